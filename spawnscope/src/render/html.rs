//! report.html: one self-contained page that works offline — inline CSS, the charts as inline
//! SVG, the tables, the machines' fingerprints side by side, cross-checks per run, and each run's
//! flame graph (flame.svg) when there is one. No script, no font, no link leaves the file.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analyse::compare::{CompareReport, RunPoint};
use crate::render::charts::Chart;
use crate::render::compare as compare_md;
use crate::units::{bytes, count};

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The `<svg …>…</svg>` element of an SVG document (without its XML prolog or doctype).
fn svg_element(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1240px;color:#222;line-height:1.4}\
h1{font-size:26px}h2{font-size:20px;margin-top:32px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}\
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}\
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}\
td.l{text-align:left}.ok{color:#1a7f37}.bad{color:#c62828}\
figure{margin:12px 0 24px}figcaption{font-size:13px;color:#555}\
.chart svg{max-width:100%;height:auto;border:1px solid #ddd}\
object.flame{width:100%;height:520px;border:1px solid #ddd}\
code{background:#f4f4f4;padding:1px 4px}ul{font-size:14px}";

fn table(out: &mut String, class: &str, header: &[String], rows: &[Vec<String>]) {
    let _ = write!(out, "<table class=\"{class}\"><thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
}

/// Rows of a markdown table (`| a | b |` lines after the separator) as cells.
fn md_rows(md: &str, heading: &str) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let start = md.find(heading)?;
    let lines: Vec<&str> = md[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let split = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = split(lines.first()?);
    let rows = lines.iter().skip(2).map(|l| split(l)).collect();
    Some((header, rows))
}

/// The page. `flames`: each run's flame.svg, by the run's directory as the report names it.
pub fn page(
    report: &CompareReport,
    charts: &[Chart],
    flames: &BTreeMap<String, Vec<u8>>,
) -> String {
    let md = compare_md::markdown(report);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\">\
<title>spawnscope report</title><style>{STYLE}</style></head><body>\n\
<h1>spawnscope: what one OS thread and one goroutine cost</h1>\n\
<p>{} runs on {} machine(s); rendered {} from the raw records on disk.</p>\n",
        report.runs.len(),
        report.machines.len(),
        escape(&report.rendered_utc)
    );
    if let Some(plan) = &report.plan {
        let notes: Vec<&str> = plan
            .cells
            .iter()
            .filter_map(|c| c.note.as_deref())
            .collect();
        if !notes.is_empty() || plan.stopped.is_some() {
            h.push_str("<h2 id=\"plan\">Plan: what the preflight changed</h2><ul>");
            for n in notes {
                let _ = write!(h, "<li>{}</li>", escape(n));
            }
            if let Some(s) = &plan.stopped {
                let _ = write!(h, "<li class=\"bad\">stopped early: {}</li>", escape(s));
            }
            h.push_str("</ul>\n");
        }
    }
    if let Some(rep) = &report.reproduce {
        let _ = write!(
            h,
            "<h2 id=\"reproduce\">Hansen 2023, reproduced</h2><p>Article figures: {}.</p>",
            escape(&rep.source)
        );
        let mut header = vec![String::new()];
        header.extend(rep.columns.iter().cloned());
        let rows: Vec<Vec<String>> = rep
            .rows
            .iter()
            .map(|(l, v)| {
                std::iter::once(l.clone())
                    .chain(v.iter().cloned())
                    .collect()
            })
            .collect();
        table(&mut h, "reproduce", &header, &rows);
        h.push_str("<ul>");
        for c in &rep.caveats {
            let _ = write!(h, "<li>{}</li>", escape(c));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<h2 id=\"runs\">Runs: median (min … max) over repeats</h2>\n");
    if let Some((header, rows)) = md_rows(&md, "## Runs") {
        table(&mut h, "cells", &header, &rows);
    }
    h.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for c in charts {
        let _ = writeln!(
            h,
            "<figure class=\"chart\" id=\"{}\">{}<figcaption><b>{}</b> — {}</figcaption></figure>",
            escape(c.file.trim_end_matches(".svg")),
            svg_element(&c.svg),
            escape(&c.title),
            escape(&c.note)
        );
    }
    h.push_str("<h2 id=\"fits\">Per task by regression over N</h2>\n<p>Slope = what one more task costs; intercept = the fixed cost. Memory is regressed on tasks alive at the peak, time and counts on tasks spawned; every completed repeat is a point. R² says how well a straight line explains them.</p>\n");
    if let Some((header, rows)) = md_rows(&md, "## Per task by regression") {
        table(&mut h, "fits", &header, &rows);
    }
    let with_flame: Vec<&RunPoint> = report.runs.iter().filter(|r| r.has_flame).collect();
    if !with_flame.is_empty() {
        h.push_str("<h2 id=\"flames\">Flame graphs</h2>\n");
        for r in with_flame {
            if let Some(svg) = flames.get(&r.dir) {
                // An <object> keeps the flame graph's own script (zoom, search) in its own
                // document, apart from this page and from the other flame graphs.
                let _ = writeln!(
                    h,
                    "<figure><object class=\"flame\" type=\"image/svg+xml\" data=\"data:image/svg+xml;base64,{}\"></object><figcaption>{} — {}</figcaption></figure>",
                    base64(svg),
                    escape(&r.label),
                    escape(&r.dir)
                );
            }
        }
    }
    h.push_str("<h2 id=\"machines\">Machines</h2>\n");
    let fps: Vec<&crate::record::Fingerprint> =
        report.machines.iter().map(|m| &m.fingerprint).collect();
    let mut header = vec!["".to_string()];
    header.extend(
        report
            .machines
            .iter()
            .map(|m| format!("{} ({} runs)", m.id, m.runs)),
    );
    type Field = fn(&crate::record::Fingerprint) -> String;
    let fields: Vec<(&str, Field)> = vec![
        ("hostname", |f| f.hostname.clone()),
        ("CPU", |f| f.cpu_model.clone()),
        ("cores", |f| f.cores.to_string()),
        ("memory", |f| bytes(f.memory_total_bytes as f64)),
        ("kernel", |f| format!("{} ({})", f.kernel, f.arch)),
        ("virtualization", |f| f.virtualization.clone()),
        ("transparent hugepages", |f| f.transparent_hugepages.clone()),
        ("glibc", |f| f.glibc.clone()),
        ("Rust", |f| f.rust.clone().unwrap_or_default()),
        ("Go", |f| f.go.clone().unwrap_or_default()),
        ("cgroups", |f| f.cgroup.clone()),
    ];
    let mut rows: Vec<Vec<String>> = fields
        .iter()
        .map(|(label, get)| {
            std::iter::once(label.to_string())
                .chain(fps.iter().map(|f| get(f)))
                .collect()
        })
        .collect();
    let mut keys: Vec<&String> = fps.iter().flat_map(|f| f.sysctls.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        rows.push(
            std::iter::once(k.clone())
                .chain(
                    fps.iter()
                        .map(|f| f.sysctls.get(k).cloned().unwrap_or_default()),
                )
                .collect(),
        );
    }
    table(&mut h, "machines", &header, &rows);

    h.push_str("<h2 id=\"checks\">Cross-checks per run</h2>\n<p>Memory parts (RSS + kernel stack + page tables + slab) against how far MemAvailable fell and what the run's cgroup was charged; tasks alive at the peak against N; sysctls put back; the workload's output against the event schema.</p>\n");
    let header: Vec<String> = [
        "run",
        "outcome",
        "alive at peak / N",
        "most alive",
        "parts / task",
        "MemAvailable drop / task",
        "parts vs drop",
        "cgroup charge / task",
        "sysctls restored",
        "schema violations",
        "collector",
        "directory",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let kb = |v: f64| bytes(v * 1024.0);
    let rows: Vec<Vec<String>> = report
        .runs
        .iter()
        .map(|r| {
            let m = r.memory_per_task.as_ref();
            vec![
                r.label.clone(),
                r.outcome.split(':').next().unwrap_or("").to_string(),
                format!(
                    "{} / {}",
                    r.alive_at_peak.map_or("?".into(), count),
                    r.n.map_or("?".into(), count)
                ),
                r.alive_max.map_or("?".into(), count),
                m.map_or("—".into(), |m| kb(m.total_kb)),
                m.map_or("—".into(), |m| kb(m.mem_available_drop_kb)),
                m.map_or("—".into(), |m| {
                    format!(
                        "{:+.1} % {}",
                        m.difference_percent,
                        if m.adds_up { "✓" } else { "✗" }
                    )
                }),
                m.and_then(|m| m.cgroup_kb).map_or("—".into(), kb),
                if r.sysctls_restored { "yes" } else { "NO" }.into(),
                r.contract_violations.to_string(),
                if r.has_collector { "yes" } else { "no" }.into(),
                r.dir.clone(),
            ]
        })
        .collect();
    table(&mut h, "checks", &header, &rows);
    if !report.stopped_at_limit.is_empty() {
        h.push_str(
            "<h2>Runs that stopped at a limit (kept: their tasks alive were measured)</h2><ul>",
        );
        for e in &report.stopped_at_limit {
            let _ = write!(h, "<li>{}</li>", escape(e));
        }
        h.push_str("</ul>\n");
    }
    if !report.excluded.is_empty() {
        h.push_str("<h2>Runs with nothing measured (left out)</h2><ul>");
        for e in &report.excluded {
            let _ = write!(h, "<li>{}</li>", escape(e));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<p><small>Generated by spawnscope: <code>spawnscope report DIR…</code> renders this page again from the results directories.</small></p>\n</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn escapes_and_strips_the_prolog() {
        assert_eq!(escape("<a & 'b'>"), "&lt;a &amp; &#39;b&#39;&gt;");
        assert_eq!(svg_element("<?xml version=\"1.0\"?>\n<svg x>"), "<svg x>");
    }
}
