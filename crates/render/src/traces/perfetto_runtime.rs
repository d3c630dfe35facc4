//! What a runtime's own slices in a run's Perfetto trace share (the goroutines' running slices,
//! render/traces/perfetto_goroutines.rs; tokio's polls, render/traces/perfetto_tokio.rs): a sequence of their
//! own, appended after render/traces/perfetto.rs's packets (a Trace is a stream of `packet` fields, so
//! they simply follow each other), its names interned in its first packet; a track per OS thread
//! under that thread's track (render/traces/perfetto.rs's `thread_uuid`, by TID; a thread descriptor
//! first where the kernel's trace gave none); each slice begun with its name and an id as a debug
//! annotation (the UI's search and SQL find a goroutine or a task by it) and ended; within the
//! sequence time never goes back.

use std::collections::BTreeSet;
use std::io::{self, Write};

use perfetto_protos::debug_annotation::{DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent};
use protobuf::{CodedOutputStream, Message};

use crate::traces::perfetto::thread_uuid;
use analyse::traces::sched_trace::boot;

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub packets: u64,
    pub slices: u64,
}

/// A slice's edge as written, on CLOCK_MONOTONIC: a begin names its slice (the iid of one of
/// [`Sequence::event_names`], 1 the first) and carries its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    Begin {
        ts_ns: u64,
        tid: u32,
        name_iid: u64,
        id: u64,
    },
    End {
        ts_ns: u64,
        tid: u32,
    },
}

/// A runtime's sequence: its id, the slices' names (interned, iid = index + 1), the id's
/// annotation name, and each thread's track (name and uuid).
pub struct Sequence<'a> {
    pub id: u32,
    pub event_names: Vec<&'a str>,
    pub id_name: &'a str,
    pub track_name: &'a str,
    pub track_uuid: fn(u32) -> u64,
}

/// Appends the sequence's packets to `out`. `threads`: the TIDs with slices; `described`: those
/// that already have a thread descriptor (the kernel's trace), the others get one in process
/// `launched`. `offset_ns`: CLOCK_BOOTTIME − CLOCK_MONOTONIC (the kernel trace's clock); None
/// leaves the times on CLOCK_MONOTONIC.
pub fn write(
    out: &mut dyn Write,
    seq: &Sequence,
    edges: impl Iterator<Item = io::Result<Edge>>,
    threads: &[u32],
    described: &BTreeSet<u32>,
    launched: u32,
    offset_ns: Option<i64>,
) -> io::Result<Written> {
    let mut stream = CodedOutputStream::new(out);
    let mut written = Written::default();
    let mut put = |p: &TracePacket, written: &mut Written| -> io::Result<()> {
        let bytes = p.write_to_bytes().map_err(io::Error::other)?;
        stream.write_bytes(1, &bytes).map_err(io::Error::other)?;
        written.packets += 1;
        Ok(())
    };
    let mut first = true;
    let packet = |first: &mut bool| {
        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(seq.id);
        if *first {
            p.set_first_packet_on_sequence(true);
            p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
            let mut interned = InternedData::new();
            for (i, name) in seq.event_names.iter().enumerate() {
                let mut n = EventName::new();
                n.set_iid(i as u64 + 1);
                n.set_name(name.to_string());
                interned.event_names.push(n);
            }
            let mut id = DebugAnnotationName::new();
            id.set_iid(1);
            id.set_name(seq.id_name.into());
            interned.debug_annotation_names.push(id);
            p.interned_data = Some(interned).into();
            *first = false;
        } else {
            p.set_sequence_flags(SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32);
        }
        p
    };
    for &tid in threads {
        let mut p = packet(&mut first);
        if !described.contains(&tid) {
            let mut th = ThreadDescriptor::new();
            th.set_pid(launched as i32);
            th.set_tid(tid as i32);
            let mut d = TrackDescriptor::new();
            d.set_uuid(thread_uuid(tid));
            d.thread = Some(th).into();
            p.set_track_descriptor(d);
            put(&p, &mut written)?;
            p = packet(&mut first);
        }
        let mut d = TrackDescriptor::new();
        d.set_uuid((seq.track_uuid)(tid));
        d.set_parent_uuid(thread_uuid(tid));
        d.set_name(seq.track_name.into());
        p.set_track_descriptor(d);
        put(&p, &mut written)?;
    }
    // Time never goes back within the sequence (a runtime's order across threads may).
    let mut last = 0u64;
    for edge in edges {
        let edge = edge?;
        let (ts, tid) = match edge {
            Edge::Begin { ts_ns, tid, .. } | Edge::End { ts_ns, tid } => (ts_ns, tid),
        };
        let ts = offset_ns.map_or(ts, |o| boot(ts, o)).max(last);
        last = ts;
        let mut p = packet(&mut first);
        p.set_timestamp(ts);
        let mut e = TrackEvent::new();
        e.set_track_uuid((seq.track_uuid)(tid));
        match edge {
            Edge::Begin { name_iid, id, .. } => {
                e.set_type(Type::TYPE_SLICE_BEGIN);
                e.set_name_iid(name_iid);
                let mut a = DebugAnnotation::new();
                a.set_name_iid(1);
                a.set_uint_value(id);
                e.debug_annotations.push(a);
                written.slices += 1;
            }
            Edge::End { .. } => e.set_type(Type::TYPE_SLICE_END),
        }
        p.set_track_event(e);
        put(&p, &mut written)?;
    }
    stream.flush().map_err(io::Error::other)?;
    Ok(written)
}
