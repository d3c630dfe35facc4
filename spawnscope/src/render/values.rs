//! Figures written in a page's prose, each quoted from its results set so that a test fails when
//! the prose and the set disagree (`spawnscope docs render --check`). An inline mark:
//!
//! ```text
//! tokio (<!-- value: reproduce-async-runtimes-2024 cells[runtime=tokio-sleepers,n=1000000].maxrss_kb.median mib -->437.0<!-- /value --> MB)
//! ```
//!
//! SET is a results set's directory under docs/; PATH walks its compare.json: `name` takes a
//! field, `name[3]` an element, `name[key=value,…]` the one element whose fields print as those
//! values (it is an error when none or several do); FORMAT is one of [`FORMATS`]. Between the
//! marks is the command's, as in a figure block.

use serde_json::Value;

use crate::units::{bytes, count};

pub const OPEN: &str = "<!-- value:";
pub const CLOSE: &str = "<!-- /value -->";

/// How a value is printed.
pub const FORMATS: [(&str, &str); 8] = [
    ("count", "a whole number with thousands separators: 13,902"),
    (
        "mib",
        "KiB as MiB, one decimal, no unit (the studies' MB columns): 2,626.3",
    ),
    ("kib", "KiB as a size: 2.7 KiB, 47.2 MiB"),
    ("bytes", "bytes as a size: 975 B"),
    ("s", "seconds, two decimals: 1.13"),
    ("fixed1", "one decimal: 15.6"),
    ("fixed3", "three decimals: 0.958"),
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
    for step in path.split('.') {
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
        let wanted: Vec<(&str, &str)> = filter
            .split(',')
            .map(|kv| {
                kv.split_once('=')
                    .ok_or_else(|| format!("'{kv}' is not key=value"))
            })
            .collect::<Result<_, _>>()?;
        let matching: Vec<&Value> = items
            .iter()
            .filter(|item| {
                wanted
                    .iter()
                    .all(|(k, v)| item.get(*k).is_some_and(|f| printed(f) == *v))
            })
            .collect();
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

/// A field as a filter compares it: a string without its quotes, anything else as JSON prints it.
fn printed(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The value printed in FORMAT.
pub fn format(value: &Value, format: &str) -> Result<String, String> {
    if format == "text" {
        return value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{value} is not a string"));
    }
    let x = value
        .as_f64()
        .ok_or_else(|| format!("{value} is not a number"))?;
    Ok(match format {
        "count" => count(x.round().max(0.0) as u64),
        "mib" => {
            let tenths = (x / 1024.0 * 10.0).round() as u64;
            format!("{}.{}", count(tenths / 10), tenths % 10)
        }
        "kib" => bytes(x * 1024.0),
        "bytes" => bytes(x),
        "s" => format!("{x:.2}"),
        "fixed1" => format!("{x:.1}"),
        "fixed3" => format!("{x:.3}"),
        other => return Err(format!("no value format '{other}'")),
    })
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
        let value = lookup(&set, &q.path)
            .and_then(|v| format(v, &q.format))
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
