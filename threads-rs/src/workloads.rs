//! The five workloads on OS threads (the sixth, serve, is serve.rs). Each spawns through the
//! Harness (which counts, guards and reports) and keeps nothing per task beyond what std::thread
//! itself needs: tasks wait on one shared gate, report to one shared latch, and are joined by
//! their scope.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::thread;
use std::time::Duration;

use workload::cli::EventType;
use workload::harness::{Latch, Throughput};

use crate::gate::Gate;
use crate::spawn::{spawn, spawn_detached, ThreadHarness as Harness};

/// sleep: N tasks each sleep, then all are joined — Hansen's experiment with exactly N tasks.
pub fn sleep(h: &mut Harness) -> Option<Throughput> {
    let nap = Duration::from_nanos(h.cfg.sleep_ns);
    thread::scope(|scope| {
        h.phase("spawn");
        while h.spawned < h.target() && h.may_spawn() {
            spawn(h, scope, move || thread::sleep(nap));
        }
        h.snapshot_peak();
        h.phase("join");
    });
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "spawn",
    })
}

/// hold: N tasks stay alive together until released, proving they coexist.
pub fn hold(h: &mut Harness) -> Option<Throughput> {
    // Tasks block at the gate until main opens it: one close releases all.
    let (gate, opener) = Gate::closed();
    let started = Latch::new(h.target());
    thread::scope(|scope| {
        h.phase("spawn");
        while h.spawned < h.target() && h.may_spawn() {
            spawn(h, scope, || {
                started.arrive();
                gate.wait();
            });
        }
        started.wait(h.spawned, || h.tick());
        h.emit_peak();
        h.phase("steady");
        h.wait_for_release();
        h.phase("join");
        opener.open();
    });
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
            handles.extend(spawn_detached(h, || {}));
        }
        if h.spawned as usize == handles.len() {
            h.snapshot_peak(); // the first batch: the most tasks this workload has at once
        }
        for handle in handles.drain(..) {
            let _ = handle.join();
        }
    }
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "churn",
    })
}

/// pingpong: --n pairs each bounce --rounds round trips over two channels of one slot.
pub fn pingpong(h: &mut Harness) -> Option<Throughput> {
    let rounds = h.cfg.rounds;
    let (gate, opener) = Gate::closed();
    let finished = Latch::new(h.cfg.n);
    let mut pairs = 0;
    thread::scope(|scope| {
        h.phase("spawn");
        while h.spawned < h.target() && h.may_spawn() {
            let (to_pong, pong_inbox) = sync_channel::<u64>(1);
            let (to_ping, ping_inbox) = sync_channel::<u64>(1);
            // The pong echoes until its ping hangs up (or never started: its sender is dropped).
            if !spawn(h, scope, move || {
                while let Ok(v) = pong_inbox.recv() {
                    if to_ping.send(v).is_err() {
                        break;
                    }
                }
            }) || !h.may_spawn()
            {
                break;
            }
            let (gate, finished) = (&gate, &finished);
            if spawn(h, scope, move || {
                gate.wait();
                for round in 0..rounds {
                    if to_pong.send(round).is_err() || ping_inbox.recv().is_err() {
                        break;
                    }
                }
                finished.arrive();
            }) {
                pairs += 1;
            }
        }
        h.snapshot_peak();
        h.phase("steady");
        opener.open();
        finished.wait(pairs, || {});
        h.phase("join");
    });
    h.phase("end");
    Some(Throughput {
        unit: "hops/s",
        count: pairs * rounds * 2,
        phase: "steady",
    })
}

/// chain: the bench-of-chan experiment. --n receivers, each with a bounded queue of --queue;
/// --n senders, sender i sending --events events to receiver i once all are spawned.
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

fn run_chain<T: Send>(h: &mut Harness, make_event: impl Fn(u64) -> T + Sync) -> Option<Throughput> {
    let (events, queue) = (h.cfg.events, h.cfg.queue as usize);
    let (gate, opener) = Gate::closed();
    let drained = Latch::new(h.cfg.n);
    let received = AtomicU64::new(0);
    let mut receivers = 0;
    thread::scope(|scope| {
        h.phase("spawn");
        while h.spawned < h.target() && h.may_spawn() {
            let (sender, inbox) = sync_channel::<T>(queue);
            let (drained, received) = (&drained, &received);
            // A receiver counts until its sender hangs up, then reports once.
            if !spawn(h, scope, move || {
                let mut count = 0u64;
                while let Ok(event) = inbox.recv() {
                    std::hint::black_box(&event);
                    count += 1;
                }
                received.fetch_add(count, Ordering::Relaxed);
                drained.arrive();
            }) {
                break;
            }
            receivers += 1;
            if !h.may_spawn() {
                break; // the receiver sees its sender dropped and reports 0 events
            }
            let (gate, make_event) = (&gate, &make_event);
            spawn(h, scope, move || {
                gate.wait();
                for i in 0..events {
                    if sender.send(make_event(i)).is_err() {
                        break;
                    }
                }
            });
        }
        h.snapshot_peak();
        h.phase("steady");
        opener.open();
        drained.wait(receivers, || {});
        h.phase("join");
    });
    h.phase("end");
    let count = received.load(Ordering::Relaxed);
    Some(Throughput {
        unit: "events/s",
        count,
        phase: "steady",
    })
}
