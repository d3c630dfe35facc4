//! The floor under every traced run's syscalls: what the probes' `raw_syscalls` pair costs one
//! syscall that its programs only filter out, and what the kernel's BPF run-time statistics add
//! to each program run. A loop of getppid() is timed untraced, with the (lean) probes attached and
//! the statistics off, and with them on; the probes wait on a gated child that never execs, so
//! every program returns at its first test, as it does for every other process's syscalls.
//!
//! Whatever a traced syscall costs beyond the untraced one is the tracing slow path every task
//! takes while a syscall tracepoint is enabled, two tracepoint dispatches and two programs' first
//! test: the part no program's statistics see. The statistics then add their two clock reads and
//! a counter update to each program run, and the time they report for a run spans the program and
//! the second clock read (kernel/bpf: `__bpf_prog_run`), so their ns per run includes part of their
//! own cost (docs/manual/probe-cost.md). The figures are analyse/syscall_cost.rs's.

use std::os::fd::OwnedFd;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::host::tracefs;
use crate::measure::launch::{self, ChildSetup, Stdio};
use spawnscope_collector::{Collector, Config as CollectorConfig, FaultKinds, ProgramStats};

/// The states the loop is timed in, in the order the rounds run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// No probe attached (before they are, and again after).
    Untraced,
    /// The lean probes attached, the kernel's run-time statistics off.
    Traced,
    /// The same, the statistics on.
    StatisticsOn,
}

/// One round: `calls` getppid() calls in `state`, and their wall time.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    pub state: State,
    pub calls: u64,
    pub ns: u64,
}

/// A syscall-tracing program as the statistics timed it while the loop ran.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramTimed {
    pub program: String,
    pub tracepoint: String,
    /// Its runs over the whole measurement (the program counts them itself).
    pub runs: u64,
    /// Its runs while the statistics were on, and their ns per run as the statistics report it.
    pub timed_runs: u64,
    pub timed_ns_per_run: Option<f64>,
}

/// What `spawnscope syscall-cost` measured, raw: every round, and the syscall programs' runs.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub kernel: String,
    pub cpus: usize,
    pub rounds: Vec<Round>,
    pub programs: Vec<ProgramTimed>,
}

/// `rounds` rounds of `calls` calls in each state: untraced, traced, statistics on, traced again,
/// untraced again (drift falls on both sides of each comparison). Root only.
pub fn measure(rounds: u32, calls: u64) -> Result<Measured> {
    let mut timed = Vec::new();
    let loop_in = |state: State, timed: &mut Vec<Round>| {
        for _ in 0..rounds {
            timed.push(Round {
                state,
                calls,
                ns: getppid_loop(calls),
            });
        }
    };
    loop_in(State::Untraced, &mut timed);

    // A gated child that never execs: the probes are attached for a target that never arms them.
    let setup = ChildSetup {
        cgroup_procs: Vec::new(),
        unlimited_nproc: false,
        gated: true,
        stdin: Stdio::Null,
        stdout: Stdio::Null,
        stderr: Stdio::Null,
    };
    let exe = std::env::current_exe().context("this program's path")?;
    let child = launch::spawn(&exe, &[], setup)?;
    let attached = attach(child.pid);
    let measured = attached.map(|collector| {
        loop_in(State::Traced, &mut timed);
        let on = statistics_on();
        if on.is_ok() {
            loop_in(State::StatisticsOn, &mut timed);
        }
        let refused = on.err();
        loop_in(State::Traced, &mut timed);
        (collector.finish(), refused)
    });
    launch::kill(child.pid);
    let _ = launch::wait(child.pid);
    drop(child);
    let (report, refused) = measured?;
    if let Some(why) = refused {
        return Err(why);
    }
    loop_in(State::Untraced, &mut timed);

    let programs = report
        .program_costs
        .iter()
        .filter(|p| p.tracepoint.starts_with("raw_syscalls:"))
        .map(|p| ProgramTimed {
            program: p.program.clone(),
            tracepoint: p.tracepoint.clone(),
            runs: p.run_cnt,
            timed_runs: p.sampled_runs,
            timed_ns_per_run: (p.sampled_runs > 0)
                .then(|| p.sampled_ns as f64 / p.sampled_runs as f64),
        })
        .collect();
    Ok(Measured {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| r.trim().to_string())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rounds: timed,
        programs,
    })
}

/// The lean probes, as a run's default, the statistics left to `statistics_on`.
fn attach(pid: u32) -> Result<Collector> {
    tracefs::mount_if_missing();
    let mut config = CollectorConfig::new(pid, 1);
    config.fault_kinds = FaultKinds::Off;
    config.program_stats = ProgramStats::Off;
    let collector = Collector::start(&config).context("loading the eBPF probes")?;
    if collector
        .probes()
        .iter()
        .any(|p| p.probe == "raw_syscalls:sys_enter" && p.attach.is_some())
    {
        Ok(collector)
    } else {
        bail!("the raw_syscalls:sys_enter probe could not be attached on this kernel")
    }
}

/// The kernel's run-time statistics, on while the descriptor lives.
fn statistics_on() -> Result<OwnedFd> {
    spawnscope_collector::enable_stats().map_err(anyhow::Error::msg)
}

/// Wall ns of `calls` getppid() calls: a syscall that does next to nothing in the kernel, and that
/// no C library caches.
fn getppid_loop(calls: u64) -> u64 {
    let start = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(std::os::unix::process::parent_id());
    }
    start.elapsed().as_nanos() as u64
}
