//! spawnscope's eBPF collector: what one process costs the kernel, counted in the kernel.
//!
//! The BPF programs (`probes/collector.bpf.c`, CO-RE) attach to tracepoints only, filter to one
//! thread group from its `exec` on, and aggregate in the kernel: counters per workload phase,
//! per 100 ms bucket and per `getrusage` epoch, log2 histograms. Nothing is streamed to user space
//! while the workload runs; [`Collector::finish`] reads the maps once.
//!
//! How the conductor uses it (see [`launch`] for the fork/hold/exec part, which std's `Command`
//! cannot do on its own):
//!
//! ```no_run
//! use std::process::{Command, Stdio};
//! use spawnscope_collector::{launch::HeldChild, Collector, Config};
//!
//! let mut cmd = Command::new("target/release/threads");
//! cmd.args(["hold", "--n", "2000", "--hold-for", "1s"]).stdout(Stdio::piped());
//! let held = HeldChild::spawn(cmd)?;              // forked, waiting before exec
//! let collector = Collector::start(&Config::new(held.pid(), 2000));
//! let child = held.release()?;                    // execs the workload
//! // ... for each `phase` event read from the child's stdout: collector.set_phase(i, t_ns)
//! // ... wait for the child, then:
//! if let Ok(collector) = collector {
//!     let report = collector.finish();
//!     println!("{}", serde_json::to_string(&report).unwrap());
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

mod checks;
pub mod launch;
mod layout {
    include!(concat!(env!("OUT_DIR"), "/layout.rs"));
}
mod load;
mod probes;
mod read;
mod report;

use std::fmt;
use std::sync::Mutex;

pub use checks::{CrossCheck, Rusage, Verdict};
pub use report::{metric_label, FaultKinds};
pub use report::{
    Attach, CutCounts, CutWindow, Diagnostics, ErrnoCount, HistBucket, Histogram, Metric,
    PhaseMark, PreExec, ProbeStatus, Report, RusageBasis, Series, SummaryRow, REPORT_SCHEMA,
};

/// The compiled BPF object (built from `probes/collector.bpf.c` by build.rs).
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/collector.bpf.o"));

/// What to trace and how big to make the kernel-side maps.
#[derive(Clone, Debug)]
pub struct Config {
    /// PID of the process to trace: counting starts when it execs, and covers every thread of
    /// its thread group.
    pub target_pid: u32,
    /// The most tasks the workload will spawn (its N). Sizes the per-thread map, capped at the
    /// kernel's pid_max since no process can hold more threads than that.
    pub expected_tasks: u64,
    /// Width of one time bucket of the series (default 100 ms).
    pub bucket_ns: u64,
    /// Time covered by the series (default 20 min); later events land in the last bucket and are
    /// counted in [`Diagnostics::late_events`].
    pub max_duration_ns: u64,
    /// How far to tell which memory each page fault hits (default: stack, heap, other).
    pub fault_kinds: FaultKinds,
    /// Also switch phases in the kernel the moment the target writes a `phase` event to its
    /// stdout (the workload contract: one JSON line per event, `"event"` first); set_phase then
    /// only catches what that misses. Exact where set_phase lags by a pipe and a wakeup.
    pub phases_from_stdout: bool,
    /// Use only the classic tracepoint programs, as on a kernel without BTF (for tests and
    /// comparisons; off by default).
    pub classic_only: bool,
    /// Test seam: mark this tracepoint's tp_btf program sleepable, which the kernel refuses at
    /// load time, so the per-probe fallback runs for real.
    #[doc(hidden)]
    pub refuse_btf_for: Option<String>,
}

impl Config {
    /// Defaults for everything but the target and N.
    pub fn new(target_pid: u32, expected_tasks: u64) -> Self {
        Config {
            target_pid,
            expected_tasks,
            bucket_ns: 100_000_000,
            max_duration_ns: 20 * 60 * 1_000_000_000,
            fault_kinds: FaultKinds::StackHeap,
            phases_from_stdout: true,
            classic_only: false,
            refuse_btf_for: None,
        }
    }
}

/// Why nothing could be collected.
#[derive(Debug)]
pub enum Error {
    /// BPF is not available to this process: not root (no CAP_BPF/CAP_PERFMON), no BPF syscall,
    /// or the object could not be loaded at all. The message is libbpf's.
    NoBpf(String),
    /// Some probes load, but not the one that starts the counting (sched_process_exec), so
    /// nothing would be counted.
    Unusable(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoBpf(msg) => write!(f, "BPF not available: {msg}"),
            Error::Unusable(msg) => write!(f, "collector unusable: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

/// A probe that could not be loaded or attached, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MissingProbe {
    /// `category:tracepoint`, e.g. `exceptions:page_fault_user`.
    pub probe: String,
    pub reason: String,
}

/// A running collector: probes attached, counting once the target execs.
pub struct Collector {
    loaded: load::Loaded,
    missing: Vec<MissingProbe>,
    held: Option<PreExec>,
    cfg: Config,
    phases: Mutex<Vec<PhaseMark>>,
}

impl Collector {
    /// Loads and attaches every probe it can, each as `tp_btf` or else as a classic tracepoint.
    /// Err only when nothing useful can be loaded (no root, no BPF, no exec tracepoint).
    pub fn start(cfg: &Config) -> Result<Collector, Error> {
        // Before attaching, while the child sleeps in its hold: the classic path's pre-exec
        // baseline (the tp_btf exec probe reads the exact one from task_struct).
        let held = read::held_counters(cfg.target_pid);
        let loaded = load::load(cfg)?;
        let missing = loaded
            .probes
            .iter()
            .filter(|p| p.attach.is_none())
            .map(|p| MissingProbe {
                probe: p.probe.clone(),
                reason: p.note.clone().unwrap_or_default(),
            })
            .collect();
        Ok(Collector {
            loaded,
            missing,
            held,
            cfg: cfg.clone(),
            phases: Mutex::new(Vec::new()),
        })
    }

    /// Which probes could not be loaded or attached, and why (shown in summaries).
    pub fn missing(&self) -> &[MissingProbe] {
        &self.missing
    }

    /// Every probe: how it is attached (tp_btf or classic tracepoint) and why it fell back.
    pub fn probes(&self) -> &[ProbeStatus] {
        &self.loaded.probes
    }

    /// Called when the workload's `phase` event number `index` (0 = first phase) is read, with its
    /// CLOCK_MONOTONIC `t_ns`: from then on events count towards that phase (unless the kernel
    /// already switched when it saw the event written, see [`Config::phases_from_stdout`]).
    /// The report gives, per phase, how long after `t_ns` counting switched to it.
    pub fn set_phase(&self, index: u32, t_ns: u64) {
        let set_ns = read::monotonic_ns();
        if let Err(err) = self.loaded.set_phase_slot(phase_slot(index)) {
            eprintln!("spawnscope-collector: set_phase({index}): {err}");
        }
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        phases.push(PhaseMark {
            index,
            t_ns,
            set_ns: Some(set_ns),
            seen_ns: None,
            lag_ns: set_ns.saturating_sub(t_ns),
        });
    }

    /// Detaches every probe and reads every map into the report.
    pub fn finish(self) -> Report {
        let finished_ns = read::monotonic_ns();
        let Collector {
            loaded,
            cfg,
            phases,
            held,
            ..
        } = self;
        let phases = phases.into_inner().unwrap_or_else(|e| e.into_inner());
        let (sizing, probes) = (loaded.sizing, loaded.probes.clone());
        let (raw, errors) = loaded.detach_and_read(finished_ns);
        let meta = report::Meta {
            tgid: cfg.target_pid,
            bucket_ns: sizing.bucket_ns,
            finished_ns,
            probes,
            phases,
            tasks_map_entries: sizing.tasks,
            nr_buckets: sizing.buckets,
            fault_kinds: cfg.fault_kinds,
            errors,
            held,
        };
        Report::assemble(meta, &raw)
    }
}

/// Phase index -> counter slot in the kernel: slot 0 is "before the first phase", and phases past
/// the last slot share it.
fn phase_slot(index: u32) -> u32 {
    (index as u64 + 1).min(layout::PHASE_SLOTS as u64 - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conductor may read the workload's stdout on another thread than the one that waits.
    #[test]
    fn a_collector_can_move_between_and_be_shared_by_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Collector>();
        send_sync::<Report>();
    }

    #[test]
    fn phase_slots_shift_by_one_and_saturate() {
        assert_eq!(phase_slot(0), 1);
        assert_eq!(phase_slot(2), 3);
        assert_eq!(phase_slot(14), 15);
        assert_eq!(phase_slot(15), 15);
        assert_eq!(phase_slot(u32::MAX), 15);
    }
}
