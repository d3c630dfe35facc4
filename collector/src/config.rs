//! What to trace, and how big to make the kernel-side maps.

use std::path::PathBuf;

use crate::cost::ProgramStats;
use crate::model::{FaultKinds, ProgramRates};

/// What to trace and how big to make the kernel-side maps.
#[derive(Clone, Debug)]
pub struct Config {
    /// PID of the process launched: counting starts when it execs. The run it covers is every
    /// task of `run_cgroup_id`'s cgroup or, without one, this process and every process forked
    /// from it or its descendants (their threads included).
    pub target_pid: u32,
    /// The id of the run's cgroup on the v2 hierarchy (the directory's inode number, what
    /// `bpf_get_current_cgroup_id` returns), which the target joined before exec: the probes count
    /// that cgroup's tasks. None: they follow the target's process tree from its forks instead
    /// (a host without a v2 hierarchy, or a run without a cgroup), in a map sized from
    /// `expected_tasks`; processes it had no room for are counted in the report's diagnostics.
    pub run_cgroup_id: Option<u64>,
    /// The most tasks the workload will spawn (its N). Sizes the per-thread map, capped at the
    /// kernel's pid_max since no process can hold more threads than that.
    pub expected_tasks: u64,
    /// Width of one time bucket of the series (default 100 ms).
    pub bucket_ns: u64,
    /// Time covered by the series (default 20 min); later events land in the last bucket and are
    /// counted in `diagnostics.late_events` of the report.
    pub max_duration_ns: u64,
    /// How far to tell which memory each page fault hits (default: stack, heap, other).
    pub fault_kinds: FaultKinds,
    /// Also switch phases in the kernel the moment the target writes a `phase` event to its
    /// stdout (the workload contract: one JSON line per event, `"event"` first); set_phase then
    /// only catches what that misses. Exact where set_phase lags by a pipe and a wakeup.
    pub phases_from_stdout: bool,
    /// Keep per-thread state in the kernel: on-CPU time, run-queue waits, futex wait and clone
    /// times (and their histograms), and attach the probes only it needs: RSS over time
    /// (kmem:rss_stat) and the futex exits (wait times, wakes done, EAGAIN and timeouts, the futex
    /// series). Off by default: that state is a hash-map update on every switch, wakeup and new
    /// thread, most of what the probes cost. Without it the counters, series and cross-checks
    /// stay, voluntary switches included (each thread's nvcsw is kept by tid in an array); the
    /// classic (non-BTF) wakeup and migration programs, which know the target's threads only by
    /// their entry, then count nothing, and migrations are not shown.
    pub per_thread: bool,
    /// Count the syscalls that serve requests — accept, accept4; read, readv, recvfrom,
    /// recvmsg; write, writev, sendto, sendmsg; epoll_wait, epoll_pwait, epoll_pwait2,
    /// epoll_ctl, poll, ppoll; close, shutdown — per phase, with the bytes moved, the EAGAIN
    /// returns, failed accepts and empty epoll waits: one classic `syscalls:sys_exit_*` program
    /// each, counting at the call's return. Off by default: those tracepoints fire on every such
    /// call of every process on the machine (a load generator's too), and are then not attached;
    /// the report says so (`diagnostics.net_syscalls` false) and leaves their metrics out — not
    /// measured, not 0.
    pub net_syscalls: bool,
    /// When the kernel's BPF run-time statistics are on (each program's ns per run) when no
    /// `program_rates` are given: for the whole run by default (cost.rs says why not in windows).
    pub program_stats: ProgramStats,
    /// Each program's ns per run from a calibration run (its statistics on): given, the
    /// statistics stay off for this run whatever `program_stats` says, and each program's time is
    /// its runs at the calibration's rate — the measured run then pays no clock reads.
    pub program_rates: Option<ProgramRates>,
    /// Use only the classic tracepoint programs, as on a kernel without BTF (for tests and
    /// comparisons; off by default).
    pub classic_only: bool,
    /// Stream the run's scheduler events into a raw file (`run --perfetto`); None: no trace,
    /// and the programs cost what they did without it (their emission is dropped at load).
    pub trace: Option<TraceConfig>,
    /// Load only the probes of these tracepoints (`category:name`) beside the arming one
    /// (sched_process_exec): `spawnscope probe-cost` times one hook's program at a time. None:
    /// every probe the rest of the configuration asks for.
    pub only_tracepoints: Option<Vec<String>>,
    /// Test seam: mark this tracepoint's tp_btf program sleepable, which the kernel refuses at
    /// load time, so the per-probe fallback runs for real.
    #[doc(hidden)]
    pub refuse_btf_for: Option<String>,
    /// Test seam: load nothing on this tracepoint (`category:name`), as on a kernel without it.
    #[doc(hidden)]
    pub hide_tracepoint: Option<String>,
    /// Test seam: take the kernel for one without BPF ring buffers (before 5.8).
    #[doc(hidden)]
    pub hide_ring_buffers: bool,
}

/// The trace: one raw record per scheduler event of the run (trace_events.rs), through a BPF
/// ring buffer that a thread of the collector drains into `path` as it fills.
#[derive(Clone, Debug)]
pub struct TraceConfig {
    /// Where the records go (made, or emptied, at start).
    pub path: PathBuf,
    /// The ring's size asked for, bytes: the kernel takes a power of two of pages, so it is
    /// rounded up, and capped at [`crate::MAX_RING_BYTES`].
    pub ring_bytes: u64,
    /// How the caller chose that size, in words: said in the report.
    pub ring_rule: String,
    /// The most the file may hold, bytes (whole records: a partial one is not written); past
    /// it records are still taken from the ring, so that it never fills, but counted, not
    /// written. None: no cap (the conductor always gives one: `run --trace-max-size`).
    pub max_bytes: Option<u64>,
    /// How the caller chose the cap, in words ("4 GiB, the default"): said in the report.
    pub max_rule: String,
}

impl Config {
    /// Defaults for everything but the target and N.
    pub fn new(target_pid: u32, expected_tasks: u64) -> Self {
        Config {
            target_pid,
            run_cgroup_id: None,
            expected_tasks,
            bucket_ns: 100_000_000,
            max_duration_ns: 20 * 60 * 1_000_000_000,
            fault_kinds: FaultKinds::StackHeap,
            phases_from_stdout: true,
            per_thread: false,
            net_syscalls: false,
            classic_only: false,
            program_stats: ProgramStats::default(),
            program_rates: None,
            trace: None,
            only_tracepoints: None,
            refuse_btf_for: None,
            hide_tracepoint: None,
            hide_ring_buffers: false,
        }
    }
}
