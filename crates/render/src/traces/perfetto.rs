//! A run's scheduler trace as a Perfetto trace (`trace.perfetto-trace`), encoded into a writer it
//! is handed, streaming: each `TracePacket` goes out as one `Trace.packet` field (tag 1, length,
//! bytes) as soon as it is made, so memory stays bounded by a bundle per CPU, whatever the run.
//!
//! What it holds, and on which packet sequence (`trusted_packet_sequence_id`; within each,
//! timestamps never go back):
//! - [`SEQ_RUN`]: the clocks lined up (a `ClockSnapshot` of BOOTTIME, the trace's clock, and
//!   MONOTONIC, the conductor's), a `TrackDescriptor` per process and per thread of the run (with
//!   their names; renames follow as ftrace events), the run's phases as slices on the launched
//!   process's track, its counters (memory in use, tasks alive, faults, clones, switches per
//!   bucket, records lost) and a track per note of what the trace cannot show;
//! - [`SEQ_WAITS`]: the waits the collector times as slices on their threads' tracks, names
//!   interned (`SEQ_INCREMENTAL_STATE_CLEARED` on its first packet, which carries them);
//! - [`SEQ_CPU0`] + cpu: per CPU, `FtraceEventBundle`s of at most [`BUNDLE_EVENTS`] events:
//!   switches and wakings in `compact_sched` (comms interned per bundle), and as full ftrace
//!   events task_newtask, task_rename and sched_process_exit, so that Perfetto puts each thread in
//!   its process (perfetto#701), and any switch whose prev is not the CPU's last next.
//!
//! Only switches with one of the run's threads on a side are recorded. Compact sched gives no
//! prev: Perfetto takes the CPU's previous next. Where that is not the record's prev (an outside
//! task ran something else between, unrecorded) the switch goes out as a full sched_switch with
//! its prev, so no switch is misattributed; the outside task's slice still spans whatever ran
//! unrecorded between, which a note track says.
//!
//! The bytes depend on the records alone (ordered maps, no clock read): `report` rewrites the
//! same file byte for byte.

use std::collections::HashMap;
use std::io::{self, Write};

use perfetto_protos::builtin_clock::BuiltinClock;
use perfetto_protos::clock_snapshot::{
    clock_snapshot::clock::BuiltinClocks, clock_snapshot::Clock, ClockSnapshot,
};
use perfetto_protos::counter_descriptor::{counter_descriptor::Unit, CounterDescriptor};
use perfetto_protos::ftrace_event::FtraceEvent;
use perfetto_protos::ftrace_event_bundle::{ftrace_event_bundle::CompactSched, FtraceEventBundle};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::process_descriptor::ProcessDescriptor;
use perfetto_protos::sched::{SchedProcessExitFtraceEvent, SchedSwitchFtraceEvent};
use perfetto_protos::task::{TaskNewtaskFtraceEvent, TaskRenameFtraceEvent};
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent};
use protobuf::{CodedOutputStream, Message};
use spawnscope_collector::trace_events::{Kind, TraceEvent, Wait};

use analyse::traces::run_tracks::{Counter, CounterUnit, RunTracks};
use analyse::traces::sched_trace::{ClosedWait, SchedTrace, WaitStacks};

/// The run's own tracks: clocks, descriptors, phases, counters, notes.
pub const SEQ_RUN: u32 = 1;
/// The waits, as slices on their threads.
pub const SEQ_WAITS: u32 = 2;
/// CPU n's ftrace bundles are on sequence SEQ_CPU0 + n.
pub const SEQ_CPU0: u32 = 16;
/// Events per bundle at most (switches, wakings and full events together): a bundle is held in
/// memory until it is written.
pub const BUNDLE_EVENTS: usize = 1000;

/// A process's track: its uuid.
pub fn process_uuid(tgid: u32) -> u64 {
    1 << 32 | tgid as u64
}

/// A thread's track: its uuid.
pub fn thread_uuid(tid: u32) -> u64 {
    2 << 32 | tid as u64
}

fn counter_uuid(i: usize) -> u64 {
    3 << 32 | i as u64
}

fn note_uuid(i: usize) -> u64 {
    4 << 32 | i as u64
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub packets: u64,
    pub switches: u64,
    pub wakings: u64,
    /// Switches written as full sched_switch events (their prev was not the CPU's last next).
    pub full_switches: u64,
}

struct Out<'a> {
    stream: CodedOutputStream<'a>,
    written: Written,
    run_started: bool,
}

impl Out<'_> {
    /// A packet of the run's sequence; its first clears the sequence's state.
    fn run_packet(&mut self) -> TracePacket {
        let mut p = on_sequence(SEQ_RUN);
        if !self.run_started {
            p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
            p.set_first_packet_on_sequence(true);
            self.run_started = true;
        }
        p
    }

    fn put(&mut self, packet: &TracePacket) -> io::Result<()> {
        let bytes = packet.write_to_bytes().map_err(io::Error::other)?;
        // Trace.packet is field 1: the file is a Trace message, one packet at a time.
        self.stream
            .write_bytes(1, &bytes)
            .map_err(io::Error::other)?;
        self.written.packets += 1;
        Ok(())
    }
}

fn on_sequence(seq: u32) -> TracePacket {
    let mut p = TracePacket::new();
    p.set_trusted_packet_sequence_id(seq);
    p
}

/// A track event of the run's sequence (after its descriptors: never its first packet).
fn track_event(ts: u64, track: u64, kind: Type) -> (TracePacket, TrackEvent) {
    let mut p = on_sequence(SEQ_RUN);
    p.set_timestamp(ts);
    let mut e = TrackEvent::new();
    e.set_type(kind);
    e.set_track_uuid(track);
    (p, e)
}

/// One item of the run's sequence, ordered by time, then ends before begins at the same moment.
struct Timed {
    ts: u64,
    rank: u8,
    packet: TracePacket,
}

/// Writes the trace: `trace` is the derivation of the same records `events` yields again (the
/// raw records' file read a second time, in time order: `analyse::traces::sched_trace::TimeOrdered`).
/// `launched` is the run's first process, whose track holds its phases and counters.
pub fn write(
    out: &mut dyn Write,
    trace: &SchedTrace,
    tracks: &RunTracks,
    launched: u32,
    launched_name: &str,
    events: impl Iterator<Item = io::Result<TraceEvent>>,
) -> io::Result<Written> {
    let mut o = Out {
        stream: CodedOutputStream::new(out),
        written: Written::default(),
        run_started: false,
    };
    write_run(&mut o, trace, tracks, launched, launched_name)?;
    write_events(&mut o, trace, events)?;
    o.stream.flush().map_err(io::Error::other)?;
    Ok(o.written)
}

fn write_run(
    o: &mut Out,
    trace: &SchedTrace,
    tracks: &RunTracks,
    launched: u32,
    launched_name: &str,
) -> io::Result<()> {
    let start = trace.first_ts.unwrap_or(0);
    if let Some(offset) = tracks.offset_ns {
        let mut snapshot = ClockSnapshot::new();
        for (id, ts) in [
            (BuiltinClocks::BOOTTIME, start),
            (
                BuiltinClocks::MONOTONIC,
                (start as i128 - offset as i128).max(0) as u64,
            ),
        ] {
            let mut c = Clock::new();
            c.set_clock_id(id as u32);
            c.set_timestamp(ts);
            snapshot.clocks.push(c);
        }
        snapshot.set_primary_trace_clock(BuiltinClock::BUILTIN_CLOCK_BOOTTIME);
        let mut p = o.run_packet();
        p.set_clock_snapshot(snapshot);
        o.put(&p)?;
    }
    // Processes: the launched one even if no record named it.
    let mut processes: Vec<(u32, &str)> = trace
        .processes
        .iter()
        .map(|(pid, p)| (*pid, p.name.as_str()))
        .collect();
    if !trace.processes.contains_key(&launched) {
        processes.insert(0, (launched, launched_name));
    }
    for (pid, name) in processes {
        let mut d = TrackDescriptor::new();
        d.set_uuid(process_uuid(pid));
        d.process = Some(process(pid, name)).into();
        descriptor(o, d)?;
    }
    for (tid, t) in &trace.threads {
        let mut th = ThreadDescriptor::new();
        th.set_pid(t.tgid as i32);
        th.set_tid(*tid as i32);
        th.set_thread_name(t.name.clone());
        let mut d = TrackDescriptor::new();
        d.set_uuid(thread_uuid(*tid));
        d.thread = Some(th).into();
        descriptor(o, d)?;
    }
    let parent = process_uuid(launched);
    let mut timed: Vec<Timed> = Vec::new();
    let mut counters: Vec<Counter> = tracks.counters.clone();
    if let Some(lost) = tracks.records_lost {
        counters.push(Counter {
            name: "records lost by the capture (over the run)".into(),
            unit: CounterUnit::Count,
            points: vec![(start, lost as i64)],
        });
    }
    for (i, Counter { name, unit, points }) in counters.into_iter().enumerate() {
        let unit = match unit {
            CounterUnit::Bytes => Unit::UNIT_SIZE_BYTES,
            CounterUnit::Count => Unit::UNIT_COUNT,
        };
        let uuid = counter_uuid(i);
        let mut cd = CounterDescriptor::new();
        cd.set_unit(unit);
        let mut d = TrackDescriptor::new();
        d.set_uuid(uuid);
        d.set_parent_uuid(parent);
        d.set_name(name);
        d.counter = Some(cd).into();
        descriptor(o, d)?;
        for (ts, v) in points {
            let (mut p, mut e) = track_event(ts, uuid, Type::TYPE_COUNTER);
            e.set_counter_value(v);
            p.set_track_event(e);
            timed.push(Timed {
                ts,
                rank: 2,
                packet: p,
            });
        }
    }
    for (i, note) in tracks.notes.iter().enumerate() {
        let uuid = note_uuid(i);
        let mut d = TrackDescriptor::new();
        d.set_uuid(uuid);
        d.set_parent_uuid(parent);
        d.set_name(format!("note: {note}"));
        descriptor(o, d)?;
        let (mut p, mut e) = track_event(start, uuid, Type::TYPE_INSTANT);
        e.set_name(note.clone());
        p.set_track_event(e);
        timed.push(Timed {
            ts: start,
            rank: 1,
            packet: p,
        });
    }
    for phase in &tracks.phases {
        let (mut p, mut e) = track_event(phase.begin, parent, Type::TYPE_SLICE_BEGIN);
        e.set_name(phase.name.clone());
        p.set_track_event(e);
        timed.push(Timed {
            ts: phase.begin,
            rank: 1,
            packet: p,
        });
        let (mut p, e) = track_event(phase.end, parent, Type::TYPE_SLICE_END);
        p.set_track_event(e);
        timed.push(Timed {
            ts: phase.end,
            rank: 0,
            packet: p,
        });
    }
    // Stable: items of one moment and rank keep the order they were made in.
    timed.sort_by_key(|t| (t.ts, t.rank));
    for t in timed {
        o.put(&t.packet)?;
    }
    Ok(())
}

fn process(pid: u32, name: &str) -> ProcessDescriptor {
    let mut p = ProcessDescriptor::new();
    p.set_pid(pid as i32);
    p.set_process_name(name.to_string());
    p
}

fn descriptor(o: &mut Out, d: TrackDescriptor) -> io::Result<()> {
    let mut p = o.run_packet();
    p.set_track_descriptor(d);
    o.put(&p)
}

/// One CPU's bundle being filled.
struct Bundle {
    compact: CompactSched,
    events: Vec<FtraceEvent>,
    comms: HashMap<String, u32>,
    last_switch: Option<u64>,
    last_waking: Option<u64>,
    len: usize,
}

impl Bundle {
    fn new() -> Self {
        Bundle {
            compact: CompactSched::new(),
            events: Vec::new(),
            comms: HashMap::new(),
            last_switch: None,
            last_waking: None,
            len: 0,
        }
    }

    fn comm(&mut self, comm: &str) -> u32 {
        if let Some(&i) = self.comms.get(comm) {
            return i;
        }
        let i = self.compact.intern_table.len() as u32;
        self.compact.intern_table.push(comm.to_string());
        self.comms.insert(comm.to_string(), i);
        i
    }
}

/// A CPU's state: its bundle, the last task switched in, the last time written (compact deltas
/// never go back).
struct Cpu {
    bundle: Bundle,
    last_next: Option<u32>,
    last_ts: u64,
    first_packet: bool,
}

struct Cpus {
    by_cpu: std::collections::BTreeMap<u32, Cpu>,
}

impl Cpus {
    fn get(&mut self, cpu: u32) -> &mut Cpu {
        self.by_cpu.entry(cpu).or_insert_with(|| Cpu {
            bundle: Bundle::new(),
            last_next: None,
            last_ts: 0,
            first_packet: true,
        })
    }
}

fn flush(o: &mut Out, cpu_id: u32, cpu: &mut Cpu) -> io::Result<()> {
    if cpu.bundle.len == 0 {
        return Ok(());
    }
    let b = std::mem::replace(&mut cpu.bundle, Bundle::new());
    let mut bundle = FtraceEventBundle::new();
    bundle.set_cpu(cpu_id);
    bundle.event = b.events;
    bundle.compact_sched = Some(b.compact).into();
    let mut p = on_sequence(SEQ_CPU0 + cpu_id);
    if cpu.first_packet {
        p.set_first_packet_on_sequence(true);
        p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
        cpu.first_packet = false;
    }
    p.set_ftrace_events(bundle);
    o.put(&p)
}

fn full_event(ts: u64, pid: u32) -> FtraceEvent {
    let mut e = FtraceEvent::new();
    e.set_timestamp(ts);
    e.set_pid(pid);
    e
}

struct WaitSlices {
    stacks: WaitStacks,
    first: bool,
    /// The sequence's last moment: a record later than the reorder window is put there.
    last_ts: u64,
}

impl WaitSlices {
    fn packet(&mut self, ts: u64) -> TracePacket {
        self.last_ts = self.last_ts.max(ts);
        let mut p = on_sequence(SEQ_WAITS);
        p.set_timestamp(self.last_ts);
        if self.first {
            // The names, interned once: iid = the wait's index + 1 (0 is no name).
            let mut interned = InternedData::new();
            for w in Wait::ALL {
                let mut n = EventName::new();
                n.set_iid(w as u64 + 1);
                n.set_name(w.name().to_string());
                interned.event_names.push(n);
            }
            p.interned_data = Some(interned).into();
            p.set_first_packet_on_sequence(true);
            p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
            self.first = false;
        } else {
            p.set_sequence_flags(SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32);
        }
        p
    }

    fn begin(&mut self, o: &mut Out, tid: u32, wait: Wait, ts: u64) -> io::Result<()> {
        self.stacks.begin(tid, wait, ts);
        let mut p = self.packet(ts);
        let mut e = TrackEvent::new();
        e.set_type(Type::TYPE_SLICE_BEGIN);
        e.set_track_uuid(thread_uuid(tid));
        e.set_name_iid(wait as u64 + 1);
        p.set_track_event(e);
        o.put(&p)
    }

    fn end(&mut self, o: &mut Out, closed: &[ClosedWait]) -> io::Result<()> {
        for c in closed {
            let mut p = self.packet(c.end);
            let mut e = TrackEvent::new();
            e.set_type(Type::TYPE_SLICE_END);
            e.set_track_uuid(thread_uuid(c.tid));
            p.set_track_event(e);
            o.put(&p)?;
        }
        Ok(())
    }
}

fn write_events(
    o: &mut Out,
    trace: &SchedTrace,
    events: impl Iterator<Item = io::Result<TraceEvent>>,
) -> io::Result<()> {
    let mut cpus = Cpus {
        by_cpu: Default::default(),
    };
    // Every task's comm as last seen, for a full switch's prev and a rename's old name.
    let mut comms: HashMap<u32, String> = HashMap::new();
    let mut waits = WaitSlices {
        stacks: WaitStacks::default(),
        first: true,
        last_ts: 0,
    };
    for event in events {
        let e = event?;
        let comm = e.comm();
        let cpu_id = e.cpu;
        let cpu = cpus.get(cpu_id);
        // Per CPU, time never goes back (a record later than the reorder window is put at the
        // CPU's last moment: analyse::traces::sched_trace counts them).
        let ts = e.ts.max(cpu.last_ts);
        match e.kind {
            Kind::Switch => {
                if cpu.last_next == Some(e.task.tid) {
                    let b = &mut cpu.bundle;
                    let idx = b.comm(&comm);
                    let c = &mut b.compact;
                    c.switch_timestamp.push(ts - b.last_switch.unwrap_or(0));
                    c.switch_prev_state.push(e.arg as i64);
                    c.switch_next_pid.push(e.other.tid as i32);
                    c.switch_next_prio.push(e.other_prio as i32);
                    c.switch_next_comm_index.push(idx);
                    b.last_switch = Some(ts);
                } else {
                    let mut s = SchedSwitchFtraceEvent::new();
                    s.set_prev_comm(comms.get(&e.task.tid).cloned().unwrap_or_default());
                    s.set_prev_pid(e.task.tid as i32);
                    s.set_prev_prio(e.prio as i32);
                    s.set_prev_state(e.arg as i64);
                    s.set_next_comm(comm.clone());
                    s.set_next_pid(e.other.tid as i32);
                    s.set_next_prio(e.other_prio as i32);
                    let mut f = full_event(ts, e.task.tid);
                    f.set_sched_switch(s);
                    cpu.bundle.events.push(f);
                    o.written.full_switches += 1;
                }
                cpu.last_next = Some(e.other.tid);
                o.written.switches += 1;
                comms.insert(e.other.tid, comm);
            }
            Kind::Wakeup | Kind::WakeupNew => {
                let b = &mut cpu.bundle;
                let idx = b.comm(&comm);
                let c = &mut b.compact;
                c.waking_timestamp.push(ts - b.last_waking.unwrap_or(0));
                c.waking_pid.push(e.task.tid as i32);
                c.waking_target_cpu.push(e.arg as i32);
                c.waking_prio.push(e.prio as i32);
                c.waking_comm_index.push(idx);
                c.waking_common_flags.push(0);
                b.last_waking = Some(ts);
                o.written.wakings += 1;
                comms.insert(e.task.tid, comm);
            }
            Kind::NewTask => {
                let mut n = TaskNewtaskFtraceEvent::new();
                n.set_pid(e.task.tid as i32);
                n.set_comm(comm.clone());
                n.set_clone_flags(e.arg);
                n.set_oom_score_adj(0);
                let mut f = full_event(ts, e.other.tid);
                f.set_task_newtask(n);
                cpu.bundle.events.push(f);
                comms.insert(e.task.tid, comm);
            }
            Kind::Rename => {
                let mut r = TaskRenameFtraceEvent::new();
                r.set_pid(e.task.tid as i32);
                r.set_oldcomm(comms.get(&e.task.tid).cloned().unwrap_or_default());
                r.set_newcomm(comm.clone());
                r.set_oom_score_adj(0);
                let mut f = full_event(ts, e.task.tid);
                f.set_task_rename(r);
                cpu.bundle.events.push(f);
                comms.insert(e.task.tid, comm);
            }
            Kind::Exit => {
                let mut x = SchedProcessExitFtraceEvent::new();
                x.set_comm(comm.clone());
                x.set_pid(e.task.tid as i32);
                x.set_tgid(e.task.tgid as i32);
                x.set_prio(e.prio as i32);
                let mut f = full_event(ts, e.task.tid);
                f.set_sched_process_exit(x);
                cpu.bundle.events.push(f);
            }
            Kind::WaitBegin | Kind::WaitEnd => {}
        }
        if !matches!(e.kind, Kind::WaitBegin | Kind::WaitEnd) {
            cpu.bundle.len += 1;
            cpu.last_ts = ts;
            if cpu.bundle.len >= BUNDLE_EVENTS {
                flush(o, cpu_id, cpu)?;
            }
        }
        // The waits, on their own sequence, closed as analyse::traces::sched_trace closes them.
        match (e.kind, e.wait()) {
            (Kind::WaitBegin, Some(w)) => waits.begin(o, e.task.tid, w, e.ts)?,
            (Kind::WaitEnd, Some(w)) => {
                if let Some(closed) = waits.stacks.end(e.task.tid, w, e.ts) {
                    let closed: Vec<ClosedWait> = closed.into_iter().map(|(c, _)| c).collect();
                    waits.end(o, &closed)?;
                }
            }
            (Kind::Exit, _) => {
                let closed = waits.stacks.close_thread(e.task.tid, e.ts);
                waits.end(o, &closed)?;
            }
            _ => {}
        }
    }
    let closed = waits.stacks.close_all(trace.end_ts);
    waits.end(o, &closed)?;
    for (cpu_id, cpu) in cpus.by_cpu.iter_mut() {
        flush(o, *cpu_id, cpu)?;
    }
    Ok(())
}
