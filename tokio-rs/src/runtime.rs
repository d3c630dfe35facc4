//! The tokio runtime the tasks run on, how it counts them, and how a task is spawned and counted.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;
use workload::cli::Config;
use workload::harness::{Harness, Tasks};
use workload::json::Obj;

/// The multi-thread runtime, and the count of the OS threads it started.
pub struct TokioTasks {
    pub runtime: Runtime,
    threads_started: Arc<AtomicU64>,
    /// The hooks build's --tokio-trace, written at the exit.
    #[cfg(all(tokio_unstable, feature = "hooks"))]
    trace: Option<crate::hooks::Trace>,
}

impl TokioTasks {
    /// The runtime with `workers` worker threads (None: tokio's default, one per CPU) and timers;
    /// with `net`, the I/O driver too (serve's sockets). Only serve has it: with it, an idle
    /// worker parks in epoll_wait and is woken through an eventfd rather than a futex, which the
    /// other workloads would then measure.
    pub fn build(
        workers: Option<u64>,
        net: bool,
        #[cfg(all(tokio_unstable, feature = "hooks"))] trace: Option<crate::hooks::Trace>,
    ) -> io::Result<Self> {
        let threads_started = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&threads_started);
        let mut builder = Builder::new_multi_thread();
        builder.enable_time().on_thread_start(move || {
            counter.fetch_add(1, Relaxed);
        });
        if net {
            builder.enable_io();
        }
        if let Some(n) = workers {
            builder.worker_threads(n as usize);
        }
        #[cfg(all(tokio_unstable, feature = "hooks"))]
        if trace.is_some() {
            crate::hooks::install(&mut builder, Arc::clone(&threads_started));
        }
        Ok(TokioTasks {
            runtime: builder.build()?,
            threads_started,
            #[cfg(all(tokio_unstable, feature = "hooks"))]
            trace,
        })
    }
}

impl Tasks for TokioTasks {
    /// The runtime's own count: tasks spawned and not yet completed.
    fn alive(&self) -> u64 {
        self.runtime.metrics().num_alive_tasks() as u64
    }

    /// Workers, and the OS threads of the process counted as Go's `threadcreate` does (main
    /// included): what the probes' "threads created" check compares with.
    fn stats(&self, _cfg: &Config) -> Obj {
        Obj::new()
            .with("workers", self.runtime.metrics().num_workers())
            .with("os_threads_created", self.threads_started.load(Relaxed) + 1)
            .with("tokio_version", env!("TOKIO_VERSION"))
    }

    /// The hooks build: the runtime shut down and its task events written.
    #[cfg(all(tokio_unstable, feature = "hooks"))]
    fn before_exit(&mut self) -> Result<(), String> {
        let Some(trace) = self.trace.take() else {
            return Ok(());
        };
        // A runtime with no threads in its place: the workers' is shut down, joined.
        let idle = Builder::new_current_thread()
            .build()
            .map_err(|e| format!("--tokio-trace: {e}"))?;
        crate::hooks::write(trace, std::mem::replace(&mut self.runtime, idle))
    }
}

pub type TokioHarness = Harness<TokioTasks>;

/// Spawns one task on the runtime, counting it. Spawning a task cannot fail short of an
/// allocation failure, which aborts: the harness's memory guard stops spawning before that.
pub fn spawn<F>(h: &mut TokioHarness, task: F) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    h.spawned += 1;
    h.tasks.runtime.spawn(task)
}
