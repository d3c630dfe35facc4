//! Starting the eBPF collector (the spawnscope-collector crate) on a workload held at its gate.

use spawnscope_collector::{
    Collector, Config as CollectorConfig, FaultKinds, ProgramRates, ProgramStats,
};

use crate::host::tracefs;

/// What the collector keeps (`run --probes`); its cost grows with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeDetail {
    /// Counters, series and cross-checks.
    Lean,
    /// Also per-thread state (on-CPU, run-queue, futex and clone times, RSS over time) and the
    /// kinds of page faults.
    Full,
}

/// Where each probe program's time comes from (`run --probe-times`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeTimes {
    /// Its runs in this run at its ns per run in a short traced calibration run (the kernel's
    /// run-time statistics off in this run: their clock reads stay out of its times).
    #[default]
    Calibrated,
    /// The kernel's run-time statistics on for the whole run: each program's exact time here, at
    /// two clock reads per program run, in every time figure of the run.
    InRun,
}

impl ProbeDetail {
    /// As `--probes` takes it.
    pub fn name(self) -> &'static str {
        match self {
            ProbeDetail::Lean => "lean",
            ProbeDetail::Full => "full",
        }
    }
}

/// The collector's configuration for `detail` on `pid`, sized for `threads` OS threads: what a
/// run loads (`start`), and what `syscall-cost` loads with the statistics left to itself.
pub fn config(pid: u32, threads: u64, detail: ProbeDetail) -> CollectorConfig {
    let full = detail == ProbeDetail::Full;
    let mut config = CollectorConfig::new(pid, threads.max(1));
    config.per_thread = full;
    config.fault_kinds = if full {
        FaultKinds::StackHeap
    } else {
        FaultKinds::Off
    };
    config
}

/// Loads the eBPF collector for the workload's PID, sized for `threads` OS threads, keeping what
/// `detail` says; `net_syscalls` also counts the syscalls that serve requests (accept, reads,
/// writes, epoll and poll, close, shutdown: for `serve`, false for every other run — their
/// tracepoints fire for every process's reads and writes). `rates`: each program's ns per run from
/// a calibration of the same probes, so that the kernel's run-time statistics stay off; None:
/// they are on for the whole run. `run_cgroup`: the run's v2 cgroup id, whose tasks the probes
/// count (every process the workload or command starts); None: the probes follow `pid`'s forks.
/// What cannot be loaded is said, not fatal.
pub fn start(
    pid: u32,
    run_cgroup: Option<u64>,
    threads: u64,
    detail: ProbeDetail,
    net_syscalls: bool,
    rates: Option<ProgramRates>,
    left_out: &mut Vec<String>,
) -> Option<Collector> {
    // libbpf finds tracepoints through tracefs.
    tracefs::mount_if_missing();
    let mut config = config(pid, threads, detail);
    config.run_cgroup_id = run_cgroup;
    config.net_syscalls = net_syscalls;
    config.program_stats = ProgramStats::Always;
    config.program_rates = rates;
    match Collector::start(&config) {
        Ok(collector) => {
            // Probes left out by choice are said once, below, not one by one.
            for missing in collector
                .missing()
                .iter()
                .filter(|m| m.reason != spawnscope_collector::PER_THREAD_ONLY)
            {
                left_out.push(format!(
                    "probe {} not loaded: {}",
                    missing.probe, missing.reason
                ));
            }
            if detail == ProbeDetail::Lean {
                left_out.push("eBPF probes: per-thread figures (on-CPU, run-queue, futex and clone times, RSS over time) and page faults by kind not kept: --probes full keeps them, at about 2.5 times the cost".into());
            }
            Some(collector)
        }
        Err(err) => {
            left_out.push(format!("eBPF probes: {err}"));
            None
        }
    }
}
