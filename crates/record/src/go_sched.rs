//! A runtime-traced goroutines run's raw records (`run --runtime-trace`): the Go execution trace
//! the workload wrote (GO_TRACE) and what gotrace-reduce made of it — one record per goroutine
//! state change (GO_SCHED, laid out as schema/go-sched-record.tsv says; a unit test checks this
//! reader against that table) and its tables and counts (GO_SCHED_SUMMARY). Pure reads.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use crate::{GO_SCHED, GO_SCHED_SUMMARY};

/// The file's first bytes: the magic, then the format version and the record size (u32 each).
pub const MAGIC: &[u8; 8] = b"SPGOSCH1";
pub const HEADER_BYTES: usize = 16;
/// Version 3: the records are the trace's first `max_records` (GO_SCHED_SUMMARY's counts stay
/// over the whole trace and count what lies past the cap); the layout is version 2's. Version 4:
/// flags bit 1 (FLAG_WAIT_START_MOVED), never set before it.
pub const FORMAT_VERSION: u32 = 4;
/// Versions 1 and 2 (every record kept) are read too: version 1's `pad` was zero where `flags`
/// is (nothing said moved).
pub const OLDEST_VERSION: u32 = 1;
pub const RECORD_BYTES: usize = 40;

/// flags: the parser moved the record's time (see `GoChange::time_moved`).
pub const FLAG_TIME_MOVED: u16 = 1;
/// flags: on a record with a wait, the readying change's time was the parser's (see
/// `GoChange::wait_start_moved`).
pub const FLAG_WAIT_START_MOVED: u16 = 2;

/// A goroutine's state as x/exp/trace names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GoState {
    /// Its state before the trace began (the trace's first mention only).
    Undetermined,
    NotExist,
    Runnable,
    Running,
    Waiting,
    Syscall,
}

impl GoState {
    fn of(code: u8) -> Option<GoState> {
        use GoState::*;
        [Undetermined, NotExist, Runnable, Running, Waiting, Syscall]
            .get(code as usize)
            .copied()
    }

    /// Executing on its thread (running Go code or in a system call).
    pub fn on_thread(self) -> bool {
        matches!(self, GoState::Running | GoState::Syscall)
    }
}

/// One goroutine state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoChange {
    /// CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    pub goid: u64,
    /// A start readied by its creation or an unblock: ns since (the reducer's rule).
    pub wait_ns: Option<u64>,
    /// The OS thread that emitted it (for a creation or an unblock, the readier's).
    pub tid: Option<u32>,
    pub proc: Option<u16>,
    pub from: GoState,
    pub to: GoState,
    /// Index into the summary's `reasons` (0: none).
    pub reason: u16,
    /// A creation's start function: index into the summary's `functions`.
    pub function: Option<u32>,
    /// The parser moved its time forward to keep its one time order (flags bit 0): `ts_ns` is
    /// the parser's; the event happened at or before it, not before its thread's previous one.
    pub time_moved: bool,
    /// On a record with a wait: the parser moved the readying change's time (flags bit 1), so
    /// the wait's start is the parser's and its true length unknown (format 4 on).
    pub wait_start_moved: bool,
}

impl GoChange {
    pub fn decode(b: &[u8; RECORD_BYTES]) -> io::Result<GoChange> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u16_at = |i: usize| u16::from_le_bytes(b[i..i + 2].try_into().unwrap());
        let state = |code: u8| {
            GoState::of(code).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("goroutine state {code} unknown"),
                )
            })
        };
        let tid = u32_at(24) as i32;
        let proc = u16_at(28) as i16;
        Ok(GoChange {
            ts_ns: u64_at(0),
            goid: u64_at(8),
            wait_ns: Some(u64_at(16)).filter(|&w| w != u64::MAX),
            tid: (tid >= 0).then_some(tid as u32),
            proc: (proc >= 0).then_some(proc as u16),
            from: state(b[30])?,
            to: state(b[31])?,
            reason: u16_at(32),
            function: Some(u32_at(36)).filter(|&f| f != u32::MAX),
            time_moved: u16_at(34) & FLAG_TIME_MOVED != 0,
            wait_start_moved: u16_at(34) & FLAG_WAIT_START_MOVED != 0,
        })
    }
}

/// GO_SCHED_SUMMARY: the reducer's tables, clock and counts.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GoSchedSummary {
    pub format_version: u32,
    /// The records in GO_SCHED (versions 1 and 2 call it `records`: every change).
    #[serde(alias = "records")]
    pub records_kept: u64,
    /// The reducer's cap on the records (version 3); None: every change kept.
    #[serde(default)]
    pub max_records: Option<u64>,
    /// The last kept record's time (CLOCK_MONOTONIC ns); every change before it is kept.
    #[serde(default)]
    pub kept_until_ns: Option<u64>,
    /// The latest kept time the parser did not move: where the kept records' own times reach.
    #[serde(default)]
    pub kept_until_own_ns: Option<u64>,
    /// The changes past the cap: counted in `counts`, not in GO_SCHED.
    #[serde(default)]
    pub records_past_cap: PastCap,
    pub reasons: Vec<String>,
    pub functions: Vec<String>,
    pub clock: GoClock,
    pub counts: GoCounts,
    /// The Ps' counts (record/go_procs.rs); absent where the reducer predates them.
    #[serde(default)]
    pub procs: Option<crate::go_procs::GoProcsCounts>,
}

/// The changes the reducer read past its cap: counted, not written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct PastCap {
    pub records: u64,
    /// Of them, starts with a readied→running wait (not among the kept records' waits).
    pub readied_to_running: u64,
    /// By "From->To".
    pub transitions: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GoClock {
    /// Sync events with a clock snapshot; 0: the trace's clock taken as CLOCK_MONOTONIC.
    pub snapshots: u64,
    pub first_mono_minus_trace_ns: i64,
    pub last_mono_minus_trace_ns: i64,
    /// The trace's first and last goroutine change (CLOCK_MONOTONIC ns), kept or not.
    #[serde(default)]
    pub first_ns: u64,
    #[serde(default)]
    pub last_ns: u64,
    /// Records whose time the parser moved (flagged in the records).
    #[serde(default)]
    pub moved_by_parser: u64,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GoCounts {
    pub created: u64,
    pub created_by_function: BTreeMap<String, u64>,
    pub at_start: u64,
    pub started: u64,
    pub blocked: u64,
    pub blocked_by_reason: BTreeMap<String, u64>,
    pub unblocked: u64,
    pub stopped: u64,
    pub stopped_by_reason: BTreeMap<String, u64>,
    pub syscalls: u64,
    pub syscalls_blocked: u64,
    pub destroyed: u64,
    pub readied_to_running: u64,
}

/// Whether the run directory holds the reducer's records.
pub fn has_records(dir: &Path) -> bool {
    dir.join(GO_SCHED).is_file() && dir.join(GO_SCHED_SUMMARY).is_file()
}

pub fn read_summary(dir: &Path) -> anyhow::Result<GoSchedSummary> {
    crate::read_json(dir, GO_SCHED_SUMMARY)
}

/// The records, one at a time (bounded memory).
pub struct Changes<R> {
    inner: R,
    /// Bytes at the end too few for a record (a file cut short).
    pub trailing_bytes: usize,
}

pub fn open_changes(dir: &Path) -> io::Result<Changes<BufReader<File>>> {
    let file = File::open(dir.join(GO_SCHED))?;
    Changes::new(BufReader::with_capacity(1 << 20, file))
}

impl<R: Read> Changes<R> {
    /// Checks the header: the magic, this version, this record size.
    pub fn new(mut inner: R) -> io::Result<Self> {
        let mut h = [0u8; HEADER_BYTES];
        inner.read_exact(&mut h)?;
        let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
        let size = u32::from_le_bytes(h[12..16].try_into().unwrap());
        if &h[..8] != MAGIC
            || !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version)
            || size as usize != RECORD_BYTES
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not go-sched records of version {OLDEST_VERSION} to {FORMAT_VERSION} ({RECORD_BYTES}-byte records): header {h:?}"),
            ));
        }
        Ok(Changes {
            inner,
            trailing_bytes: 0,
        })
    }
}

impl<R: Read> Iterator for Changes<R> {
    type Item = io::Result<GoChange>;

    fn next(&mut self) -> Option<Self::Item> {
        let b =
            super::next_fixed_record::<RECORD_BYTES>(&mut self.inner, &mut self.trailing_bytes)?;
        Some(b.and_then(|b| GoChange::decode(&b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This reader takes each field where schema/go-sched-record.tsv puts it (the table the
    /// reducer's own test checks its writer against).
    #[test]
    fn the_layout_is_the_tables() {
        let table = include_str!("../../../schema/go-sched-record.tsv");
        let mut b = [0u8; RECORD_BYTES];
        let mut end = 0;
        let values: BTreeMap<&str, u64> = [
            ("ts_ns", 0x0102030405060708u64),
            ("goid", 0x1112131415161718),
            ("wait_ns", 0x2122232425262728),
            ("tid", 0x31323334),
            ("proc", 0x0142),
            ("from", 3),
            ("to", 4),
            ("reason", 0x7172),
            ("flags", 0x0003),
            ("function", 0x01828384),
        ]
        .into();
        let mut fields = Vec::new();
        for line in table
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let cols: Vec<&str> = line.split('\t').collect();
            let [name, offset, kind, _] = cols[..] else {
                panic!("malformed row {line:?}")
            };
            let offset: usize = offset.parse().unwrap();
            let size = match kind {
                "u64" => 8,
                "u32" | "i32" => 4,
                "u16" | "i16" => 2,
                "u8" => 1,
                other => panic!("type {other}"),
            };
            assert_eq!(offset, end, "{name} does not follow the field before it");
            b[offset..offset + size].copy_from_slice(&values[name].to_le_bytes()[..size]);
            fields.push(name);
            end = offset + size;
        }
        assert_eq!(end, RECORD_BYTES);
        assert_eq!(fields.len(), values.len(), "fields: {fields:?}");
        let c = GoChange::decode(&b).unwrap();
        assert_eq!(
            c,
            GoChange {
                ts_ns: 0x0102030405060708,
                goid: 0x1112131415161718,
                wait_ns: Some(0x2122232425262728),
                tid: Some(0x31323334),
                proc: Some(0x0142),
                from: GoState::Running,
                to: GoState::Waiting,
                reason: 0x7172,
                function: Some(0x01828384),
                time_moved: true,
                wait_start_moved: true,
            }
        );
        // The "none" values.
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        b[24..28].copy_from_slice(&(-1i32).to_le_bytes());
        b[28..30].copy_from_slice(&(-1i16).to_le_bytes());
        b[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
        let c = GoChange::decode(&b).unwrap();
        assert_eq!(
            (c.wait_ns, c.tid, c.proc, c.function),
            (None, None, None, None)
        );
    }

    #[test]
    fn a_header_of_another_format_is_refused_and_a_cut_record_counted() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend(FORMAT_VERSION.to_le_bytes());
        bytes.extend((RECORD_BYTES as u32).to_le_bytes());
        bytes.extend([0u8; RECORD_BYTES + 7]);
        let mut changes = Changes::new(&bytes[..]).unwrap();
        assert_eq!(changes.next().unwrap().unwrap().from, GoState::Undetermined);
        assert!(changes.next().is_none());
        assert_eq!(changes.trailing_bytes, 7);
        for older in [1, 2, 3] {
            bytes[8] = older;
            assert!(
                Changes::new(&bytes[..]).is_ok(),
                "version {older} is read too"
            );
        }
        bytes[8] = 5;
        assert!(Changes::new(&bytes[..]).is_err());
    }
}
