//! `processes`: the spawnscope workload on processes, one forked child per task (fork, waitpid
//! and pipes, Rust std only but for the libc calls os.rs declares, and the workspace's std-only
//! contract, workload-rs/). The contract it shares with `threads`, `goroutines` and `tokio-tasks`
//! is in schema/ and the architecture notes.
//!
//! What one task holds: its kernel task (task_struct, kernel stack, PID), its own mm (page
//! tables, a copy of the parent's memory map), and the pages it writes: one page of its stack
//! at least (os::write_own_stack_page), the rest shared with the parent until written. The
//! cgroup's charge counts a shared page once; RSS counts it in every process that maps it.

mod os;
mod serve;
mod spawn;
mod workloads;

use workload::cli::{self, Workload};
use workload::harness::Harness;
use workload::{Program, RuntimeFlag};

pub const PROGRAM: &str = "processes";

static PROCESSES: Program = Program {
    name: PROGRAM,
    runtime: "processes",
    runtime_version: env!("PROCESSES_RUSTC_VERSION"),
    about: "Forks processes (one per task, fork and pipes)",
    channels: "pipes",
    stack_size: RuntimeFlag::Refuses(
        "a forked process runs on its copy of the parent's main stack, whose limit is RLIMIT_STACK",
    ),
    workers: RuntimeFlag::Refuses(
        "it sets an async runtime's worker threads; here every task is its own process",
    ),
    gomaxprocs_refusal: "it sets the Go scheduler's processor count, which processes do not have",
    tokio_trace: RuntimeFlag::Refuses(
        "it records tokio's task hooks (the tokio workload's hooks build, tokio-tasks-hooks)",
    ),
};

fn main() {
    let Some(cfg) = cli::config_or_exit(&PROCESSES) else {
        return;
    };
    Harness::new(&PROCESSES, cfg, spawn::Processes::default()).run(|workload| match workload {
        Workload::Sleep => workloads::sleep,
        Workload::Hold => workloads::hold,
        Workload::Churn => workloads::churn,
        Workload::Pingpong => workloads::pingpong,
        Workload::Chain => workloads::chain,
        Workload::Serve => serve::serve,
    })
}
