//! `tokio-tasks`: the spawnscope workload on tokio tasks (the multi-thread runtime, tokio and the
//! workspace's std-only contract crate only). The contract it shares with `threads` and
//! `goroutines` is in schema/ and the architecture notes.

#[cfg(all(tokio_unstable, feature = "hooks"))]
mod hooks;
mod runtime;
mod serve;
mod workloads;

use workload::cli::{self, Workload};
use workload::harness::Harness;
use workload::{Program, RuntimeFlag};

#[cfg(not(all(tokio_unstable, feature = "hooks")))]
pub const PROGRAM: &str = "tokio-tasks";
/// The hooks build (scripts/build-tokio-hooks.sh): --tokio-trace taken.
#[cfg(all(tokio_unstable, feature = "hooks"))]
pub const PROGRAM: &str = "tokio-tasks-hooks";

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
    #[cfg(not(all(tokio_unstable, feature = "hooks")))]
    tokio_trace: RuntimeFlag::Refuses(
        "tokio's task hooks are the hooks build's (tokio-tasks-hooks: scripts/build-tokio-hooks.sh)",
    ),
    #[cfg(all(tokio_unstable, feature = "hooks"))]
    tokio_trace: RuntimeFlag::Takes(
        "record tokio's task hooks (spawn, poll, terminate) per thread to FILE\n                      and tokio's metrics to FILE's name with the extension .json",
    ),
};

fn main() {
    let Some(cfg) = cli::config_or_exit(&TOKIO) else {
        return;
    };
    #[cfg(all(tokio_unstable, feature = "hooks"))]
    let trace = {
        hooks::mark_main();
        match cfg
            .tokio_trace
            .as_deref()
            .map(|p| hooks::open(p, cfg.dry_run))
        {
            Some(Err(why)) => cli::exit_bad_usage(&TOKIO, &why),
            Some(Ok(trace)) => trace,
            None => None,
        }
    };
    let tasks = match runtime::TokioTasks::build(
        cfg.workers,
        cfg.workload == Workload::Serve,
        #[cfg(all(tokio_unstable, feature = "hooks"))]
        trace,
    ) {
        Ok(tasks) => tasks,
        Err(err) => {
            eprintln!("{PROGRAM}: the tokio runtime could not start: {err}");
            std::process::exit(1);
        }
    };
    Harness::new(&TOKIO, cfg, tasks).run(|workload| match workload {
        Workload::Sleep => workloads::sleep,
        Workload::Hold => workloads::hold,
        Workload::Churn => workloads::churn,
        Workload::Pingpong => workloads::pingpong,
        Workload::Chain => workloads::chain,
        Workload::Serve => serve::serve,
    })
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
