//! One run as a comparison sees it: the figures of its summary that cells, fits and published
//! experiments are made of.

use serde::{Deserialize, Serialize};

use crate::memory::per_task::MemoryPerTask;
use crate::probes::counts_verdict::CountsVerdict;
use crate::time::verdict::Verdict;

/// One run, as read from its directory.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct RunPoint {
    pub dir: String,
    pub machine: String,
    pub label: String,
    pub runtime: Option<String>,
    pub workload: Option<String>,
    pub n: Option<u64>,
    /// `--cpu-count K`: the CPUs the run was held to (a cell dimension, like N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<u32>,
    pub ok: bool,
    /// Completed, or stopped at a limit (memory, pid_max…) with what it had spawned alive and
    /// measured at the peak: a point at N = tasks alive, kept in cells and fits.
    pub measured: bool,
    pub outcome: String,
    pub started_utc: String,
    /// Tasks spawned, as the workload counted them; a command's, as it declares (--tasks).
    pub spawned: Option<u64>,
    pub alive_at_peak: Option<u64>,
    pub alive_max: Option<u64>,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_percent: f64,
    pub maxrss_kb: u64,
    pub minor_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub memory_per_task: Option<MemoryPerTask>,
    pub sysctls_restored: bool,
    pub contract_violations: usize,
    pub has_collector: bool,
    /// The probes' own cost over the workload's CPU time, when the collector measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost_share: Option<f64>,
    pub has_flame: bool,
    /// Whether the run's time figures can be trusted (runs recorded with the noise sentinels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Whether the run's counts agree with the kernel's (its cross-checks): checked, wrong or not
    /// checked and why (absent in sets written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts_verdict: Option<CountsVerdict>,
    /// A command's moment measured, seconds after its release. Its tasks alive there are its
    /// own word; with `task_lifetime_s` and `wall_s` this says whether they could all be alive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_at_s: Option<f64>,
    /// How long each of a command's tasks lives, as declared (`--task-lifetime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_lifetime_s: Option<f64>,
    /// The run's cgroup memory limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// serve: the load, the costs per connection and request, what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<crate::serving::ServeFigures>,
    /// What the program said of its own work in its result event: a workload's
    /// `spawn_ns_per_task` and `throughput_per_s`; a command's numeric fields of the last
    /// `{"event":"result",…}` line it printed (say `create_ns`, `switch_ns`), by their names.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub program: std::collections::BTreeMap<String, f64>,
    /// `--perfetto`: the scheduler trace's wake-to-run over the whole run (a wakeup of one of
    /// the run's threads → its next switch-in; analyse::sched_trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_to_run: Option<crate::traces::sched_trace::LatencyRow>,
    /// `--perfetto`: preempted-to-run over the whole run (a switch out still runnable → the
    /// thread's next switch-in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_to_run: Option<crate::traces::sched_trace::LatencyRow>,
    /// `--runtime-trace` (run.json's `runtime_traced`): a run of its own kind, listed with the
    /// runs but kept out of cells, fits, repeats, headlines' memory and times and the CPU sweep
    /// (the tracer's memory and time); it gives the runtime's latencies
    /// (analyse/traces/runtime_latency.rs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runtime_traced: bool,
}

impl RunPoint {
    /// When every one of a command's tasks was alive, from its times alone (a user-space
    /// runtime's tasks cannot be counted from outside), where it declared how long each lives:
    /// a task lives at least that long from its start and the program waits for all of them, so
    /// the last one started at most `wall − lifetime` after the release, and none ended before
    /// `lifetime`. (from, to) in seconds after the release; None when that span is empty (which
    /// does not show that they never coexisted) or nothing was declared.
    pub fn all_alive_window(&self) -> Option<(f64, f64)> {
        let life = self.task_lifetime_s?;
        let from = (self.wall_s - life).max(0.0);
        (from < life).then_some((from, life))
    }

    /// Whether all of a command's tasks were shown alive at its moment measured (None: no
    /// lifetime declared, or no moment recorded).
    pub fn all_alive_when_measured(&self) -> Option<bool> {
        let at = self.measured_at_s?;
        self.task_lifetime_s?;
        Some(
            self.all_alive_window()
                .is_some_and(|(from, to)| from <= at && at < to),
        )
    }

    /// A memory part in total kB at the peak (per task × tasks alive).
    pub fn memory_total(&self, part: fn(&MemoryPerTask) -> Option<f64>) -> Option<f64> {
        let alive = self.alive_at_peak? as f64;
        Some(part(self.memory_per_task.as_ref()?)? * alive)
    }
}
