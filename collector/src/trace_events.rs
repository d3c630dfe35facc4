//! The trace's raw records: one per scheduler event of the run, as the BPF programs submit them
//! to the `trace_events` ring buffer (probes/collector.h, `enum sc_trace_field`) and as user space
//! writes them, unchanged, to the run directory. This module is the one reader and writer of
//! that layout: [`TraceEvent`] decoded from (and encoded to) [`RECORD_BYTES`] bytes.
//!
//! A record is `trace_field::NR` little-endian u64 slots; two 32-bit values share a slot as
//! `low | high << 32`. The layout is generated from the header (build.rs), so the two sides agree
//! by construction.

use std::io::{self, Read, Write};

use crate::layout::{trace_field as field, trace_kind, trace_wait};

/// Bytes of one raw record.
pub const RECORD_BYTES: usize = field::NR * 8;

/// What a record is about (`enum sc_trace_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `task` switched out (prev), `other` switched in (next); `arg` prev_state (0: preempted,
    /// still runnable); `comm` next's.
    Switch,
    /// `task` woken while `other` ran (the waker, or the task an interrupt came in on; 0: idle)
    /// to run on CPU `arg`; `comm` task's.
    Wakeup,
    /// As `Wakeup`, a new task's first.
    WakeupNew,
    /// `task` created by `other`; `arg` clone_flags; `comm` the new task's.
    NewTask,
    /// `task` renamed to `comm`.
    Rename,
    /// `task` exits (every thread has one); `comm` its.
    Exit,
    /// `task` begins a wait the collector times (`wait()` says which).
    WaitBegin,
    /// ... and ends it.
    WaitEnd,
}

impl Kind {
    fn from_raw(raw: u32) -> Option<Kind> {
        Some(match raw as usize {
            trace_kind::SWITCH => Kind::Switch,
            trace_kind::WAKEUP => Kind::Wakeup,
            trace_kind::WAKEUP_NEW => Kind::WakeupNew,
            trace_kind::NEWTASK => Kind::NewTask,
            trace_kind::RENAME => Kind::Rename,
            trace_kind::EXIT => Kind::Exit,
            trace_kind::WAIT_BEGIN => Kind::WaitBegin,
            trace_kind::WAIT_END => Kind::WaitEnd,
            _ => return None,
        })
    }

    fn raw(self) -> u32 {
        (match self {
            Kind::Switch => trace_kind::SWITCH,
            Kind::Wakeup => trace_kind::WAKEUP,
            Kind::WakeupNew => trace_kind::WAKEUP_NEW,
            Kind::NewTask => trace_kind::NEWTASK,
            Kind::Rename => trace_kind::RENAME,
            Kind::Exit => trace_kind::EXIT,
            Kind::WaitBegin => trace_kind::WAIT_BEGIN,
            Kind::WaitEnd => trace_kind::WAIT_END,
        }) as u32
    }
}

/// The waits a trace shows as slices (`enum sc_trace_wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wait {
    Futex,
    MmapLockRead,
    MmapLockWrite,
    Clone,
    /// A kernel lock (lock:contention_begin / _end).
    Lock,
}

impl Wait {
    /// Every wait, in the header's order.
    pub const ALL: [Wait; trace_wait::NR] = [
        Wait::Futex,
        Wait::MmapLockRead,
        Wait::MmapLockWrite,
        Wait::Clone,
        Wait::Lock,
    ];

    /// Its name as the header has it, lower case ("futex", "mmap_lock_read", …).
    pub fn name(self) -> &'static str {
        trace_wait::NAMES[self as usize]
    }

    fn from_raw(raw: u64) -> Option<Wait> {
        Wait::ALL.get(usize::try_from(raw).ok()?).copied()
    }
}

/// A task as the kernel names it: thread id and thread group (process) id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Task {
    pub tid: u32,
    pub tgid: u32,
}

impl Task {
    fn from_slot(v: u64) -> Task {
        Task {
            tid: v as u32,
            tgid: (v >> 32) as u32,
        }
    }

    fn slot(self) -> u64 {
        self.tid as u64 | (self.tgid as u64) << 32
    }
}

/// One raw record, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// CLOCK_BOOTTIME, ns.
    pub ts: u64,
    pub kind: Kind,
    pub cpu: u32,
    /// The task the event is about (a switch's prev).
    pub task: Task,
    /// The other task, where there is one (a switch's next, a wakeup's waker, a new task's
    /// creator), else tid 0.
    pub other: Task,
    /// Per kind: prev_state, target CPU, clone_flags or the wait (see [`Kind`]).
    pub arg: u64,
    /// Kernel priorities (0..139) of `task` and `other`.
    pub prio: u32,
    pub other_prio: u32,
    /// A comm, NUL-padded (see [`Kind`] for whose).
    pub comm: [u8; 16],
}

impl TraceEvent {
    /// Decodes one record; None for a kind this build does not know.
    pub fn decode(bytes: &[u8; RECORD_BYTES]) -> Option<TraceEvent> {
        let slot = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        let kind_cpu = slot(field::KIND_CPU);
        let prios = slot(field::PRIOS);
        let mut comm = [0u8; 16];
        comm.copy_from_slice(&bytes[field::COMM_LO * 8..field::COMM_LO * 8 + 16]);
        Some(TraceEvent {
            ts: slot(field::TS),
            kind: Kind::from_raw(kind_cpu as u32)?,
            cpu: (kind_cpu >> 32) as u32,
            task: Task::from_slot(slot(field::TASK)),
            other: Task::from_slot(slot(field::OTHER)),
            arg: slot(field::ARG),
            prio: prios as u32,
            other_prio: (prios >> 32) as u32,
            comm,
        })
    }

    /// The record's bytes, as the BPF programs write them.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut bytes = [0u8; RECORD_BYTES];
        let mut put = |i: usize, v: u64| bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        put(field::TS, self.ts);
        put(
            field::KIND_CPU,
            self.kind.raw() as u64 | (self.cpu as u64) << 32,
        );
        put(field::TASK, self.task.slot());
        put(field::OTHER, self.other.slot());
        put(field::ARG, self.arg);
        put(
            field::PRIOS,
            self.prio as u64 | (self.other_prio as u64) << 32,
        );
        bytes[field::COMM_LO * 8..field::COMM_LO * 8 + 16].copy_from_slice(&self.comm);
        bytes
    }

    /// A record whose tasks both have a nice-0 task's priority (120): what tests and tools that
    /// make raw traces need.
    pub fn nice_zero(
        ts: u64,
        kind: Kind,
        cpu: u32,
        task: Task,
        other: Task,
        arg: u64,
        comm: &str,
    ) -> TraceEvent {
        TraceEvent {
            ts,
            kind,
            cpu,
            task,
            other,
            arg,
            prio: 120,
            other_prio: 120,
            comm: comm_bytes(comm),
        }
    }

    /// The comm as text (up to its first NUL, lossy).
    pub fn comm(&self) -> String {
        let end = self.comm.iter().position(|&b| b == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }

    /// The wait of a WaitBegin / WaitEnd record.
    pub fn wait(&self) -> Option<Wait> {
        matches!(self.kind, Kind::WaitBegin | Kind::WaitEnd)
            .then(|| Wait::from_raw(self.arg))
            .flatten()
    }

    /// For a switch: whether prev was still runnable (preempted) rather than blocking.
    pub fn preempted(&self) -> bool {
        self.kind == Kind::Switch && self.arg == 0
    }
}

/// A comm as its 16 NUL-padded bytes (longer names cut, as the kernel does at 15).
pub fn comm_bytes(name: &str) -> [u8; 16] {
    let mut comm = [0u8; 16];
    let n = name.len().min(15);
    comm[..n].copy_from_slice(&name.as_bytes()[..n]);
    comm
}

/// Reads records one at a time from a raw trace file: bounded memory however long it is.
pub struct Reader<R: Read> {
    inner: R,
    /// Records whose kind this build does not know, skipped.
    pub unknown: u64,
    /// Bytes at the end too few for a record (a trace cut short while written).
    pub trailing_bytes: usize,
}

impl<R: Read> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            unknown: 0,
            trailing_bytes: 0,
        }
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = io::Result<TraceEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut buf = [0u8; RECORD_BYTES];
            let mut filled = 0;
            while filled < RECORD_BYTES {
                match self.inner.read(&mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Some(Err(e)),
                }
            }
            if filled < RECORD_BYTES {
                self.trailing_bytes = filled;
                return None;
            }
            match TraceEvent::decode(&buf) {
                Some(event) => return Some(Ok(event)),
                None => self.unknown += 1,
            }
        }
    }
}

/// Writes records (tests and tools that make a raw trace; the collector writes the ring
/// buffer's bytes as they come).
pub fn write_events<'a>(
    out: &mut impl Write,
    events: impl IntoIterator<Item = &'a TraceEvent>,
) -> io::Result<()> {
    for event in events {
        out.write_all(&event.encode())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_its_bytes() {
        let event = TraceEvent {
            ts: 123_456_789_012,
            kind: Kind::Switch,
            cpu: 1,
            task: Task {
                tid: 4242,
                tgid: 4200,
            },
            other: Task { tid: 77, tgid: 77 },
            arg: 1,
            prio: 120,
            other_prio: 100,
            comm: comm_bytes("a-long-thread-name"),
        };
        let bytes = event.encode();
        assert_eq!(TraceEvent::decode(&bytes), Some(event));
        assert_eq!(event.comm(), "a-long-thread-n");
        assert!(!event.preempted());
        // The slots as the C side writes them.
        assert_eq!(&bytes[..8], &123_456_789_012u64.to_le_bytes());
        assert_eq!(
            u64::from_le_bytes(bytes[16..24].try_into().unwrap()),
            4242 | 4200 << 32
        );
    }

    #[test]
    fn the_reader_skips_unknown_kinds_and_says_what_was_cut_short() {
        let wait = TraceEvent {
            ts: 1,
            kind: Kind::WaitBegin,
            cpu: 0,
            task: Task { tid: 5, tgid: 5 },
            other: Task::default(),
            arg: trace_wait::MMAP_LOCK_WRITE as u64,
            prio: 120,
            other_prio: 0,
            comm: [0; 16],
        };
        let mut bytes = Vec::new();
        write_events(&mut bytes, [&wait]).unwrap();
        let mut unknown = wait.encode();
        unknown[8] = 200; // a kind from a newer header
        bytes.extend_from_slice(&unknown);
        bytes.extend_from_slice(&wait.encode()[..10]);
        let mut reader = Reader::new(&bytes[..]);
        let read: Vec<_> = reader.by_ref().map(Result::unwrap).collect();
        assert_eq!(read, vec![wait]);
        assert_eq!(read[0].wait(), Some(Wait::MmapLockWrite));
        assert_eq!(read[0].wait().unwrap().name(), "mmap_lock_write");
        assert_eq!((reader.unknown, reader.trailing_bytes), (1, 10));
    }
}
