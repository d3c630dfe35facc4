//! sentinels.json: what else the machine did while the run was measured, read only (nothing is
//! changed to get it). Raw readings: a mark at the run's release, at each `phase` event and after
//! the reap, and a tick with every memory sample (~100 ms). analyse::time::sentinels turns them into
//! per-phase figures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `cpu ` line of /proc/stat, USER_HZ ticks since boot (all CPUs together). guest and
/// guest_nice are already inside user and nice.
#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize,
)]
pub struct MachineCpu {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl MachineCpu {
    /// Time this guest's CPUs ran something: user + nice + system + irq + softirq. Idle and
    /// iowait are not work; steal is the hypervisor running someone else (its own sentinel).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }
}

/// Where the run's own CPU time was read.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunCpuSource {
    /// cgroup v2 cpu.stat usage_usec of the run's cgroup.
    CgroupV2CpuStat,
    /// cgroup v1 cpuacct.usage of the run's cpuacct cgroup.
    CgroupV1Cpuacct,
    /// The workload process's utime+stime (/proc/PID/stat; the rusage of wait4 after the reap).
    ProcessStat,
}

impl RunCpuSource {
    pub fn describe(self) -> &'static str {
        match self {
            RunCpuSource::CgroupV2CpuStat => "cgroup v2 cpu.stat usage_usec",
            RunCpuSource::CgroupV1Cpuacct => "cgroup v1 cpuacct.usage",
            RunCpuSource::ProcessStat => "the workload's utime+stime (/proc/PID/stat, rusage)",
        }
    }
}

/// Readings at one edge between phases.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SentinelMark {
    /// `start` (the release), a workload phase mark (`spawn`, `steady`, `end`…), `reaped`.
    pub name: String,
    /// CLOCK_MONOTONIC when read.
    pub t_ns: u64,
    /// /proc/stat's `cpu ` line, ticks. None when unreadable.
    pub machine_cpu: Option<MachineCpu>,
    /// The run's CPU time, ns (source in `SentinelsRecord::run_cpu_source`).
    pub run_cpu_ns: Option<u64>,
    /// /proc/vmstat: reclaim, compaction, THP, balloon and fault counters.
    pub vmstat: BTreeMap<String, u64>,
    /// The page_reporting module's numeric parameters (counters and order); None without it.
    pub page_reporting: Option<BTreeMap<String, u64>>,
    /// Memory not initialized since boot, kB (MemTotal less the zones' managed pages): what falls
    /// between two marks was used for the first time. None in records from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninitialized_kb: Option<u64>,
    /// Pressure stall totals, µs (`cpu_some_us`, `memory_some_us`, `memory_full_us`,
    /// `io_some_us`…, from /proc/pressure). None without PSI, or in records from before it was
    /// read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_us: Option<BTreeMap<String, u64>>,
    /// Every kernel thread's CPU time so far (kthreadd and its children): what tells their share
    /// of the CPU outside the run apart without the collector. None where they are not visible
    /// (another PID namespace), or in records from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_threads: Option<KernelThreads>,
    /// spawnscope's own CPU time so far, ns: every thread of the conductor (its sampler, the
    /// trace's drain, the event follower), CLOCK_PROCESS_CPUTIME_ID. Read back to back with
    /// `run_cpu_ns` and `machine_cpu` (`cpu_read`), so that its work is never taken for the
    /// machine's. None in records from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conductor_cpu_ns: Option<u64>,
    /// How the three CPU readings (the conductor's, the run's, /proc/stat's) were taken. None in
    /// records from before they were read as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_read: Option<CpuRead>,
    /// Every process's CPU time at the mark, the run's, the conductor's and kernel threads left
    /// out (/proc/PID/stat): who took the CPU outside the run. None where /proc could not be
    /// listed, or in records from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<ProcessCpu>>,
}

/// The CPU readings of one mark, taken as one: what the machine's busy time is derived from.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuRead {
    /// How long the three readings took together, ns (CLOCK_MONOTONIC before the first and after
    /// the last): the window they may be apart by.
    pub span_ns: u64,
    /// The CPUs `machine_cpu` sums (its `cpuN` lines: the online ones, or the K a run is held
    /// to): the capacity the machine's busy time is taken from.
    pub cpus: u32,
}

/// One process at a mark (/proc/PID/stat).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessCpu {
    pub pid: u32,
    pub ppid: u32,
    /// Its start time, clock ticks since boot: with the PID it names the process.
    pub start_ticks: u64,
    /// utime + stime, every thread of it, clock ticks (`ticks_per_second`).
    pub cpu_ticks: u64,
    /// cutime + cstime: its children that ended and were waited for, clock ticks: where the CPU
    /// of processes that began and ended between two marks went.
    pub children_ticks: u64,
    /// Its name (/proc/PID/stat's comm).
    pub comm: String,
}

/// The kernel threads' CPU times at one mark (/proc/PID/stat of kthreadd and its children).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelThreads {
    /// CLOCK_BOOTTIME when the reading began, clock ticks (the clock of a thread's start time):
    /// a thread the mark before did not list counts in full only if it started after that mark.
    pub boot_ticks: u64,
    /// How long the reading took, µs (it runs in the conductor, between two phases).
    pub read_us: u64,
    /// Every kernel thread read, those that never ran included.
    pub threads: Vec<KernelThreadTime>,
}

/// One kernel thread at a mark.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct KernelThreadTime {
    pub pid: u32,
    /// Its start time, clock ticks since boot: with the PID it names the thread, PIDs reused.
    pub start_ticks: u64,
    /// utime + stime, clock ticks (`ticks_per_second`).
    pub cpu_ticks: u64,
    /// Its name as /proc/PID/stat gives it ("kworker/u4:2-events_unbound", "rcuop/1").
    pub comm: String,
}

/// One sampler tick.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SentinelTick {
    pub t_ns: u64,
    /// /proc/stat procs_running: runnable tasks on the whole machine, the reader included.
    pub procs_running: Option<u64>,
    /// /proc/loadavg's 1-minute load.
    pub load1: Option<f64>,
    /// The run's CPU time, ns, to estimate how many of the runnable tasks were the run's.
    pub run_cpu_ns: Option<u64>,
    /// Lowest and highest scaling_cur_freq over the CPUs, kHz; None without cpufreq.
    pub freq_khz_min: Option<u64>,
    pub freq_khz_max: Option<u64>,
}

/// sentinels.json.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SentinelsRecord {
    pub schema: u32,
    /// USER_HZ: /proc/stat's ticks per second.
    pub ticks_per_second: u64,
    pub run_cpu_source: Option<RunCpuSource>,
    /// Sentinels this host cannot give, with why: they are absent, never zeros.
    pub unavailable: BTreeMap<String, String>,
    /// A run held to K CPUs (`--cpu-count`): the CPUs whose /proc/stat lines `machine_cpu` sums
    /// (CPU outside the run and steal judged over them). Absent: the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// /proc/sys/kernel/random/boot_id: CLOCK_MONOTONIC and the counters start again at boot,
    /// so marks of two runs compare only within one. Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// spawnscope's own PID (the conductor): its children outside the run are its work too.
    /// Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conductor_pid: Option<u32>,
    pub marks: Vec<SentinelMark>,
    pub ticks: Vec<SentinelTick>,
}

// Names of the sentinels, the keys of `unavailable`.
pub const STEAL: &str = "steal";
pub const OUTSIDE_CPU: &str = "cpu_outside_run";
pub const PAGE_REPORTING: &str = "page_reporting";
pub const BALLOON: &str = "balloon";
pub const VMSTAT: &str = "vmstat";
pub const RUNNABLE: &str = "runnable_outside_run";
pub const FREQUENCY: &str = "cpu_frequency";
pub const PRESSURE: &str = "pressure";
pub const KERNEL_THREADS: &str = "kernel_threads";
pub const PROCESSES: &str = "processes";
