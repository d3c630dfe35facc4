//! A runtime-traced tokio run's polls in its Perfetto trace: each poll a slice on a "tokio tasks"
//! track under the OS thread's track that ran it (render/perfetto.rs's `thread_uuid`, by TID),
//! named "poll", its task id a debug annotation (`task_id`: the UI's search and SQL find a task by
//! id). Appended after render/perfetto.rs's packets (and the goroutines', which a tokio run has
//! none of) on a sequence of its own ([`SEQ_TOKIO`]), as render/perfetto_goroutines.rs does.

use std::collections::BTreeSet;
use std::io::{self, Write};

use perfetto_protos::debug_annotation::{DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent};
use protobuf::{CodedOutputStream, Message};

use crate::analyse::sched_trace::boot;
use crate::analyse::tokio_sched::PollEdge;
use crate::render::perfetto::thread_uuid;

/// The tokio tasks' packets (render/perfetto.rs uses 1, 2 and 16 up; the goroutines 3).
pub const SEQ_TOKIO: u32 = 4;
/// The track's name under each thread.
pub const TRACK_NAME: &str = "tokio tasks";
pub const SLICE_NAME: &str = "poll";
pub const TASK_ID: &str = "task_id";

/// A thread's tokio tasks track: its uuid (render/perfetto.rs's kinds are 1 to 4, the
/// goroutines' 5).
pub fn tokio_uuid(tid: u32) -> u64 {
    6 << 32 | tid as u64
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub packets: u64,
    pub slices: u64,
}

/// Appends the polls' packets to `out`. `threads`: the TIDs that polled; `described`: those that
/// already have a thread descriptor (the kernel's trace), the others get one in process
/// `launched`. `offset_ns`: CLOCK_BOOTTIME − CLOCK_MONOTONIC (the kernel trace's clock); None
/// leaves the times on CLOCK_MONOTONIC. `edges` in time order.
pub fn write(
    out: &mut dyn Write,
    edges: impl Iterator<Item = io::Result<PollEdge>>,
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
        p.set_trusted_packet_sequence_id(SEQ_TOKIO);
        if *first {
            p.set_first_packet_on_sequence(true);
            p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
            let mut interned = InternedData::new();
            let mut n = EventName::new();
            n.set_iid(1);
            n.set_name(SLICE_NAME.into());
            interned.event_names.push(n);
            let mut id = DebugAnnotationName::new();
            id.set_iid(1);
            id.set_name(TASK_ID.into());
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
        d.set_uuid(tokio_uuid(tid));
        d.set_parent_uuid(thread_uuid(tid));
        d.set_name(TRACK_NAME.into());
        p.set_track_descriptor(d);
        put(&p, &mut written)?;
    }
    // Within the sequence time never goes back (the merge is in time order; kept so regardless).
    let mut last = 0u64;
    for edge in edges {
        let edge = edge?;
        let (ts, tid) = match edge {
            PollEdge::Begin { ts_ns, tid, .. } | PollEdge::End { ts_ns, tid } => (ts_ns, tid),
        };
        let ts = offset_ns.map_or(ts, |o| boot(ts, o)).max(last);
        last = ts;
        let mut p = packet(&mut first);
        p.set_timestamp(ts);
        let mut e = TrackEvent::new();
        e.set_track_uuid(tokio_uuid(tid));
        match edge {
            PollEdge::Begin { task, .. } => {
                e.set_type(Type::TYPE_SLICE_BEGIN);
                e.set_name_iid(1);
                let mut a = DebugAnnotation::new();
                a.set_name_iid(1);
                a.set_uint_value(task);
                e.debug_annotations.push(a);
                written.slices += 1;
            }
            PollEdge::End { .. } => e.set_type(Type::TYPE_SLICE_END),
        }
        p.set_track_event(e);
        put(&p, &mut written)?;
    }
    stream.flush().map_err(io::Error::other)?;
    Ok(written)
}
