//! The five workloads on processes (the sixth, serve, is serve.rs). Each forks through spawn.rs
//! (which counts, guards and reaps) and keeps nothing per task in the parent: tasks wait on one
//! shared gate (a pipe no one writes to, opened by closing its write end), report on one shared
//! pipe (a record each), and are reaped at the end. pingpong and chain talk over pipes, a pair's
//! own; the parent closes its copies of a pair's ends once both of its processes are forked.

use workload::cli::EventType;
use workload::harness::Throughput;

use crate::os::{self, Pipe};
use crate::spawn::{collect, spawn, ProcessHarness as Harness};

/// A pipe for the parent's own use before any task is forked; a process without a descriptor
/// left for it just stops (exit 1, as when its output fails).
fn pipe_or_exit(what: &str) -> Pipe {
    Pipe::new().unwrap_or_else(|err| {
        eprintln!("{}: no pipe for {what}: {err}", crate::PROGRAM);
        std::process::exit(1);
    })
}

/// sleep: N tasks each sleep, then all are reaped — Hansen's experiment with exactly N tasks.
pub fn sleep(h: &mut Harness) -> Option<Throughput> {
    let nap = h.cfg.sleep_ns;
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        spawn(h, &[], || os::sleep_ns(nap));
    }
    h.snapshot_peak();
    h.phase("join");
    h.tasks.reap_all();
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "spawn",
    })
}

/// hold: N tasks stay alive together until released, proving they coexist.
pub fn hold(h: &mut Harness) -> Option<Throughput> {
    let gate = pipe_or_exit("the release gate");
    let started = pipe_or_exit("the started latch");
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        spawn(h, &[gate.write, started.read], || {
            os::write_record(started.write, 1);
            os::close_fd(started.write);
            os::wait_for_end_of_file(gate.read);
        });
    }
    // From here only the children hold the latch's write end: a child that died unannounced
    // ends the wait with the others' end of file instead of hanging it.
    started.close_write();
    let want = h.spawned;
    collect(h, started.read, want);
    h.emit_peak();
    h.phase("steady");
    h.wait_for_release();
    h.phase("join");
    gate.close_write(); // every child reads end of file, and exits
    h.tasks.reap_all();
    gate.close_read();
    started.close_read();
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "spawn",
    })
}

/// churn: fork and reap N tasks, at most --batch alive at once: the cost of a task's whole life.
pub fn churn(h: &mut Harness) -> Option<Throughput> {
    let batch = h.cfg.batch.min(h.target());
    h.phase("churn");
    while h.spawned < h.target() && !h.failed() {
        let mut forked = 0;
        while forked < batch && h.spawned < h.target() && h.may_spawn() {
            if spawn(h, &[], || {}).is_some() {
                forked += 1;
            }
        }
        if h.spawned == forked {
            h.snapshot_peak(); // the first batch: the most tasks this workload has at once
        }
        h.tasks.reap_all();
    }
    h.phase("end");
    Some(Throughput {
        unit: "tasks/s",
        count: h.spawned,
        phase: "churn",
    })
}

/// pingpong: --n pairs each bounce --rounds round trips over two pipes of their own.
pub fn pingpong(h: &mut Harness) -> Option<Throughput> {
    let rounds = h.cfg.rounds;
    let gate = pipe_or_exit("the release gate");
    let finished = pipe_or_exit("the finished latch");
    let mut pairs = 0;
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        let to_pong = match Pipe::new() {
            Ok(pipe) => pipe,
            Err(err) => {
                h.spawn_failed(&err);
                break;
            }
        };
        let to_ping = match Pipe::new() {
            Ok(pipe) => pipe,
            Err(err) => {
                to_pong.close();
                h.spawn_failed(&err);
                break;
            }
        };
        // The pong echoes until its ping hangs up (or never started: the parent's write end
        // closes below and no ping holds one).
        let pong = spawn(
            h,
            &[
                gate.write,
                finished.read,
                finished.write,
                to_pong.write,
                to_ping.read,
            ],
            || {
                while let Some(round) = os::read_record(to_pong.read) {
                    if !os::write_record(to_ping.write, round) {
                        break;
                    }
                }
            },
        );
        let ping = pong.is_some() && h.may_spawn() && {
            spawn(
                h,
                &[gate.write, finished.read, to_pong.read, to_ping.write],
                || {
                    os::wait_for_end_of_file(gate.read);
                    for round in 0..rounds {
                        if !os::write_record(to_pong.write, round)
                            || os::read_record(to_ping.read).is_none()
                        {
                            break;
                        }
                    }
                    os::write_record(finished.write, 1);
                },
            )
            .is_some()
        };
        to_pong.close();
        to_ping.close();
        if !ping {
            break;
        }
        pairs += 1;
    }
    finished.close_write();
    h.snapshot_peak();
    h.phase("steady");
    gate.close_write();
    collect(h, finished.read, pairs);
    h.phase("join");
    h.tasks.reap_all();
    gate.close_read();
    finished.close_read();
    h.phase("end");
    Some(Throughput {
        unit: "hops/s",
        count: pairs * rounds * 2,
        phase: "steady",
    })
}

/// chain: the bench-of-chan experiment. --n receivers, each reading a pipe of its own sized for
/// --queue events (the kernel rounds a pipe's buffer up to a power of two pages: at least
/// --queue); --n senders, sender i writing --events events to receiver i once all are forked.
/// Over a pipe every event is copied: `str` and `str_clone` send --size bytes alike; `int` sends
/// the number, and `str_ptr` the address of one string made before the forks, which every
/// process has at that address.
pub fn chain(h: &mut Harness) -> Option<Throughput> {
    let size = h.cfg.size as usize;
    let text = "x".repeat(size);
    let address = (text.as_ptr() as u64).to_ne_bytes();
    let (event, each): (&[u8], usize) = match h.cfg.event_type {
        EventType::Int => (&[], os::RECORD),
        EventType::StrPtr => (&address, os::RECORD),
        EventType::Str | EventType::StrClone => (text.as_bytes(), size.max(1)),
    };
    let (events, queue) = (h.cfg.events, h.cfg.queue);
    let gate = pipe_or_exit("the release gate");
    let counts = pipe_or_exit("the receivers' counts");
    let mut receivers = 0;
    h.phase("spawn");
    while h.spawned < h.target() && h.may_spawn() {
        let inbox = match Pipe::new() {
            Ok(pipe) => pipe,
            Err(err) => {
                h.spawn_failed(&err);
                break;
            }
        };
        inbox.resize(queue * each as u64);
        // A receiver counts the events whole until its sender hangs up, then reports once.
        let receiver = spawn(h, &[gate.write, counts.read, inbox.write], || {
            let mut buf = [0u8; 4096];
            let mut bytes = 0u64;
            while let Some(read @ 1..) = os::read_some(inbox.read, &mut buf) {
                std::hint::black_box(&buf[..read]);
                bytes += read as u64;
            }
            os::write_record(counts.write, bytes / each as u64);
        });
        if receiver.is_some() {
            receivers += 1;
        }
        // The receiver sees its sender missing (the parent's write end closes below) and
        // reports 0 events.
        if receiver.is_some() && h.may_spawn() {
            spawn(
                h,
                &[gate.write, counts.read, counts.write, inbox.read],
                || {
                    os::wait_for_end_of_file(gate.read);
                    for i in 0..events {
                        let sent = match event {
                            [] => os::write_record(inbox.write, i),
                            bytes => os::write_all(inbox.write, bytes),
                        };
                        if !sent {
                            break;
                        }
                    }
                },
            );
        }
        inbox.close();
    }
    counts.close_write();
    h.snapshot_peak();
    h.phase("steady");
    gate.close_write();
    let count = collect(h, counts.read, receivers);
    h.phase("join");
    h.tasks.reap_all();
    gate.close_read();
    counts.close_read();
    h.phase("end");
    Some(Throughput {
        unit: "events/s",
        count,
        phase: "steady",
    })
}
