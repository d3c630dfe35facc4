//! What the analyse tests share: a collector report holding just the metrics a test gives.

use spawnscope_collector::{Metric, Report as CollectorReport};

use spawnscope_collector::trace_events::TraceEvent;

use crate::traces::sched_trace::{derive, Context, PhaseEdges, SchedTrace};
use record::{RunRecord, Target};

/// A metric of `unit` by its name (`_ns`: ns, else a count) with its counts before the first
/// phase mark and per phase.
pub fn metric(name: &str, before: u64, per_phase: &[u64]) -> Metric {
    Metric {
        name: name.into(),
        unit: if name.ends_with("_ns") { "ns" } else { "count" }.into(),
        total: before + per_phase.iter().sum::<u64>(),
        before_first_phase: before,
        per_phase: per_phase.to_vec(),
    }
}

/// An empty collector report (as collector.json would read) with `metrics`.
pub fn collector_report(metrics: Vec<Metric>) -> CollectorReport {
    let mut r: CollectorReport = serde_json::from_value(serde_json::json!({
        "schema": 1, "tgid": 1, "exec_seen": true, "t0_ns": 0, "finished_ns": 0,
        "bucket_ns": 1, "probes": [], "phases": [], "metrics": [], "histograms": [],
        "series": [], "clone_failures": [],
        "rusage_basis": {"getrusage_calls": 0, "getrusage_returns": 0, "last_getrusage_ns": 0,
            "pre_exec": null, "at_last_getrusage": null,
            "total": {"faults": 0, "switches_voluntary": 0, "switches_involuntary": 0,
                "switches_voluntary_after_exit": 0, "switches_involuntary_after_exit": 0,
                "new_threads": 0}},
        "diagnostics": {"tasks_map_entries": 0, "tasks_map_full": 0, "threads_left_in_map": 0,
            "nr_buckets": 0, "late_events": 0, "fault_kinds": "stack_heap",
            "vma_lookups_busy": 0, "execs": 1, "read_errors": []}
    }))
    .unwrap();
    r.metrics = metrics;
    r
}

/// A run that recorded nothing else: a command `prog`, as root, 1 ns long.
pub fn run_record() -> RunRecord {
    RunRecord {
        schema: 1,
        target: Target::Command {
            argv: vec!["prog".into()],
            tasks: None,
            task_kind: Default::default(),
            peak_when: None,
            label: None,
            task_lifetime_ns: None,
        },
        argv: vec![],
        started_utc: String::new(),
        root: true,
        pid: None,
        wall_ns: 1,
        released_t_ns: None,
        reaped_t_ns: None,
        exit: None,
        rusage: None,
        interrupted_by: None,
        oom_killed: false,
        memory_limit_bytes: None,
        estimate: None,
        contract_violations: vec![],
        timeout_ns: None,
        pids_limit: None,
        stopped_by: None,
        cpus: None,
        cpu_count: None,
        open_files_limit: None,
        left_out: vec![],
        stages: vec![],
        runtime_traced: false,
    }
}

/// A completed run of `runtime`'s `workload` at `n`, as a comparison reads it, nothing measured.
pub fn run_point(runtime: &str, workload: &str, n: u64) -> crate::comparisons::run_point::RunPoint {
    serde_json::from_value(serde_json::json!({
        "dir": "d", "machine": "M1", "label": "l", "runtime": runtime, "workload": workload,
        "n": n, "ok": true, "measured": true, "outcome": "completed", "started_utc": "",
        "spawned": n, "alive_at_peak": n, "alive_max": n, "wall_s": 1.0, "user_s": 0.0,
        "sys_s": 0.0, "cpu_percent": 0.0, "maxrss_kb": 0, "minor_faults": 0,
        "voluntary_switches": 0, "involuntary_switches": 0, "memory_per_task": null,
        "sysctls_restored": true, "contract_violations": 0, "has_collector": false,
        "has_flame": false
    }))
    .unwrap()
}

/// The scheduler trace of `events` (in memory, none failing to read), `launched` the run's first
/// process: what sched_trace's and trace_cut's tests derive from.
pub fn sched_trace_of(events: &[TraceEvent], launched: u32, phases: PhaseEdges) -> SchedTrace {
    derive(
        events.iter().copied().map(Ok),
        &Context {
            launched: Some(launched),
            phases,
            run_end_ts: None,
        },
    )
    .unwrap()
}
