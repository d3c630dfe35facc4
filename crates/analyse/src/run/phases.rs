//! The phases of a run, one rule for all: around the workload's own phases come `startup` (exec
//! to its first phase mark) and `exit` (its `end` mark to the reap: process teardown, e.g.
//! unmapping every thread stack). Summaries, probe tables, perf samples and timelines all cut a
//! run by these edges.

use serde::{Deserialize, Serialize};

use record::perf::Phases;
use record::{CpuTime, MemoryRecord, RunRecord, WorkloadStop};

/// Wall and CPU time of one phase.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseCost {
    pub name: String,
    pub wall_ms: f64,
    pub user_ms: Option<f64>,
    pub sys_ms: Option<f64>,
}

/// The name a report gives a workload's phase mark: its `end` mark opens the `exit` phase.
pub fn shown_name(mark: &str) -> &str {
    if mark == "end" {
        "exit"
    } else {
        mark
    }
}

/// The phases a run's events cut it into, in time order: `startup`, the workload's own, `exit`.
pub fn phase_names(memory: &MemoryRecord) -> Vec<String> {
    let mut names = vec!["startup".to_string()];
    names.extend(
        memory
            .phases
            .iter()
            .map(|p| shown_name(&p.name).to_string()),
    );
    names
}

/// One edge between phases: the phase that starts here, when (CLOCK_MONOTONIC), and the process's
/// CPU time then, when it was read.
pub struct PhaseMark {
    pub name: String,
    pub t_ns: u64,
    pub cpu: Option<CpuTime>,
}

/// The edges of a run's phases, in time order. Around the workload's own phases come `startup`
/// (exec to the first phase) and `exit` (the last phase mark to the reap: process teardown, e.g.
/// unmapping every thread stack); the last mark, `reaped`, ends the run. Empty when the workload
/// reported no phases (any command).
pub fn phase_marks(run: &RunRecord, memory: &MemoryRecord) -> Vec<PhaseMark> {
    let Some(first) = memory.phases.first() else {
        return Vec::new();
    };
    let mut marks: Vec<PhaseMark> = Vec::new();
    if let Some(t) = run.released_t_ns {
        marks.push(PhaseMark {
            name: "startup".into(),
            t_ns: t,
            cpu: Some(CpuTime::default()),
        });
    }
    for p in &memory.phases {
        marks.push(PhaseMark {
            name: p.name.clone(),
            t_ns: p.t_ns,
            cpu: p.snapshot.cpu,
        });
    }
    if let Some(t) = run.reaped_t_ns {
        // The workload's `end` mark opens the `exit` pseudo-phase.
        if let Some(last) = marks.last_mut().filter(|m| m.name == "end") {
            last.name = "exit".into();
        }
        marks.push(PhaseMark {
            name: "reaped".into(),
            t_ns: t.max(first.t_ns),
            cpu: run.rusage.map(|r| CpuTime {
                user_us: r.user_us,
                sys_us: r.sys_us,
            }),
        });
    }
    marks
}

/// How much of `from_ns..to_ns` (CLOCK_MONOTONIC) the workload spent stopped for a reading of
/// its memory (measure/stop.rs): wall times leave it out. A stopped workload burns no CPU, so
/// CPU times need no such correction.
pub fn stopped_ns_between(stops: &[WorkloadStop], from_ns: u64, to_ns: u64) -> u64 {
    stops
        .iter()
        .map(|s| {
            s.to_t_ns
                .min(to_ns)
                .saturating_sub(s.from_t_ns.max(from_ns))
        })
        .sum()
}

/// Wall and CPU time per phase (see `phase_marks`), so the phases add up to the run's rusage.
/// The wall time leaves out a stop for a memory reading.
pub fn phase_costs(run: &RunRecord, memory: &MemoryRecord) -> Vec<PhaseCost> {
    phase_marks(run, memory)
        .windows(2)
        .map(|w| {
            let (m0, m1) = (&w[0], &w[1]);
            let cpu = m0.cpu.zip(m1.cpu);
            let stopped = stopped_ns_between(&memory.stops, m0.t_ns, m1.t_ns);
            PhaseCost {
                name: m0.name.clone(),
                wall_ms: m1.t_ns.saturating_sub(m0.t_ns).saturating_sub(stopped) as f64 / 1e6,
                user_ms: cpu.map(|(x, y)| y.user_us.saturating_sub(x.user_us) as f64 / 1e3),
                sys_ms: cpu.map(|(x, y)| y.sys_us.saturating_sub(x.sys_us) as f64 / 1e3),
            }
        })
        .collect()
}

/// Where each phase starts, for cutting perf's samples by phase (the reap ends the last).
pub fn perf_phases(run: &RunRecord, memory: &MemoryRecord) -> Phases {
    Phases(
        phase_marks(run, memory)
            .into_iter()
            .filter(|m| m.name != "reaped")
            .map(|m| (m.name, m.t_ns))
            .collect(),
    )
}
