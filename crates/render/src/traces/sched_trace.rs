//! The scheduler trace's figures as people read them: wake-to-run and preempted-to-run per
//! phase (summary.md, the terminal), and per run of a comparison (compare.md, report.html).

use std::fmt::Write;

use crate::table::Table;
use analyse::traces::sched_figures::SchedFigures;
use analyse::traces::sched_trace::LatencyRow;
use units::{count, in_unit};

fn plural(n: u64, one: &str) -> String {
    match (n, one.ends_with('s')) {
        (1, _) => format!("1 {one}"),
        (_, true) => format!("{} {one}es", count(n)),
        _ => format!("{} {one}s", count(n)),
    }
}

fn ns(v: u64) -> String {
    in_unit(v as f64, "ns")
}

/// One latency row's cells: samples, p50, p90, p99, max.
pub fn cells(r: &LatencyRow) -> [String; 5] {
    [
        count(r.count),
        ns(r.p50_ns),
        ns(r.p90_ns),
        ns(r.p99_ns),
        ns(r.max_ns),
    ]
}

/// Both latencies, per phase, one table.
pub fn latency_table(f: &SchedFigures) -> Table {
    let mut t = Table::new(["", "phase", "samples", "p50", "p90", "p99", "max"])
        .right_aligned([2, 3, 4, 5, 6]);
    for (what, rows) in [
        ("wake-to-run", &f.wake_to_run),
        ("preempted-to-run", &f.preempted_to_run),
    ] {
        for r in rows {
            let [n, p50, p90, p99, max] = cells(r);
            t.row([what.to_string(), r.phase.clone(), n, p50, p90, p99, max]);
        }
    }
    t
}

/// The waits as the trace's slices show them.
fn waits_table(f: &SchedFigures) -> Table {
    let mut t =
        Table::new(["wait", "slices", "total", "max", "closed for them"]).right_aligned([1, 2, 3]);
    for w in &f.waits {
        let mut closed = Vec::new();
        for (n, what) in [
            (w.cut, "cut by an outer wait's end"),
            (w.closed_at_exit, "at their thread's exit"),
            (w.closed_at_end, "at the run's end"),
            (
                w.unmatched_ends,
                "ends without a captured begin (not shown)",
            ),
        ] {
            if n > 0 {
                closed.push(format!("{} {what}", count(n)));
            }
        }
        t.row([
            w.wait.clone(),
            count(w.pairs),
            ns(w.total_ns),
            ns(w.max_ns),
            if closed.is_empty() {
                "—".into()
            } else {
                closed.join("; ")
            },
        ]);
    }
    t
}

/// The full mode's histogram beside the trace's, in one sentence.
pub fn probes_line(f: &SchedFigures) -> Option<String> {
    let r = f.probes_runq.as_ref()?;
    let bound = |v: Option<u64>| v.map_or("—".into(), ns);
    let kinds: String = r
        .by_kind
        .iter()
        .map(|k| {
            format!(
                " {}: {} samples there (p50 ≤ {}), {} here (p50 {}).",
                k.kind,
                count(k.probes_count),
                bound(k.probes_p50_at_most_ns),
                count(k.trace_count),
                bound(k.trace_p50_ns),
            )
        })
        .collect();
    Some(format!(
        "Beside the probes' per-thread histogram \"wakeup or preemption → switch-in\": {} samples there (p50 ≤ {}, p99 ≤ {}, log2 buckets), {} here (p50 {}, p99 {}, both kinds together) — {}.{kinds}",
        count(r.probes_count),
        bound(r.probes_p50_at_most_ns),
        bound(r.probes_p99_at_most_ns),
        count(r.trace_count),
        bound(r.trace_p50_ns),
        bound(r.trace_p99_ns),
        r.agreement
    ))
}

/// summary.md's section.
pub fn markdown(md: &mut String, f: &SchedFigures) {
    let _ = writeln!(
        md,
        "\n## Wake-to-run and preempted-to-run (scheduler trace, `{}`)\n",
        record::PERFETTO_TRACE
    );
    md.push_str(&latency_table(f).markdown());
    let _ = writeln!(
        md,
        "\nFrom {} records: {} in {}, {} switches; {}.",
        count(f.records),
        plural(f.threads, "thread"),
        plural(f.processes, "process"),
        count(f.switches),
        f.method
    );
    if let Some(line) = probes_line(f) {
        let _ = writeln!(md, "\n{line}");
    }
    if !f.waits.is_empty() {
        let _ = writeln!(md, "\nThe waits, as slices on their threads:\n");
        md.push_str(&waits_table(f).markdown());
    }
    let lost = f.records_lost.map_or("records lost: not said".into(), |n| {
        format!("records lost: {}", count(n))
    });
    let _ = writeln!(
        md,
        "\n{lost}; records out of order beyond the reorder window: {}.",
        count(f.late_records)
    );
    for note in &f.notes {
        let _ = writeln!(md, "- {note}");
    }
    if let Some(cut) = &f.too_big_for_the_ui {
        let _ = writeln!(md, "- {cut}");
    }
}

/// The terminal's line: the whole run's two p50s and p99s.
pub fn terminal_line(f: &SchedFigures) -> Option<String> {
    let part = |what: &str, r: Option<&LatencyRow>| {
        r.map(|r| {
            format!(
                "{what} p50 {} p99 {} ({} samples)",
                ns(r.p50_ns),
                ns(r.p99_ns),
                count(r.count)
            )
        })
    };
    let parts: Vec<String> = [
        part("wake-to-run", f.wake_whole()),
        part("preempted-to-run", f.preempted_whole()),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Figures from a trace that lost records are from what it kept: said on the same line.
    let lost = match f.records_lost {
        Some(n) if n > 0 => format!(
            " — {} records LOST (the ring was full): from the {} kept",
            count(n),
            count(f.records)
        ),
        _ => String::new(),
    };
    // A capped trace's figures cover its kept window: said on the same line too.
    let window = match &f.kept_window {
        Some(w) => format!(" — {w}: these cover the kept window only"),
        None => String::new(),
    };
    (!parts.is_empty()).then(|| format!("Scheduler trace: {}{lost}{window}", parts.join("; ")))
}

/// One run of a comparison with a trace: its name and whole-run rows.
pub struct RunLatency<'a> {
    pub run: &'a str,
    pub wake: Option<&'a LatencyRow>,
    pub preempted: Option<&'a LatencyRow>,
}

/// compare.md's and report.html's table: per run with a trace, both latencies over the whole run.
pub fn runs_table(runs: &[RunLatency]) -> Table {
    let mut t = Table::new([
        "run",
        "wake-to-run samples",
        "p50",
        "p99",
        "max",
        "preempted-to-run samples",
        "p50",
        "p99",
        "max",
    ])
    .right_aligned(1..9);
    let four = |r: Option<&LatencyRow>| match r {
        Some(r) => {
            let [n, p50, _, p99, max] = cells(r);
            [n, p50, p99, max]
        }
        None => ["0".into(), "—".into(), "—".into(), "—".into()],
    };
    for r in runs {
        let mut row = vec![r.run.to_string()];
        row.extend(four(r.wake));
        row.extend(four(r.preempted));
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(phase: &str, count: u64, p50: u64) -> LatencyRow {
        LatencyRow {
            phase: phase.into(),
            count,
            p50_ns: p50,
            p90_ns: p50 * 2,
            p99_ns: p50 * 3,
            max_ns: p50 * 10,
        }
    }

    #[test]
    fn the_table_has_a_row_per_kind_and_phase_and_the_line_the_whole_run() {
        let f = SchedFigures {
            method: "m".into(),
            wake_to_run: vec![row("spawn", 3, 12_000), row("whole run", 5, 11_000)],
            preempted_to_run: vec![row("whole run", 2, 2_500_000)],
            records: 10,
            processes: 1,
            threads: 3,
            switches: 4,
            waits: Vec::new(),
            records_lost: Some(0),
            late_records: 0,
            probes_runq: None,
            notes: Vec::new(),
            too_big_for_the_ui: None,
            kept_window: None,
        };
        let md = latency_table(&f).markdown();
        assert!(
            md.contains("| wake-to-run | spawn | 3 | 12.0 µs | 24.0 µs | 36.0 µs | 120.0 µs |"),
            "{md}"
        );
        assert!(
            md.contains("| preempted-to-run | whole run | 2 | 2.5 ms |"),
            "{md}"
        );
        assert_eq!(
            terminal_line(&f).unwrap(),
            "Scheduler trace: wake-to-run p50 11.0 µs p99 33.0 µs (5 samples); preempted-to-run p50 2.5 ms p99 7.5 ms (2 samples)"
        );
        let lossy = SchedFigures {
            records_lost: Some(1_234),
            ..f
        };
        assert!(
            terminal_line(&lossy).unwrap().ends_with(
                "(2 samples) — 1,234 records LOST (the ring was full): from the 10 kept"
            ),
            "{}",
            terminal_line(&lossy).unwrap()
        );
        let capped = SchedFigures {
            kept_window: Some("the trace was capped at 1.0 MiB".into()),
            ..lossy
        };
        assert!(terminal_line(&capped)
            .unwrap()
            .ends_with("— the trace was capped at 1.0 MiB: these cover the kept window only"));
    }
}
