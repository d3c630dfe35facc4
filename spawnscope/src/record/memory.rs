//! memory.json: snapshots of the machine, the process and its cgroup before the run, at each
//! phase, at the peak and after, and the 100 ms timeline between them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One moment's readings of the machine, the process and its cgroup.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC, comparable with the workload's `t_ns`.
    pub t_ns: u64,
    /// /proc/meminfo, kB.
    pub meminfo: BTreeMap<String, u64>,
    /// Free pages in the per-CPU lists, kB (free, yet outside MemFree): see procfs::pcp_free_kb.
    #[serde(default)]
    pub pcp_free_kb: Option<u64>,
    /// Tasks on the whole host (/proc/loadavg): with KernelStack, the size of one kernel stack.
    #[serde(default)]
    pub tasks_on_host: Option<u64>,
    /// /proc/PID/status (kB for sizes).
    pub status: BTreeMap<String, u64>,
    /// /proc/PID/smaps_rollup (kB), at the peak only: it walks every mapping.
    pub smaps_rollup: BTreeMap<String, u64>,
    pub cpu: Option<CpuTime>,
    pub cgroup: Option<CgroupStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseSample {
    pub name: String,
    pub t_ns: u64,
    pub snapshot: Snapshot,
}

/// Every 100 ms during the run: what the progress bar and timeline charts show.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TimelineSample {
    pub t_ns: u64,
    pub mem_available_kb: u64,
    pub rss_kb: u64,
    pub threads: u64,
    pub cgroup_bytes: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Before the workload started.
    pub before: Snapshot,
    /// At each `phase` event.
    pub phases: Vec<PhaseSample>,
    /// When most tasks were alive: the `peak` event (hold), the end of spawning (other
    /// workloads), or the lowest MemAvailable seen (any command).
    pub peak: Option<Snapshot>,
    /// After the workload exited and the kernel freed what it held.
    pub after: Option<Snapshot>,
    pub timeline: Vec<TimelineSample>,
    /// The cgroup's counters at the end (peaks, OOM kills).
    pub cgroup_final: Option<CgroupStats>,
}

/// CPU time of a whole process (live and exited threads), from /proc/PID/stat, in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CpuTime {
    pub user_us: u64,
    pub sys_us: u64,
}

/// Which cgroup hierarchy a controller is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Memory and PID figures of a run's cgroup, read from its files.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CgroupStats {
    pub version: Option<CgroupVersion>,
    pub memory_current_bytes: Option<u64>,
    /// v2 memory.peak, v1 memory.max_usage_in_bytes.
    pub memory_peak_bytes: Option<u64>,
    /// v1 memory.kmem.usage_in_bytes; on v2 the sum of kernel_stack, pagetables, slab, percpu, sock.
    pub kernel_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// memory.stat as the kernel prints it (v1 and v2 name things differently).
    pub memory_stat: BTreeMap<String, u64>,
    pub oom_kills: u64,
    pub pids_current: Option<u64>,
    pub pids_peak: Option<u64>,
}
