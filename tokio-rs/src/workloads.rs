//! The five workloads on tokio tasks (the sixth, serve, is serve.rs), spawned from the main
//! thread as `#[tokio::main]` programs spawn them (into the runtime's global queue). Each keeps
//! nothing per task beyond what tokio itself needs: what tasks share is leaked once per run and
//! reached through one reference, tasks wait at one shared gate (a semaphore with no permits,
//! closed to open it) and report to one shared latch. Main waits on the latch as `threads` joins
//! its scope.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use workload::cli::EventType;
use workload::harness::{Latch, Throughput};

use crate::runtime::{spawn, TokioHarness as Harness};

/// What every task of a run reads: made once, never freed (the process ends with the run).
fn shared<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

/// A closed gate: tasks wait on `acquire`, which fails for all of them at once when it is closed.
fn closed_gate() -> Semaphore {
    Semaphore::new(0)
}

/// sleep: N tasks each sleep, then all are joined — the 2023 experiment with exactly N tasks.
pub fn sleep(h: &mut Harness) -> Option<Throughput> {
    struct Sleep {
        nap: Duration,
        done: Latch,
    }
    let run = shared(Sleep {
        nap: Duration::from_nanos(h.cfg.sleep_ns),
        done: Latch::new(h.target()),
    });
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        spawn(h, async move {
            tokio::time::sleep(run.nap).await;
            run.done.arrive();
        });
    }
    h.snapshot_peak();
    h.phase("join");
    // Progress while tasks finish: the runtime's count is the only one (the kernel sees threads).
    let spawned = h.spawned;
    run.done.wait(spawned, || h.tick());
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "spawn",
    })
}

/// hold: N tasks stay alive together until released, proving they coexist.
pub fn hold(h: &mut Harness) -> Option<Throughput> {
    struct Hold {
        gate: Semaphore,
        started: Latch,
        done: Latch,
    }
    let run = shared(Hold {
        gate: closed_gate(),
        started: Latch::new(h.target()),
        done: Latch::new(h.target()),
    });
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        spawn(h, async move {
            run.started.arrive();
            let _ = run.gate.acquire().await;
            run.done.arrive();
        });
    }
    let spawned = h.spawned;
    run.started.wait(spawned, || h.tick());
    h.emit_peak();
    h.phase("steady");
    h.wait_for_release();
    h.phase("join");
    run.gate.close(); // one close releases every task
    run.done.wait(spawned, || {});
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "spawn",
    })
}

/// churn: create and join N tasks, at most --batch alive at once: the cost of a task's whole life.
pub fn churn(h: &mut Harness) -> Option<Throughput> {
    let batch = h.cfg.batch.min(h.target()) as usize;
    let mut handles = Vec::with_capacity(batch);
    h.phase("churn");
    while h.spawned < h.target() && !h.failed() {
        while handles.len() < batch && h.spawned < h.target() && h.may_spawn() {
            handles.push(spawn(h, async {}));
        }
        if h.spawned as usize == handles.len() {
            h.snapshot_peak(); // the first batch: the most tasks this workload has at once
        }
        let batch_done = std::mem::take(&mut handles);
        h.tasks.runtime.block_on(async {
            for handle in batch_done {
                let _ = handle.await;
            }
        });
    }
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "churn",
    })
}

/// pingpong: --n pairs each bounce --rounds round trips over two tokio channels of one slot.
pub fn pingpong(h: &mut Harness) -> Option<Throughput> {
    struct Pingpong {
        rounds: u64,
        gate: Semaphore,
        finished: Latch,
        done: Latch,
    }
    let run = shared(Pingpong {
        rounds: h.cfg.rounds,
        gate: closed_gate(),
        finished: Latch::new(h.cfg.n),
        done: Latch::new(h.target()),
    });
    let mut pairs = 0;
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        let (to_pong, mut pong_inbox) = mpsc::channel::<u64>(1);
        let (to_ping, mut ping_inbox) = mpsc::channel::<u64>(1);
        // The pong echoes until its ping hangs up (or never started: its sender is dropped).
        spawn(h, async move {
            while let Some(v) = pong_inbox.recv().await {
                if to_ping.send(v).await.is_err() {
                    break;
                }
            }
            run.done.arrive();
        });
        if !h.may_spawn() {
            break;
        }
        spawn(h, async move {
            let _ = run.gate.acquire().await;
            for round in 0..run.rounds {
                if to_pong.send(round).await.is_err() || ping_inbox.recv().await.is_none() {
                    break;
                }
            }
            run.finished.arrive();
            run.done.arrive();
        });
        pairs += 1;
    }
    h.snapshot_peak();
    h.phase("steady");
    run.gate.close();
    run.finished.wait(pairs, || {});
    h.phase("join");
    run.done.wait(h.spawned, || {});
    h.phase("end");
    Some(Throughput {
        unit: "hops/s",
        count: pairs * run.rounds * 2,
        phase: "steady",
    })
}

/// chain: the bench-of-chan experiment as its Rust side ran it (tokio, bounded mpsc channels).
/// --n receivers, each with a queue of --queue; --n senders, sender i sending --events events to
/// receiver i once all are spawned.
pub fn chain(h: &mut Harness) -> Option<Throughput> {
    let size = h.cfg.size as usize;
    match h.cfg.event_type {
        EventType::Int => run_chain(h, |i| i),
        EventType::Str => run_chain(h, move |_| "x".repeat(size)),
        // A pointer to one string, as bench-of-chan's Rust side sent it: a `&'static str` (leaked
        // once per run), copied without a reference count that every sender and receiver would
        // contend on.
        EventType::StrPtr => {
            let shared: &'static str = Box::leak("x".repeat(size).into_boxed_str());
            run_chain(h, move |_| shared)
        }
        EventType::StrClone => {
            let template = "x".repeat(size);
            run_chain(h, move |_| template.clone())
        }
    }
}

fn run_chain<T, F>(h: &mut Harness, make_event: F) -> Option<Throughput>
where
    T: Send + 'static,
    F: Fn(u64) -> T + Send + Sync + 'static,
{
    struct Chain<F> {
        events: u64,
        gate: Semaphore,
        drained: Latch,
        done: Latch,
        received: AtomicU64,
        make_event: F,
    }
    let run = shared(Chain {
        events: h.cfg.events,
        gate: closed_gate(),
        drained: Latch::new(h.cfg.n),
        done: Latch::new(h.target()),
        received: AtomicU64::new(0),
        make_event,
    });
    let queue = h.cfg.queue as usize;
    let mut receivers = 0;
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        let (sender, mut inbox) = mpsc::channel::<T>(queue);
        // A receiver counts until its sender hangs up, then reports once.
        spawn(h, async move {
            let mut count = 0u64;
            while let Some(event) = inbox.recv().await {
                std::hint::black_box(&event);
                count += 1;
            }
            run.received.fetch_add(count, Ordering::Relaxed);
            run.drained.arrive();
            run.done.arrive();
        });
        receivers += 1;
        if !h.may_spawn() {
            break; // the receiver sees its sender dropped and reports 0 events
        }
        spawn(h, async move {
            let _ = run.gate.acquire().await;
            for i in 0..run.events {
                if sender.send((run.make_event)(i)).await.is_err() {
                    break;
                }
            }
            run.done.arrive();
        });
    }
    h.snapshot_peak();
    h.phase("steady");
    run.gate.close();
    run.drained.wait(receivers, || {});
    h.phase("join");
    run.done.wait(h.spawned, || {});
    h.phase("end");
    Some(Throughput {
        unit: "events/s",
        count: run.received.load(Ordering::Relaxed),
        phase: "steady",
    })
}
