//! The Go runtime's Ps in a runtime-traced run's Perfetto trace (analyse/runtimes/go_procs.rs's edges):
//! a top-level "Go Ps" track whose children are one track per P (in P order), with a slice
//! `M <tid>` while that M holds the P (its `m` and `proc` as debug annotations) and an instant
//! `steal` where the P was taken from an M in a syscall (`stolen_from`, `by`); and, through
//! render/traces/perfetto_runtime.rs, a "P" track under each M's thread track with a slice `P <n>` while
//! it holds that P. Each on a sequence of its own ([`SEQ_GO_PS`], [`SEQ_GO_MS`]), appended after
//! the other packets; names interned in the sequence's first packet; time never goes back.

use std::collections::BTreeSet;
use std::io::{self, Write};

use perfetto_protos::debug_annotation::{DebugAnnotation, DebugAnnotationName};
use perfetto_protos::interned_data::InternedData;
use perfetto_protos::trace_packet::{trace_packet::SequenceFlags, TracePacket};
use perfetto_protos::track_descriptor::{track_descriptor::ChildTracksOrdering, TrackDescriptor};
use perfetto_protos::track_event::{track_event::Type, EventName, TrackEvent};
use protobuf::{CodedOutputStream, Message};

use crate::traces::perfetto_runtime::{self, Edge, Sequence, Written};
use analyse::runtimes::go_procs::ProcEdge;
use analyse::traces::sched_trace::boot;

/// The Ps' packets and the Ms' "P" tracks' (render/traces/perfetto.rs uses 1, 2 and 16 up; the
/// goroutines 3, tokio 4).
pub const SEQ_GO_PS: u32 = 5;
pub const SEQ_GO_MS: u32 = 6;

/// The "Go Ps" group's uuid, and its P tracks' (render/traces/perfetto.rs's kinds are 1 to 4, the
/// goroutines' 5, tokio's 6).
pub const GROUP_UUID: u64 = 7 << 32 | 0xffff_ffff;
pub fn proc_uuid(proc: u32) -> u64 {
    7 << 32 | proc as u64
}
/// An M's "P" track, under its thread's.
pub fn m_procs_uuid(tid: u32) -> u64 {
    8 << 32 | tid as u64
}

pub const GROUP_NAME: &str = "Go Ps";
const STEAL: &str = "steal";
// Debug annotation names (iids 1 up).
const ANNOTATIONS: [&str; 4] = ["m", "proc", "stolen_from", "by"];

/// Appends the Ps' tracks: `procs` the Ps, `ms` the Ms that held one (their slices' names,
/// `M <tid>`, interned in this order), `edges` in time order. `offset_ns`: CLOCK_BOOTTIME −
/// CLOCK_MONOTONIC; None leaves the times on CLOCK_MONOTONIC.
pub fn write_ps(
    out: &mut dyn Write,
    edges: &[ProcEdge],
    procs: &[u32],
    ms: &[u32],
    offset_ns: Option<i64>,
) -> io::Result<Written> {
    let mut stream = CodedOutputStream::new(out);
    let mut written = Written::default();
    let mut put = |p: TracePacket, written: &mut Written| -> io::Result<()> {
        let bytes = p.write_to_bytes().map_err(io::Error::other)?;
        stream.write_bytes(1, &bytes).map_err(io::Error::other)?;
        written.packets += 1;
        Ok(())
    };
    let packet = || {
        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(SEQ_GO_PS);
        p.set_sequence_flags(SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32);
        p
    };
    // The first packet: the names, and the group's track.
    let mut p = TracePacket::new();
    p.set_trusted_packet_sequence_id(SEQ_GO_PS);
    p.set_first_packet_on_sequence(true);
    p.set_sequence_flags(SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32);
    let mut interned = InternedData::new();
    for (i, name) in ms
        .iter()
        .map(|m| format!("M {m}"))
        .chain([STEAL.to_string()])
        .enumerate()
    {
        let mut n = EventName::new();
        n.set_iid(i as u64 + 1);
        n.set_name(name);
        interned.event_names.push(n);
    }
    for (i, name) in ANNOTATIONS.iter().enumerate() {
        let mut n = DebugAnnotationName::new();
        n.set_iid(i as u64 + 1);
        n.set_name(name.to_string());
        interned.debug_annotation_names.push(n);
    }
    p.interned_data = Some(interned).into();
    let mut group = TrackDescriptor::new();
    group.set_uuid(GROUP_UUID);
    group.set_name(GROUP_NAME.into());
    group.set_child_ordering(ChildTracksOrdering::EXPLICIT);
    p.set_track_descriptor(group);
    put(p, &mut written)?;
    for &proc in procs {
        let mut d = TrackDescriptor::new();
        d.set_uuid(proc_uuid(proc));
        d.set_parent_uuid(GROUP_UUID);
        d.set_name(format!("P {proc}"));
        d.set_sibling_order_rank(proc as i32);
        let mut p = packet();
        p.set_track_descriptor(d);
        put(p, &mut written)?;
    }
    let m_iid = |m: u32| ms.binary_search(&m).map_or(0, |i| i as u64 + 1);
    let steal_iid = ms.len() as u64 + 1;
    let annotation = |iid: u64, v: u64| {
        let mut a = DebugAnnotation::new();
        a.set_name_iid(iid);
        a.set_uint_value(v);
        a
    };
    let mut last = 0u64;
    for edge in edges {
        let (ts, proc) = match *edge {
            ProcEdge::Begin { ts_ns, proc, .. }
            | ProcEdge::End { ts_ns, proc, .. }
            | ProcEdge::Steal { ts_ns, proc, .. } => (ts_ns, proc),
        };
        let ts = offset_ns.map_or(ts, |o| boot(ts, o)).max(last);
        last = ts;
        let mut e = TrackEvent::new();
        e.set_track_uuid(proc_uuid(proc));
        match *edge {
            ProcEdge::Begin { m, .. } => {
                e.set_type(Type::TYPE_SLICE_BEGIN);
                e.set_name_iid(m_iid(m));
                e.debug_annotations.push(annotation(1, m as u64));
                e.debug_annotations.push(annotation(2, proc as u64));
                written.slices += 1;
            }
            ProcEdge::End { .. } => e.set_type(Type::TYPE_SLICE_END),
            ProcEdge::Steal { from, by, .. } => {
                e.set_type(Type::TYPE_INSTANT);
                e.set_name_iid(steal_iid);
                e.debug_annotations.push(annotation(2, proc as u64));
                if let Some(m) = from {
                    e.debug_annotations.push(annotation(3, m as u64));
                }
                if let Some(m) = by {
                    e.debug_annotations.push(annotation(4, m as u64));
                }
            }
        }
        let mut p = packet();
        p.set_timestamp(ts);
        p.set_track_event(e);
        put(p, &mut written)?;
    }
    stream.flush().map_err(io::Error::other)?;
    Ok(written)
}

/// Appends each M's "P" track under its thread (render/traces/perfetto_runtime.rs): `ms` the Ms that
/// held a P, `described` the TIDs that already have a thread descriptor, the others get one in
/// process `launched`; `procs` the Ps (the slices' names, `P <n>`).
pub fn write_ms(
    out: &mut dyn Write,
    edges: &[ProcEdge],
    procs: &[u32],
    ms: &[u32],
    described: &BTreeSet<u32>,
    launched: u32,
    offset_ns: Option<i64>,
) -> io::Result<Written> {
    let names: Vec<String> = procs.iter().map(|p| format!("P {p}")).collect();
    let seq = Sequence {
        id: SEQ_GO_MS,
        event_names: names.iter().map(String::as_str).collect(),
        id_name: "proc",
        track_name: "P",
        track_uuid: m_procs_uuid,
    };
    let iid = |p: u32| procs.binary_search(&p).map_or(0, |i| i as u64 + 1);
    let edges = edges.iter().filter_map(|e| match *e {
        ProcEdge::Begin { ts_ns, proc, m } => Some(Ok(Edge::Begin {
            ts_ns,
            tid: m,
            name_iid: iid(proc),
            id: proc as u64,
        })),
        ProcEdge::End { ts_ns, m, .. } => Some(Ok(Edge::End { ts_ns, tid: m })),
        ProcEdge::Steal { .. } => None,
    });
    perfetto_runtime::write(out, &seq, edges, ms, described, launched, offset_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfetto_protos::track_event::track_event::Type;
    use protobuf::CodedInputStream;

    fn packets(bytes: &[u8]) -> Vec<TracePacket> {
        let mut input = CodedInputStream::from_bytes(bytes);
        let mut out = Vec::new();
        while input.read_raw_tag_or_eof().unwrap().is_some() {
            out.push(input.read_message().unwrap());
        }
        out
    }

    /// Decoded with perfetto_protos: the group, a track per P under it in P order, a slice per
    /// hold named by its M with the steal an instant, and each M's "P" track under its thread.
    #[test]
    fn the_ps_decode_as_a_group_of_p_tracks_and_the_ms_as_p_tracks() {
        let edges = [
            ProcEdge::Begin {
                ts_ns: 100,
                proc: 0,
                m: 10,
            },
            ProcEdge::End {
                ts_ns: 300,
                proc: 0,
                m: 10,
            },
            ProcEdge::Steal {
                ts_ns: 300,
                proc: 0,
                from: Some(10),
                by: Some(30),
            },
            ProcEdge::Begin {
                ts_ns: 350,
                proc: 0,
                m: 20,
            },
            ProcEdge::Begin {
                ts_ns: 360,
                proc: 1,
                m: 10,
            },
            ProcEdge::End {
                ts_ns: 400,
                proc: 0,
                m: 20,
            },
            ProcEdge::End {
                ts_ns: 500,
                proc: 1,
                m: 10,
            },
        ];
        let mut out = Vec::new();
        let ps = write_ps(&mut out, &edges, &[0, 1], &[10, 20], Some(1_000)).unwrap();
        assert_eq!(ps.slices, 3);
        let decoded = packets(&out);
        let names: Vec<String> = decoded[0]
            .interned_data
            .event_names
            .iter()
            .map(|n| n.name().to_string())
            .collect();
        assert_eq!(names, ["M 10", "M 20", "steal"]);
        let group = decoded[0].track_descriptor();
        assert_eq!((group.uuid(), group.name()), (GROUP_UUID, GROUP_NAME));
        let p1 = decoded[2].track_descriptor();
        assert_eq!(
            (p1.name(), p1.parent_uuid(), p1.sibling_order_rank()),
            ("P 1", GROUP_UUID, 1)
        );
        let events: Vec<_> = decoded[3..]
            .iter()
            .map(|p| (p.timestamp(), p.track_event().clone()))
            .collect();
        assert_eq!(events.len(), edges.len());
        assert_eq!(events[0].0, 1_100, "on BOOTTIME");
        assert_eq!(events[0].1.name_iid(), 1);
        assert_eq!(events[2].1.type_(), Type::TYPE_INSTANT);
        assert_eq!(events[2].1.name_iid(), 3);
        let steal: Vec<u64> = events[2]
            .1
            .debug_annotations
            .iter()
            .map(|a| a.uint_value())
            .collect();
        assert_eq!(steal, [0, 10, 30]);
        assert_eq!(events[3].1.name_iid(), 2);
        assert_eq!(events[4].1.track_uuid(), proc_uuid(1));

        let mut out = Vec::new();
        let ms = write_ms(&mut out, &edges, &[0, 1], &[10, 20], &[10].into(), 7, None).unwrap();
        assert_eq!(ms.slices, 3);
        let decoded = packets(&out);
        let tracks: Vec<_> = decoded
            .iter()
            .filter(|p| p.has_track_descriptor())
            .map(|p| p.track_descriptor().clone())
            .collect();
        // M 20 had no thread descriptor: given one, then its "P" track.
        assert!(tracks.iter().any(|d| d
            .thread
            .as_ref()
            .is_some_and(|t| t.tid() == 20 && t.pid() == 7)));
        let p_tracks: Vec<_> = tracks
            .iter()
            .filter(|d| d.name() == "P")
            .map(|d| (d.uuid(), d.parent_uuid()))
            .collect();
        assert_eq!(
            p_tracks,
            [
                (m_procs_uuid(10), crate::traces::perfetto::thread_uuid(10)),
                (m_procs_uuid(20), crate::traces::perfetto::thread_uuid(20))
            ]
        );
        let begins: Vec<(u64, u64)> = decoded
            .iter()
            .filter(|p| p.has_track_event() && p.track_event().type_() == Type::TYPE_SLICE_BEGIN)
            .map(|p| (p.track_event().track_uuid(), p.track_event().name_iid()))
            .collect();
        assert_eq!(
            begins,
            [
                (m_procs_uuid(10), 1),
                (m_procs_uuid(20), 1),
                (m_procs_uuid(10), 2)
            ]
        );
    }
}
