//! One run as a comparison sees it: the figures of its summary that cells, fits and published
//! experiments are made of.

use serde::{Deserialize, Serialize};

use crate::analyse::summary::MemoryPerTask;
use crate::analyse::verdict::Verdict;

/// One run, as read from its directory.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct RunPoint {
    pub dir: String,
    pub machine: String,
    pub label: String,
    pub runtime: Option<String>,
    pub workload: Option<String>,
    pub n: Option<u64>,
    pub ok: bool,
    /// Completed, or stopped at a limit (memory, pid_max…) with what it had spawned alive and
    /// measured at the peak: a point at N = tasks alive, kept in cells and fits.
    pub measured: bool,
    pub outcome: String,
    pub started_utc: String,
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
}

impl RunPoint {
    /// A memory part in total kB at the peak (per task × tasks alive).
    pub fn memory_total(&self, part: fn(&MemoryPerTask) -> Option<f64>) -> Option<f64> {
        let alive = self.alive_at_peak? as f64;
        Some(part(self.memory_per_task.as_ref()?)? * alive)
    }
}
