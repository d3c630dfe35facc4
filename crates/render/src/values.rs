//! Figures written in a page's prose, each quoted from its results set so that a test fails when
//! the prose and the set disagree (`spawnscope docs render --check`). An inline mark:
//!
//! ```text
//! tokio (<!-- value: reproduce-async-runtimes-2024 cells[runtime=tokio-sleepers,n=1000000].maxrss_kb.median mib -->437.0<!-- /value --> MB)
//! ```
//!
//! SET is a results set's directory under docs/, whose compare.json PATH walks, or one file of a
//! results directory there that is not a compare set (a bench's `figures.json`, the kernel
//! matrix's `results.tsv`: [`parse_file`]). PATH: `name` takes a field, `name[3]` an element,
//! `name[key=value,…]` the one element whose fields print as those values (it is an error when
//! none or several do; a space in a value is written %20; a row of a TSV file is a list, its
//! fields named 0, 1, …); FORMAT is one of
//! [`FORMATS`]. Between the marks is the command's, as in a figure block.

use serde_json::Value;

use analyse::comparisons::regression::spread;
use units::{bytes, count};

pub const OPEN: &str = "<!-- value:";
pub const CLOSE: &str = "<!-- /value -->";

/// How a value is printed.
pub const FORMATS: [(&str, &str); 14] = [
    ("count", "a whole number with thousands separators: 13,902"),
    (
        "mib",
        "KiB as MiB, one decimal, no unit (the studies' MB columns): 2,626.3",
    ),
    ("kib", "KiB as a size: 2.7 KiB, 47.2 MiB"),
    ("bytes", "bytes as a size: 975 B"),
    (
        "ns",
        "nanoseconds as a time, as the summaries print one: 184.8 µs, 18.48 s",
    ),
    ("s", "seconds, two decimals: 1.13"),
    ("fixed1", "one decimal: 15.6"),
    ("fixed2", "two decimals: 1.01"),
    ("fixed3", "three decimals: 0.958"),
    ("millions", "in millions, one decimal: 38.1 for 38,123,456"),
    ("share", "a fraction as a percentage, one decimal: 52.6 % for 0.526"),
    (
        "pct",
        "a signed percentage, one decimal, as the summaries print a difference: +0.2 %",
    ),
    (
        "lead",
        "a string's first word, a figure with its unit if one follows: \"0.2 %\" of \"0.2 % (rss …\"",
    ),
    ("text", "a string as it is"),
];

/// An inline mark: what to quote, and where its text lies in the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    pub set: String,
    pub path: String,
    pub format: String,
    pub line: usize,
    pub body: std::ops::Range<usize>,
}

/// Every inline mark of a page, in order. Err: a mark that does not parse or is not closed on its
/// line.
pub fn quotes(page: &str) -> Result<Vec<Quote>, String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = page[from..].find(OPEN).map(|i| from + i) {
        let line = page[..at].matches('\n').count() + 1;
        let end = page[at..]
            .find("-->")
            .map(|i| at + i)
            .ok_or_else(|| format!("line {line}: the value mark does not end with -->"))?;
        let words: Vec<&str> = page[at + OPEN.len()..end].split_whitespace().collect();
        let [set, path, format] = words[..] else {
            return Err(format!("line {line}: a value mark needs SET PATH FORMAT"));
        };
        if !FORMATS.iter().any(|(f, _)| *f == format) {
            let known = FORMATS.map(|(f, _)| f).join(", ");
            return Err(format!(
                "line {line}: no value format '{format}' (one of {known})"
            ));
        }
        let start = end + "-->".len();
        let close = page[start..]
            .find(CLOSE)
            .map(|i| start + i)
            .filter(|&c| !page[start..c].contains('\n') && !page[start..c].contains(OPEN))
            .ok_or_else(|| format!("line {line}: the value is not closed ({CLOSE}) on its line"))?;
        found.push(Quote {
            set: set.into(),
            path: path.into(),
            format: format.into(),
            line,
            body: start..close,
        });
        from = close + CLOSE.len();
    }
    Ok(found)
}

/// The value PATH names in `root`.
pub fn lookup<'a>(root: &'a Value, path: &str) -> Result<&'a Value, String> {
    let mut here = root;
    for step in steps(path) {
        let (name, filter) = match step.split_once('[') {
            Some((name, rest)) => (
                name,
                Some(
                    rest.strip_suffix(']')
                        .ok_or_else(|| format!("'{step}': a [ without its ]"))?,
                ),
            ),
            None => (step, None),
        };
        if !name.is_empty() {
            here = match here {
                Value::Object(fields) => fields.get(name),
                Value::Array(items) => name.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            }
            .ok_or_else(|| format!("no '{name}' at '{step}'"))?;
        }
        let Some(filter) = filter else { continue };
        let items = here
            .as_array()
            .ok_or_else(|| format!("'{step}': {name} is not a list"))?;
        if let Ok(i) = filter.parse::<usize>() {
            here = items
                .get(i)
                .ok_or_else(|| format!("'{step}': {name} has {} items", items.len()))?;
            continue;
        }
        let wanted = parse_filter(filter)?;
        let matching: Vec<&Value> = items.iter().filter(|item| matches(item, &wanted)).collect();
        here = match matching.as_slice() {
            [one] => one,
            [] => return Err(format!("'{step}': no item of {name} has {filter}")),
            many => {
                return Err(format!(
                    "'{step}': {} items of {name} have {filter}",
                    many.len()
                ))
            }
        };
    }
    Ok(here)
}

/// A filter's `key=value` pairs. A mark is split at spaces: a value holding one writes it %20.
fn parse_filter(filter: &str) -> Result<Vec<(&str, String)>, String> {
    filter
        .split(',')
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k, v.replace("%20", " ")))
                .ok_or_else(|| format!("'{kv}' is not key=value"))
        })
        .collect()
}

/// Whether an item's fields print as the filter's values.
fn matches(item: &Value, wanted: &[(&str, String)]) -> bool {
    wanted
        .iter()
        .all(|(k, v)| field(item, k).is_some_and(|f| printed(f) == *v))
}

/// The value PATH names, as [`lookup`] finds it — or, when one step is `name[*key=value,…]`, the
/// median over every item that matches of the rest of the path read in each: a table's "median
/// of three" quoted from the three runs (`runs[*runtime=tokio,n=1000].serve.load.requests_per_s`).
pub fn resolve(root: &Value, path: &str) -> Result<Value, String> {
    let all = steps(path);
    let Some(at) = all.iter().position(|s| s.contains("[*")) else {
        return lookup(root, path).cloned();
    };
    let (name, filter) = all[at].split_once("[*").unwrap_or_default();
    let filter = filter
        .strip_suffix(']')
        .ok_or_else(|| format!("'{}': a [ without its ]", all[at]))?;
    let list_path = all[..at]
        .iter()
        .copied()
        .chain((!name.is_empty()).then_some(name))
        .collect::<Vec<_>>()
        .join(".");
    let list = if list_path.is_empty() {
        root
    } else {
        lookup(root, &list_path)?
    };
    let items = list
        .as_array()
        .ok_or_else(|| format!("'{}': {name} is not a list", all[at]))?;
    let wanted = parse_filter(filter)?;
    let rest = all[at + 1..].join(".");
    let mut xs = Vec::new();
    for item in items.iter().filter(|item| matches(item, &wanted)) {
        let v = if rest.is_empty() {
            item
        } else {
            lookup(item, &rest)?
        };
        xs.push(number(v).ok_or_else(|| format!("{v} is not a number"))?);
    }
    let median = spread(&xs)
        .map(|s| s.median)
        .ok_or_else(|| format!("'{}': no item of {name} has {filter}", all[at]))?;
    Ok(serde_json::json!(median))
}

/// A number, or a string that reads as one (a CSV or TSV field).
fn number(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .or_else(|| value.as_str().and_then(|t| t.trim().parse().ok()))
}

/// PATH's steps: split at the dots outside brackets, so a filter may hold a dotted value
/// (`runs[dir=runs/6.1.0-56-amd64/…]`).
fn steps(path: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let (mut depth, mut from) = (0usize, 0);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                found.push(&path[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    found.push(&path[from..]);
    found
}

/// An item's field by name; a list's (a TSV row's) by its index.
fn field<'a>(item: &'a Value, name: &str) -> Option<&'a Value> {
    match item {
        Value::Array(fields) => name.parse::<usize>().ok().and_then(|i| fields.get(i)),
        other => other.get(name),
    }
}

/// A field as a filter compares it: a string without its quotes, anything else as JSON prints it.
fn printed(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The value printed in FORMAT.
pub fn format(value: &Value, format: &str) -> Result<String, String> {
    if format == "text" || format == "lead" {
        let text = value
            .as_str()
            .ok_or_else(|| format!("{value} is not a string"))?;
        return Ok(if format == "lead" {
            lead(text)
        } else {
            text.into()
        });
    }
    let x = number(value).ok_or_else(|| format!("{value} is not a number"))?;
    Ok(match format {
        "count" => count(x.round().max(0.0) as u64),
        "mib" => {
            let tenths = (x / 1024.0 * 10.0).round() as u64;
            format!("{}.{}", count(tenths / 10), tenths % 10)
        }
        // A size that rounds to no byte is 0 B, whichever its sign ("-0 B" says nothing).
        "kib" => bytes(if (x * 1024.0).abs() < 0.5 {
            0.0
        } else {
            x * 1024.0
        }),
        "bytes" => bytes(if x.abs() < 0.5 { 0.0 } else { x }),
        "ns" => units::in_unit(x, "ns"),
        "s" => format!("{x:.2}"),
        "fixed1" => format!("{x:.1}"),
        "fixed2" => format!("{x:.2}"),
        "fixed3" => format!("{x:.3}"),
        "pct" => format!("{x:+.1} %"),
        "share" => format!("{:.1} %", x * 100.0),
        "millions" => format!("{:.1}", x / 1e6),
        other => return Err(format!("no value format '{other}'")),
    })
}

/// The first word of a result line, with its unit when one follows ("0.2 %", "12 s"): the figure a
/// line such as the kernel matrix's "0.2 % (rss 14.7, …)" leads with.
fn lead(text: &str) -> String {
    let mut words = text.split_whitespace();
    let first = words.next().unwrap_or_default();
    match words.next() {
        Some(unit @ ("%" | "s" | "ms" | "µs" | "ns" | "KiB" | "MiB" | "GiB" | "B")) => {
            format!("{first} {unit}")
        }
        _ => first.trim_end_matches([',', ';', ':']).to_string(),
    }
}

/// A results file that is not a compare set, as values read it: JSON as it is, a TSV file (the
/// kernel matrix's `results.tsv`, headerless) as a list of rows, each a list of its fields, a CSV
/// file by its header.
pub fn parse_file(name: &str, text: &str) -> Result<Value, String> {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => serde_json::from_str(text).map_err(|e| e.to_string()),
        Some("tsv") => Ok(Value::Array(
            text.lines()
                .filter(|l| !l.is_empty())
                .map(|l| Value::Array(l.split('\t').map(|f| Value::String(f.into())).collect()))
                .collect(),
        )),
        // A CSV file with its header (a bench's table, as bench-chan.sh writes chain.csv): a list
        // of rows, each an object by the header's names, every field a string.
        Some("csv") => {
            let mut reader = csv::Reader::from_reader(text.as_bytes());
            let names = reader.headers().map_err(|e| e.to_string())?.clone();
            reader
                .records()
                .map(|row| {
                    let row = row.map_err(|e| e.to_string())?;
                    Ok(Value::Object(
                        names
                            .iter()
                            .zip(row.iter())
                            .map(|(k, v)| (k.to_string(), Value::String(v.into())))
                            .collect(),
                    ))
                })
                .collect::<Result<Vec<_>, String>>()
                .map(Value::Array)
        }
        _ => Err(format!(
            "{name}: a value reads a set's directory (its compare.json), a .json, .tsv or .csv file"
        )),
    }
}

/// The page with every inline value quoted from its set (`load` reads a set's compare.json by
/// name), and the 1-based lines of those whose text changed.
pub fn fill(
    page: &str,
    mut load: impl FnMut(&str) -> Result<Value, String>,
) -> Result<(String, Vec<usize>), String> {
    let mut out = String::with_capacity(page.len());
    let mut changed = Vec::new();
    let mut at = 0;
    for q in quotes(page)? {
        let set = load(&q.set).map_err(|e| format!("line {}: {e}", q.line))?;
        let value = resolve(&set, &q.path)
            .and_then(|v| format(&v, &q.format))
            .map_err(|e| format!("line {}: value {} {}: {e}", q.line, q.set, q.path))?;
        if page[q.body.clone()] != value {
            changed.push(q.line);
        }
        out.push_str(&page[at..q.body.start]);
        out.push_str(&value);
        at = q.body.end;
    }
    out.push_str(&page[at..]);
    Ok((out, changed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> Value {
        json!({"cells": [
            {"runtime": "go-sleepers", "n": 1000000, "maxrss_kb": {"median": 2689360}},
            {"runtime": "go-sleepers", "n": 100000, "maxrss_kb": {"median": 262144}},
            {"runtime": "tokio-sleepers", "n": 1000000, "maxrss_kb": {"median": 447484}}
        ], "reproduce": {"rows": [["Go (go-sleepers)", ["1", "2,585.6"]]]}})
    }

    #[test]
    fn a_path_takes_fields_indexes_and_the_one_item_a_filter_names() {
        let s = set();
        let go = lookup(&s, "cells[runtime=go-sleepers,n=1000000].maxrss_kb.median").unwrap();
        assert_eq!(format(go, "mib").unwrap(), "2,626.3");
        assert_eq!(format(go, "count").unwrap(), "2,689,360");
        assert_eq!(format(go, "kib").unwrap(), "2.6 GiB");
        let article = lookup(&s, "reproduce.rows[0].1[1]").unwrap();
        assert_eq!(format(article, "text").unwrap(), "2,585.6");
        // Two items match, or none: said, never one picked.
        assert!(lookup(&s, "cells[runtime=go-sleepers].n")
            .unwrap_err()
            .contains("2 items"));
        assert!(lookup(&s, "cells[runtime=node].n")
            .unwrap_err()
            .contains("no item"));
        assert!(lookup(&s, "cells[9].n").unwrap_err().contains("3 items"));
        assert!(format(&json!("x"), "count").is_err());
    }

    #[test]
    fn a_tsv_row_is_found_by_its_fields_and_a_line_gives_its_leading_figure() {
        let tsv = "6.1\tv2\tthreads-hold-2000\tpass\t0.2 % (rss 14.7, stack 15.9)\n6.1\tv2\tcheck\tpass\t6 warnings\n";
        let rows = parse_file("table.tsv", tsv).unwrap();
        let line = lookup(&rows, "[2=threads-hold-2000].4").unwrap();
        assert_eq!(format(line, "lead").unwrap(), "0.2 %");
        let check = lookup(&rows, "[0=6.1,2=check].4").unwrap();
        assert_eq!(format(check, "lead").unwrap(), "6");
        assert_eq!(format(check, "text").unwrap(), "6 warnings");
        assert!(lookup(&rows, "[0=6.1].4").unwrap_err().contains("2 items"));
        let runs = json!({"runs": [{"dir": "runs/6.1.0/a", "n": 7}]});
        let dotted = lookup(&runs, "runs[dir=runs/6.1.0/a].n").unwrap();
        let spaced = json!({"repeats": [{"label": "threads hold --n 100", "runs": 10}]});
        let ten = lookup(&spaced, "repeats[label=threads%20hold%20--n%20100].runs").unwrap();
        assert_eq!(format(ten, "count").unwrap(), "10");
        assert_eq!(format(dotted, "count").unwrap(), "7");
        assert_eq!(lead("no memory per task (0 alive)"), "no");
        assert_eq!(format(&json!(0.18210987), "pct").unwrap(), "+0.2 %");
        assert_eq!(format(&json!(-2.32), "pct").unwrap(), "-2.3 %");
        assert_eq!(format(&json!(-0.0001), "kib").unwrap(), "0 B");
        assert_eq!(format(&json!(0.5264), "share").unwrap(), "52.6 %");
        assert_eq!(format(&json!(18_480_000_000u64), "ns").unwrap(), "18.48 s");
        assert!(parse_file("x.txt", "a,b")
            .unwrap_err()
            .contains(".tsv or .csv"));
        let csv = parse_file(
            "chain.csv",
            "program,etype,worker,speed\ngo,int,100,7477027\ngo,str,100,5\n",
        )
        .unwrap();
        let speed = lookup(&csv, "[program=go,etype=int,worker=100].speed").unwrap();
        assert_eq!(format(speed, "text").unwrap(), "7477027");
        assert_eq!(format(speed, "millions").unwrap(), "7.5");
        // Every matching item's figure, and their median: three runs' requests/s.
        let runs = json!({"runs": [
            {"runtime": "tokio", "n": 1000, "serve": {"rps": 3.0}},
            {"runtime": "tokio", "n": 1000, "serve": {"rps": 1.0}},
            {"runtime": "go", "n": 1000, "serve": {"rps": 9.0}},
            {"runtime": "tokio", "n": 1000, "serve": {"rps": 2.0}}]});
        let median = resolve(&runs, "runs[*runtime=tokio,n=1000].serve.rps").unwrap();
        assert_eq!(format(&median, "fixed1").unwrap(), "2.0");
        assert!(resolve(&runs, "runs[*runtime=node].serve.rps")
            .unwrap_err()
            .contains("no item"));
        assert!(resolve(&runs, "runs[*runtime=go].serve.gone").is_err());
    }

    #[test]
    fn a_quoted_value_is_its_sets_and_a_hand_edit_is_found_and_undone() {
        let page = "tokio (<!-- value: x cells[runtime=tokio-sleepers].maxrss_kb.median mib -->9.9<!-- /value --> MB) and\nGo <!-- value: x cells[runtime=go-sleepers,n=100000].n count -->100,000<!-- /value -->.\n";
        let (filled, changed) = fill(page, |_| Ok(set())).unwrap();
        assert_eq!(changed, vec![1], "only the hand-edited value changed");
        assert!(filled.contains("-->437.0<!-- /value --> MB) and\nGo "));
        let (again, none) = fill(&filled, |_| Ok(set())).unwrap();
        assert_eq!((again.as_str(), none.len()), (filled.as_str(), 0));
        // Marks that do not parse say where.
        assert!(quotes("a\n<!-- value: x cells.n -->1<!-- /value -->")
            .unwrap_err()
            .starts_with("line 2: a value mark needs SET PATH FORMAT"));
        assert!(quotes("<!-- value: x n count -->1\n<!-- /value -->")
            .unwrap_err()
            .contains("not closed"));
        assert!(quotes("<!-- value: x n pounds -->1<!-- /value -->")
            .unwrap_err()
            .contains("no value format 'pounds'"));
        let bad = "<!-- value: x cells[runtime=gone].n count -->1<!-- /value -->";
        assert!(fill(bad, |_| Ok(set())).unwrap_err().contains("no item"));
    }
}
