//! spawnscope's eBPF collector: what one process costs the kernel, counted in the kernel.
//!
//! The BPF programs (`probes/collector.bpf.c`, CO-RE) attach to tracepoints only, filter to one
//! thread group from its `exec` on, and aggregate in the kernel: counters per workload phase,
//! per 100 ms bucket and per `getrusage` epoch, log2 histograms. Nothing is streamed to user space
//! while the workload runs; [`Collector::finish`] reads the maps once.
//!
//! How the conductor uses it, with the project's one launcher ([`launch`]: fork, hold at a gate
//! before exec, wait4), since std's `Command` cannot hold a child before exec:
//!
//! ```no_run
//! use std::io::{BufRead, BufReader};
//! use std::path::Path;
//! use spawnscope_collector::launch::{self, ChildSetup, Stdio};
//! use spawnscope_collector::{Collector, Config};
//!
//! let args = ["hold", "--n", "2000", "--hold-for", "1s"].map(String::from);
//! let setup = ChildSetup { gated: true, stdout: Stdio::Pipe, ..ChildSetup::default() };
//! let mut child = launch::spawn(Path::new("target/release/threads"), &args, setup)?;
//! let collector = Collector::start(&Config::new(child.pid, 2000)); // while it waits at its gate
//! child.release()?;                                               // execs the workload
//! for line in BufReader::new(child.stdout.take().unwrap()).lines() {
//!     // ... for each `phase` event: collector.set_phase(i, t_ns)
//! }
//! let (exit, rusage) = launch::wait(child.pid)?;
//! if let Ok(collector) = collector {
//!     let report = collector.finish();
//!     println!("{}", serde_json::to_string(&report).unwrap());
//! }
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! Modules, bottom to top (each uses only those before it): `layout` (generated from
//! probes/collector.h), [`clock`], [`launch`], [`jhash`], `model` (collector.json),
//! [`trace_events`], `probes`, `net`, `cost`, `floor`, `config`, `sizing`, `held`, `maps`, `waits`,
//! `assemble`, `summary`, `cross_checks`, `attach`, `capture`, and this facade.
//!
//! With [`Config::trace`] (`run --perfetto`) one thing does reach user space while the workload
//! runs: one raw record per scheduler event of the run, through a BPF ring buffer that a thread
//! of the collector drains into a file as it fills (`capture`); the report's `trace` says what
//! was kept and lost.

mod assemble;
mod attach;
mod capture;
pub mod clock;
mod config;
mod cost;
mod cross_checks;
mod floor;
mod held;
pub mod jhash;
pub mod launch;
mod layout {
    include!(concat!(env!("OUT_DIR"), "/layout.rs"));
}
mod maps;
mod model;
mod net;
mod probes;
mod sizing;
mod summary;
pub mod trace_events;
mod waits;

use std::sync::Mutex;

pub use attach::{Error, PER_THREAD_ONLY};
pub use clock::{boottime_ns, monotonic_ns};
pub use config::{Config, TraceConfig};
pub use cost::{enable_stats, ProgramStats, ProgramTotals};
pub use cross_checks::{CrossCheck, Verdict};
pub use floor::{Floor, FLOOR_HOOKS};
pub use launch::Rusage;
pub use model::{
    Attach, CutCounts, CutWindow, Diagnostics, ErrnoCount, FaultKinds, FutexAddress, FutexBucket,
    FutexHash, HistBucket, Histogram, Metric, PhaseMark, PreExec, ProbeStatus, ProgramCost,
    ProgramRate, ProgramRates, Report, RusageBasis, Series, Trace, TraceGap, Unavailable, Waits,
    REPORT_SCHEMA,
};
pub use probes::{tracefs_root, tracepoints};
pub use sizing::MAX_RING_BYTES;
pub use summary::{metric_label, SummaryRow};

/// A probe that could not be loaded or attached, and why.
#[derive(
    schemars::JsonSchema, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize,
)]
pub struct MissingProbe {
    /// `category:tracepoint`, e.g. `exceptions:page_fault_user`.
    pub probe: String,
    pub reason: String,
}

/// A running collector: probes attached, counting once the target execs.
pub struct Collector {
    loaded: attach::Loaded,
    missing: Vec<MissingProbe>,
    held: Option<PreExec>,
    cfg: Config,
    phases: Mutex<Vec<PhaseMark>>,
    /// The kernel's run-time statistics, on in windows while the collector lives (cost.rs).
    stats: cost::Stats,
    /// The trace's drain (Config::trace), or why it is not running.
    capture: Option<Result<capture::Capture, String>>,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC at the start, and how far off (clock.rs).
    clock_offset: (u64, u64),
}

impl Collector {
    /// Loads and attaches every probe it can, each as `tp_btf` or else as a classic tracepoint.
    /// Err only when nothing useful can be loaded (no root, no BPF, no exec tracepoint).
    pub fn start(cfg: &Config) -> Result<Collector, Error> {
        // Before attaching, while the child sleeps in its hold: the classic path's pre-exec
        // baseline (the tp_btf exec probe reads the exact one from task_struct).
        let held = held::held_counters(cfg.target_pid);
        // Started before the programs attach, so that a run always on counts every run; off when a
        // calibration gives the programs' ns per run.
        let stats = cost::Stats::start(match cfg.program_rates {
            Some(_) => ProgramStats::Off,
            None => cfg.program_stats,
        });
        let loaded = attach::load(cfg)?;
        let missing = loaded
            .probes
            .iter()
            .filter(|p| p.attach.is_none())
            .map(|p| MissingProbe {
                probe: p.probe.clone(),
                reason: p.note.clone().unwrap_or_default(),
            })
            .collect();
        // The drain starts before the workload is released: its records wait in the ring
        // until then.
        let capture = cfg.trace.as_ref().map(|trace| {
            loaded.kernel.trace.clone()?;
            capture::Capture::start(loaded.trace_ring()?, &trace.path, trace.max_bytes)
        });
        Ok(Collector {
            loaded,
            missing,
            held,
            cfg: cfg.clone(),
            phases: Mutex::new(Vec::new()),
            stats,
            capture,
            clock_offset: clock::boottime_offset(16),
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
        let set_ns = monotonic_ns();
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

    /// Each loaded program's runs and time so far, as the kernel's run-time statistics count
    /// them (they grow only while the statistics are on: [`enable_stats`]).
    pub fn program_totals(&self) -> Result<Vec<ProgramTotals>, String> {
        self.loaded.program_totals()
    }

    /// Detaches every probe and reads every map into the report.
    pub fn finish(self) -> Report {
        let finished_ns = monotonic_ns();
        let Collector {
            loaded,
            cfg,
            phases,
            held,
            stats,
            capture,
            clock_offset,
            ..
        } = self;
        let phases = phases.into_inner().unwrap_or_else(|e| e.into_inner());
        let (sizing, probes, kernel) =
            (loaded.sizing, loaded.probes.clone(), loaded.kernel.clone());
        let (raw, errors, program_costs) =
            loaded.detach_and_read(finished_ns, cfg.program_rates.as_ref());
        // The programs are detached: what is left in the ring is all there will be.
        let drained = capture.map(|c| c.map(capture::Capture::finish));
        // Counting stops with the last holder of the statistics' descriptor.
        let program_costs_note = stats.note.clone();
        let windows = stats.stop();
        let meta = assemble::Meta {
            tgid: cfg.target_pid,
            bucket_ns: sizing.bucket_ns,
            finished_ns,
            probes,
            phases,
            tasks_map_entries: sizing.tasks,
            nr_buckets: sizing.buckets,
            fault_kinds: cfg.fault_kinds,
            per_thread: cfg.per_thread,
            net_syscalls: cfg.net_syscalls,
            by_cgroup: cfg.run_cgroup_id.is_some(),
            errors,
            held,
            support: waits::Support {
                task_storage: kernel.task_storage,
                futex_phash: kernel.futex_phash,
                tlb_func_known: kernel.tlb_func != 0,
                per_thread: cfg.per_thread,
            },
        };
        let mut report = assemble::assemble(meta, &raw);
        if let (Some(trace), Some(drained)) = (&cfg.trace, drained) {
            let section = capture::Section {
                path: &trace.path,
                max_bytes: trace.max_bytes,
                max_rule: &trace.max_rule,
                ring_bytes: sizing.ring_bytes as u64,
                ring_rule: &trace.ring_rule,
                clock: clock_offset,
                probes: &report.probes,
                program_costs: &report.program_costs,
                per_thread: cfg.per_thread,
                task_storage: kernel.task_storage,
            };
            report.trace = Some(section.report(drained, &raw.trace_cpu));
        }
        report.program_costs = program_costs;
        report.program_costs_note = program_costs_note;
        report.program_stats_on_ms = windows.map(|w| w.0);
        report.program_stats_of_ms = windows.map(|w| w.1);
        // Said only where the calibration's rates gave a time (the kernel timed no run here).
        if report.program_costs.iter().any(|p| p.from_calibration) {
            report.program_rates_from = cfg.program_rates.as_ref().map(|r| r.from.clone());
        }
        report
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
