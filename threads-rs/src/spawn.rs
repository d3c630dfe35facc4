//! How OS threads are spawned and counted: std::thread with the configured stack size, each
//! spawn counted by the harness and a failed one recorded as data.

use std::thread;

use workload::cli::Config;
use workload::harness::{Harness, Tasks};
use workload::json::Obj;
use workload::sys;

/// The runtime of the `threads` binary: the kernel's threads.
pub struct OsThreads;

impl Tasks for OsThreads {
    /// Threads of this process but the main one.
    fn alive(&self) -> u64 {
        sys::thread_count().saturating_sub(1)
    }

    /// The stack size each thread got, and where it came from.
    fn stats(&self, cfg: &Config) -> Obj {
        let (bytes, source) = match (cfg.stack_size, std::env::var("RUST_MIN_STACK").ok()) {
            (Some(bytes), _) => (bytes, "flag"),
            (None, Some(text)) => (text.trim().parse().unwrap_or(2 << 20), "RUST_MIN_STACK"),
            (None, None) => (2 << 20, "default"),
        };
        Obj::new()
            .with("stack_size_bytes", bytes)
            .with("stack_size_source", source)
    }
}

pub type ThreadHarness = Harness<OsThreads>;

fn builder(cfg: &Config) -> thread::Builder {
    let builder = thread::Builder::new();
    match cfg.stack_size {
        Some(bytes) => builder.stack_size(bytes as usize),
        None => builder,
    }
}

/// Spawns one scoped thread, counting it; false (and the failure recorded) when it failed.
pub fn spawn<'scope, F>(
    h: &mut ThreadHarness,
    scope: &'scope thread::Scope<'scope, '_>,
    task: F,
) -> bool
where
    F: FnOnce() + Send + 'scope,
{
    match builder(&h.cfg).spawn_scoped(scope, task) {
        Ok(_) => {
            h.spawned += 1;
            true
        }
        Err(err) => {
            h.spawn_failed(&err);
            false
        }
    }
}

/// Spawns one unscoped thread (churn joins its batches itself).
pub fn spawn_detached<F>(h: &mut ThreadHarness, task: F) -> Option<thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    match builder(&h.cfg).spawn(task) {
        Ok(handle) => {
            h.spawned += 1;
            Some(handle)
        }
        Err(err) => {
            h.spawn_failed(&err);
            None
        }
    }
}
