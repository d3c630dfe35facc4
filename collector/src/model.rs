//! collector.json: the report's plain data, serde both ways (the conductor writes it and reads
//! old files back, so names and shapes are a file format), and the lookups on it. A leaf: it
//! imports nothing of the crate.

use serde::{Deserialize, Serialize};

/// Version of this report's shape.
pub const REPORT_SCHEMA: u32 = 1;

/// How a probe is attached.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attach {
    /// BTF-typed raw tracepoint: typed arguments, task_struct readable.
    TpBtf,
    /// Classic tracepoint: the tracefs record only.
    Tracepoint,
}

/// One probe: attached how, or missing; `note` says why it is not tp_btf, or why it is missing.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeStatus {
    pub probe: String,
    pub attach: Option<Attach>,
    pub note: Option<String>,
}

/// A phase start: the workload's own CLOCK_MONOTONIC time for it, when counting switched to it,
/// and the difference (events in that window were counted towards the previous phase).
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseMark {
    pub index: u32,
    /// The phase event's `t_ns` as passed to set_phase; 0 when only the kernel saw the event.
    pub t_ns: u64,
    /// When set_phase was called for it.
    pub set_ns: Option<u64>,
    /// When the kernel saw the event written to the target's stdout.
    pub seen_ns: Option<u64>,
    /// From `t_ns` to the earlier of `seen_ns` and `set_ns`.
    pub lag_ns: u64,
}

/// One counter: its total, and how it splits between the time before the first phase event and
/// each phase (index = phase number). `total = before_first_phase + sum(per_phase)`.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    /// `count`, `ns` or `bytes`.
    pub unit: String,
    pub total: u64,
    pub before_first_phase: u64,
    pub per_phase: Vec<u64>,
}

/// Values v with `lo <= v < hi`.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistBucket {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

/// A log2 histogram: bucket i holds [2^i, 2^(i+1)), the first also 0 and 1. Only the buckets from
/// the first to the last non-empty one are listed.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub name: String,
    pub unit: String,
    pub count: u64,
    pub buckets: Vec<HistBucket>,
}

impl Histogram {
    /// Upper bound of the bucket holding the q-quantile (0 <= q <= 1): "at most this much".
    pub fn quantile_upper(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for b in &self.buckets {
            seen += b.count;
            if seen >= rank {
                return Some(b.hi);
            }
        }
        self.buckets.last().map(|b| b.hi)
    }
}

/// One value per time bucket (bucket i starts at t0_ns + i * bucket_ns). Counters are sums over
/// the bucket; `rss_*` are gauges: the last size seen, carried forward over quiet buckets.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub unit: String,
    pub values: Vec<u64>,
}

/// clone/clone3 failures with one errno. errno 159 stands for 159 and above.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrnoCount {
    pub syscall: String,
    pub errno: u32,
    pub name: String,
    pub count: u64,
}

/// How far page faults are told apart by the memory they hit.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKinds {
    /// Every fault counts as `fault_unclassified`.
    Off = 0,
    /// `fault_stack` (within 64 KiB below to 256 KiB above the faulting thread's user stack
    /// pointer), `fault_heap` (the brk heap), `fault_other` (elsewhere). No lock taken.
    StackHeap = 1,
    /// Also a VMA lookup per fault (bpf_find_vma): `fault_other` splits into `fault_anon` and
    /// `fault_file`, and a stack fault must share the VMA of SP. Costs a trylock of mmap_lock and
    /// an irq_work per fault: about 15 us each on the 2-core VM (goroutines' spawn took 4x longer).
    Vma = 2,
}

/// The counters the cross-checks compare with rusage.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutCounts {
    /// page_fault_user + page_fault_kernel on user addresses.
    pub faults: u64,
    pub switches_voluntary: u64,
    pub switches_involuntary: u64,
    /// Switches of threads whose counts had already gone into the process's (a thread's final
    /// switch after release): never in any rusage.
    pub switches_voluntary_after_exit: u64,
    pub switches_involuntary_after_exit: u64,
    /// Switches of the group leader after its parent claimed it in wait4 (exit_state EXIT_DEAD;
    /// not among those after exit above): the reaper's getrusage sums them or not, by a race, so
    /// they widen the window the rusage from wait4 must fall in. Files from before it had none.
    #[serde(default)]
    pub switches_voluntary_while_reaped: u64,
    #[serde(default)]
    pub switches_involuntary_while_reaped: u64,
    pub new_threads: u64,
    /// Signals delivered to the target's threads (signal:signal_deliver): each lets one page fault
    /// be entered twice for one completion (a fault interrupted by a pending signal is taken
    /// again once it is delivered), so they bound how far faults may exceed rusage's. 0 when the
    /// probe was not attached (see `probes`) and in files from before it was counted.
    #[serde(default)]
    pub signals_delivered: u64,
    /// Kernel-mode faults on user addresses taken with page faults disabled (perf's user
    /// call-chain walks from NMI, atomic user accesses): fixed up unhandled, counted by no rusage,
    /// and left out of `faults`. An atomic futex op's fault is then retried through
    /// fixup_user_fault, which rusage counts without an exception: the faults' check takes these
    /// as the upper end of its window. 0 in files from before they were told apart.
    #[serde(default)]
    pub faults_unhandled: u64,
}

/// The task's own counters when it exec'd: what its rusage already held from between fork and exec.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreExec {
    pub minflt: u64,
    pub majflt: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
    /// How they were read: from task_struct by the tp_btf exec probe (exact), or from /proc while
    /// the child was held plus what the classic probes counted until its exec (misses the few
    /// faults execve takes through get_user_pages).
    pub source: String,
}

/// Counted up to the entry of a getrusage call, and up to its return. Other threads run while
/// getrusage sums their counters, so what it returns lies between the two.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutWindow {
    pub entered: CutCounts,
    pub returned: CutCounts,
}

/// What the cross-checks stand on.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RusageBasis {
    /// getrusage(RUSAGE_SELF) calls by the target, and returns seen; the workloads make one call,
    /// for their result event.
    pub getrusage_calls: u64,
    pub getrusage_returns: u64,
    pub last_getrusage_ns: u64,
    /// None when neither the exec probe nor /proc could tell.
    pub pre_exec: Option<PreExec>,
    /// Counted up to the last getrusage call: what its figures can be compared with. None when
    /// there was no call, more than the kernel side keeps apart (15), or calls overlapped.
    pub at_last_getrusage: Option<CutWindow>,
    /// Counted in all.
    pub total: CutCounts,
}

#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostics {
    /// Size of the per-thread map, and how often it was found full (then per-thread figures
    /// such as on-CPU time and run-queue waits miss some threads).
    pub tasks_map_entries: u32,
    pub tasks_map_full: u64,
    /// Threads still in the per-thread map at the end (alive, or exits not seen).
    pub threads_left_in_map: u64,
    pub nr_buckets: u32,
    /// Events after the last bucket's end, counted in the last bucket.
    pub late_events: u64,
    pub fault_kinds: FaultKinds,
    /// Whether per-thread state was kept (on-CPU, run-queue, futex and clone times; RSS over
    /// time). Files from before it could be turned off had it.
    #[serde(default = "kept")]
    pub per_thread: bool,
    /// Switches whose thread's nvcsw was not known (tid beyond the nvcsw array, or its slot not
    /// set), so told voluntary or not by the prev_state rule. Without per-thread state only.
    #[serde(default)]
    pub nv_untracked: u64,
    /// Whether task local storage held the start of each wait (kernel BTF): the wait figures
    /// (mmap_lock, lock contention, futex wait and wake times without per-thread state, direct
    /// reclaim, compaction). Files from before it existed had none.
    #[serde(default)]
    pub task_storage: bool,
    /// Whether the syscalls that serve requests were counted (Config::net_syscalls: accept,
    /// reads, writes, epoll and poll, close, shutdown). Without it their metrics are left out of
    /// `metrics` (not measured, not 0), and so is any syscall's whose probe was not attached.
    #[serde(default)]
    pub net_syscalls: bool,
    /// VMA lookups that found mmap_lock held for writing (their faults count as `fault_other`).
    pub vma_lookups_busy: u64,
    /// How the run's tasks were told from the rest: "cgroup" (every task of the run's v2 cgroup),
    /// "process tree" (the launched process and the processes forked from it, followed by
    /// task_newtask), or absent in files from before a run was more than its one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_selected_by: Option<String>,
    /// Processes the run forked besides the launched one, followed by their tgid (process tree
    /// only), and those the map had no room for: their tasks were not counted.
    #[serde(default)]
    pub processes_followed: u64,
    #[serde(default)]
    pub processes_not_followed: u64,
    pub execs: u64,
    pub read_errors: Vec<String>,
}

/// Each program's ns per run as a calibration run measured it (the kernel's run-time statistics
/// on for its whole run), for a later run that leaves them off.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramRates {
    /// The run they were measured on, in words (e.g. `threads hold --n 2500, lean probes`).
    pub from: String,
    pub programs: Vec<ProgramRate>,
}

/// One program's runs and nanoseconds in the calibration run.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramRate {
    pub program: String,
    pub runs: u64,
    pub ns: u64,
}

/// One BPF program's cost: its runs (counted by the program itself) and its time (those runs at
/// the ns per run the kernel's run-time statistics measured while they were on: see cost.rs).
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCost {
    /// The program's name in collector.bpf.c (`btf_<tracepoint>` or `tp_<tracepoint>`).
    pub program: String,
    /// `category:name` of the tracepoint it is attached to.
    pub tracepoint: String,
    /// How often it ran: every time its tracepoint fired, on any CPU, for any task (the filter to
    /// the workload is inside the program).
    pub run_cnt: u64,
    /// Of `run_cnt`, the runs that were another process's, filtered out at the program's first
    /// test (counted by the programs that count them: the raw_syscalls pair; 0 for the others and
    /// in records from before they did): what every other process pays while it is attached.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub filtered_runs: u64,
    /// Nanoseconds spent in it, in all: `run_cnt` × `sampled_ns` / `sampled_runs` (exact when the
    /// statistics were on for the whole run; 0 when no run of it was sampled).
    pub run_time_ns: u64,
    /// Runs the kernel skipped because the program was already running on that CPU.
    pub recursion_misses: u64,
    /// Runs while the kernel's run-time statistics were on, and their nanoseconds.
    #[serde(default)]
    pub sampled_runs: u64,
    #[serde(default)]
    pub sampled_ns: u64,
    /// `sampled_runs` and `sampled_ns` are a calibration run's (`Config::program_rates`), the
    /// kernel having timed none of this run's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_calibration: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn kept() -> bool {
    true
}

/// Everything the collector found.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    /// The traced thread group.
    pub tgid: u32,
    /// Whether the target exec'd (false: nothing was counted).
    pub exec_seen: bool,
    /// CLOCK_MONOTONIC ns of the exec: bucket 0 starts here.
    pub t0_ns: u64,
    pub finished_ns: u64,
    pub bucket_ns: u64,
    pub probes: Vec<ProbeStatus>,
    pub phases: Vec<PhaseMark>,
    pub metrics: Vec<Metric>,
    pub histograms: Vec<Histogram>,
    pub series: Vec<Series>,
    pub clone_failures: Vec<ErrnoCount>,
    pub rusage_basis: RusageBasis,
    pub diagnostics: Diagnostics,
    /// What each program cost (empty in files written before it was measured).
    #[serde(default)]
    pub program_costs: Vec<ProgramCost>,
    /// How long the kernel's run-time statistics were on (their windows, ms) of how long the
    /// probes were attached (ms); None when never on: program times are then not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_stats_on_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_stats_of_ms: Option<u64>,
    /// The calibration run whose ns per run gave the programs' times, the statistics off in this
    /// run (`Config::program_rates`); None: measured in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_rates_from: Option<String>,
    /// Why `program_costs` is empty, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_costs_note: Option<String>,
    /// The kernel's waits beyond the counters: which figures this host cannot give, and the
    /// futex hash (absent in files written before they were counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<Waits>,
    /// The run's scheduler events streamed to a raw file (`run --perfetto`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
}

/// The trace's capture: its raw records (collector/src/trace_events.rs reads them), what was
/// kept and lost, the ring they came through, and the clocks lined up.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// The raw records' file name, in the run directory.
    pub file: String,
    /// Records in the file, each 64 bytes, in the order the ring gave them (per CPU, the order
    /// they happened).
    pub records: u64,
    /// Records the BPF programs could not keep: the ring was full (bpf_ringbuf_reserve failed).
    /// Nothing else drops one.
    pub lost: u64,
    /// Records the programs put in the ring. `records + past_cap + lost_writing = emitted` once
    /// drained.
    pub emitted: u64,
    /// Records taken from the ring but not in the file: after a write error, or cut short.
    pub lost_writing: u64,
    /// The most the file may hold, bytes (None: no cap), and the rule that chose it.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub max_rule: String,
    /// Records taken from the ring once the file held `max_bytes`: counted, not written.
    #[serde(default)]
    pub past_cap: u64,
    /// Where records went past the cap: every record stamped before this time (CLOCK_BOOTTIME
    /// ns, the records' clock) is in the file, save the `lost` ones. None: nothing past the cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_until_ns: Option<u64>,
    /// Switches of the run's tasks that no program saw: a CPU's next switch showed as prev a
    /// task other than the one its last switch put there (trace.bpf.c, trace_switch_seen). The
    /// kernel's doing, not the ring's; not in `complete`, which is about the capture.
    pub switches_unseen: u64,
    /// Runs of the programs that emit records which the kernel skipped, the program already
    /// running on that CPU (their `recursion_misses`: a lock's contention_end inside another
    /// one's, from an interrupt): their records were never made, and a wait they would have
    /// ended stays open until its task's exit.
    #[serde(default)]
    pub runs_skipped: u64,
    /// The ring buffer's size, bytes, and the rule that chose it.
    pub ring_bytes: u64,
    pub ring_rule: String,
    /// The scheduling priority the thread draining the ring ran at ("SCHED_FIFO 10"; else
    /// nice -20 or the conductor's own, with why): above the run's tasks, so that it keeps up.
    #[serde(default)]
    pub drain_priority: String,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC at the start, ns: the records are on BOOTTIME (what
    /// Perfetto reads ftrace data on), the phases, samples and `t0_ns` here on MONOTONIC.
    pub boottime_minus_monotonic_ns: u64,
    /// How far that offset may be off (half the tightest of several paired readings), ns.
    pub clock_offset_uncertainty_ns: u64,
    /// What the records leave out on this kernel, hook by hook (a missing tracepoint, a classic
    /// twin's record lacking a field): empty when every kind is recorded in full.
    pub gaps: Vec<TraceGap>,
    /// Every record the programs emitted is in the file, and none was lost (false past the cap).
    pub complete: bool,
    /// Why the capture stopped short (a write error: the records before it are kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How the trace stays out of the run's memory figures, in one sentence.
    pub memory: String,
}

/// Records a trace lacks on this kernel, and why.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceGap {
    /// `category:name` of the tracepoint.
    pub hook: String,
    /// The records it gives (`switch`, `wakeup`, `wait futex`, …).
    pub records: String,
    pub why: String,
}

/// What the wait counters (mmap_lock, lock contention, TLB, IPIs, futex hash, the machine's
/// reclaim and compaction) leave unsaid.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waits {
    /// Figures this host cannot give: their metrics are left out of `metrics` (not available,
    /// never 0).
    pub unavailable: Vec<Unavailable>,
    /// The target's own futex hash; None when its figures are not available here.
    pub futex_hash: Option<FutexHash>,
    pub notes: Vec<String>,
}

/// A figure left out, the metrics it would have had, and why.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    pub figure: String,
    pub metrics: Vec<String>,
    pub why: String,
}

/// The target's private futex hash (Linux 6.16+), as its futex ops found it.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FutexHash {
    /// Its slots (hash_mask + 1) at the last private op; None when no op found one (a
    /// single-threaded process uses the global hash).
    pub slots: Option<u64>,
    /// Times the size changed during the run: waiters counted in a bucket of the old hash were
    /// rehashed by the kernel, so per-bucket counts are approximate.
    pub resizes: u64,
    pub resized: bool,
    /// The most waiters one wake found queued in its bucket.
    pub walk_max: u64,
    /// Private ops made while the process had no hash of its own (the global hash).
    pub global_hash_ops: u64,
    /// Ops on a hash of more slots than the collector follows (their walks are not counted).
    pub too_big_ops: u64,
    /// Ops on addresses the address table had no room for.
    pub addresses_untracked: u64,
    /// Futex addresses whose wakes walked the most waiters, most first.
    pub top_futexes: Vec<FutexAddress>,
    /// Buckets where the most tasks waited at once, most first.
    pub busiest_buckets: Vec<FutexBucket>,
}

/// One futex word of the target.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FutexAddress {
    /// `0x…`: the user address.
    pub address: String,
    pub bucket: u64,
    pub waits: u64,
    pub wakes: u64,
    /// Waiters queued in its bucket at its wakes, summed.
    pub walked: u64,
    pub max_walk: u64,
}

/// One bucket of the target's futex hash.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FutexBucket {
    pub bucket: u64,
    pub peak_waiters: u64,
    pub wakes: u64,
    pub walked: u64,
}

impl Report {
    /// The counter called `name` (see probes/collector.h, enum sc_counter, lower case).
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// The total of counter `name`, 0 when there is no such counter.
    pub fn total(&self, name: &str) -> u64 {
        self.metric(name).map_or(0, |m| m.total)
    }

    pub fn histogram(&self, name: &str) -> Option<&Histogram> {
        self.histograms.iter().find(|h| h.name == name)
    }

    pub fn series(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }

    /// Probes that are not attached, with why.
    pub fn missing(&self) -> impl Iterator<Item = &ProbeStatus> {
        self.probes.iter().filter(|p| p.attach.is_none())
    }
}
