//! The eBPF collector's counts for a run (collector.json) as the figures a summary shows: totals,
//! per task and per phase, latency quantiles, and the cross-checks against the kernel's own
//! accounting.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use spawnscope_collector::{CrossCheck, Report as CollectorReport, Verdict, PER_THREAD_ONLY};

use record::Rusage;

use crate::run::phases::phase_names;
use record::{MemoryRecord, RunRecord, Target};
use runtime::{OsThreads, TaskKind, WorkloadKind};

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
    /// Of `events`, the runs that were another process's, filtered out at the program's first
    /// test (the raw_syscalls pair counts them; 0 for the others).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub filtered_out: u64,
    pub total_ns: u64,
    pub ns_per_event: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
    /// The cost as a formula with its parts: each program's own events × its ns, and the host's
    /// share (absent for runs recorded before the pair counted what it filtered out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<CostFormula>,
    /// Written by summaries derived before the formula: the tracing around the programs at a
    /// rate fitted on the overhead benchmark itself (a circular check, withdrawn). Never derived
    /// now; kept so that those summaries still read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub around_programs: Option<serde_json::Value>,
}

/// A traced run's cost = Σ over its programs of the run's own events × the program's ns per
/// event, + the host's share: what every other process paid for the raw_syscalls pair while it
/// was attached. The parts add up to `total_ns`.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CostFormula {
    /// One per program with an event of the run's own, most expensive first.
    pub terms: Vec<CostTerm>,
    /// The terms added up: what the programs took inside the workload's CPU time.
    pub programs_ns: f64,
    /// The host's share; None when the pair filtered nothing out.
    pub host: Option<HostShare>,
    /// programs_ns + the host's share.
    pub total_ns: f64,
    /// total_ns over the workload's CPU time (rusage user + system).
    pub share_of_cpu: Option<f64>,
}

/// One program's part: the run's own events (its runs less those filtered out) and their time
/// (the program's whole time at its ns per run, the calibration's or this run's statistics', less
/// its filtered-out runs at the hook's floor); `ns_per_event` is that time over those events.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CostTerm {
    pub program: String,
    pub events: u64,
    pub ns_per_event: f64,
    pub ns: f64,
}

/// The syscalls of other processes the raw_syscalls pair saw and filtered out, × the pair's
/// floor (one per-CPU array increment on the same hook, timed in the probes' calibration): paid
/// by those processes, outside the workload's CPU time.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostShare {
    /// Per hook of the pair: its runs filtered out and its floor.
    pub hooks: Vec<HostTerm>,
    /// The filtered-out runs of both hooks (each syscall fires both).
    pub filtered_out: u64,
    /// Their floors added up; None when the calibration timed no floor (then not a guess).
    pub ns: Option<f64>,
}

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostTerm {
    pub hook: String,
    pub filtered_out: u64,
    pub floor_ns: Option<f64>,
}

/// The formula's parts from the programs' rows and the calibration's floors (hook, runs, ns).
/// A program's ns per run is an average over all its runs, the cheap filtered-out ones among
/// them (the statistics time every run), so the run's own part is not its own events × that
/// average: it is the program's whole time less what its filtered-out runs took, priced at the
/// hook's floor (the least any run there costs). The host's share is those filtered-out runs at
/// the floor: at least what the other processes paid. The parts add up to every run × its ns.
pub fn cost_formula(
    programs: &[ProgramCostRow],
    floors: &[record::FloorRate],
    cpu_us: Option<u64>,
) -> CostFormula {
    let floor_of = |hook: &str| {
        floors
            .iter()
            .find(|f| f.hook == hook && f.runs > 0)
            .map(|f| f.ns as f64 / f.runs as f64)
    };
    let mut terms: Vec<CostTerm> = programs
        .iter()
        .map(|p| {
            let events = p.events.saturating_sub(p.filtered_out);
            let all_ns = p.events as f64 * p.ns_per_event;
            let filtered_ns = floor_of(&p.tracepoint).map_or(0.0, |f| f * p.filtered_out as f64);
            let ns = (all_ns - filtered_ns).max(0.0);
            CostTerm {
                program: p.program.clone(),
                events,
                ns_per_event: if events > 0 { ns / events as f64 } else { 0.0 },
                ns,
            }
        })
        .filter(|t| t.events > 0)
        .collect();
    terms.sort_by(|a, b| {
        b.ns.total_cmp(&a.ns)
            .then_with(|| a.program.cmp(&b.program))
    });
    let programs_ns: f64 = terms.iter().map(|t| t.ns).sum();
    let hooks: Vec<HostTerm> = programs
        .iter()
        .filter(|p| p.filtered_out > 0)
        .map(|p| HostTerm {
            hook: p.tracepoint.clone(),
            filtered_out: p.filtered_out,
            floor_ns: floor_of(&p.tracepoint),
        })
        .collect();
    let host = (!hooks.is_empty()).then(|| HostShare {
        filtered_out: hooks.iter().map(|h| h.filtered_out).sum(),
        ns: hooks
            .iter()
            .map(|h| h.floor_ns.map(|f| f * h.filtered_out as f64))
            .sum(),
        hooks,
    });
    let total_ns = programs_ns + host.as_ref().and_then(|h| h.ns).unwrap_or(0.0);
    CostFormula {
        terms,
        programs_ns,
        host,
        total_ns,
        share_of_cpu: cpu_us.map(|us| total_ns / (us as f64 * 1000.0)),
    }
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
            filtered_out: p.filtered_runs,
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
    // Records from before the pair counted what it filtered out give no formula: their runs
    // cannot be told apart.
    let counted_filtered = programs.iter().any(|p| p.filtered_out > 0);
    let floors = run
        .estimate
        .as_ref()
        .and_then(|e| e.calibration.probes.as_ref())
        .map_or(&[][..], |p| &p.floors[..]);
    Some(ProbeCost {
        formula: counted_filtered.then(|| cost_formula(&programs, floors, cpu_us)),
        events,
        total_ns,
        share_of_cpu: cpu_us.map(|us| total_ns as f64 / (us as f64 * 1000.0)),
        sampled_share: report
            .program_stats_on_ms
            .zip(report.program_stats_of_ms)
            .filter(|&(_, of)| of > 0)
            .map(|(on, of)| on as f64 / of as f64),
        rates_from: report.program_rates_from.clone(),
        around_programs: None,
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
        "wake_to_run_ns",
        "preempted_to_run_ns",
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
    // The workload's own getrusage(RUSAGE_SELF) covers its one process: held against the counts
    // cut at that call. A run that forked (a command, a workload whose tasks are processes) is
    // held against wait4's rusage instead — the launched process and every descendant it reaped —
    // over the whole run's counts.
    let forked = report.total("new_processes") > 0;
    let (rusage, of_wait4) = match from_result {
        Some(own) if !forked => (Some(own), false),
        _ => (run.rusage, true),
    };
    // Threads created by the kernel for the workload: its spawned threads, or — for goroutines —
    // the OS threads the Go runtime made, less the main thread (exec made that one).
    // A command whose tasks are not threads says nothing about its threads: no such check.
    let threads_created = match (&run.target, result) {
        // A server starts threads of its own besides its connections' (accept loops, a ticker,
        // tokio's I/O driver) that no workload counts: no check rather than a false Fail.
        (Target::Workload(inv), Some(_)) if inv.workload == WorkloadKind::Serve => None,
        (Target::Workload(inv), Some(r)) => Some(match inv.runtime.describe().os_threads {
            // The count at the result's getrusage, where the probes' count is cut; results from
            // before it was reported have the peak's.
            OsThreads::FromRuntimeStats => r["runtime_stats"]["os_threads_at_getrusage"]
                .as_u64()
                .or_else(|| r["runtime_stats"]["os_threads_created"].as_u64())
                .map(|n| n.saturating_sub(1)),
            OsThreads::OnePerTask => r["spawned"].as_u64(),
            // Forked without CLONE_THREAD: a process per task makes no thread at all.
            OsThreads::NoneBesidesMain => Some(0),
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
        let threads = threads_created.map(|n| (n.unwrap_or(0), expected_from));
        if of_wait4 {
            report.cross_checks_of_wait4(&ru, threads)
        } else {
            report.cross_checks(&ru, threads)
        }
    });
    // A workload of one process per task forked each (runtime_stats.processes_forked): the probes
    // must have seen every fork.
    if let (Target::Workload(inv), Some(r), false) = (&run.target, result, cross_checks.is_empty())
    {
        if inv.runtime.describe().os_threads == OsThreads::NoneBesidesMain {
            if let Some(forked) = r["runtime_stats"]["processes_forked"].as_u64() {
                cross_checks.push(report.processes_created_check(
                    forked,
                    "the processes the workload says it forked (runtime_stats.processes_forked)",
                ));
            }
        }
    }
    // A command's threads are checked against what it was said to run, not what it spawned —
    // and --tasks is how many it runs at once: a command may end threads and start others
    // (stress-ng's pthread stressor keeps 4,000 alive by replacing them), so the probes must have
    // seen at least that many created.
    if matches!(run.target, Target::Command { .. }) {
        for c in cross_checks
            .iter_mut()
            .filter(|c| c.name == "threads created vs spawned")
        {
            c.name = "threads created vs --tasks".into();
            at_least(c);
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

/// A check that passes when the probes counted at least `expected` (any more were started and
/// ended by the command within the run); one that counted fewer still fails.
fn at_least(check: &mut CrossCheck) {
    check.basis = format!(
        "{}; at least --tasks: a command may end threads and start others",
        check.basis
    );
    if check.verdict == Verdict::Fail && check.observed_max + check.tolerance >= check.expected {
        check.verdict = Verdict::Pass;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threads_check(expected: u64, observed: u64, verdict: Verdict) -> CrossCheck {
        CrossCheck {
            name: "threads created vs spawned".into(),
            expected,
            observed,
            observed_max: observed,
            tolerance: 0,
            verdict,
            basis: "observed = task_newtask".into(),
        }
    }

    #[test]
    fn a_command_passes_with_more_threads_created_than_it_runs_at_once_never_with_fewer() {
        let mut replaced = threads_check(4_000, 28_000, Verdict::Fail);
        at_least(&mut replaced);
        assert_eq!(replaced.verdict, Verdict::Pass);
        assert!(replaced.basis.contains("at least --tasks"));
        let mut missed = threads_check(4_000, 3_999, Verdict::Fail);
        at_least(&mut missed);
        assert_eq!(missed.verdict, Verdict::Fail);
        let mut unmeasured = threads_check(4_000, 0, Verdict::NotMeasured);
        at_least(&mut unmeasured);
        assert_eq!(unmeasured.verdict, Verdict::NotMeasured);
    }
}
