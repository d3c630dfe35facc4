//! `tokio-tasks`: the spawnscope workload on tokio tasks (the multi-thread runtime, tokio and the
//! workspace's std-only contract crate only). The contract it shares with `threads` and
//! `goroutines` is in schema/ and the architecture notes.

mod runtime;
mod workloads;

use workload::cli::{self, Command, Workload};
use workload::harness::Harness;
use workload::{Program, RuntimeFlag};

pub const PROGRAM: &str = "tokio-tasks";

static TOKIO: Program = Program {
    name: PROGRAM,
    runtime: "tokio",
    runtime_version: env!("TOKIO_RUNTIME_VERSION"),
    about: "Spawns tokio tasks (the multi-thread runtime)",
    channels: "tokio mpsc",
    stack_size: RuntimeFlag::Refuses(
        "a tokio task has no stack of its own: it is a future on the heap, polled on the worker threads' stacks",
    ),
    workers: RuntimeFlag::Takes("worker threads of the runtime, 1..1024 [one per CPU]"),
    gomaxprocs_refusal:
        "it sets the Go scheduler's processor count; tokio's worker threads are set with --workers",
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match cli::parse(&TOKIO, &args) {
        Ok(Command::Run(cfg)) => cfg,
        Ok(Command::Help) => {
            print!("{}", cli::usage(&TOKIO));
            return;
        }
        Ok(Command::Version) => {
            println!(
                "{PROGRAM} {} ({})",
                env!("CARGO_PKG_VERSION"),
                TOKIO.runtime_version
            );
            return;
        }
        Err(reason) => {
            eprintln!("{PROGRAM}: {reason}");
            eprint!("{}", cli::usage(&TOKIO));
            std::process::exit(2);
        }
    };
    let tasks = match runtime::TokioTasks::build(cfg.workers) {
        Ok(tasks) => tasks,
        Err(err) => {
            eprintln!("{PROGRAM}: the tokio runtime could not start: {err}");
            std::process::exit(1);
        }
    };
    let dry_run = cfg.dry_run;
    let mut harness = Harness::new(&TOKIO, cfg, tasks);
    harness.start();
    if dry_run {
        return;
    }
    let throughput = match harness.cfg.workload {
        Workload::Sleep => workloads::sleep(&mut harness),
        Workload::Hold => workloads::hold(&mut harness),
        Workload::Churn => workloads::churn(&mut harness),
        Workload::Pingpong => workloads::pingpong(&mut harness),
        Workload::Chain => workloads::chain(&mut harness),
    };
    std::process::exit(harness.finish(throughput));
}

#[cfg(test)]
mod tests {
    use super::*;
    use workload::cli::MAX_WORKERS;

    #[test]
    fn the_workers_usage_names_the_contracts_bound() {
        let RuntimeFlag::Takes(usage) = TOKIO.workers else {
            panic!("tokio-tasks takes --workers");
        };
        assert!(usage.contains(&format!("1..{MAX_WORKERS}")), "{usage}");
    }
}
