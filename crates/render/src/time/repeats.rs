//! Repeats of one experiment (analyse::time::repeats) as a table and the list of outliers with their
//! causes: compare.md's and report.html's "Time over repeats", and the main job's closing view.

use std::fmt::Write;

use crate::table::Table;
use analyse::comparisons::regression::Spread;
use analyse::time::repeats::{FigureSpread, Repeated, OUTLIER_FACTOR};
use units::count;

fn figure(value: f64, unit: &str) -> String {
    match unit {
        "s" => format!("{value:.2} s"),
        _ if value >= 100.0 => format!("{value:.0} {unit}"),
        _ => format!("{value:.1} {unit}"),
    }
}

fn spread_text(s: &Spread, unit: &str) -> String {
    format!(
        "{} ({} … {})",
        figure(s.median, unit),
        figure(s.min, unit),
        figure(s.max, unit)
    )
}

fn ratio(f: &FigureSpread) -> String {
    f.trustworthy_ratio()
        .map_or("—".into(), |r| format!("{r:.2}"))
}

/// One row per experiment and figure: median (min … max) over every run, the same over the
/// trustworthy runs, and their max / min.
pub fn table(repeated: &[Repeated]) -> Table {
    let mut t = Table::new([
        "experiment",
        "figure",
        "all runs: median (min … max)",
        "trustworthy runs: median (min … max)",
        "max / min (trustworthy)",
        "runs (trustworthy / all)",
    ])
    .right_aligned([2, 3, 4, 5]);
    for r in repeated {
        for f in &r.figures {
            t.row([
                r.label.clone(),
                f.label.clone(),
                spread_text(&f.all, &f.unit),
                f.trustworthy
                    .as_ref()
                    .map_or("none trustworthy".into(), |s| spread_text(s, &f.unit)),
                ratio(f),
                format!("{} / {}", r.trustworthy_runs, r.runs),
            ]);
        }
    }
    t
}

/// Each unjudged set, outlier and suspect run with its cause, one line each.
pub fn causes(repeated: &[Repeated]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in repeated {
        if r.unjudged_runs > 0 {
            lines.push(format!(
                "{}: {} of {} runs have no verdict (recorded without noise sentinels)",
                r.label, r.unjudged_runs, r.runs
            ));
        }
        for o in &r.outliers {
            lines.push(format!(
                "outlier: {} `{}` {} = {:.2}× the median — {}",
                r.label, o.run, o.figure, o.factor, o.cause
            ));
        }
        for (run, line) in &r.suspect {
            if !r.outliers.iter().any(|o| &o.run == run) {
                lines.push(format!("{} `{run}`: {line}", r.label));
            }
        }
        for (run, path) in &r.other_exit_path {
            if !r.outliers.iter().any(|o| &o.run == run) {
                lines.push(format!("{} `{run}`: {path}", r.label));
            }
        }
    }
    lines
}

/// The traced runs left out of the table, where their experiments have untraced runs to time.
pub fn left_out_line(repeated: &[Repeated]) -> Option<String> {
    let left_out: usize = repeated
        .iter()
        .filter_map(|r| Some(r.times_from?.traced_left_out()))
        .sum();
    (left_out > 0).then(|| {
        format!(
            "Only untraced runs are here: the {} traced run{} of these experiments, whose times carry the probes' cost, {} left out (outliers included).",
            count(left_out as u64),
            if left_out == 1 { "" } else { "s" },
            if left_out == 1 { "is" } else { "are" }
        )
    })
}

/// The section: the table, then each outlier and each suspect run with its cause.
pub fn markdown(repeated: &[Repeated]) -> String {
    if repeated.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n## Time over repeats: median (min … max)\n\n");
    md.push_str(&table(repeated).markdown());
    let _ = writeln!(
        md,
        "\nTrustworthy: the run's verdict found no noise sentinel past its rule. An outlier lies more than {OUTLIER_FACTOR}× from its experiment's median, either way."
    );
    if let Some(line) = left_out_line(repeated) {
        let _ = writeln!(md, "\n{line}");
    }
    if repeated.iter().any(|r| !r.other_exit_path.is_empty()) {
        let _ = writeln!(
            md,
            "\nA threads run whose threads ended another way than most of its repeats' (each freeing its own stack, or ending with the process: a race, the workload's own) keeps its spawn figures in the trustworthy spread and leaves out those that include the exit."
        );
    }
    for line in causes(repeated) {
        let _ = writeln!(md, "- {line}");
    }
    md
}
