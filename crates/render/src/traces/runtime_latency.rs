//! A comparison's runtime-traced runs as people read them: the latency table per workload × N
//! (each runtime's wait by its own scheduler) and the runtime-traced runs listed apart, in
//! compare.md and report.html.

use std::fmt::Write;

use crate::table::{escape, Table};
use crate::traces::sched_trace::cells;
use analyse::comparisons::compare::Comparison;
use analyse::traces::runtime_latency::LatencyCell;
use units::count;

pub const TITLE: &str = "How long a woken task waits to run, by its own scheduler";
pub const NOTE: &str = "A thread's (or a process's) wait is the kernel's wake→run, from the scheduler trace of its cell's ordinary runs (`--perfetto`); a goroutine's is its runtime's readied→running (created or unblocked → its next start) and a tokio task's scheduled→polled, from the cell's runtime-traced run (`--runtime-trace`). Over the whole run; with several runs each figure is the median of theirs; p50, p90 and p99 within 1 % (HDR histograms), samples and max exact.";
pub const RUNTIME_TRACED_TITLE: &str =
    "Runtime-traced runs (their own kind: in no memory, fault or time figure)";
pub const RUNTIME_TRACED_NOTE: &str = "The runtime's own tracer ran through each of these, adding its memory, faults and time: they give the runtime's counts, latencies and trace (their summary.md), and are not repeats of their cells.";

/// One cell's table: a row per runtime.
pub fn table(cell: &LatencyCell) -> Table {
    let mut t = Table::new([
        "runtime", "latency", "from", "runs", "samples", "p50", "p90", "p99", "max",
    ])
    .right_aligned(3..9);
    for s in &cell.sides {
        let from = match (&s.missing, s.kernel) {
            (Some(why), _) => format!("missing: {why}"),
            (None, true) => "the kernel's scheduler trace".into(),
            (None, false) => "its runtime's trace".into(),
        };
        let figures = match &s.latency {
            Some(row) => cells(row).to_vec(),
            None => vec!["—".to_string(); 5],
        };
        let mut row = vec![s.runtime.clone(), s.what.clone(), from, s.runs.to_string()];
        row.extend(figures);
        t.row(row);
    }
    t
}

/// A cell's heading: "pingpong, N = 10,000" (the machine's id first with several).
fn heading(cell: &LatencyCell, several_machines: bool) -> String {
    let machine = if several_machines {
        format!("{}: ", cell.machine)
    } else {
        String::new()
    };
    format!("{machine}{}, N = {}", cell.workload, count(cell.n))
}

/// The runtime-traced runs, a line each: "goroutines pingpong --n 10000 (dir)".
fn runtime_traced(r: &Comparison) -> Vec<String> {
    r.runs
        .iter()
        .filter(|p| p.runtime_traced)
        .map(|p| format!("{} ({}): {}", p.label, p.dir, p.outcome))
        .collect()
}

/// compare.md's sections; empty without runtime-traced runs.
pub fn markdown(r: &Comparison) -> String {
    let mut md = String::new();
    if !r.runtime_latency.is_empty() {
        let _ = writeln!(md, "\n## {TITLE}\n\n{NOTE}");
        for cell in &r.runtime_latency {
            let _ = writeln!(md, "\n### {}\n", heading(cell, r.machines.len() > 1));
            md.push_str(&table(cell).markdown());
        }
    }
    let traced = runtime_traced(r);
    if !traced.is_empty() {
        let _ = writeln!(md, "\n## {RUNTIME_TRACED_TITLE}\n\n{RUNTIME_TRACED_NOTE}\n");
        for line in traced {
            let _ = writeln!(md, "- {line}");
        }
    }
    md
}

/// report.html's sections; empty without runtime-traced runs.
pub fn html(r: &Comparison) -> String {
    let mut h = String::new();
    if !r.runtime_latency.is_empty() {
        let _ = writeln!(
            h,
            "<h2 id=\"runtime-latency\">{}</h2><p>{}</p>",
            escape(TITLE),
            escape(NOTE)
        );
        for cell in &r.runtime_latency {
            let _ = writeln!(
                h,
                "<h3>{}</h3>",
                escape(&heading(cell, r.machines.len() > 1))
            );
            h.push_str(&table(cell).html("runtime-latency"));
        }
    }
    let traced = runtime_traced(r);
    if !traced.is_empty() {
        let _ = write!(
            h,
            "<h2 id=\"runtime-traced\">{}</h2><p>{}</p><ul>",
            escape(RUNTIME_TRACED_TITLE),
            escape(RUNTIME_TRACED_NOTE)
        );
        for line in traced {
            let _ = write!(h, "<li>{}</li>", escape(&line));
        }
        h.push_str("</ul>\n");
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::traces::runtime_latency::LatencySide;
    use analyse::traces::sched_trace::LatencyRow;
    use analyse::traces::sched_trace::WHOLE_RUN;

    fn side(runtime: &str, what: &str, kernel: bool, p50_ns: Option<u64>) -> LatencySide {
        LatencySide {
            runtime: runtime.into(),
            n: 10_000,
            what: what.into(),
            kernel,
            runs: p50_ns.map_or(0, |_| 1),
            latency: p50_ns.map(|p| LatencyRow {
                phase: WHOLE_RUN.into(),
                count: 20_000,
                p50_ns: p,
                p90_ns: 2 * p,
                p99_ns: 4 * p,
                max_ns: 10 * p,
            }),
            missing: p50_ns
                .is_none()
                .then(|| "tokio: not yet: no hooks build".into()),
        }
    }

    #[test]
    fn each_runtime_is_a_row_with_its_distribution_or_why_it_is_missing() {
        let cell = LatencyCell {
            machine: "M1".into(),
            workload: "pingpong".into(),
            n: 10_000,
            sides: vec![
                side("threads", "wake→run", true, Some(13_000)),
                side("goroutines", "readied→running", false, Some(3_000)),
                side("tokio", "scheduled→polled", false, None),
            ],
        };
        assert_eq!(heading(&cell, false), "pingpong, N = 10,000");
        assert_eq!(heading(&cell, true), "M1: pingpong, N = 10,000");
        let md = table(&cell).markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 5, "{md}");
        assert_eq!(
            lines[2],
            "| threads | wake→run | the kernel's scheduler trace | 1 | 20,000 | 13.0 µs | 26.0 µs | 52.0 µs | 130.0 µs |"
        );
        assert!(lines[3].contains("| goroutines | readied→running | its runtime's trace |"));
        assert!(lines[4].contains(
            "| tokio | scheduled→polled | missing: tokio: not yet: no hooks build | 0 |"
        ));
    }
}
