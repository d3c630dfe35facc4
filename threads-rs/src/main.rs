//! `threads`: the spawnscope workload on OS threads (Rust std::thread, no crates but the
//! workspace's std-only contract, workload-rs/). The contract it shares with `goroutines` and
//! `tokio-tasks` is in schema/ and the architecture notes.

mod gate;
mod spawn;
mod workloads;

use workload::cli::{self, Command, Workload};
use workload::harness::Harness;
use workload::{Program, RuntimeFlag};

pub const PROGRAM: &str = "threads";

static THREADS: Program = Program {
    name: PROGRAM,
    runtime: "threads",
    runtime_version: env!("THREADS_RUSTC_VERSION"),
    about: "Spawns OS threads (Rust std::thread)",
    channels: "std mpsc",
    stack_size: RuntimeFlag::Takes(
        "stack of each thread, at least the platform minimum\n                      [Rust's default: RUST_MIN_STACK or 2 MiB]",
    ),
    workers: RuntimeFlag::Refuses(
        "it sets an async runtime's worker threads; here every task is its own OS thread",
    ),
    gomaxprocs_refusal:
        "it sets the Go scheduler's processor count, which OS threads do not have",
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match cli::parse(&THREADS, &args) {
        Ok(Command::Run(cfg)) => cfg,
        Ok(Command::Help) => {
            print!("{}", cli::usage(&THREADS));
            return;
        }
        Ok(Command::Version) => {
            println!(
                "{PROGRAM} {} ({})",
                env!("CARGO_PKG_VERSION"),
                THREADS.runtime_version
            );
            return;
        }
        Err(reason) => {
            eprintln!("{PROGRAM}: {reason}");
            eprint!("{}", cli::usage(&THREADS));
            std::process::exit(2);
        }
    };
    let dry_run = cfg.dry_run;
    let mut harness = Harness::new(&THREADS, cfg, spawn::OsThreads);
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
