//! A runtime-traced run's goroutines in its Perfetto trace: each goroutine's running slices on a
//! "goroutines" track under its OS thread's track (render/traces/perfetto.rs's `thread_uuid`, by TID),
//! named by the goroutine's start function, its id a debug annotation (`goid`: the UI's search
//! and SQL find one by id). Appended after render/traces/perfetto.rs's packets on a sequence of its own
//! ([`SEQ_GOROUTINES`]); a Trace is a stream of `packet` fields, so the two simply follow each
//! other. Kept apart from the kernel's waits, which are slices on the thread's own track: the two
//! need not nest.

use std::collections::BTreeSet;
use std::io::{self, Write};

use crate::traces::perfetto_runtime::{self, Edge, Sequence};
use analyse::runtimes::go_sched::SliceEdge;

pub use crate::traces::perfetto_runtime::Written;

/// The goroutines' packets (render/traces/perfetto.rs uses 1, 2 and 16 up).
pub const SEQ_GOROUTINES: u32 = 3;

/// A thread's goroutines track: its uuid (render/traces/perfetto.rs's kinds are 1 to 4).
pub fn goroutines_uuid(tid: u32) -> u64 {
    5 << 32 | tid as u64
}

/// The name of a slice whose goroutine's creation the trace did not see.
const UNNAMED: &str = "goroutine";
const GOID: &str = "goid";

/// Appends the goroutines' packets to `out` (render/traces/perfetto_runtime.rs: the shape both
/// runtimes share). `threads`: the TIDs goroutines ran on; `described`: those that already have
/// a thread descriptor (the kernel's trace), the others get one in process `launched`;
/// `functions`: the start functions a slice is named by (interned after UNNAMED: a function's
/// iid is its index + 2). `offset_ns`: CLOCK_BOOTTIME − CLOCK_MONOTONIC (the kernel trace's
/// clock); None leaves the times on CLOCK_MONOTONIC.
pub fn write(
    out: &mut dyn Write,
    edges: impl Iterator<Item = io::Result<SliceEdge>>,
    threads: &[u32],
    described: &BTreeSet<u32>,
    launched: u32,
    functions: &[String],
    offset_ns: Option<i64>,
) -> io::Result<Written> {
    let seq = Sequence {
        id: SEQ_GOROUTINES,
        event_names: std::iter::once(UNNAMED)
            .chain(functions.iter().map(String::as_str))
            .collect(),
        id_name: GOID,
        track_name: "goroutines",
        track_uuid: goroutines_uuid,
    };
    let edges = edges.map(|e| {
        e.map(|e| match e {
            SliceEdge::Begin {
                ts_ns,
                tid,
                goid,
                function,
            } => Edge::Begin {
                ts_ns,
                tid,
                name_iid: function.map_or(1, |f| f as u64 + 2),
                id: goid,
            },
            SliceEdge::End { ts_ns, tid } => Edge::End { ts_ns, tid },
        })
    });
    perfetto_runtime::write(out, &seq, edges, threads, described, launched, offset_ns)
}
