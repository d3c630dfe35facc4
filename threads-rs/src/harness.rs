//! What every workload shares: the events on stdout, phases, progress, the memory guard, the peak
//! snapshot and the final `result`. The workloads themselves (workloads/) only spawn and wait.

use std::io::{self, PipeReader, PipeWriter, Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::thread::{self, Thread};
use std::time::Duration;

use crate::cli::{Config, Workload, PROGRAM};
use crate::json::{Obj, Value};
use crate::limits::{Failure, Limits, SpawnGuard};
use crate::sys;

pub const SCHEMA_VERSION: u64 = 1;
const PROGRESS_EVERY_NS: u64 = 100_000_000;

/// How a workload's work is summed up in the result: the unit and how many of it were done in
/// which phase (e.g. pingpong: hops during `steady`).
pub struct Throughput {
    pub unit: &'static str,
    pub count: u64,
    pub phase: &'static str,
}

pub struct Harness {
    pub cfg: Config,
    reserve: u64,
    stdout: io::Stdout,
    output_failed: bool,
    limits: Limits,
    guard: SpawnGuard,
    phases: Vec<(&'static str, u64)>,
    pub spawned: u64,
    last_progress_ns: u64,
    alive_max: u64,
    peak: Option<(u64, Obj)>,
    failure: Option<Failure>,
}

impl Harness {
    pub fn new(cfg: Config) -> Self {
        let limits = Limits::discover();
        let reserve = cfg.reserve.unwrap_or_else(|| limits.auto_reserve());
        let guard = SpawnGuard::new(reserve, &limits);
        Harness {
            cfg,
            reserve,
            stdout: io::stdout(),
            output_failed: false,
            limits,
            guard,
            phases: Vec::new(),
            spawned: 0,
            last_progress_ns: 0,
            alive_max: 0,
            peak: None,
            failure: None,
        }
    }

    /// Tasks the workload means to spawn.
    pub fn target(&self) -> u64 {
        self.cfg.workload.tasks(self.cfg.n)
    }

    fn emit(&mut self, event: Obj) {
        let mut line = event.to_line();
        line.push('\n');
        let mut out = self.stdout.lock();
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            self.output_failed = true;
        }
    }

    fn params(&self) -> Obj {
        let c = &self.cfg;
        let mut p = Obj::new().with("n", c.n);
        match c.workload {
            Workload::Sleep => p.put("sleep_ns", c.sleep_ns),
            Workload::Hold => p.put("hold_for_ns", c.hold_for_ns),
            Workload::Churn => p.put("batch", c.batch),
            Workload::Pingpong => p.put("rounds", c.rounds),
            Workload::Chain => {
                p.put("events", c.events);
                p.put("queue", c.queue);
                p.put("type", c.event_type.name());
                p.put("size", c.size);
            }
        }
        p.with("stack_size", c.stack_size)
            .with("gomaxprocs", Option::<u64>::None)
            .with("reserve_bytes", self.reserve)
    }

    pub fn start(&mut self) {
        let event = Obj::new()
            .with("event", "start")
            .with("schema", SCHEMA_VERSION)
            .with("t_ns", sys::monotonic_ns())
            .with("runtime", PROGRAM)
            .with("workload", self.cfg.workload.name())
            .with("pid", std::process::id())
            .with("program_version", env!("CARGO_PKG_VERSION"))
            .with("runtime_version", env!("THREADS_RUSTC_VERSION"))
            .with("params", self.params());
        self.emit(event);
    }

    /// Marks the start of phase `name` (`end` closes the last one).
    pub fn phase(&mut self, name: &'static str) {
        let t_ns = sys::monotonic_ns();
        self.phases.push((name, t_ns));
        self.emit(
            Obj::new()
                .with("event", "phase")
                .with("name", name)
                .with("t_ns", t_ns),
        );
    }

    /// Live tasks: threads of this process but the main one.
    fn alive(&self) -> u64 {
        sys::thread_count().saturating_sub(1)
    }

    /// A `progress` event if the last one is ~100 ms old.
    pub fn tick(&mut self) {
        let now = sys::monotonic_ns();
        if now < self.last_progress_ns + PROGRESS_EVERY_NS {
            return;
        }
        self.last_progress_ns = now;
        let alive = self.alive();
        self.alive_max = self.alive_max.max(alive);
        let event = Obj::new()
            .with("event", "progress")
            .with("t_ns", now)
            .with("spawned", self.spawned)
            .with("target", self.target())
            .with("alive", alive);
        self.emit(event);
    }

    /// Before each spawn: progress now and then, and the memory guard. false = stop spawning.
    pub fn may_spawn(&mut self) -> bool {
        if self.failure.is_some() {
            return false;
        }
        // Every 1024 spawns (a mask, not is_multiple_of: that needs Rust 1.87).
        if self.spawned & 1023 == 0 {
            self.tick();
        }
        match self.guard.check(self.spawned, &self.limits) {
            Ok(()) => true,
            Err(failure) => {
                self.stop(*failure);
                false
            }
        }
    }

    /// Spawns one thread with the configured stack size, counting it; a failure is recorded.
    pub fn spawn<'scope, F>(&mut self, scope: &'scope thread::Scope<'scope, '_>, task: F) -> bool
    where
        F: FnOnce() + Send + 'scope,
    {
        let mut builder = thread::Builder::new();
        if let Some(bytes) = self.cfg.stack_size {
            builder = builder.stack_size(bytes as usize);
        }
        match builder.spawn_scoped(scope, task) {
            Ok(_) => {
                self.spawned += 1;
                true
            }
            Err(err) => {
                self.spawn_failed(&err);
                false
            }
        }
    }

    /// Spawns one unscoped thread (churn joins its batches itself).
    pub fn spawn_detached<F>(&mut self, task: F) -> Option<thread::JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        let mut builder = thread::Builder::new();
        if let Some(bytes) = self.cfg.stack_size {
            builder = builder.stack_size(bytes as usize);
        }
        match builder.spawn(task) {
            Ok(handle) => {
                self.spawned += 1;
                Some(handle)
            }
            Err(err) => {
                self.spawn_failed(&err);
                None
            }
        }
    }

    fn spawn_failed(&mut self, err: &io::Error) {
        let errno = err.raw_os_error().unwrap_or(0);
        let failure = Failure::from_errno(errno, err.to_string(), &self.limits, self.reserve);
        self.stop(failure);
    }

    fn stop(&mut self, failure: Failure) {
        eprintln!(
            "{PROGRAM}: spawning stopped after {} of {} tasks: {} ({}: {})",
            self.spawned,
            self.target(),
            failure.message,
            failure.limit,
            failure.detail
        );
        self.failure = Some(failure);
    }

    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Snapshot of the moment most tasks are alive: /proc/self/status and the live count.
    pub fn snapshot_peak(&mut self) -> (u64, Obj) {
        let status = sys::status();
        let alive = self.alive();
        self.alive_max = self.alive_max.max(alive);
        self.peak = Some((alive, status.clone()));
        (alive, status)
    }

    /// hold: the `peak` event, with the snapshot just taken.
    pub fn emit_peak(&mut self) {
        let (alive, status) = self.snapshot_peak();
        let event = Obj::new()
            .with("event", "peak")
            .with("t_ns", sys::monotonic_ns())
            .with("alive", alive)
            .with("expected", self.spawned)
            .with("status", status);
        self.emit(event);
    }

    fn phase_span(&self, name: &str) -> Option<u64> {
        let i = self.phases.iter().position(|(n, _)| *n == name)?;
        let next = self.phases.get(i + 1)?;
        Some(next.1 - self.phases[i].1)
    }

    fn runtime_stats(&self) -> Obj {
        let (bytes, source) = match (self.cfg.stack_size, std::env::var("RUST_MIN_STACK").ok()) {
            (Some(bytes), _) => (bytes, "flag"),
            (None, Some(text)) => (text.trim().parse().unwrap_or(2 << 20), "RUST_MIN_STACK"),
            (None, None) => (2 << 20, "default"),
        };
        Obj::new()
            .with("stack_size_bytes", bytes)
            .with("stack_size_source", source)
    }

    /// Emits `result` and returns the process exit code.
    pub fn finish(mut self, throughput: Option<Throughput>) -> i32 {
        let phases: Vec<Value> = self
            .phases
            .windows(2)
            .map(|w| {
                Obj::new()
                    .with("name", w[0].0)
                    .with("start_ns", w[0].1)
                    .with("end_ns", w[1].1)
                    .with("dur_ns", w[1].1 - w[0].1)
                    .into()
            })
            .collect();
        let spawn_phase = if self.cfg.workload == Workload::Churn {
            "churn"
        } else {
            "spawn"
        };
        let per_task = self
            .phase_span(spawn_phase)
            .filter(|_| self.spawned > 0)
            .map(|ns| ns as f64 / self.spawned as f64);
        let throughput = throughput.and_then(|t| {
            let ns = self.phase_span(t.phase).filter(|&ns| ns > 0)?;
            Some(
                Obj::new()
                    .with("unit", t.unit)
                    .with("count", t.count)
                    .with("value", t.count as f64 * 1e9 / ns as f64),
            )
        });
        let (alive_at_peak, status) = self.peak.take().unwrap_or_else(|| (0, sys::status()));
        let failure = self.failure.as_ref().map(Failure::to_obj);
        let event = Obj::new()
            .with("event", "result")
            .with("schema", SCHEMA_VERSION)
            .with("t_ns", sys::monotonic_ns())
            .with("runtime", PROGRAM)
            .with("workload", self.cfg.workload.name())
            .with("ok", failure.is_none())
            .with("params", self.params())
            .with("target", self.target())
            .with("spawned", self.spawned)
            .with("alive_at_peak", alive_at_peak)
            .with("alive_max", self.alive_max)
            .with("failure", failure)
            .with("phases", Value::Arr(phases))
            .with("spawn_ns_per_task", per_task)
            .with("throughput", throughput)
            .with("rusage", sys::rusage())
            .with("status_at_peak", status)
            .with("runtime_stats", self.runtime_stats());
        self.emit(event);
        match (self.output_failed, self.failure.is_some()) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 0,
        }
    }
}

/// Counts arrivals and wakes one waiting thread (main) when the target is reached, so main sleeps
/// instead of polling while thousands of tasks start or finish.
pub struct Latch {
    count: AtomicU64,
    target: AtomicU64,
    waiter: Thread,
}

impl Latch {
    /// A latch that the calling thread will wait on.
    pub fn new(target: u64) -> Self {
        Latch {
            count: 0.into(),
            target: target.into(),
            waiter: thread::current(),
        }
    }

    pub fn arrive(&self) {
        // SeqCst: `wait` stores the target then reads the count, this adds then reads the target;
        // one of the two must see the other's write, so the last arrival is never missed.
        let count = self.count.fetch_add(1, SeqCst) + 1;
        if count == self.target.load(SeqCst) {
            self.waiter.unpark();
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(SeqCst)
    }

    /// Waits until `target` arrivals (lowered from the initial target when spawning stopped
    /// early), calling `tick` about every 100 ms.
    pub fn wait(&self, target: u64, mut tick: impl FnMut()) {
        self.target.store(target, SeqCst);
        while self.count() < target {
            thread::park_timeout(Duration::from_millis(100));
            tick();
        }
    }
}

/// Where tasks wait until main releases them all at once: a pipe no one writes to, each task
/// blocked reading it, released when main closes the write end (its `Opener`): every reader then
/// sees end of file.
///
/// Not a futex. An `RwLock` held for writing was the gate until the slow runs were explained
/// (README, "The slow runs"): since Linux 6.16 a process hashes its private futexes into a table of
/// its own, 16 slots on 2 CPUs, and a wake walks every waiter in its slot under the slot's lock.
/// N tasks parked on one futex fill one slot; std's thread start locks a global Mutex (the
/// stack-overflow handler's thread list), and in the runs where that Mutex hashed to the gate's
/// slot (1 in 16, by address layout) each contended unlock walked every task parked so far:
/// spawning turned quadratic. A pipe's readers wait on the pipe's own queue, outside the hash.
pub struct Gate {
    waiting: PipeReader,
}

/// The write end of a [`Gate`]: dropping it (or `open`) releases every task.
pub struct Opener {
    _write_end: PipeWriter,
}

impl Opener {
    pub fn open(self) {}
}

impl Gate {
    /// A closed gate and what opens it. Before any task exists, so a process without a file
    /// descriptor left for the pipe just stops (exit 1, as when its output fails).
    pub fn closed() -> (Self, Opener) {
        match io::pipe() {
            Ok((waiting, write_end)) => (
                Gate { waiting },
                Opener {
                    _write_end: write_end,
                },
            ),
            Err(err) => {
                eprintln!("{PROGRAM}: no pipe for the release gate: {err}");
                std::process::exit(1);
            }
        }
    }

    /// Blocks until the gate opens.
    pub fn wait(&self) {
        let mut byte = [0u8; 1];
        // Ok(0) is end of file: open (nothing is ever written, so no Ok(1)). A signal interrupting
        // the read waits again; any other error cannot be waited out.
        while let Err(err) = (&self.waiting).read(&mut byte) {
            if err.kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }
}
