//! A runtime-traced tokio run's figures as people read them (summary.md, the terminal): tokio's
//! scheduled→polled beside the kernel's wake-to-run, its counts, its workers' parks and steals
//! beside the kernel's futex waits, and the spawn and on-CPU checks.

use std::fmt::Write;

use crate::table::Table;
use analyse::runtimes::tokio_sched::TokioSchedFigures;
use analyse::traces::on_cpu::OnCpuCheck;
use analyse::traces::sched_figures::SchedFigures;
use analyse::traces::sched_trace::LatencyRow;
use analyse::traces::sched_trace::WHOLE_RUN;
use units::{count, in_unit};

fn ns(v: u64) -> String {
    in_unit(v as f64, "ns")
}

/// Why such a run's memory and time are not the runtime's own: said first wherever it is shown.
pub const RUNTIME_TRACED: &str = "runtime-traced: tokio's task hooks ran through this run (the workload's hooks build, tokio_unstable), so its memory, fault and time figures carry the hooks' cost and are not tokio's own (take those from a run without --runtime-trace)";

fn whole(rows: &[LatencyRow]) -> Option<&LatencyRow> {
    rows.iter()
        .find(|r| r.phase == WHOLE_RUN)
        .or_else(|| (rows.len() == 1).then(|| &rows[0]))
}

/// The spawn check in one sentence.
pub fn spawn_line(f: &TokioSchedFigures) -> String {
    let c = &f.spawn_check;
    let spawned = c
        .workload_spawned
        .map_or("the workload said no count".into(), |s| {
            format!("the workload spawned {}", count(s))
        });
    let verdict = match c.agrees {
        Some(true) => "agree",
        Some(false) => "DISAGREE",
        None => "not checked",
    };
    format!(
        "Tasks spawned by the hooks: {}, {spawned} — {verdict} (tokio's own count: {}).",
        count(c.hooks_spawned),
        count(c.runtime_spawned)
    )
}

fn check_line(c: Option<&OnCpuCheck>) -> String {
    match c {
        Some(c) => format!(
            "On-CPU check: {} — {}.",
            if c.passed { "passed" } else { "FAILED" },
            c.says
        ),
        None => "On-CPU check: not made (it needs the kernel's trace and its clock offset).".into(),
    }
}

/// summary.md's section.
pub fn markdown(md: &mut String, f: &TokioSchedFigures, kernel: Option<&SchedFigures>) {
    let _ = writeln!(
        md,
        "\n## tokio's scheduler (task hooks, `{}`)\n",
        record::TOKIO_SCHED
    );
    let mut t = Table::new(["", "phase", "samples", "p50", "p90", "p99", "max"])
        .right_aligned([2, 3, 4, 5, 6]);
    let mut rows: Vec<(&str, &LatencyRow)> = f
        .scheduled_to_polled
        .iter()
        .map(|r| ("tokio task scheduled → polled", r))
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
        "\nFrom {} hook events: {} spawned, {} terminated ({} of them the runtime's own, unspawned), {} polls ({} a task). {} poll slices on {} threads (TIDs {}) in the Perfetto trace, on each thread's \"{}\" track, with the `{}`.\n",
        count(f.records),
        count(f.spawned),
        count(f.terminated),
        count(f.terminated_unspawned),
        count(f.polls),
        f.polls_per_task.map_or("-".into(), |p| format!("{p:.1}")),
        count(f.poll_slices),
        f.threads.len(),
        f.threads.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        crate::traces::perfetto_tokio::TRACK_NAME,
        crate::traces::perfetto_tokio::TASK_ID,
    );
    let mut w = Table::new([
        "worker",
        "TID",
        "polls (tokio)",
        "polls (hooks)",
        "parks",
        "futex waits (kernel)",
        "steals",
        "steal operations",
        "busy",
    ])
    .right_aligned([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    for x in &f.workers {
        w.row([
            x.worker.to_string(),
            x.tid.map_or("-".into(), |t| t.to_string()),
            count(x.poll_count),
            count(x.hook_polls),
            count(x.park_count),
            x.kernel_futex_waits.map_or("-".into(), count),
            count(x.steal_count),
            count(x.steal_operations),
            ns(x.busy_ns),
        ]);
    }
    md.push_str(&w.markdown());
    let _ = writeln!(
        md,
        "\nA parked worker waits on a futex (no I/O driver outside serve): its parks against the kernel's futex waits of its thread (the kernel's also count the runtime's other futex waits). tokio's poll count leaves out the polls of tasks a worker runs from its LIFO slot in the same turn; the hooks see every poll (those kept are counted here).\n\n{}\n\n{}\n\nMethod: {}.",
        spawn_line(f),
        check_line(f.on_cpu.as_ref()),
        f.method
    );
    for note in &f.notes {
        let _ = writeln!(md, "- {note}");
    }
}

/// The terminal's line.
pub fn terminal_line(f: &TokioSchedFigures) -> String {
    let latency = whole(&f.scheduled_to_polled).map_or("no samples".into(), |r| {
        format!(
            "p50 {} p99 {} ({} samples)",
            ns(r.p50_ns),
            ns(r.p99_ns),
            count(r.count)
        )
    });
    format!(
        "tokio task hooks: scheduled → polled {latency}; {} {}",
        spawn_line(f),
        check_line(f.on_cpu.as_ref())
    )
}
