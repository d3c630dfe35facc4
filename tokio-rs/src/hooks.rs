//! The hooks build's `--tokio-trace FILE` (compiled only with `--cfg tokio_unstable` and the
//! `hooks` feature: scripts/build-tokio-hooks.sh; the default `tokio-tasks` has none of this).
//! tokio's task hooks record, per thread, into a buffer of that thread's own (no lock on the hot
//! path): each task's spawn, each poll's begin (with tokio's schedule latency: scheduled → this
//! poll) and end, and its termination, on CLOCK_MONOTONIC. A worker hands its buffer over when it
//! stops (`on_thread_stop`), main at the exit, after the runtime is shut down (every worker
//! joined, so every hook has run). Then FILE gets the records, laid out as
//! schema/tokio-sched-record.tsv says, and FILE with the extension `json` the threads, the counts
//! and tokio's RuntimeMetrics per worker.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime, TaskMeta};
use workload::json::{Obj, Value};

/// The file's first bytes: the magic, then the format version and the record size (u32 each).
const MAGIC: &[u8; 8] = b"SPTOKIO1";
const FORMAT_VERSION: u32 = 1;
const RECORD_BYTES: usize = 32;
/// Records a thread's buffer holds before it first grows (2 MiB).
const PREALLOCATED: usize = 1 << 16;
/// The most records a thread keeps (256 MiB of them): pingpong's default 10,000 rounds at
/// --n 10,000 would poll 200 million times. Those past it are counted by kind, not kept.
const KEPT_PER_THREAD: usize = 1 << 23;
/// How long the exit waits for the workers to stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// The kinds of schema/tokio-sched-record.tsv.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Kind {
    Spawn = 0,
    Terminate = 1,
    PollBegin = 2,
    PollEnd = 3,
}

/// One hook's event, as kept in memory (the thread is its buffer's).
#[derive(Clone, Copy)]
struct Event {
    ts_ns: u64,
    task: u64,
    /// tokio's schedule latency (poll begin and end), u64::MAX: none.
    latency_ns: u64,
    kind: Kind,
}

/// A thread's events, and the thread.
struct Buffer {
    tid: u32,
    thread: ThreadId,
    events: Vec<Event>,
    /// Events past KEPT_PER_THREAD, by kind.
    dropped: [u64; 4],
}

thread_local! {
    static LOCAL: RefCell<Option<Buffer>> = const { RefCell::new(None) };
}

/// The buffers of threads that stopped (and main's, at the exit).
static HANDED_OVER: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());
/// Each thread the runtime started: its Rust id and its OS TID (gettid), in start order.
static STARTED: Mutex<Vec<(ThreadId, u32)>> = Mutex::new(Vec::new());

extern "C" {
    fn gettid() -> i32;
}

fn tid() -> u32 {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { gettid() as u32 }
}

/// tokio's task id as a number: `Id` shows it (Display) and keeps it to itself otherwise.
fn task_id(meta: &TaskMeta<'_>) -> u64 {
    struct Digits(u64);
    impl std::fmt::Write for Digits {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            for b in s.bytes() {
                self.0 = self.0 * 10 + u64::from(b - b'0');
            }
            Ok(())
        }
    }
    let mut d = Digits(0);
    let _ = std::fmt::write(&mut d, format_args!("{}", meta.id()));
    d.0
}

fn record(meta: &TaskMeta<'_>, kind: Kind, latency: Option<Duration>) {
    let event = Event {
        ts_ns: workload::sys::monotonic_ns(),
        task: task_id(meta),
        latency_ns: latency.map_or(u64::MAX, |d| d.as_nanos() as u64),
        kind,
    };
    LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        let buffer = local.get_or_insert_with(|| Buffer {
            tid: tid(),
            thread: std::thread::current().id(),
            events: Vec::with_capacity(PREALLOCATED),
            dropped: [0; 4],
        });
        if buffer.events.len() < KEPT_PER_THREAD {
            buffer.events.push(event);
        } else {
            buffer.dropped[kind as usize] += 1;
        }
    });
}

/// This thread's buffer handed over (a worker stopping; main at the exit).
fn hand_over() {
    if let Some(buffer) = LOCAL.with(|local| local.borrow_mut().take()) {
        HANDED_OVER.lock().unwrap().push(buffer);
    }
}

/// The file the events go to, opened before `start` (a path that cannot be written is bad
/// usage); a dry run only checks, and removes a file it had to create.
pub fn open(path: &str, dry_run: bool) -> Result<Option<Trace>, String> {
    let p = Path::new(path);
    if p.is_dir() {
        return Err(format!("--tokio-trace '{path}': is a directory"));
    }
    let existed = p.symlink_metadata().is_ok();
    let summary = p.with_extension("json");
    // The summary goes beside the records as FILE.json: a FILE named so would be overwritten.
    if summary == p {
        return Err(format!(
            "--tokio-trace '{path}': ends in .json, the name of the summary written beside it"
        ));
    }
    let opened = |p: &Path| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!dry_run)
            .open(p)
            .map_err(|e| format!("--tokio-trace '{}': {}", p.display(), bare(&e)))
    };
    let file = opened(p)?;
    if dry_run {
        drop(file);
        if !existed {
            let _ = std::fs::remove_file(p);
        }
        return Ok(None);
    }
    Ok(Some(Trace {
        file,
        summary: summary.clone(),
    }))
}

/// An io::Error's words without " (os error N)", as the contract's tables expect them.
fn bare(e: &io::Error) -> String {
    let text = e.to_string();
    text.split(" (os error")
        .next()
        .unwrap_or(&text)
        .to_lowercase()
}

/// An open trace, until the exit writes it.
pub struct Trace {
    file: File,
    summary: PathBuf,
}

/// Sets the hooks on the runtime's builder; `threads_started` is the count runtime.rs's own
/// `on_thread_start` keeps (a builder holds one such callback: this one replaces it).
pub fn install(builder: &mut Builder, threads_started: Arc<AtomicU64>) {
    builder
        .on_thread_start(move || {
            threads_started.fetch_add(1, Relaxed);
            STARTED
                .lock()
                .unwrap()
                .push((std::thread::current().id(), tid()));
        })
        .on_thread_stop(hand_over)
        .on_task_spawn(|meta| record(meta, Kind::Spawn, None))
        .on_before_task_poll(|meta| record(meta, Kind::PollBegin, meta.schedule_latency()))
        .on_after_task_poll(|meta| record(meta, Kind::PollEnd, meta.schedule_latency()))
        .on_task_terminate(|meta| record(meta, Kind::Terminate, None))
        .track_task_schedule_latency();
}

/// At the exit: shuts `runtime` down (every worker joined, its buffer handed over), then writes
/// the records and the JSON beside them.
pub fn write(trace: Trace, runtime: Runtime) -> Result<(), String> {
    let handle = runtime.handle().clone();
    // Which worker ran on which thread, while the workers are there to say.
    let workers: Vec<Option<ThreadId>> = (0..handle.metrics().num_workers())
        .map(|w| handle.metrics().worker_thread_id(w))
        .collect();
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    hand_over();
    let metrics = metrics(&handle, &workers);
    let buffers = std::mem::take(&mut *HANDED_OVER.lock().unwrap());
    let fail = |e: io::Error| format!("--tokio-trace: writing the trace: {e}");
    let mut out = BufWriter::with_capacity(1 << 20, trace.file);
    out.write_all(MAGIC).map_err(fail)?;
    out.write_all(&FORMAT_VERSION.to_le_bytes()).map_err(fail)?;
    out.write_all(&(RECORD_BYTES as u32).to_le_bytes())
        .map_err(fail)?;
    let mut by_kind = [0u64; 4];
    let mut dropped = [0u64; 4];
    let mut threads = Vec::new();
    for b in &buffers {
        for e in &b.events {
            let mut r = [0u8; RECORD_BYTES];
            r[0..8].copy_from_slice(&e.ts_ns.to_le_bytes());
            r[8..16].copy_from_slice(&e.task.to_le_bytes());
            r[16..24].copy_from_slice(&e.latency_ns.to_le_bytes());
            r[24..28].copy_from_slice(&b.tid.to_le_bytes());
            r[28] = e.kind as u8;
            out.write_all(&r).map_err(fail)?;
            by_kind[e.kind as usize] += 1;
        }
        for (all, d) in dropped.iter_mut().zip(b.dropped) {
            *all += d;
        }
        threads.push(Value::from(
            Obj::new()
                .with("tid", b.tid)
                .with("records", b.events.len() as u64)
                .with("dropped", b.dropped.iter().sum::<u64>())
                .with("main", b.thread == main_thread()),
        ));
    }
    out.into_inner()
        .map_err(|e| fail(e.into_error()))?
        .sync_all()
        .map_err(fail)?;
    let records: u64 = by_kind.iter().sum();
    let summary = Obj::new()
        .with("format_version", FORMAT_VERSION)
        .with("records", records)
        .with(
            "counts",
            Obj::new()
                .with("spawned", by_kind[Kind::Spawn as usize])
                .with("terminated", by_kind[Kind::Terminate as usize])
                .with("polls_begun", by_kind[Kind::PollBegin as usize])
                .with("polls_ended", by_kind[Kind::PollEnd as usize]),
        )
        .with("kept_per_thread", KEPT_PER_THREAD as u64)
        .with(
            "dropped",
            Obj::new()
                .with("spawned", dropped[Kind::Spawn as usize])
                .with("terminated", dropped[Kind::Terminate as usize])
                .with("polls_begun", dropped[Kind::PollBegin as usize])
                .with("polls_ended", dropped[Kind::PollEnd as usize]),
        )
        .with("threads", Value::Arr(threads))
        .with("metrics", metrics);
    let mut line = summary.to_line();
    line.push('\n');
    std::fs::write(&trace.summary, line)
        .map_err(|e| format!("--tokio-trace: writing {}: {e}", trace.summary.display()))
}

static MAIN: std::sync::OnceLock<ThreadId> = std::sync::OnceLock::new();

/// The thread that called [`mark_main`] (the process's main thread).
fn main_thread() -> ThreadId {
    *MAIN.get_or_init(|| std::thread::current().id())
}

/// Marks the calling thread as main (before the runtime starts).
pub fn mark_main() {
    let _ = main_thread();
}

/// tokio's RuntimeMetrics at the exit, per worker (its TID where the worker's thread started
/// through the runtime's `on_thread_start`).
fn metrics(handle: &Handle, workers: &[Option<ThreadId>]) -> Obj {
    let m = handle.metrics();
    let tids: HashMap<ThreadId, u32> = STARTED.lock().unwrap().iter().copied().collect();
    let workers: Vec<Value> = (0..workers.len())
        .map(|w| {
            let tid = workers[w].and_then(|t| tids.get(&t).copied());
            Value::from(
                Obj::new()
                    .with("worker", w as u64)
                    .with("tid", tid)
                    .with("park_count", m.worker_park_count(w))
                    .with("park_unpark_count", m.worker_park_unpark_count(w))
                    .with("steal_count", m.worker_steal_count(w))
                    .with("steal_operations", m.worker_steal_operations(w))
                    .with("poll_count", m.worker_poll_count(w))
                    .with("noop_count", m.worker_noop_count(w))
                    .with("busy_ns", m.worker_total_busy_duration(w).as_nanos() as u64),
            )
        })
        .collect();
    Obj::new()
        .with("workers", Value::Arr(workers))
        .with("spawned_tasks_count", m.spawned_tasks_count())
        .with("threads_started", STARTED.lock().unwrap().len() as u64)
}
