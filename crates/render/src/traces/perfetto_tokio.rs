//! A runtime-traced tokio run's polls in its Perfetto trace: each poll a slice on a "tokio tasks"
//! track under the OS thread's track that ran it (render/traces/perfetto.rs's `thread_uuid`, by TID),
//! named "poll", its task id a debug annotation (`task_id`: the UI's search and SQL find a task by
//! id). Appended after render/traces/perfetto.rs's packets (and the goroutines', which a tokio run has
//! none of) on a sequence of its own ([`SEQ_TOKIO`]), as render/traces/perfetto_goroutines.rs does.

use std::collections::BTreeSet;
use std::io::{self, Write};

use crate::traces::perfetto_runtime::{self, Edge, Sequence};
use analyse::runtimes::tokio_sched::PollEdge;

pub use crate::traces::perfetto_runtime::Written;

/// The tokio tasks' packets (render/traces/perfetto.rs uses 1, 2 and 16 up; the goroutines 3).
pub const SEQ_TOKIO: u32 = 4;
/// The track's name under each thread.
pub const TRACK_NAME: &str = "tokio tasks";
pub const SLICE_NAME: &str = "poll";
pub const TASK_ID: &str = "task_id";

/// A thread's tokio tasks track: its uuid (render/traces/perfetto.rs's kinds are 1 to 4, the
/// goroutines' 5).
pub fn tokio_uuid(tid: u32) -> u64 {
    6 << 32 | tid as u64
}

/// Appends the polls' packets to `out` (render/traces/perfetto_runtime.rs: the shape both runtimes
/// share). `threads`: the TIDs that polled; `described`: those that already have a thread
/// descriptor (the kernel's trace), the others get one in process `launched`. `offset_ns`:
/// CLOCK_BOOTTIME − CLOCK_MONOTONIC (the kernel trace's clock); None leaves the times on
/// CLOCK_MONOTONIC. `edges` in time order.
pub fn write(
    out: &mut dyn Write,
    edges: impl Iterator<Item = io::Result<PollEdge>>,
    threads: &[u32],
    described: &BTreeSet<u32>,
    launched: u32,
    offset_ns: Option<i64>,
) -> io::Result<Written> {
    let seq = Sequence {
        id: SEQ_TOKIO,
        event_names: vec![SLICE_NAME],
        id_name: TASK_ID,
        track_name: TRACK_NAME,
        track_uuid: tokio_uuid,
    };
    let edges = edges.map(|e| {
        e.map(|e| match e {
            PollEdge::Begin { ts_ns, tid, task } => Edge::Begin {
                ts_ns,
                tid,
                name_iid: 1,
                id: task,
            },
            PollEdge::End { ts_ns, tid } => Edge::End { ts_ns, tid },
        })
    });
    perfetto_runtime::write(out, &seq, edges, threads, described, launched, offset_ns)
}
