//! The eBPF collector's counts for a run (collector.json) as the figures a summary shows: totals,
//! per task and per phase, latency quantiles, and the cross-checks against the kernel's own
//! accounting.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use spawnscope_collector::{CrossCheck, Report as CollectorReport, PER_THREAD_ONLY};

use crate::record::Rusage;

use crate::analyse::phases::phase_names;
use crate::analyse::probe_model::{around_programs, AroundPrograms};
use crate::record::{MemoryRecord, RunRecord, Target};
use crate::runtime::{OsThreads, TaskKind, WorkloadKind};

/// One eBPF metric: its total, per task, and split over the run's phases.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeRow {
    pub metric: String,
    pub unit: String,
    pub total: u64,
    pub per_task: Option<f64>,
    /// Aligned with `ProbeSummary::phases`.
    pub per_phase: Vec<u64>,
}

/// A latency distribution's upper bounds (log2 buckets), ns.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub name: String,
    pub count: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

/// What the eBPF collector saw, and how it agrees with the kernel's own accounting.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeSummary {
    /// `startup` (exec to the first phase mark), the workload's phases, `exit` (after `end`).
    pub phases: Vec<String>,
    pub rows: Vec<ProbeRow>,
    pub latencies: Vec<Latency>,
    pub cross_checks: Vec<CrossCheck>,
    pub cross_checks_pass: bool,
    /// Probes that could not be loaded, with why.
    pub not_loaded: Vec<String>,
    /// What the probes themselves cost, from the kernel's BPF run-time statistics (absent for runs
    /// recorded before the collector measured it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<ProbeCost>,
}

/// One BPF program's cost over the run.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProgramCostRow {
    pub program: String,
    pub tracepoint: String,
    /// Times it ran: every time its tracepoint fired, for any task (it filters inside).
    pub events: u64,
    pub total_ns: u64,
    pub ns_per_event: f64,
}

/// What the probes cost in all, and per program, most expensive first.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeCost {
    /// Programs that ran at least once.
    pub programs: Vec<ProgramCostRow>,
    pub events: u64,
    pub total_ns: u64,
    /// total_ns over the workload's CPU time (rusage user + system): the share of what was
    /// measured that the measuring took. BPF programs run on the CPU of the task that hits the
    /// tracepoint, mostly the workload's own, so most of it is inside that CPU time.
    pub share_of_cpu: Option<f64>,
    /// The share of the run the kernel's run-time statistics were on: each program's time is then
    /// its runs (counted by the program) at the ns per run of those windows, an estimate. None:
    /// on for the whole run (runs recorded before the collector sampled them), exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_share: Option<f64>,
    /// The probes' calibration run whose ns per run timed the programs, the statistics off in
    /// this run (measure/probe_rates.rs); None: timed in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rates_from: Option<String>,
    /// What the tracing cost around the programs (dispatch, the syscall slow path), which no
    /// counter sees: the programs' runs at the overhead benchmark's rate
    /// (`analyse/probe_model.rs`). Inside the run's time figures too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub around_programs: Option<AroundPrograms>,
}

/// The probes' cost from collector.json; None when the collector did not measure it.
pub fn probe_cost(report: &CollectorReport, run: &RunRecord) -> Option<ProbeCost> {
    if report.program_costs.is_empty() {
        return None;
    }
    let programs: Vec<ProgramCostRow> = report
        .program_costs
        .iter()
        .filter(|p| p.run_cnt > 0)
        .map(|p| ProgramCostRow {
            program: p.program.clone(),
            tracepoint: p.tracepoint.clone(),
            events: p.run_cnt,
            total_ns: p.run_time_ns,
            ns_per_event: p.run_time_ns as f64 / p.run_cnt as f64,
        })
        .collect();
    let total_ns: u64 = programs.iter().map(|p| p.total_ns).sum();
    let cpu_us = run
        .rusage
        .map(|r| r.user_us + r.sys_us)
        .filter(|&us| us > 0);
    let events: u64 = programs.iter().map(|p| p.events).sum();
    let runtime = match &run.target {
        Target::Workload(inv) => Some(inv.runtime),
        Target::Command { .. } => None,
    };
    Some(ProbeCost {
        around_programs: around_programs(runtime, events),
        events,
        total_ns,
        share_of_cpu: cpu_us.map(|us| total_ns as f64 / (us as f64 * 1000.0)),
        sampled_share: report
            .program_stats_on_ms
            .zip(report.program_stats_of_ms)
            .filter(|&(_, of)| of > 0)
            .map(|(on, of)| on as f64 / of as f64),
        rates_from: report.program_rates_from.clone(),
        programs,
    })
}

/// Summarises collector.json. Cross-checks compare with the workload's own getrusage (the
/// collector cuts its counts at that call) — or, for a command, the rusage of wait4.
pub fn probe_summary(
    report: &CollectorReport,
    memory: &MemoryRecord,
    run: &RunRecord,
    result: Option<&Value>,
    tasks: Option<u64>,
) -> ProbeSummary {
    let phases = phase_names(memory);
    let rows = report
        .summary_rows()
        .into_iter()
        .map(|r| {
            let mut per_phase = vec![r.before_first_phase];
            per_phase.extend(r.per_phase.iter().copied());
            per_phase.resize(phases.len(), 0);
            ProbeRow {
                per_task: tasks.filter(|&t| t > 0).map(|t| r.total as f64 / t as f64),
                metric: r.metric,
                unit: r.unit,
                total: r.total,
                per_phase,
            }
        })
        .collect();
    let latencies = [
        "clone_ns",
        "clone3_ns",
        "runq_ns",
        "oncpu_slice_ns",
        "futex_wait_ns",
    ]
    .iter()
    .filter_map(|name| report.histogram(name))
    .filter(|h| h.count > 0)
    .map(|h| Latency {
        name: h.name.clone(),
        count: h.count,
        p50_ns: h.quantile_upper(0.5),
        p99_ns: h.quantile_upper(0.99),
    })
    .collect();
    let from_result = result
        .map(|r| &r["rusage"])
        .filter(|r| r.is_object())
        // The event's rusage has the launcher's fields; what it lacks counts as zero.
        .map(|r| Rusage {
            user_us: r["user_us"].as_u64().unwrap_or(0),
            sys_us: r["sys_us"].as_u64().unwrap_or(0),
            maxrss_kb: r["maxrss_kb"].as_u64().unwrap_or(0),
            minflt: r["minflt"].as_u64().unwrap_or(0),
            majflt: r["majflt"].as_u64().unwrap_or(0),
            nvcsw: r["nvcsw"].as_u64().unwrap_or(0),
            nivcsw: r["nivcsw"].as_u64().unwrap_or(0),
        });
    // wait4's rusage (a command's, or a workload's that wrote no result) covers the whole run, not
    // the span up to the program's own last getrusage call, where the collector cuts its counts
    // for a workload's result: set against the probes' totals (a `threads hold` run as a command
    // had failed both switch checks by its exiting threads' switches, ≈ one each, after its call).
    let whole_run = from_result.is_none();
    let rusage = from_result.or(run.rusage);
    let uncut;
    let checked = if whole_run && report.rusage_basis.at_last_getrusage.is_some() {
        let mut r = report.clone();
        r.rusage_basis.at_last_getrusage = None;
        uncut = r;
        &uncut
    } else {
        report
    };
    // Threads created by the kernel for the workload: its spawned threads, or — for goroutines —
    // the OS threads the Go runtime made, less the main thread (exec made that one).
    // A command whose tasks are not threads says nothing about its threads: no such check.
    let threads_created = match (&run.target, result) {
        // A server starts threads of its own besides its connections' (accept loops, a ticker,
        // tokio's I/O driver) that no workload counts: no check rather than a false Fail.
        (Target::Workload(inv), Some(_)) if inv.workload == WorkloadKind::Serve => None,
        (Target::Workload(inv), Some(r)) => Some(match inv.runtime.describe().os_threads {
            OsThreads::FromRuntimeStats => r["runtime_stats"]["os_threads_created"]
                .as_u64()
                .map(|n| n.saturating_sub(1)),
            OsThreads::OnePerTask => r["spawned"].as_u64(),
        }),
        (
            Target::Command {
                task_kind: TaskKind::Task,
                ..
            },
            _,
        ) => None,
        _ => Some(tasks),
    };
    let expected_from = match &run.target {
        Target::Workload(_) => "the OS threads the workload says it created",
        Target::Command { .. } => {
            "--tasks, the OS threads the command was said to create (--task-kind task when its \
             tasks are not OS threads)"
        }
    };
    let mut cross_checks = rusage.map_or_else(Vec::new, |ru| {
        checked.cross_checks(
            &ru,
            threads_created.map(|n| (n.unwrap_or(0), expected_from)),
        )
    });
    if !std::ptr::eq(checked, report) {
        // The collector's note says its cut is missing; here it was left out on purpose.
        let basis = &report.rusage_basis;
        let said = format!(
            "counts are totals: {} getrusage calls and {} returns seen, no cut at the last",
            basis.getrusage_calls, basis.getrusage_returns
        );
        let meant = format!(
            "counts are totals: the rusage is wait4's, of the whole run, not cut at the \
             program's own getrusage calls ({})",
            basis.getrusage_calls
        );
        for c in &mut cross_checks {
            c.basis = c.basis.replace(&said, &meant);
        }
    }
    // A command's threads are checked against what it was said to run, not what it spawned.
    if matches!(run.target, Target::Command { .. }) {
        for c in cross_checks
            .iter_mut()
            .filter(|c| c.name == "threads created vs spawned")
        {
            c.name = "threads created vs --tasks".into();
        }
    }
    let not_loaded = report
        .probes
        .iter()
        // Left out by choice (lean probes) is said once in the run's "left out", not per probe.
        .filter(|p| p.attach.is_none() && p.note.as_deref() != Some(PER_THREAD_ONLY))
        .map(|p| format!("{}: {}", p.probe, p.note.clone().unwrap_or_default()))
        .collect();
    ProbeSummary {
        cross_checks_pass: cross_checks.iter().all(|c| c.pass()),
        phases,
        rows,
        latencies,
        cross_checks,
        not_loaded,
        cost: probe_cost(report, run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyse::test_support::{collector_report, run_record};
    use spawnscope_collector::{Attach, CutCounts, CutWindow, ProbeStatus, Verdict};

    fn counts(voluntary: u64, after_exit: u64, involuntary: u64) -> CutCounts {
        CutCounts {
            switches_voluntary: voluntary,
            switches_voluntary_after_exit: after_exit,
            switches_involuntary: involuntary,
            ..Default::default()
        }
    }

    /// `run --tasks 3000 -- threads hold --n 3000` as recorded on M1 (27 Nov 2026): the program
    /// called getrusage once, for its own result, before its 3,000 threads ended; wait4's rusage
    /// counts them all.
    #[test]
    fn wait4s_rusage_is_set_against_the_whole_runs_counts_not_the_programs_own_cut() {
        let mut report = collector_report(vec![]);
        report.probes = vec![ProbeStatus {
            probe: "sched:sched_switch".into(),
            attach: Some(Attach::TpBtf),
            note: None,
        }];
        report.rusage_basis.getrusage_calls = 1;
        report.rusage_basis.getrusage_returns = 1;
        let cut = counts(6_618, 80, 145);
        report.rusage_basis.at_last_getrusage = Some(CutWindow {
            entered: cut.clone(),
            returned: cut,
        });
        report.rusage_basis.total = counts(12_381, 3_000, 978);
        let mut run = run_record();
        run.rusage = Some(Rusage {
            nvcsw: 9_381,
            nivcsw: 978,
            ..Default::default()
        });
        let memory = MemoryRecord::default();
        let checks = probe_summary(&report, &memory, &run, None, Some(3_000)).cross_checks;
        let switches: Vec<&CrossCheck> = checks
            .iter()
            .filter(|c| c.name.contains("switches"))
            .collect();
        assert_eq!(switches.len(), 2);
        for c in switches {
            assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
            assert!(c.basis.contains("the rusage is wait4's"), "{}", c.basis);
            assert!(!c.basis.contains("no cut at the last"), "{}", c.basis);
        }
        // A workload's own rusage (its result event) is still set against the cut.
        let result = serde_json::json!({"rusage": {"nvcsw": 6_538, "nivcsw": 145}});
        let run = run_record();
        let checks = probe_summary(&report, &memory, &run, Some(&result), Some(3_000));
        let voluntary = checks
            .cross_checks
            .iter()
            .find(|c| c.name.starts_with("voluntary"))
            .unwrap();
        assert_eq!(voluntary.verdict, Verdict::Pass, "{voluntary:?}");
        assert_eq!(voluntary.observed, 6_538);
    }
}
