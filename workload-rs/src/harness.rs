//! What every workload shares: the events on stdout, phases, progress, the memory guard, the peak
//! snapshot and the final `result`; and serve's main loop (its tasks are connections). The
//! workloads themselves (each binary's workloads.rs and serve.rs) only spawn and wait; how a
//! runtime counts its tasks is its [`Tasks`].

use std::io::{self, BufRead, Write};
use std::net::TcpListener;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc::{Receiver, Sender};
use std::thread::{self, Thread};
use std::time::Duration;

use crate::cli::{self, Config, Workload};
use crate::json::{Obj, Value};
use crate::limits::{Failure, Limits, SpawnGuard};
use crate::serve::{self, Arrival, Service};
use crate::{sys, Program};

pub const SCHEMA_VERSION: u64 = 1;
const PROGRESS_EVERY_NS: u64 = 100_000_000;

/// How a workload's work is summed up in the result: the unit and how many of it were done in
/// which phase (e.g. pingpong: hops during `steady`).
pub struct Throughput {
    pub unit: &'static str,
    pub count: u64,
    pub phase: &'static str,
}

/// What the harness asks of the runtime whose tasks it reports on.
pub trait Tasks {
    /// Tasks alive now, as the runtime itself counts them.
    fn alive(&self) -> u64;
    /// The result's `runtime_stats`: the one object whose keys differ between runtimes.
    fn stats(&self, cfg: &Config) -> Obj;
    /// The result's `rusage`: this process's own, unless the runtime's tasks are processes of
    /// their own (then theirs too).
    fn rusage(&self) -> Obj {
        sys::rusage()
    }
    /// After `result`, before the exit: what the runtime still has to write (the tokio hooks
    /// build's --tokio-trace). Err: why it could not (exit 1, output failed).
    fn before_exit(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// One workload of a runtime: spawns and waits through the harness, and says what it did.
pub type WorkloadFn<T> = fn(&mut Harness<T>) -> Option<Throughput>;

pub struct Harness<T: Tasks> {
    pub program: &'static Program,
    pub cfg: Config,
    /// The runtime: how it counts its tasks, and what else it reports.
    pub tasks: T,
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
    /// serve: its listeners, bound before `start`, until `listen` hands them over.
    listeners: Vec<TcpListener>,
    /// serve: what its connections count into, from `listen` on.
    service: Option<&'static Service>,
    /// serve: connections still open when the drain gave up.
    open_at_end: u64,
    /// serve: good requests answered by the release (the end of `load`).
    requests_in_load: u64,
}

impl<T: Tasks> Harness<T> {
    pub fn new(program: &'static Program, cfg: Config, tasks: T) -> Self {
        let limits = Limits::discover();
        let reserve = cfg.reserve.unwrap_or_else(|| limits.auto_reserve());
        let guard = SpawnGuard::new(reserve, &limits);
        Harness {
            program,
            cfg,
            tasks,
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
            listeners: Vec::new(),
            service: None,
            open_at_end: 0,
            requests_in_load: 0,
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
            Workload::Serve => {
                p.put("port", u64::from(c.port));
                p.put("addrs", c.addrs);
                p.put("backlog", c.backlog);
                p.put("serve_for_ns", c.serve_for_ns);
                let work = Obj::new()
                    .with("spin_ns", c.work.spin_ns)
                    .with("sleep_ns", c.work.sleep_ns)
                    .with("body_bytes", c.work.body_bytes);
                p.put("work", work);
            }
        }
        p.with("stack_size", c.stack_size)
            .with("gomaxprocs", Option::<u64>::None)
            .with("workers", c.workers)
            .with("reserve_bytes", self.reserve)
    }

    pub fn start(&mut self) {
        let event = Obj::new()
            .with("event", "start")
            .with("schema", SCHEMA_VERSION)
            .with("t_ns", sys::monotonic_ns())
            .with("runtime", self.program.runtime)
            .with("workload", self.cfg.workload.name())
            .with("pid", std::process::id())
            .with("program_version", env!("CARGO_PKG_VERSION"))
            .with("runtime_version", self.program.runtime_version)
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

    fn alive(&self) -> u64 {
        match self.service {
            // serve's tasks are its connections (its accept loops are tasks too).
            Some(service) => service.open(),
            None => self.tasks.alive(),
        }
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
        let mut event = Obj::new()
            .with("event", "progress")
            .with("t_ns", now)
            .with("spawned", self.spawned)
            .with("target", self.target())
            .with("alive", alive);
        if let Some(service) = self.service {
            event.put("requests", service.requests());
        }
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

    /// A spawn call failed with `err`: spawning stops, diagnosed while the limit is in force.
    pub fn spawn_failed(&mut self, err: &io::Error) {
        let errno = err.raw_os_error().unwrap_or(0);
        let failure = Failure::from_errno(errno, err.to_string(), &self.limits, self.reserve);
        self.stop(failure);
    }

    fn stop(&mut self, failure: Failure) {
        eprintln!(
            "{}: spawning stopped after {} of {} tasks: {} ({}: {})",
            self.program.name,
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

    /// The `peak` event, with the snapshot just taken: hold's when every task it spawned is alive,
    /// serve's when --n connections are open at once (and serving goes on).
    pub fn emit_peak(&mut self) {
        let (alive, status) = self.snapshot_peak();
        let expected = match self.cfg.workload {
            Workload::Serve => self.target(),
            _ => self.spawned,
        };
        let event = Obj::new()
            .with("event", "peak")
            .with("t_ns", sys::monotonic_ns())
            .with("alive", alive)
            .with("expected", expected)
            .with("status", status);
        self.emit(event);
    }

    fn phase_span(&self, name: &str) -> Option<u64> {
        let i = self.phases.iter().position(|(n, _)| *n == name)?;
        let next = self.phases.get(i + 1)?;
        Some(next.1 - self.phases[i].1)
    }

    /// hold: waits for --hold-for, or else for a line or EOF on stdin.
    pub fn wait_for_release(&self) {
        match self.cfg.hold_for_ns {
            Some(ns) => thread::sleep(Duration::from_nanos(ns)),
            None => {
                eprintln!(
                    "{}: {} tasks alive; a line or EOF on stdin releases them",
                    self.program.name, self.spawned
                );
                let mut line = String::new();
                let _ = io::stdin().lock().read_line(&mut line);
            }
        }
    }

    /// serve: phase `listen` and the `listening` event; hands over the listeners (bound before
    /// `start`) and the service the connections share.
    pub fn listen(&mut self) -> (Vec<TcpListener>, &'static Service) {
        let service: &'static Service = Box::leak(Box::new(Service::new(&self.cfg)));
        self.listen_with(service)
    }

    /// serve: `listen`, with the service in memory shared with the processes forked from now on
    /// (`sys::share`), so that what they count main reads. Exits 1 when there is no such memory.
    pub fn listen_shared(&mut self) -> (Vec<TcpListener>, &'static Service) {
        let Some(service) = sys::share(Service::new(&self.cfg)) else {
            eprintln!("{}: no shared memory for serve's counts", self.program.name);
            std::process::exit(1);
        };
        self.listen_with(service)
    }

    fn listen_with(&mut self, service: &'static Service) -> (Vec<TcpListener>, &'static Service) {
        self.service = Some(service);
        self.phase("listen");
        let addrs: Vec<String> = self
            .listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.to_string())
            .collect();
        let event = Obj::new()
            .with("event", "listening")
            .with("t_ns", sys::monotonic_ns())
            .with(
                "addrs",
                Value::Arr(addrs.iter().map(|a| a.as_str().into()).collect()),
            );
        self.emit(event);
        // Progress every ~100 ms from now on, the first one 100 ms after listening.
        self.last_progress_ns = sys::monotonic_ns();
        if self.cfg.serve_for_ns.is_none() {
            eprintln!(
                "{}: serving on {}; a line or EOF on stdin drains",
                self.program.name,
                addrs.join(", ")
            );
        }
        (std::mem::take(&mut self.listeners), service)
    }

    /// serve, after `listen`, to phase `end`: main takes every connection the accept loops hand
    /// over (`arrivals`; `to_main` is their sender) and starts its task with `start` (false: it did
    /// not start) once the memory guard allows, until release (a line or EOF on stdin, or
    /// --serve-for). Then `stop_accepting` closes the listeners and the clients have up to
    /// DRAIN_FOR_NS to close their connections. A connection refused by the guard, or whose task
    /// did not start, stops accepting; the open ones are served until release.
    pub fn serve<S: Send + 'static>(
        &mut self,
        to_main: Sender<Arrival<S>>,
        arrivals: Receiver<Arrival<S>>,
        mut start: impl FnMut(&mut Self, S) -> bool,
        stop_accepting: impl FnOnce(),
    ) -> Option<Throughput> {
        let service = self.service?;
        let mut stop_accepting = Some(stop_accepting);
        let mut stop = move || {
            if let Some(stop) = stop_accepting.take() {
                stop();
            }
        };
        // An accept loop that could not start has stopped spawning already.
        let mut accepting = !self.failed();
        if !accepting {
            stop();
        }
        let deadline = self.cfg.serve_for_ns.map(|ns| sys::monotonic_ns() + ns);
        let mut released = false;
        if deadline.is_none() {
            let to_main = to_main.clone();
            let watcher = thread::Builder::new().spawn(move || {
                let mut line = String::new();
                let _ = io::stdin().lock().read_line(&mut line);
                let _ = to_main.send(Arrival::Released);
            });
            // Without a thread waiting on stdin nothing could release the run: it drains at once.
            if let Err(err) = watcher {
                self.spawn_failed(&err);
                released = true;
            }
        }
        while !released {
            let now = sys::monotonic_ns();
            let wait_ns = match deadline {
                Some(at) if now >= at => break,
                Some(at) => (at - now).min(PROGRESS_EVERY_NS),
                None => PROGRESS_EVERY_NS,
            };
            // Main keeps a sender: the wait ends with an arrival or a timeout, never hung up.
            match arrivals.recv_timeout(Duration::from_nanos(wait_ns)) {
                Ok(Arrival::Released) => released = true,
                Ok(Arrival::Connection(conn)) => {
                    self.mark_load();
                    if accepting && !self.start_connection(service, conn, &mut start) {
                        accepting = false;
                        stop();
                    }
                }
                Err(_) => {}
            }
            self.tick();
        }
        self.mark_load();
        // Per-request figures are of the load phase: what the drain answers is not in it.
        self.requests_in_load = service.requests();
        self.phase("drain");
        stop();
        // Closes what the accept loops took before their listener closed; their sends now fail.
        drop(arrivals);
        drop(to_main);
        let give_up = sys::monotonic_ns() + serve::DRAIN_FOR_NS;
        while service.open() > 0 {
            let now = sys::monotonic_ns();
            if now >= give_up {
                break;
            }
            // The last connection to close wakes main.
            thread::park_timeout(Duration::from_nanos((give_up - now).min(PROGRESS_EVERY_NS)));
            self.tick();
        }
        self.open_at_end = service.open();
        self.phase("end");
        Some(Throughput {
            unit: "requests/s",
            count: self.requests_in_load,
            phase: "load",
        })
    }

    /// serve, after `listen`, to phase `end`, where the tasks take their connections themselves
    /// (a prefork server's processes, started before this is called, `Service::took`): main
    /// does not see a connection arrive, so it looks at the shared counts every `look_every`:
    /// phase `load` from the first connection taken, `peak` the first time --n are open at once,
    /// progress, release (a line or EOF on stdin, or --serve-for), then `stop_accepting` and the
    /// drain, as `serve`. The tasks' connections are the result's `spawned`. Where spawning
    /// stopped before --n tasks (`capacity` of them started), accepting stops once each has
    /// taken a connection, as `serve` stops at the first connection no task can take.
    pub fn serve_watched(
        &mut self,
        look_every: Duration,
        capacity: u64,
        stop_accepting: impl FnOnce(),
    ) -> Option<Throughput> {
        let service = self.service?;
        let mut stop_accepting = Some(stop_accepting);
        let mut stop = move || {
            if let Some(stop) = stop_accepting.take() {
                stop();
            }
        };
        let deadline = self.cfg.serve_for_ns.map(|ns| sys::monotonic_ns() + ns);
        // Main keeps a sender: the wait ends with the release or a timeout, never hung up.
        let (to_main, stdin_read) = std::sync::mpsc::channel::<()>();
        let mut released = false;
        if deadline.is_none() {
            let to_main = to_main.clone();
            let watcher = thread::Builder::new().spawn(move || {
                let mut line = String::new();
                let _ = io::stdin().lock().read_line(&mut line);
                let _ = to_main.send(());
            });
            // Without a thread waiting on stdin nothing could release the run: it drains at once.
            if let Err(err) = watcher {
                self.spawn_failed(&err);
                released = true;
            }
        }
        let look = |h: &mut Self| {
            h.spawned = service.accepted();
            if h.spawned > 0 {
                h.mark_load();
            }
            h.alive_max = h.alive_max.max(service.max_open());
            if service.open() >= h.target() && h.peak.is_none() {
                h.emit_peak();
            }
            h.tick();
        };
        while !released {
            let now = sys::monotonic_ns();
            let wait = match deadline {
                Some(at) if now >= at => break,
                Some(at) => Duration::from_nanos(at - now).min(look_every),
                None => look_every,
            };
            released = stdin_read.recv_timeout(wait).is_ok();
            look(self);
            if self.failed() && service.accepted() >= capacity {
                stop();
            }
        }
        drop(to_main);
        look(self);
        self.mark_load();
        self.requests_in_load = service.requests();
        self.phase("drain");
        stop();
        let give_up = sys::monotonic_ns() + serve::DRAIN_FOR_NS;
        while service.open() > 0 && sys::monotonic_ns() < give_up {
            thread::sleep(look_every);
            self.tick();
        }
        look(self);
        self.open_at_end = service.open();
        self.phase("end");
        Some(Throughput {
            unit: "requests/s",
            count: self.requests_in_load,
            phase: "load",
        })
    }

    /// serve: phase `load` from the first connection (at release when none came).
    fn mark_load(&mut self) {
        if self.phases.last().map(|(name, _)| *name) == Some("listen") {
            self.phase("load");
        }
    }

    /// serve: starts one connection's task once the guard allows, counting it open first (the
    /// task's end uncounts it); `peak` the first time --n are open at once. false: spawning
    /// stopped, and the connection is closed.
    fn start_connection<S>(
        &mut self,
        service: &Service,
        conn: S,
        start: &mut impl FnMut(&mut Self, S) -> bool,
    ) -> bool {
        if !self.may_spawn() {
            return false;
        }
        let open = service.opened();
        if !start(self, conn) {
            service.closed();
            return false;
        }
        self.alive_max = self.alive_max.max(open);
        if open >= self.target() && self.peak.is_none() {
            self.emit_peak();
        }
        true
    }

    /// The whole run: `start`, then (unless --dry-run) the workload `pick` gives for the
    /// configured one, then `result`; exits with the contract's code.
    pub fn run(mut self, pick: impl FnOnce(Workload) -> WorkloadFn<T>) -> ! {
        if self.cfg.workload == Workload::Serve {
            // Before `start`: an address that cannot be listened on is bad usage, not a run.
            match serve::bind(&self.cfg) {
                Ok(listeners) => self.listeners = listeners,
                Err(reason) => cli::exit_bad_usage(self.program, &reason),
            }
        }
        self.start();
        if self.cfg.dry_run {
            std::process::exit(0);
        }
        if self.cfg.wait_to_start {
            wait_at_start_gate(&mut io::stdin().lock());
        }
        let throughput = pick(self.cfg.workload)(&mut self);
        std::process::exit(self.finish(throughput));
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
        let serve = self.service.map(|s| {
            s.to_obj(
                self.spawned,
                self.alive_max,
                self.open_at_end,
                self.requests_in_load,
            )
        });
        let event = Obj::new()
            .with("event", "result")
            .with("schema", SCHEMA_VERSION)
            .with("t_ns", sys::monotonic_ns())
            .with("runtime", self.program.runtime)
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
            .with("serve", serve)
            .with("rusage", self.tasks.rusage())
            .with("status_at_peak", status)
            .with("runtime_stats", self.tasks.stats(&self.cfg));
        self.emit(event);
        if let Err(why) = self.tasks.before_exit() {
            eprintln!("{}: {why}", self.program.name);
            self.output_failed = true;
        }
        match (self.output_failed, self.failure.is_some()) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 0,
        }
    }
}

/// The start gate (--wait-to-start): one line, or EOF, from `input` (stdin) lets the run go on.
/// Before any phase or spawn, so that the reader's base holds nothing of the run. std's stdin is
/// buffered once for the process: hold's and serve's release, read from it later, is the next line
/// even when both came in one read.
pub fn wait_at_start_gate(input: &mut impl BufRead) {
    let mut line = String::new();
    let _ = input.read_line(&mut line);
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
