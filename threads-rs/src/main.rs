//! `threads`: the spawnscope workload on OS threads (Rust std::thread, no crates but the
//! workspace's std-only contract, workload-rs/). The contract it shares with `goroutines` and
//! `tokio-tasks` is in schema/ and the architecture notes.

mod gate;
mod serve;
mod spawn;
mod workloads;

use workload::cli::{self, Workload};
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
    tokio_trace: RuntimeFlag::Refuses(
        "it records tokio's task hooks (the tokio workload's hooks build, tokio-tasks-hooks)",
    ),
};

fn main() {
    let Some(cfg) = cli::config_or_exit(&THREADS) else {
        return;
    };
    Harness::new(&THREADS, cfg, spawn::OsThreads).run(|workload| match workload {
        Workload::Sleep => workloads::sleep,
        Workload::Hold => workloads::hold,
        Workload::Churn => workloads::churn,
        Workload::Pingpong => workloads::pingpong,
        Workload::Chain => workloads::chain,
        Workload::Serve => serve::serve,
    })
}
