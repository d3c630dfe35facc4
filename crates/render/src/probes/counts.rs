//! What the eBPF probes counted in one run (analyse::probes::counts) as people read it: the counts,
//! the latencies, the cross-checks against the kernel, and what the probes cost the run.

use crate::table::Table;
use analyse::probes::counts::{CostFormula, ProbeCost, ProbeSummary};
use std::fmt::Write;
use units::{count, in_unit};

/// The probes' counts: total, per task and per phase.
pub fn probes_table(p: &ProbeSummary) -> Table {
    let mut t = Table::new(
        ["metric", "total", "per task"]
            .map(String::from)
            .into_iter()
            .chain(p.phases.iter().cloned()),
    );
    for row in &p.rows {
        let mut cells = vec![
            spawnscope_collector::metric_label(&row.metric).to_string(),
            in_unit(row.total as f64, &row.unit),
            row.per_task.map_or("—".into(), |v| in_unit(v, &row.unit)),
        ];
        cells.extend(row.per_phase.iter().map(|v| in_unit(*v as f64, &row.unit)));
        t.row(cells);
    }
    t
}

/// The probes' latency histograms: samples and upper bounds of the median and 99th percentile.
pub fn latencies_table(p: &ProbeSummary) -> Table {
    let q = |v: Option<u64>| v.map_or("?".into(), |v| in_unit(v as f64, "ns"));
    let mut t = Table::new(["latency (log2 buckets)", "samples", "p50 ≤", "p99 ≤"]);
    for l in &p.latencies {
        t.row([l.name.clone(), count(l.count), q(l.p50_ns), q(l.p99_ns)]);
    }
    t
}

/// The probes' counts against the kernel's own accounting.
pub fn cross_checks_table(p: &ProbeSummary) -> Table {
    let mut t = Table::new([
        "check",
        "expected (kernel's count, or the tasks said)",
        "counted by the probes",
        "tolerance",
        "verdict",
    ]);
    for c in &p.cross_checks {
        let observed = if c.observed == c.observed_max {
            count(c.observed)
        } else {
            format!("{}..{}", count(c.observed), count(c.observed_max))
        };
        t.row([
            c.name.clone(),
            count(c.expected),
            observed,
            count(c.tolerance),
            format!("{:?}", c.verdict),
        ]);
    }
    t
}

pub(crate) fn probes_markdown(md: &mut String, p: &ProbeSummary) {
    let _ = writeln!(
        md,
        "\n## eBPF probes (in-kernel counts for the workload's tasks)\n"
    );
    md.push_str(&probes_table(p).markdown());
    if !p.latencies.is_empty() {
        md.push('\n');
        md.push_str(&latencies_table(p).markdown());
    }
    let _ = writeln!(
        md,
        "\n### Cross-checks against the kernel's own accounting: {}\n",
        if p.cross_checks_pass {
            "all pass"
        } else {
            "NOT all pass"
        }
    );
    md.push_str(&cross_checks_table(p).markdown());
    if !p.not_loaded.is_empty() {
        let _ = writeln!(md, "\nProbes not loaded: {}", p.not_loaded.join("; "));
    }
    if let Some(cost) = &p.cost {
        let _ = writeln!(md, "\n### What the probes cost: {}\n", cost_line(cost));
        md.push_str(&probe_cost_table(cost).markdown());
    }
}

/// The probes' cost in one line: time in BPF programs, and its share of the workload's CPU time.
pub fn cost_line(cost: &ProbeCost) -> String {
    let share = cost.share_of_cpu.map_or(String::new(), |s| {
        format!(", {:.1} % of the workload's CPU time", s * 100.0)
    });
    let basis = match (&cost.rates_from, cost.sampled_share) {
        (Some(from), _) => format!(
            "each program's runs at its ns per run in the probes' calibration run ({from}); the kernel's run-time statistics off in this run"
        ),
        // Recorded with the statistics on for the whole run: what they measured.
        (None, None) => "the kernel's run-time statistics".to_string(),
        (None, Some(on)) if on >= 0.999 => {
            "the kernel's run-time statistics, on for the whole run".into()
        }
        (None, Some(on)) => format!(
            "each program's runs at its ns per run while the kernel's run-time statistics were on, {:.0} % of the run",
            on * 100.0
        ),
    };
    // The statistics time a run from their first clock read to their second: each run's time
    // holds one of their own reads (measure/probe_cost.rs measures how much that is).
    let own_read = if cost.total_ns > 0 {
        "; each run's time holds one of the statistics' own clock reads"
    } else {
        ""
    };
    let not_in_it = "not in it: the tracepoints' dispatch and the syscall-tracing slow path around the run's own events (docs/manual/probe-cost.md)";
    let Some(f) = &cost.formula else {
        // Recorded before the pair counted what it filtered out: every run at its program's ns.
        return format!(
            "{} in BPF programs over {} runs{share} ({basis}{own_read}); {not_in_it}",
            in_unit(cost.total_ns as f64, "ns"),
            count(cost.events)
        );
    };
    format!(
        "{}; {not_in_it}; every time figure of this run includes the programs' part ({basis}{own_read})",
        formula_text(f)
    )
}

/// The formula with its parts: "total = Σ program events × ns (= programs) + the host's share
/// (filtered-out syscalls × the pair's floor) = total, share of the workload's CPU time".
pub fn formula_text(f: &CostFormula) -> String {
    let terms = if f.terms.is_empty() {
        "no event of the run's own".to_string()
    } else {
        f.terms
            .iter()
            .map(|t| {
                if t.ns_per_event > 0.0 {
                    format!(
                        "{} {} × {:.0} ns",
                        t.program,
                        count(t.events),
                        t.ns_per_event
                    )
                } else {
                    // A program the calibration never ran: no time, not a guess.
                    format!("{} {} × not timed", t.program, count(t.events))
                }
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let host = match &f.host {
        None => " + the host's share: no syscall of another process seen".to_string(),
        Some(h) => {
            let parts: Vec<String> = h
                .hooks
                .iter()
                .map(|t| match t.floor_ns {
                    Some(floor) => format!("{} × {:.0} ns", count(t.filtered_out), floor),
                    None => format!("{} × its floor (not timed)", count(t.filtered_out)),
                })
                .collect();
            let value = h.ns.map_or_else(
                || "not counted: the calibration timed no floor".to_string(),
                |ns| in_unit(ns, "ns"),
            );
            format!(
                " + the host's share, the syscalls of other processes the raw_syscalls pair filtered out × the pair's floor: {} (= {value}, paid by those processes)",
                parts.join(" + ")
            )
        }
    };
    let share = f.share_of_cpu.map_or(String::new(), |s| {
        format!(", {:.2} % of the workload's CPU time", s * 100.0)
    });
    format!(
        "{} = Σ the run's own events × each program's ns: {terms} (= {}){host}{share}",
        in_unit(f.total_ns, "ns"),
        in_unit(f.programs_ns, "ns"),
    )
}

/// Per program: how often it ran, for how long, per run.
pub fn probe_cost_table(cost: &ProbeCost) -> Table {
    let mut t = Table::new(["program", "tracepoint", "runs", "total", "per run", "share"])
        .right_aligned([2, 3, 4, 5]);
    for p in &cost.programs {
        t.row([
            p.program.clone(),
            p.tracepoint.clone(),
            count(p.events),
            in_unit(p.total_ns as f64, "ns"),
            format!("{:.0} ns", p.ns_per_event),
            format!(
                "{:.1} %",
                p.total_ns as f64 * 100.0 / cost.total_ns.max(1) as f64
            ),
        ]);
    }
    t
}

/// The probe figures a terminal line has room for.
pub(crate) fn probe_highlights(p: &ProbeSummary) -> String {
    KEY_PROBES
        .iter()
        .filter(|(_, on_terminal)| *on_terminal)
        .map(|(name, _)| name)
        .filter_map(|name| {
            let row = p.rows.iter().find(|r| r.metric == *name)?;
            Some(format!("{name} {}", in_unit(row.per_task?, &row.unit)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The probe figures shown beyond summary.md's full table, per task: in `report`'s side-by-side
/// view, and (those marked) on the terminal's one line.
pub(crate) const KEY_PROBES: &[(&str, bool)] = &[
    ("faults", true),
    ("clones", true),
    ("switches_voluntary", true),
    ("switches_involuntary", true),
    ("oncpu_ns", true),
    ("runq_ns", true),
    ("futex_waits", true),
    ("mmap_calls", true),
    ("munmap_calls", false),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_line_is_the_formula_with_its_parts() {
        use analyse::probes::counts::{cost_formula, ProgramCostRow};
        use record::FloorRate;
        let programs = vec![
            ProgramCostRow {
                program: "btf_sys_enter".into(),
                tracepoint: "raw_syscalls:sys_enter".into(),
                events: 1_500,
                filtered_out: 500,
                total_ns: 90_000,
                ns_per_event: 60.0,
            },
            ProgramCostRow {
                program: "btf_sys_exit".into(),
                tracepoint: "raw_syscalls:sys_exit".into(),
                events: 1_400,
                filtered_out: 400,
                total_ns: 70_000,
                ns_per_event: 50.0,
            },
            ProgramCostRow {
                program: "btf_sched_switch".into(),
                tracepoint: "sched:sched_switch".into(),
                events: 2_000,
                filtered_out: 0,
                total_ns: 160_000,
                ns_per_event: 80.0,
            },
        ];
        let floors = vec![
            FloorRate {
                hook: "raw_syscalls:sys_enter".into(),
                runs: 10,
                ns: 500,
            },
            FloorRate {
                hook: "raw_syscalls:sys_exit".into(),
                runs: 10,
                ns: 400,
            },
        ];
        // 2 ms of the workload's CPU.
        let f = cost_formula(&programs, &floors, Some(2_000));
        // Every run at its ns: 1,500 × 60 + 1,400 × 50 + 2,000 × 80 = 320 µs; the host's: 500 × 50
        // + 400 × 40 = 41 µs at the floors; the run's own the rest: 65 + 54 + 160 = 279 µs (its
        // own events dearer than the average, which the cheap filtered-out runs pull down).
        assert_eq!(f.programs_ns, 279_000.0);
        assert_eq!(f.host.as_ref().unwrap().ns, Some(41_000.0));
        assert_eq!(f.total_ns, 320_000.0);
        let cost = ProbeCost {
            events: 4_900,
            total_ns: 320_000,
            rates_from: Some("threads hold --n 2500, lean probes, 2026-11-28T04:00:00Z".into()),
            formula: Some(f.clone()),
            programs,
            ..Default::default()
        };
        assert_eq!(
            cost_line(&cost),
            "320.0 µs = Σ the run's own events × each program's ns: btf_sched_switch 2,000 × 80 ns + btf_sys_enter 1,000 × 65 ns + btf_sys_exit 1,000 × 54 ns (= 279.0 µs) + the host's share, the syscalls of other processes the raw_syscalls pair filtered out × the pair's floor: 500 × 50 ns + 400 × 40 ns (= 41.0 µs, paid by those processes), 16.00 % of the workload's CPU time; not in it: the tracepoints' dispatch and the syscall-tracing slow path around the run's own events (docs/manual/probe-cost.md); every time figure of this run includes the programs' part (each program's runs at its ns per run in the probes' calibration run (threads hold --n 2500, lean probes, 2026-11-28T04:00:00Z); the kernel's run-time statistics off in this run; each run's time holds one of the statistics' own clock reads)"
        );
        // No floor timed: the host's runs said, not turned into a figure (their time stays in the programs').
        let unfloored = cost_formula(&cost.programs, &[], None);
        assert_eq!(unfloored.total_ns, 320_000.0);
        assert!(formula_text(&unfloored).contains(
            "500 × its floor (not timed) + 400 × its floor (not timed) (= not counted: the calibration timed no floor"
        ), "{}", formula_text(&unfloored));
        // A record from before the pair counted its filtered runs: the programs' time alone.
        let old = ProbeCost {
            formula: None,
            sampled_share: Some(1.0),
            share_of_cpu: Some(0.16),
            ..cost
        };
        assert_eq!(
            cost_line(&old),
            "320.0 µs in BPF programs over 4,900 runs, 16.0 % of the workload's CPU time (each program's runs at its ns per run in the probes' calibration run (threads hold --n 2500, lean probes, 2026-11-28T04:00:00Z); the kernel's run-time statistics off in this run; each run's time holds one of the statistics' own clock reads); not in it: the tracepoints' dispatch and the syscall-tracing slow path around the run's own events (docs/manual/probe-cost.md)"
        );
    }
}
