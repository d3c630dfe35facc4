//! Scheduler traces for the tests: a synthetic but realistic raw file (`trace-events.bin`) of a
//! threads run, the naive counts its wake-to-run and preempted-to-run must equal, and
//! [`check_trace`]: a written `.perfetto-trace` decoded with `perfetto_protos`, packet by packet,
//! into the facts the tests hold it to — callable on a real run's trace as well.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_event::track_event::Type;
use protobuf::CodedInputStream;
use serde_json::Value;
use spawnscope_collector::trace_events::{write_events, Kind, Task, TraceEvent, Wait};

use super::{read_json, repo_root};

const CLONE_THREAD_FLAGS: u64 = 0x3d0f00;
const TASK_INTERRUPTIBLE: u64 = 1;
const TASK_DEAD: u64 = 0x80;

/// What the synthetic run looks like on the trace's clock (BOOTTIME, ns).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub pid: u32,
    pub threads: u32,
    /// The main thread starts spawning here, one thread per `spawn_step_ns`.
    pub spawn_ns: u64,
    pub spawn_step_ns: u64,
    /// Every thread is woken from its sleep here, in turn.
    pub join_ns: u64,
}

struct Gen {
    events: Vec<TraceEvent>,
}

impl Gen {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ts: u64,
        kind: Kind,
        cpu: u32,
        task: Task,
        other: Task,
        arg: u64,
        comm: &str,
    ) {
        self.events
            .push(TraceEvent::nice_zero(ts, kind, cpu, task, other, arg, comm));
    }

    fn switch(
        &mut self,
        ts: u64,
        cpu: u32,
        prev: Task,
        next: Task,
        prev_state: u64,
        next_comm: &str,
    ) {
        self.push(ts, Kind::Switch, cpu, prev, next, prev_state, next_comm);
    }

    fn wait(&mut self, from: u64, to: u64, cpu: u32, task: Task, wait: Wait) {
        self.push(
            from,
            Kind::WaitBegin,
            cpu,
            task,
            Task::default(),
            wait as u64,
            "",
        );
        self.push(
            to,
            Kind::WaitEnd,
            cpu,
            task,
            Task::default(),
            wait as u64,
            "",
        );
    }
}

fn outside(tid: u32) -> Task {
    Task { tid, tgid: tid }
}

/// A threads run on two CPUs, as the ring buffer hands it over: the main thread (CPU 0) spawns
/// `threads` threads (clone waits, task_newtask, wakeup_new), now and then preempted by a
/// kworker; each new thread runs on CPU 1 after a wait that varies, renames itself ("w<i>"),
/// sleeps in a futex; outside tasks sometimes run on CPU 1 between them, their switches among
/// themselves unrecorded (so a switch's prev is not the CPU's last next); at `join_ns` each is woken,
/// runs, exits; main waits for them in a futex and exits last. Records per CPU in time order,
/// across CPUs nearly (neighbours less than 3 µs apart from different CPUs swapped).
pub fn synthetic_run(s: Shape) -> Vec<TraceEvent> {
    let idle = Task::default();
    let main = Task {
        tid: s.pid,
        tgid: s.pid,
    };
    let kworker = outside(40);
    let mut g = Gen { events: Vec::new() };
    // Main is switched in at its release, renamed at its exec.
    g.switch(s.spawn_ns - 200_000, 0, idle, main, 0, "spawnscope");
    g.push(
        s.spawn_ns - 150_000,
        Kind::Rename,
        0,
        main,
        idle,
        0,
        "threads",
    );
    let mut cpu1_last = idle;
    let mut cpu1_free = s.spawn_ns;
    for i in 0..s.threads {
        let tid = s.pid + 1 + i;
        let t = Task { tid, tgid: s.pid };
        let at = s.spawn_ns + i as u64 * s.spawn_step_ns;
        g.wait(at, at + 8_000, 0, main, Wait::Clone);
        g.push(
            at + 5_000,
            Kind::NewTask,
            0,
            t,
            main,
            CLONE_THREAD_FLAGS,
            "threads",
        );
        g.push(at + 6_000, Kind::WakeupNew, 0, t, main, 1, "threads");
        if i % 7 == 3 {
            // main preempted by a kworker for 20 µs.
            g.switch(at + 9_000, 0, main, kworker, 0, "kworker/0:1");
            g.switch(at + 29_000, 0, kworker, main, 1, "threads");
        }
        // The new thread's first run on CPU 1: after CPU 1 is free and a varying wait.
        let run_at = (at + 6_000 + 2_000 + (i as u64 * 977) % 40_000).max(cpu1_free + 4_000);
        if i % 5 == 2 {
            // Outside tasks ran on CPU 1 (idle → a → b, switches the filter does not keep): the
            // next switch's prev is not the CPU's last next.
            cpu1_last = outside(50 + i % 3);
        }
        g.switch(run_at, 1, cpu1_last, t, TASK_INTERRUPTIBLE, "threads");
        g.push(
            run_at + 1_000,
            Kind::Rename,
            1,
            t,
            idle,
            0,
            &format!("w{i}"),
        );
        let sleep_at = run_at + 3_000;
        g.push(
            sleep_at,
            Kind::WaitBegin,
            1,
            t,
            idle,
            Wait::Futex as u64,
            "",
        );
        if i % 4 == 1 {
            // Preempted before it could block; back 10 µs later, then it blocks.
            g.switch(sleep_at + 500, 1, t, kworker, 0, "kworker/1:0");
            g.switch(
                sleep_at + 10_500,
                1,
                kworker,
                t,
                TASK_INTERRUPTIBLE,
                &format!("w{i}"),
            );
            g.switch(
                sleep_at + 11_000,
                1,
                t,
                idle,
                TASK_INTERRUPTIBLE,
                "swapper/1",
            );
            cpu1_free = sleep_at + 12_000;
        } else {
            g.switch(sleep_at + 500, 1, t, idle, TASK_INTERRUPTIBLE, "swapper/1");
            cpu1_free = sleep_at + 1_000;
        }
        cpu1_last = idle;
    }
    // Main joins: a futex wait that the last thread's exit ends.
    let spawned_end = s.spawn_ns + s.threads as u64 * s.spawn_step_ns;
    g.push(
        spawned_end,
        Kind::WaitBegin,
        0,
        main,
        idle,
        Wait::Futex as u64,
        "",
    );
    g.switch(
        spawned_end + 1_000,
        0,
        main,
        idle,
        TASK_INTERRUPTIBLE,
        "swapper/0",
    );
    let mut cpu_free = [s.join_ns, s.join_ns.max(cpu1_free)];
    let mut cpu_last = [idle, idle];
    let mut last_exit = s.join_ns;
    for i in 0..s.threads {
        let tid = s.pid + 1 + i;
        let t = Task { tid, tgid: s.pid };
        let cpu = (i % 2) as usize;
        let woken = s.join_ns + i as u64 * 2_000;
        g.push(
            woken,
            Kind::Wakeup,
            cpu as u32,
            t,
            idle,
            cpu as u64,
            &format!("w{i}"),
        );
        let run_at = (woken + 1_500 + (i as u64 * 331) % 9_000).max(cpu_free[cpu]);
        g.switch(
            run_at,
            cpu as u32,
            cpu_last[cpu],
            t,
            TASK_INTERRUPTIBLE,
            &format!("w{i}"),
        );
        g.push(
            run_at + 200,
            Kind::WaitEnd,
            cpu as u32,
            t,
            idle,
            Wait::Futex as u64,
            "",
        );
        g.push(
            run_at + 2_000,
            Kind::Exit,
            cpu as u32,
            t,
            idle,
            0,
            &format!("w{i}"),
        );
        g.switch(run_at + 2_500, cpu as u32, t, idle, TASK_DEAD, "swapper");
        cpu_last[cpu] = idle;
        cpu_free[cpu] = run_at + 3_000;
        last_exit = last_exit.max(run_at + 2_000);
    }
    let back = last_exit.max(cpu_free[0]).max(cpu_free[1]) + 1_000;
    g.push(back, Kind::Wakeup, 0, main, idle, 0, "threads");
    let main_runs = back + 4_000;
    g.switch(
        main_runs,
        0,
        cpu_last[0],
        main,
        TASK_INTERRUPTIBLE,
        "threads",
    );
    g.push(
        main_runs + 100,
        Kind::WaitEnd,
        0,
        main,
        idle,
        Wait::Futex as u64,
        "",
    );
    // One last wait main never ends: closed at its exit.
    g.push(
        main_runs + 500,
        Kind::WaitBegin,
        0,
        main,
        idle,
        Wait::MmapLockWrite as u64,
        "",
    );
    g.push(main_runs + 9_000, Kind::Exit, 0, main, idle, 0, "threads");
    g.switch(main_runs + 9_500, 0, main, idle, TASK_DEAD, "swapper/0");
    ring_order(g.events)
}

/// Per CPU in time order, across CPUs nearly: time order, then neighbours from different CPUs
/// less than 3 µs apart swapped (as records reserved nearly at once on two CPUs come).
fn ring_order(mut events: Vec<TraceEvent>) -> Vec<TraceEvent> {
    events.sort_by_key(|e| e.ts);
    let mut i = 0;
    while i + 1 < events.len() {
        let (a, b) = (events[i], events[i + 1]);
        if a.cpu != b.cpu && b.ts - a.ts < 3_000 {
            events.swap(i, i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    events
}

/// Wake-to-run and preempted-to-run samples counted naively: for each switch-in of one of the
/// run's threads (tgid `pid`), the thread's latest record before it among its wakeups, switches
/// out and switches in — a wakeup counts one wake-to-run, a switch out still runnable one
/// preempted-to-run. Quadratic; for small files.
pub fn naive_counts(events: &[TraceEvent], pid: u32) -> (u64, u64) {
    let mut sorted = events.to_vec();
    sorted.sort_by_key(|e| e.ts);
    let (mut wake, mut preempted) = (0, 0);
    for (i, e) in sorted.iter().enumerate() {
        if e.kind != Kind::Switch || e.other.tgid != pid || e.other.tid == 0 {
            continue;
        }
        let tid = e.other.tid;
        let before = sorted[..i].iter().rev().find(|p| match p.kind {
            Kind::Wakeup | Kind::WakeupNew => p.task.tid == tid,
            Kind::Switch => p.task.tid == tid || p.other.tid == tid,
            _ => false,
        });
        match before {
            Some(p) if matches!(p.kind, Kind::Wakeup | Kind::WakeupNew) => wake += 1,
            Some(p) if p.kind == Kind::Switch && p.task.tid == tid && p.arg == 0 => preempted += 1,
            _ => {}
        }
    }
    (wake, preempted)
}

/// What a decoded trace holds, and what is wrong with it.
#[derive(Debug, Default)]
pub struct TraceFacts {
    pub packets: u64,
    /// pid → name, from the process descriptors.
    pub processes: BTreeMap<i32, String>,
    /// tid → (pid, name), from the thread descriptors.
    pub threads: BTreeMap<i32, (i32, String)>,
    /// Switches (compact and full) and those with a thread of the run (a thread descriptor) as
    /// prev or next; a compact switch's prev is the CPU's previous next, as Perfetto reads it.
    pub switches: u64,
    pub run_switches: u64,
    pub full_switches: u64,
    pub wakings: u64,
    pub newtasks: u64,
    pub renames: u64,
    pub exits: u64,
    /// Slices begun, by name (phases, waits).
    pub slices: BTreeMap<String, u64>,
    /// Counter tracks by name: their points.
    pub counters: BTreeMap<String, u64>,
    /// Track names (notes and counters included).
    pub track_names: Vec<String>,
    pub clock_snapshot: bool,
    /// Every switch as Perfetto reads it, per CPU in time order: (ts, prev, next).
    pub switch_sides: Vec<(u64, i32, i32)>,
    /// Slices begun, by name: their timestamps.
    pub slice_begins: BTreeMap<String, Vec<u64>>,
    /// Slices ended: (track, ts).
    pub slice_ends: Vec<(u64, u64)>,
    /// The earliest and latest timestamp of any event.
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    /// Every check that failed, in words: empty for a good trace.
    pub problems: Vec<String>,
}

#[derive(Default)]
struct Sequence {
    last_ts: u64,
    cleared: bool,
    names: BTreeMap<u64, String>,
}

/// Decodes a `.perfetto-trace` (a `Trace`: packets, field 1) packet by packet and checks it:
/// every track an event refers to has a descriptor; slices balance per track; on each packet
/// sequence timestamps never go back (per CPU across bundles too: compact sched's deltas add up
/// in order); interned names resolve on a sequence whose state was cleared first.
pub fn check_trace(path: &Path) -> TraceFacts {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut input = CodedInputStream::from_bytes(&bytes);
    let mut f = TraceFacts::default();
    let mut described: BTreeSet<u64> = BTreeSet::new();
    let mut counter_tracks: BTreeMap<u64, String> = BTreeMap::new();
    let mut referred: BTreeSet<u64> = BTreeSet::new();
    let mut depth: BTreeMap<u64, i64> = BTreeMap::new();
    let mut sequences: BTreeMap<u32, Sequence> = BTreeMap::new();
    // Per CPU: the last task switched in, and each switch as (ts, prev or None, next).
    let mut per_cpu: BTreeMap<u32, Vec<(u64, Option<i32>, i32)>> = BTreeMap::new();
    while let Some(tag) = input.read_raw_tag_or_eof().expect("a protobuf tag") {
        if tag != (1 << 3 | 2) {
            f.problems
                .push(format!("a field other than Trace.packet: tag {tag}"));
            break;
        }
        let p: TracePacket = input.read_message().expect("a TracePacket");
        f.packets += 1;
        let seq_id = p.trusted_packet_sequence_id();
        if seq_id == 0 {
            f.problems
                .push("a packet without a trusted_packet_sequence_id".into());
        }
        let seq = sequences.entry(seq_id).or_default();
        if p.sequence_flags() & SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32 != 0 {
            seq.cleared = true;
            seq.names.clear();
        }
        if p.sequence_flags() & SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32 != 0
            && !seq.cleared
        {
            f.problems.push(format!(
                "sequence {seq_id}: needs incremental state before any was cleared"
            ));
        }
        if let Some(interned) = p.interned_data.as_ref() {
            for n in &interned.event_names {
                seq.names.insert(n.iid(), n.name().to_string());
            }
        }
        let mut times: Vec<u64> = Vec::new();
        if p.has_timestamp() {
            times.push(p.timestamp());
        }
        if p.has_clock_snapshot() {
            f.clock_snapshot = true;
        }
        if p.has_track_descriptor() {
            let d = p.track_descriptor();
            if !described.insert(d.uuid()) {
                f.problems
                    .push(format!("track {} described twice", d.uuid()));
            }
            if d.has_name() {
                f.track_names.push(d.name().to_string());
            }
            if let Some(pr) = d.process.as_ref() {
                f.processes.insert(pr.pid(), pr.process_name().to_string());
            }
            if let Some(th) = d.thread.as_ref() {
                f.threads
                    .insert(th.tid(), (th.pid(), th.thread_name().to_string()));
            }
            if d.counter.is_some() {
                counter_tracks.insert(d.uuid(), d.name().to_string());
            }
        }
        if p.has_track_event() {
            let e = p.track_event();
            let track = e.track_uuid();
            referred.insert(track);
            let name = if e.has_name_iid() {
                match seq.names.get(&e.name_iid()) {
                    Some(n) => n.clone(),
                    None => {
                        f.problems.push(format!(
                            "sequence {seq_id}: name iid {} not interned",
                            e.name_iid()
                        ));
                        String::new()
                    }
                }
            } else {
                e.name().to_string()
            };
            match e.type_() {
                Type::TYPE_SLICE_BEGIN => {
                    *depth.entry(track).or_default() += 1;
                    f.slice_begins
                        .entry(name.clone())
                        .or_default()
                        .push(p.timestamp());
                    *f.slices.entry(name).or_default() += 1;
                }
                Type::TYPE_SLICE_END => {
                    f.slice_ends.push((track, p.timestamp()));
                    let d = depth.entry(track).or_default();
                    *d -= 1;
                    if *d < 0 {
                        f.problems
                            .push(format!("track {track}: a slice ends that never began"));
                        *d = 0;
                    }
                }
                Type::TYPE_COUNTER => {
                    let name = counter_tracks.get(&track).cloned().unwrap_or_default();
                    *f.counters.entry(name).or_default() += 1;
                }
                _ => {}
            }
        }
        if p.has_ftrace_events() {
            let b = p.ftrace_events();
            let cpu = b.cpu();
            let switches = per_cpu.entry(cpu).or_default();
            let chain_last =
                |label: &str, ts: u64, last: &mut Option<u64>, problems: &mut Vec<String>| {
                    if last.is_some_and(|l| ts < l) {
                        problems.push(format!("cpu {cpu}: {label} timestamps go back"));
                    }
                    *last = Some(ts);
                };
            if let Some(c) = b.compact_sched.as_ref() {
                let n = c.switch_timestamp.len();
                for (name, len) in [
                    ("switch_prev_state", c.switch_prev_state.len()),
                    ("switch_next_pid", c.switch_next_pid.len()),
                    ("switch_next_prio", c.switch_next_prio.len()),
                    ("switch_next_comm_index", c.switch_next_comm_index.len()),
                ] {
                    if len != n {
                        f.problems.push(format!(
                            "cpu {cpu}: {name} has {len} entries for {n} switches"
                        ));
                    }
                }
                let mut ts = 0u64;
                let mut last = None;
                for (i, delta) in c.switch_timestamp.iter().enumerate() {
                    ts += delta;
                    chain_last("compact switch", ts, &mut last, &mut f.problems);
                    times.push(ts);
                    if c.switch_next_comm_index
                        .get(i)
                        .is_some_and(|&k| k as usize >= c.intern_table.len())
                    {
                        f.problems
                            .push(format!("cpu {cpu}: a comm index past the intern table"));
                    }
                    switches.push((ts, None, c.switch_next_pid.get(i).copied().unwrap_or(-1)));
                }
                let mut ts = 0u64;
                let mut last = None;
                for delta in &c.waking_timestamp {
                    ts += delta;
                    chain_last("compact waking", ts, &mut last, &mut f.problems);
                    times.push(ts);
                    f.wakings += 1;
                }
                if c.waking_pid.len() != c.waking_timestamp.len() {
                    f.problems
                        .push(format!("cpu {cpu}: wakings' columns differ in length"));
                }
            }
            let mut last = None;
            for e in &b.event {
                chain_last("ftrace event", e.timestamp(), &mut last, &mut f.problems);
                times.push(e.timestamp());
                if e.has_sched_switch() {
                    let s = e.sched_switch();
                    switches.push((e.timestamp(), Some(s.prev_pid()), s.next_pid()));
                    f.full_switches += 1;
                }
                if e.has_task_newtask() {
                    f.newtasks += 1;
                }
                if e.has_task_rename() {
                    f.renames += 1;
                }
                if e.has_sched_process_exit() {
                    f.exits += 1;
                }
            }
        }
        // Within a sequence, this packet starts no earlier than the last one ended.
        if let (Some(&lo), Some(&hi)) = (times.iter().min(), times.iter().max()) {
            f.first_ts = Some(f.first_ts.map_or(lo, |t| t.min(lo)));
            f.last_ts = Some(f.last_ts.map_or(hi, |t| t.max(hi)));
            if lo < seq.last_ts {
                f.problems.push(format!(
                    "sequence {seq_id}: a timestamp goes back ({lo} after {})",
                    seq.last_ts
                ));
            }
            seq.last_ts = seq.last_ts.max(hi);
        }
    }
    for track in &referred {
        if !described.contains(track) {
            f.problems.push(format!(
                "track {track} is referred to and has no descriptor"
            ));
        }
    }
    for (track, d) in &depth {
        if *d != 0 {
            f.problems
                .push(format!("track {track}: {d} slices never end"));
        }
    }
    let run: BTreeSet<i32> = f.threads.keys().copied().collect();
    for switches in per_cpu.values_mut() {
        // Full and compact switches of a bundle, merged in time (stable: as written).
        switches.sort_by_key(|s| s.0);
        let mut last_next: Option<i32> = None;
        for &(ts, prev, next) in switches.iter() {
            let prev = prev.or(last_next);
            f.switch_sides.push((ts, prev.unwrap_or(-1), next));
            f.switches += 1;
            if prev.is_some_and(|p| run.contains(&p)) || run.contains(&next) {
                f.run_switches += 1;
            }
            last_next = Some(next);
        }
    }
    f
}

/// A real run's records (threads sleep 1,000, with the collector) that synthetic trace records are
/// laid beside, on its clock.
pub const FIXTURE_RUN: &str =
    "spawnscope/tests/fixtures/before-house/single/20261123T050350Z-threads-sleep-1000";
/// BOOTTIME − MONOTONIC on the synthetic capture's machine.
pub const OFFSET_NS: i64 = 1_234_567_890;

/// When a phase of a run directory starts (memory.json, CLOCK_MONOTONIC).
pub fn phase_t(dir: &Path, name: &str) -> u64 {
    let memory = read_json(dir.join("memory.json"));
    memory["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()["t_ns"]
        .as_u64()
        .unwrap()
}

/// A copy of [`FIXTURE_RUN`] without its derived files, with a raw trace made by `make` from
/// (the run's pid, its spawn and join phases on the trace's clock) and, when `offset`,
/// collector.json's trace section.
pub fn traced_run(
    tmp: &Path,
    offset: Option<i64>,
    make: impl FnOnce(u32, u64, u64) -> Vec<TraceEvent>,
) -> (PathBuf, Vec<TraceEvent>) {
    let from = repo_root().join(FIXTURE_RUN);
    let dir = tmp.join("run");
    fs::create_dir_all(&dir).unwrap();
    for entry in fs::read_dir(&from).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("summary.") {
            fs::copy(entry.path(), dir.join(&name)).unwrap();
        }
    }
    if let Some(offset) = offset {
        let path = dir.join("collector.json");
        let mut collector: Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        // The section as the capture writes it (collector/src/model.rs, `Trace`): whole, or
        // collector.json would not load.
        collector["trace"] = serde_json::json!({
            "file": "trace-events.bin",
            "records": 0,
            "lost": 0,
            "emitted": 0,
            "lost_writing": 0,
            "switches_unseen": 0,
            "runs_skipped": 0,
            "ring_bytes": 33554432,
            "ring_rule": "made by the test",
            "drain_priority": "SCHED_FIFO 10",
            "boottime_minus_monotonic_ns": offset,
            "clock_offset_uncertainty_ns": 20,
            "gaps": [],
            "complete": true,
            "memory": "made by the test",
        });
        fs::write(&path, serde_json::to_string_pretty(&collector).unwrap()).unwrap();
    }
    let run = read_json(dir.join("run.json"));
    let pid = run["pid"].as_u64().unwrap() as u32;
    let boot = |t: u64| (t as i64 + OFFSET_NS) as u64;
    let events = make(
        pid,
        boot(phase_t(&dir, "spawn")),
        boot(phase_t(&dir, "join")),
    );
    let mut file = fs::File::create(dir.join("trace-events.bin")).unwrap();
    write_events(&mut file, &events).unwrap();
    (dir, events)
}
