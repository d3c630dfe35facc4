//! A runtime-traced run's figures as people read them (summary.md, the terminal): the runtime's
//! readied→running beside the kernel's wake-to-run, its counts, and the created check.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::table::Table;
use analyse::runtimes::go_sched::GoSchedFigures;
use analyse::traces::sched_figures::SchedFigures;
use analyse::traces::sched_trace::LatencyRow;
use analyse::traces::sched_trace::WHOLE_RUN;
use units::{count, in_unit};

fn ns(v: u64) -> String {
    in_unit(v as f64, "ns")
}

/// Why such a run's memory and time are not the runtime's own: said first wherever it is shown.
pub const RUNTIME_TRACED: &str = "runtime-traced: the Go execution tracer ran through this run, so its memory, fault and time figures carry the tracer's cost and are not goroutines' own (take those from a run without --runtime-trace)";

fn whole(rows: &[LatencyRow]) -> Option<&LatencyRow> {
    rows.iter()
        .find(|r| r.phase == WHOLE_RUN)
        .or_else(|| (rows.len() == 1).then(|| &rows[0]))
}

fn by_name(map: &BTreeMap<String, u64>) -> String {
    let mut items: Vec<(&String, &u64)> = map.iter().collect();
    items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    items
        .iter()
        .map(|(k, v)| format!("{k} {}", count(**v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The created check in one sentence.
pub fn created_line(f: &GoSchedFigures) -> String {
    let c = &f.created_check;
    let spawned = match (c.workload_spawned, &c.not_checked) {
        (Some(s), _) => format!("the workload spawned {}", count(s)),
        (None, Some(why)) => why.clone(),
        (None, None) => "the workload said no count".into(),
    };
    let verdict = match c.agrees {
        Some(true) => "agree",
        Some(false) => "DISAGREE",
        None => "not checked",
    };
    let own = if c.runtime_own.is_empty() {
        "none".into()
    } else {
        by_name(&c.runtime_own)
    };
    // A command's goroutines outside package main may be its libraries' as well as the runtime's.
    let others = if c.not_checked.is_some() {
        "outside package main"
    } else {
        "the runtime's own"
    };
    format!(
        "Goroutines created in the trace: {} with a start function in package main, {spawned} — {verdict}; {others}: {own}.",
        count(c.by_the_workload)
    )
}

/// Where the reducer cut a long trace, in one sentence; None when every change was kept.
pub fn kept_line(f: &GoSchedFigures) -> Option<String> {
    let k = f.kept.as_ref().filter(|k| k.past_cap > 0)?;
    let phase = k
        .cut_in_phase
        .as_ref()
        .map_or(String::new(), |p| format!(", in its {p} phase"));
    // The parser's order is its times; where it moved the kept records' times far forward, the
    // records' own times end much earlier: both said.
    let own = match k.own_times_until_s {
        Some(own) if own < k.kept_until_s => format!(
            " in the parser's times; their own times, those it did not move, reach {}",
            ns((own * 1e9) as u64)
        ),
        _ => String::new(),
    };
    Some(format!(
        "{} records kept up to {} into the trace (of its {}{phase}){own}; {} more past the cap of {} counted, not kept: {} ({} readied→running waits). The counts are of every change; the readied→running latencies, the running slices and the on-CPU check are of the kept records.",
        count(k.records_kept),
        ns((k.kept_until_s * 1e9) as u64),
        ns((k.trace_s * 1e9) as u64),
        count(k.past_cap),
        count(k.max_records),
        by_name(&k.past_cap_by_transition),
        count(k.past_cap_readied_to_running),
    ))
}

/// The latency rows' name: of the kept records where the reducer cut the trace.
fn readied_label(f: &GoSchedFigures) -> &'static str {
    match &f.kept {
        Some(k) if k.past_cap > 0 => "goroutine readied → running (kept records)",
        _ => "goroutine readied → running",
    }
}

/// summary.md's section.
pub fn markdown(md: &mut String, f: &GoSchedFigures, kernel: Option<&SchedFigures>) {
    let _ = writeln!(
        md,
        "\n## The Go runtime's scheduler (execution trace, `{}`)\n",
        record::GO_TRACE
    );
    let mut t = Table::new(["", "phase", "samples", "p50", "p90", "p99", "max"])
        .right_aligned([2, 3, 4, 5, 6]);
    let mut rows: Vec<(&str, &LatencyRow)> = f
        .readied_to_running
        .iter()
        .map(|r| (readied_label(f), r))
        .collect();
    if let Some(k) = kernel.and_then(SchedFigures::wake_whole) {
        rows.push(("OS thread wake-to-run (kernel)", k));
    }
    for (what, r) in rows {
        t.row([
            what.to_string(),
            r.phase.clone(),
            count(r.count),
            ns(r.p50_ns),
            ns(r.p90_ns),
            ns(r.p99_ns),
            ns(r.max_ns),
        ]);
    }
    md.push_str(&t.markdown());
    let _ = writeln!(
        md,
        "\nFrom {} goroutine state changes: {} created ({}), {} already there, {} started, {} blocked ({}), {} unblocked, {} destroyed, {} syscalls; preempted or yielded: {}. {} running slices on {} OS threads (TIDs {}) in the Perfetto trace, each named by its start function with its `goid`.",
        count(f.records + f.kept.as_ref().map_or(0, |k| k.past_cap)),
        count(f.created),
        by_name(&f.created_by_function),
        count(f.at_start),
        count(f.started),
        count(f.blocked),
        by_name(&f.blocked_by_reason),
        count(f.unblocked),
        count(f.destroyed),
        count(f.syscalls),
        if f.stopped_by_reason.is_empty() { "none".into() } else { by_name(&f.stopped_by_reason) },
        count(f.running_slices),
        f.threads.len(),
        f.threads.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
    );
    if let Some(line) = kept_line(f) {
        let _ = writeln!(md, "\n{line}");
    }
    let _ = writeln!(
        md,
        "\n{}\n\n{}\n\nMethod: {}.",
        created_line(f),
        on_cpu_line(f),
        f.method
    );
    for note in &f.notes {
        let _ = writeln!(md, "- {note}");
    }
}

/// The on-CPU check in one sentence.
pub fn on_cpu_line(f: &GoSchedFigures) -> String {
    match &f.on_cpu {
        Some(c) => format!(
            "On-CPU check: {} — {}.",
            if c.passed { "passed" } else { "FAILED" },
            c.says
        ),
        None => "On-CPU check: not made (it needs the kernel's trace and its clock offset).".into(),
    }
}

/// The terminal's line.
pub fn terminal_line(f: &GoSchedFigures) -> String {
    let latency = whole(&f.readied_to_running).map_or("no samples".into(), |r| {
        format!(
            "p50 {} p99 {} ({} samples)",
            ns(r.p50_ns),
            ns(r.p99_ns),
            count(r.count)
        )
    });
    let kept = match &f.kept {
        Some(k) if k.past_cap > 0 => format!(
            " (the first {} of {} kept: {} records, {} more counted)",
            ns((k.kept_until_s * 1e9) as u64),
            ns((k.trace_s * 1e9) as u64),
            count(k.records_kept),
            count(k.past_cap)
        ),
        _ => String::new(),
    };
    format!(
        "Go runtime trace: goroutine readied → running {latency}{kept}; {} {}",
        created_line(f),
        on_cpu_line(f)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::runtimes::go_sched::KeptRecords;

    fn figures(kept: Option<KeptRecords>) -> GoSchedFigures {
        let mut f: GoSchedFigures = serde_json::from_value(serde_json::json!({
            "method": "m", "runtime_traced": true, "records": 16, "created": 4,
            "created_by_function": {"main.f": 4}, "at_start": 0, "started": 0, "blocked": 0,
            "blocked_by_reason": {}, "unblocked": 0, "stopped_by_reason": {}, "syscalls": 0,
            "destroyed": 0, "readied_to_running": [],
            "created_check": {"by_the_workload": 4, "workload_spawned": 4, "runtime_own": {},
                              "agrees": true},
            "threads": [], "running_slices": 0, "notes": []
        }))
        .unwrap();
        f.kept = kept;
        f
    }

    /// The cut is said where the cap was reached, with what lies past it; not otherwise.
    #[test]
    fn the_cut_is_said_with_what_lies_past_it() {
        let mut kept = KeptRecords {
            max_records: 16,
            records_kept: 16,
            kept_until_s: 2.5,
            own_times_until_s: Some(2.5),
            trace_s: 400.0,
            cut_in_phase: Some("steady".into()),
            past_cap: 1_000_000,
            past_cap_by_transition: [
                ("Running->Waiting".to_string(), 600_000),
                ("Runnable->Running".to_string(), 400_000),
            ]
            .into(),
            past_cap_readied_to_running: 300_000,
        };
        let f = figures(Some(kept.clone()));
        let line = kept_line(&f).unwrap();
        assert!(
            line.starts_with("16 records kept up to 2.50 s into the trace (of its 400.00 s, in its steady phase); 1,000,000 more past the cap of 16 counted, not kept: Running->Waiting 600,000, Runnable->Running 400,000 (300,000 readied→running waits)."),
            "{line}"
        );
        let mut md = String::new();
        markdown(&mut md, &f, None);
        assert!(
            md.contains("From 1,000,016 goroutine state changes"),
            "{md}"
        );
        assert!(md.contains(&line));
        assert!(terminal_line(&f)
            .contains("(the first 2.50 s of 400.00 s kept: 16 records, 1,000,000 more counted)"));
        kept.own_times_until_s = Some(0.98);
        assert!(kept_line(&figures(Some(kept.clone()))).unwrap().contains("(of its 400.00 s, in its steady phase) in the parser's times; their own times, those it did not move, reach 980.0 ms; 1,000,000 more"));
        kept.past_cap = 0;
        assert_eq!(kept_line(&figures(Some(kept))), None);
        assert_eq!(kept_line(&figures(None)), None);
    }
}
