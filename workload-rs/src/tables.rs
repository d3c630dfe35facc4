//! Test-only: the tables under schema/ that the Rust and Go tests both check every row of.

use std::path::Path;

/// The rows of `schema/<name>`: every line that is neither empty nor a `#` comment, split at tabs.
/// Each row must have `columns` columns, and there must be at least `at_least` rows.
pub fn rows(name: &str, columns: usize, at_least: usize) -> Vec<Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schema")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let cols: Vec<String> = line.split('\t').map(String::from).collect();
            assert_eq!(cols.len(), columns, "{name}: malformed row {line:?}");
            cols
        })
        .collect();
    assert!(
        rows.len() >= at_least,
        "{name}: only {} rows, want at least {at_least}",
        rows.len()
    );
    rows
}

/// A table's `\n` as a newline.
pub fn unescape(text: &str) -> String {
    text.replace("\\n", "\n")
}

/// A number, or `-` for none.
pub fn optional(text: &str) -> Option<u64> {
    (text != "-").then(|| {
        text.parse()
            .unwrap_or_else(|_| panic!("{text:?} is neither a number nor -"))
    })
}

/// Fails with every row that did not hold, one a line.
pub fn assert_all(name: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} rows of schema/{name} do not hold:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
