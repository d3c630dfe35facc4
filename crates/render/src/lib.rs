//! The only place that formats: summaries and comparisons as Markdown, terminal lines, CSV and
//! one HTML page; SVG charts and flame graphs. It reads no files and writes none: it is given
//! figures (analyse/) and returns text. Its modules are analyse's concerns, of the same names (run,
//! memory, time, probes, traces, runtimes, comparisons, serving: ARCHITECTURE.md), beside what
//! every format shares at the root (table, columns, values, charts, html, pages).

pub mod chart_kit;
pub mod charts;
pub mod columns;
pub mod comparisons;
pub mod html;
pub mod memory;
pub mod pages;
pub mod probes;
pub mod run;
pub mod runtimes;
pub mod serving;
pub mod table;
pub mod time;
pub mod traces;
pub mod values;

/// A record as one JSON document with the directory its files are in (`results_dir`): what
/// `run --json` and `compare --json` print.
pub fn json_with_dir<T: serde::Serialize>(record: &T, dir: &std::path::Path) -> String {
    let mut value = serde_json::to_value(record).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(map) = &mut value {
        map.insert(
            "results_dir".into(),
            serde_json::Value::String(dir.display().to_string()),
        );
    }
    serde_json::to_string_pretty(&value).unwrap_or_default()
}
