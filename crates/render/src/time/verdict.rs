//! The verdict on a run's time figures (analyse::time::verdict) in words: summary.md's section, the
//! terminal's line, and a cell for tables of runs.

use std::fmt::Write;

use crate::table::Table;
use analyse::time::verdict::{rule_text, Verdict};

/// "trustworthy" or "suspect (steal, outside_cpu)", for a table cell.
pub fn cell(v: Option<&Verdict>) -> String {
    match v {
        None => "not judged".into(),
        Some(v) if v.trustworthy => "trustworthy".into(),
        Some(v) => format!("suspect ({})", v.cause_ids()),
    }
}

/// Each finding with the phase it was found in and the rule that made it.
pub fn findings_table(v: &Verdict) -> Table {
    let mut t = Table::new(["phase", "found", "rule"]);
    for f in &v.findings {
        t.row([
            f.phase.clone(),
            f.found.clone(),
            rule_text(&f.rule).unwrap_or("").to_string(),
        ]);
    }
    t
}

/// summary.md's section.
pub fn markdown(v: &Verdict) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "\n## Can the time figures be trusted?\n");
    let _ = writeln!(md, "**{}**", v.line());
    if !v.findings.is_empty() {
        md.push('\n');
        md.push_str(&findings_table(v).markdown());
    }
    if !v.not_checked.is_empty() {
        let _ = writeln!(
            md,
            "\nNot checked, their sentinel not available here: {}.",
            v.not_checked.join(", ")
        );
    }
    let _ = writeln!(
        md,
        "\nThe rules: the manual, docs/manual/time-and-verdict.md. Memory figures are not judged: they do not move with the machine's noise."
    );
    md
}

/// The terminal's line.
pub fn terminal(v: &Verdict) -> String {
    format!("  time figures: {}\n", v.line())
}
