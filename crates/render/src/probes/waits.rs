//! "Where the system time goes (exact, from the kernel's tracepoints)": the kernel's waits as a
//! table and lines, in summary.md and on the terminal.

use std::fmt::Write;

use crate::table::Table;
use analyse::probes::waits::{WaitKind, Waits};
use units::{count, in_unit};

fn ns(v: u64) -> String {
    in_unit(v as f64, "ns")
}

fn opt(v: Option<u64>) -> String {
    v.map_or("not available here".into(), count)
}

/// One row per kind of wait: count, time summed over tasks, per wait, per task, what it costs
/// the CPU, and the time per phase.
pub fn waits_table(w: &Waits) -> Table {
    let mut t = Table::new(
        [
            "wait",
            "count",
            "waited (all tasks)",
            "per wait",
            "per task",
            "CPU",
        ]
        .map(String::from)
        .into_iter()
        .chain(w.phases.iter().cloned()),
    );
    for r in &w.rows {
        let cpu = match (r.kind, r.share_of_system) {
            (Some(WaitKind::Spinning), Some(share)) => {
                format!("spinning: {:.1} % of system time", share * 100.0)
            }
            (Some(WaitKind::Spinning), None) => "spinning".into(),
            _ => "asleep, not CPU time".into(),
        };
        let mut cells = vec![
            r.label.clone(),
            count(r.count),
            ns(r.total_ns),
            if r.count > 0 {
                in_unit(r.total_ns as f64 / r.count as f64, "ns")
            } else {
                "—".into()
            },
            r.ns_per_task.map_or("—".into(), |v| in_unit(v, "ns")),
            cpu,
        ];
        cells.extend(r.per_phase_ns.iter().map(|&v| ns(v)));
        t.row(cells);
    }
    t
}

/// The futex line: waits, wakes, and the waiters each wake walked in its hash bucket.
pub fn futex_line(w: &Waits) -> Option<String> {
    let f = w.futex.as_ref()?;
    let mut line = format!(
        "futex: {} waits, {} waited (all tasks); {} wakes, {} in them",
        count(f.waits),
        ns(f.wait_ns),
        count(f.wakes),
        ns(f.wake_ns)
    );
    match (f.walked_per_wake, f.hashed_wakes) {
        (Some(per), Some(hashed)) => {
            let _ = write!(
                line,
                ", walking {per:.1} waiters per wake in its hash bucket ({} hashed wakes; most {}; \
                 {} walked 1,000 or more)",
                count(hashed),
                f.walk_max.map_or("?".into(), count),
                f.wakes_walking_1000.map_or("?".into(), count)
            );
            if let Some(past) = f.walked_past_per_wake {
                let _ = write!(
                    line,
                    ", {past:.1} of them waiting on other addresses (walked past, never woken)"
                );
            }
        }
        (None, Some(_)) => line.push_str(", no wake hashed into the process's own futex hash"),
        _ => line.push_str(", waiters walked per wake: not available here"),
    }
    if let Some(slots) = f.hash_slots {
        let _ = write!(line, "; hash of {slots} slots");
        if f.hash_resized {
            line.push_str(" (resized during the run: per-bucket counts approximate)");
        }
    }
    if let Some(shared) = f.shared_ops.filter(|&n| n > 0) {
        let _ = write!(
            line,
            "; {} ops on shared futexes (global hash, walks not known)",
            count(shared)
        );
    }
    Some(line)
}

pub fn tlb_line(w: &Waits) -> String {
    let t = &w.tlb;
    let per_task = t
        .shootdowns_per_task
        .map_or(String::new(), |v| format!(" ({v:.2} per task)"));
    format!(
        "TLB shootdowns asked of other CPUs: {}{per_task}; flushes that had to reach other CPUs: \
         {}; IPIs sent: {} to {} CPUs",
        opt(t.shootdowns),
        opt(t.remote_flushes),
        opt(t.ipis),
        opt(t.ipi_targets)
    )
}

pub fn machine_line(w: &Waits) -> String {
    let m = &w.machine;
    let timed = |n: Option<u64>, t: Option<u64>| match (n, t) {
        (Some(n), Some(t)) => format!("{} ({})", count(n), ns(t)),
        _ => "not available here".into(),
    };
    // A total and its phases: "929.5 ms (startup 8.0 µs, spawn 97.8 ms, …)".
    let by_phase = |total: u64, per_phase: &[u64]| {
        let phases: Vec<String> = w
            .phases
            .iter()
            .zip(per_phase)
            .map(|(p, v)| format!("{p} {}", ns(*v)))
            .collect();
        format!("{} ({})", ns(total), phases.join(", "))
    };
    let outside = m.outside_oncpu_ns.map_or("not available here".into(), |v| {
        let kthreads = m.outside_kthread_oncpu_ns.map_or(String::new(), |k| {
            format!(
                "; of it kernel threads {}",
                by_phase(k, &m.outside_kthread_per_phase_ns)
            )
        });
        format!("{}{kthreads}", by_phase(v, &m.outside_per_phase_ns))
    });
    format!(
        "the machine during the run, all tasks: direct reclaim {}, {} pages reclaimed; \
         reclaim of cgroups at their limit {}; compaction {}; direct compaction stalls {}; THP \
         collapses {}; CPU time of tasks outside the run {outside}",
        timed(m.direct_reclaims, m.direct_reclaim_ns),
        opt(m.direct_reclaimed_pages),
        timed(m.cgroup_reclaims, m.cgroup_reclaim_ns),
        timed(m.compactions, m.compaction_ns),
        opt(m.direct_compactions),
        opt(m.thp_collapses)
    )
}

pub fn markdown(md: &mut String, w: &Waits) {
    let _ = writeln!(
        md,
        "\n## Where the system time goes (exact, from the kernel's tracepoints)\n"
    );
    let _ = writeln!(
        md,
        "Each wait counted for the workload's tasks from its start to its end, in the kernel; no \
         sampling. Times are summed over tasks: wall time spent waiting, mostly asleep. Only \
         spinning waits are CPU time, set against the run's system time ({:.2} s).\n",
        w.system_s
    );
    md.push_str(&waits_table(w).markdown());
    md.push('\n');
    if let Some(line) = futex_line(w) {
        let _ = writeln!(md, "- {line}");
        let f = w.futex.as_ref().unwrap();
        for top in &f.top {
            let _ = writeln!(md, "  - {top}");
        }
    }
    let _ = writeln!(md, "- {}", tlb_line(w));
    let _ = writeln!(md, "- {}", machine_line(w));
    if !w.not_available.is_empty() {
        let _ = writeln!(md, "- Not available here: {}", w.not_available.join("; "));
    }
    for note in &w.notes {
        let _ = writeln!(md, "- {note}");
    }
    if let Some(line) = perf_line(w) {
        let _ = writeln!(md, "- {line}");
    }
}

/// perf's sampled spinning beside the exact one, and whether they agree.
pub fn perf_line(w: &Waits) -> Option<String> {
    let p = w.perf.as_ref()?;
    let verdict = if p.agree {
        "they agree within sampling error".to_string()
    } else {
        "they differ by more than sampling error: cpu-clock cannot sample while interrupts are \
         off (a spin_lock_irqsave wait is charged to where they are re-enabled), a paravirt \
         spinlock halts its vCPU instead of spinning, and the exact figure also holds the \
         tracing's own nanoseconds"
            .to_string()
    };
    Some(format!(
        "perf, sampling the same run: {} of {} kernel samples ({:.1} %) in a spin-lock or rwlock \
         slow path, {} of system time, against {} of spinning counted exactly (which perf would \
         catch in {:.1} ± {:.1} samples); {verdict}",
        count(p.spin_samples),
        count(p.kernel_samples),
        p.spin_samples as f64 * 100.0 / p.kernel_samples.max(1) as f64,
        in_unit(p.spin_s * 1e9, "ns"),
        in_unit(p.exact_spin_s * 1e9, "ns"),
        p.expected_samples,
        p.expected_se,
    ))
}

/// The terminal's lines: the biggest waits in one line, the futex walk, the machine.
pub fn terminal(out: &mut String, w: &Waits) {
    let mut top: Vec<_> = w.rows.iter().filter(|r| r.total_ns > 0).collect();
    top.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    let waits: Vec<String> = top
        .iter()
        .take(3)
        .map(|r| format!("{} {} ({})", r.label, ns(r.total_ns), count(r.count)))
        .collect();
    let _ = writeln!(
        out,
        "  kernel waits (exact, summed over tasks): {}",
        if waits.is_empty() {
            "none".to_string()
        } else {
            waits.join("; ")
        }
    );
    if let Some(line) = futex_line(w) {
        let _ = writeln!(out, "\t{line}");
    }
    let _ = writeln!(out, "\t{}", tlb_line(w));
    let _ = writeln!(out, "\t{}", machine_line(w));
    if let Some(line) = perf_line(w) {
        let _ = writeln!(out, "\t{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::probes::waits::{FutexFigures, WaitRow};

    #[test]
    fn spinning_is_cpu_time_sleeping_is_not_and_missing_is_said() {
        let row = |metric: &str, kind, share| WaitRow {
            metric: metric.into(),
            label: metric.into(),
            kind: Some(kind),
            count: 4,
            total_ns: 4_000_000,
            ns_per_task: Some(400_000.0),
            share_of_system: share,
            per_phase_ns: vec![0, 4_000_000],
        };
        let w = Waits {
            phases: vec!["startup".into(), "spawn".into()],
            system_s: 0.016,
            rows: vec![
                row("lock_spin_waits", WaitKind::Spinning, Some(0.25)),
                row("mmap_lock_write_waits", WaitKind::Sleeping, None),
            ],
            futex: Some(FutexFigures {
                wakes: 200,
                hashed_wakes: Some(200),
                walked: Some(400_000),
                walked_per_wake: Some(2000.0),
                walk_max: Some(2000),
                wakes_walking_1000: Some(200),
                hash_slots: Some(16),
                ..FutexFigures::default()
            }),
            ..Waits::default()
        };
        let mut md = String::new();
        markdown(&mut md, &w);
        assert!(
            md.contains("## Where the system time goes (exact, from the kernel's tracepoints)\n")
        );
        assert!(md.contains(
            "| lock_spin_waits | 4 | 4.0 ms | 1.0 ms | 400.0 µs | spinning: 25.0 % of system time | 0 ns | 4.0 ms |"
        ), "{md}");
        assert!(md.contains("| asleep, not CPU time |"), "{md}");
        assert!(md.contains("walking 2000.0 waiters per wake"), "{md}");
        assert!(md.contains("; hash of 16 slots"), "{md}");
        // Figures this host could not give are said so, not shown as 0.
        assert!(
            md.contains("TLB shootdowns asked of other CPUs: not available here"),
            "{md}"
        );
        assert!(md.contains("direct reclaim not available here"), "{md}");
    }
}
