//! Runs a command under the collector and prints the report as JSON on stdout.
//!
//!     sudo target/release/examples/collect [--n N] [--classic] [--fault-kinds off|stack-heap|vma] [--net-syscalls] -- CMD ARGS...
//!
//! The command (a path, or a name looked up in PATH) is forked, held at the gate before exec while
//! the probes attach, then released. When it prints
//! spawnscope JSON Lines (the workloads do), its `phase` events set the phases and its `result`
//! event's rusage is cross-checked; every line it prints is passed on to stderr. `--n` sizes the
//! per-thread map (default 10000); `--net-syscalls` also counts the syscalls that serve requests
//! (accept, reads, writes, epoll, poll, close, shutdown). Example:
//!
//!     sudo target/release/examples/collect --n 2000 -- target/release/threads hold --n 2000 --hold-for 1s

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;
use spawnscope_collector::launch::{self, ChildSetup, Stdio};
use spawnscope_collector::{Collector, Config, FaultKinds, Rusage};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        eprintln!(
            "usage: collect [--n N] [--classic] [--fault-kinds off|stack-heap|vma] [--net-syscalls] -- CMD ARGS..."
        );
        return ExitCode::from(2);
    };
    let (opts, command) = (&args[..split], &args[split + 1..]);
    if command.is_empty() {
        eprintln!("collect: no command after --");
        return ExitCode::from(2);
    }
    let mut n = 10_000;
    let mut classic = false;
    let mut net_syscalls = false;
    let mut fault_kinds = FaultKinds::StackHeap;
    let mut it = opts.iter();
    while let Some(opt) = it.next() {
        match opt.as_str() {
            "--n" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => n = v,
                None => {
                    eprintln!("collect: --n needs a number");
                    return ExitCode::from(2);
                }
            },
            "--classic" => classic = true,
            "--net-syscalls" => net_syscalls = true,
            "--fault-kinds" => {
                fault_kinds = match it.next().map(String::as_str) {
                    Some("off") => FaultKinds::Off,
                    Some("stack-heap") => FaultKinds::StackHeap,
                    Some("vma") => FaultKinds::Vma,
                    _ => {
                        eprintln!("collect: --fault-kinds takes off, stack-heap or vma");
                        return ExitCode::from(2);
                    }
                }
            }
            other => {
                eprintln!("collect: unknown option {other}");
                return ExitCode::from(2);
            }
        }
    }

    let setup = ChildSetup {
        gated: true,
        stdout: Stdio::Pipe,
        ..ChildSetup::default()
    };
    let mut child = match launch::spawn(&program(&command[0]), &command[1..], setup) {
        Ok(child) => child,
        Err(err) => {
            eprintln!("collect: cannot start {}: {err:#}", command[0]);
            return ExitCode::from(1);
        }
    };
    let mut cfg = Config::new(child.pid, n);
    cfg.classic_only = classic;
    cfg.fault_kinds = fault_kinds;
    cfg.net_syscalls = net_syscalls;
    let collector = match Collector::start(&cfg) {
        Ok(c) => Some(c),
        Err(err) => {
            eprintln!("collect: running without the collector: {err}");
            None
        }
    };
    if let Some(c) = &collector {
        for m in c.missing() {
            eprintln!("collect: missing probe {}: {}", m.probe, m.reason);
        }
    }
    if let Err(err) = child.release() {
        eprintln!("collect: cannot run {}: {err:#}", command[0]);
        let _ = launch::wait(child.pid);
        return ExitCode::from(1);
    }

    let mut phases = 0;
    let mut result: Option<Value> = None;
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        eprintln!("{line}");
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match event["event"].as_str() {
            Some("phase") => {
                if let (Some(c), Some(t)) = (&collector, event["t_ns"].as_u64()) {
                    c.set_phase(phases, t);
                }
                phases += 1;
            }
            Some("result") => result = Some(event),
            _ => {}
        }
    }
    let status = launch::wait(child.pid);
    let Some(collector) = collector else {
        return ExitCode::from(1);
    };
    let report = collector.finish();
    if let Some(result) = result {
        // The workload's own getrusage; else (no such object) the kernel's, from wait4.
        let rusage = serde_json::from_value::<Rusage>(result["rusage"].clone())
            .ok()
            .or_else(|| status.as_ref().ok().map(|(_, ru)| *ru))
            .unwrap_or_default();
        // OS threads the workload made beside its main one.
        let stats = &result["runtime_stats"];
        let spawned = match stats["os_threads_created"].as_u64() {
            Some(created) => created.saturating_sub(1),
            None => result["spawned"].as_u64().unwrap_or(0),
        };
        for check in report.cross_checks(&rusage, Some((spawned, "threads the workload reported")))
        {
            eprintln!(
                "collect: check {:?}: {} expected {} observed {}..={} (tolerance {}) — {}",
                check.verdict,
                check.name,
                check.expected,
                check.observed,
                check.observed_max,
                check.tolerance,
                check.basis
            );
        }
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("the report serializes")
    );
    match status {
        Ok((exit, _)) if exit.success() => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}

/// `name` as a path: as given when it holds a `/`, else the first match in PATH (the launcher
/// execs a path, it does not search).
fn program(name: &str) -> PathBuf {
    if name.contains('/') {
        return PathBuf::from(name);
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(name))
}
