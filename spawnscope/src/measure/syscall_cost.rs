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
//! the second clock read (`__bpf_prog_run`, include/linux/filter.h), so their ns per run includes
//! part of their own cost (docs/manual/probe-cost.md). The figures are analyse/syscall_cost.rs's.
//! The probes are a lean run's (`probes::config`), with the statistics left to this module.

use std::os::fd::OwnedFd;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::host::tracefs;
use crate::measure::launch::{self, ChildSetup, Stdio};
use crate::measure::probes::{self, ProbeDetail};
use crate::record::syscall_cost::{Measured, ProgramTimed, Round, State};
use spawnscope_collector::{Collector, ProgramStats};

/// `cycles` cycles (see [`State`]) of `calls` calls a round. Root only, with the statistics off
/// to begin with (`procfs::bpf_stats_on`: the caller refuses otherwise); fails if they were on
/// during the traced rounds all the same.
pub fn measure(cycles: u32, calls: u64) -> Result<Measured> {
    let mut rounds = Vec::new();
    let mut programs: Vec<ProgramTimed> = Vec::new();
    for _ in 0..cycles {
        rounds.push(round(State::Untraced, calls));
        for p in traced_cycle(calls, &mut rounds)? {
            match programs.iter_mut().find(|q| q.program == p.program) {
                Some(q) => {
                    q.runs += p.runs;
                    q.timed_runs += p.timed_runs;
                    q.timed_ns += p.timed_ns;
                }
                None => programs.push(p),
            }
        }
    }
    rounds.push(round(State::Untraced, calls));
    // The traced rounds ran untimed: the pair's runs less those timed hold at least their calls.
    let traced_calls = 2 * calls * u64::from(cycles);
    for p in &programs {
        if p.runs.saturating_sub(p.timed_runs) < traced_calls {
            bail!(
                "{} ran {} times, {} of them timed: the statistics were on during the traced rounds ({traced_calls} calls), something else turned them on meanwhile",
                p.program, p.runs, p.timed_runs
            );
        }
    }
    Ok(Measured {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| r.trim().to_string())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rounds,
        programs,
    })
}

/// One cycle with the probes attached to a gated child that never execs: traced, statistics on,
/// traced; the pair's programs' runs and what the statistics timed of them.
fn traced_cycle(calls: u64, rounds: &mut Vec<Round>) -> Result<Vec<ProgramTimed>> {
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
    let pid = child.pid;
    let timed = attach(pid).and_then(|collector| {
        rounds.push(round(State::Traced, calls));
        let refused = match statistics_on() {
            Ok(on) => {
                rounds.push(round(State::StatisticsOn, calls));
                drop(on);
                None
            }
            Err(err) => Some(err),
        };
        rounds.push(round(State::Traced, calls));
        let report = collector.finish();
        match refused {
            Some(err) => Err(err),
            None => Ok(report),
        }
    });
    // Dropped while gated, the child is killed; reaped only after, so no kill reaches a free PID.
    drop(child);
    let _ = launch::wait(pid);
    let report = timed?;
    Ok(report
        .program_costs
        .iter()
        .filter(|p| p.tracepoint.starts_with("raw_syscalls:"))
        .map(|p| ProgramTimed {
            program: p.program.clone(),
            tracepoint: p.tracepoint.clone(),
            runs: p.run_cnt,
            timed_runs: p.sampled_runs,
            timed_ns: p.sampled_ns,
        })
        .collect())
}

fn round(state: State, calls: u64) -> Round {
    Round {
        state,
        calls,
        ns: getppid_loop(calls),
    }
}

/// The lean probes, as a run's default, the statistics left to `statistics_on`.
fn attach(pid: u32) -> Result<Collector> {
    tracefs::mount_if_missing();
    let mut config = probes::config(pid, 1, ProbeDetail::Lean);
    config.program_stats = ProgramStats::Off;
    let collector = Collector::start(&config).context("loading the eBPF probes")?;
    let attached = |probe: &str| {
        collector
            .probes()
            .iter()
            .any(|p| p.probe == probe && p.attach.is_some())
    };
    if attached("raw_syscalls:sys_enter") && attached("raw_syscalls:sys_exit") {
        Ok(collector)
    } else {
        bail!("the raw_syscalls sys_enter/sys_exit pair could not be attached on this kernel")
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
