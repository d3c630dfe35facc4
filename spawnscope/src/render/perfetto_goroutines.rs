//! A runtime-traced run's goroutines in its Perfetto trace: each goroutine's running slices on a
//! "goroutines" track under its OS thread's track (render/perfetto.rs's `thread_uuid`, by TID),
//! named by the goroutine's start function, its id a debug annotation (`goid`: the UI's search
//! and SQL find one by id). Appended after render/perfetto.rs's packets on a sequence of its own
//! ([`SEQ_GOROUTINES`]); a Trace is a stream of `packet` fields, so the two simply follow each
//! other. Kept apart from the kernel's waits, which are slices on the thread's own track: the two
//! need not nest.

use std::collections::BTreeSet;
use std::io::{self, Write};

use perfetto_protos::debug_annotation::{DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::thread_descriptor::ThreadDescriptor;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_descriptor::TrackDescriptor;
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent};
use protobuf::{CodedOutputStream, Message};

use crate::analyse::go_sched::SliceEdge;
use crate::analyse::sched_trace::boot;
use crate::render::perfetto::thread_uuid;

/// The goroutines' packets (render/perfetto.rs uses 1, 2 and 16 up).
pub const SEQ_GOROUTINES: u32 = 3;

/// A thread's goroutines track: its uuid (render/perfetto.rs's kinds are 1 to 4).
pub fn goroutines_uuid(tid: u32) -> u64 {
    5 << 32 | tid as u64
}

/// The name of a slice whose goroutine's creation the trace did not see.
const UNNAMED: &str = "goroutine";
const GOID: &str = "goid";

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub packets: u64,
    pub slices: u64,
}

/// Appends the goroutines' packets to `out`. `threads`: the TIDs goroutines ran on; `described`:
/// those that already have a thread descriptor (the kernel's trace), the others get one in
/// process `launched`. `offset_ns`: CLOCK_BOOTTIME − CLOCK_MONOTONIC (the kernel trace's clock);
/// None leaves the times on CLOCK_MONOTONIC.
pub fn write(
    out: &mut dyn Write,
    edges: impl Iterator<Item = io::Result<SliceEdge>>,
    threads: &[u32],
    described: &BTreeSet<u32>,
    launched: u32,
    functions: &[String],
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
        p.set_trusted_packet_sequence_id(SEQ_GOROUTINES);
        if *first {
            p.set_first_packet_on_sequence(true);
            p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
            // Names interned once: a start function's iid is its index + 2, UNNAMED's 1.
            let mut interned = InternedData::new();
            for (i, name) in std::iter::once(UNNAMED)
                .chain(functions.iter().map(String::as_str))
                .enumerate()
            {
                let mut n = EventName::new();
                n.set_iid(i as u64 + 1);
                n.set_name(name.to_string());
                interned.event_names.push(n);
            }
            let mut goid = DebugAnnotationName::new();
            goid.set_iid(1);
            goid.set_name(GOID.into());
            interned.debug_annotation_names.push(goid);
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
        d.set_uuid(goroutines_uuid(tid));
        d.set_parent_uuid(thread_uuid(tid));
        d.set_name("goroutines".into());
        p.set_track_descriptor(d);
        put(&p, &mut written)?;
    }
    // Within the sequence time never goes back (the parser's order across threads may).
    let mut last = 0u64;
    for edge in edges {
        let edge = edge?;
        let (ts, tid) = match edge {
            SliceEdge::Begin { ts_ns, tid, .. } | SliceEdge::End { ts_ns, tid } => (ts_ns, tid),
        };
        let ts = offset_ns.map_or(ts, |o| boot(ts, o)).max(last);
        last = ts;
        let mut p = packet(&mut first);
        p.set_timestamp(ts);
        let mut e = TrackEvent::new();
        e.set_track_uuid(goroutines_uuid(tid));
        match edge {
            SliceEdge::Begin { goid, function, .. } => {
                e.set_type(Type::TYPE_SLICE_BEGIN);
                e.set_name_iid(function.map_or(1, |f| f as u64 + 2));
                let mut a = DebugAnnotation::new();
                a.set_name_iid(1);
                a.set_uint_value(goid);
                e.debug_annotations.push(a);
                written.slices += 1;
            }
            SliceEdge::End { .. } => e.set_type(Type::TYPE_SLICE_END),
        }
        p.set_track_event(e);
        put(&p, &mut written)?;
    }
    stream.flush().map_err(io::Error::other)?;
    Ok(written)
}
