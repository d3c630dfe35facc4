//! A runtime-traced goroutines run's records of the Go runtime's Ps (GO_PROCS): what
//! gotrace-reduce made of the trace's P state changes — which M took a P, stopped it, or had it
//! stolen (laid out as schema/go-proc-record.tsv says; a unit test checks this reader against that
//! table) — and their counts (GO_SCHED_SUMMARY's `procs`). Runs reduced before the Ps were
//! written have neither. Pure reads.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use crate::GO_PROCS;

pub const MAGIC: &[u8; 8] = b"SPGOPRC1";
pub const HEADER_BYTES: usize = 16;
pub const FORMAT_VERSION: u32 = 1;
pub const RECORD_BYTES: usize = 24;

/// flags: the parser moved the record's time (as go-sched.bin's).
pub const FLAG_TIME_MOVED: u8 = 1;

/// A P's state as x/exp/trace names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProcState {
    /// Its state before the trace began (the trace's first word on it only).
    Undetermined,
    NotExist,
    /// Held by an M (running Go code, or in a syscall).
    Running,
    Idle,
}

/// What the change was (the reducer's reading: see schema/go-proc-record.tsv).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProcChangeKind {
    /// The trace's first word on the P.
    Status,
    /// Idle → Running, by the M that takes it.
    Start,
    /// Running → Idle, by the M that held it.
    Stop,
    /// Running → Idle by another M (taken from an M in a syscall), or Idle → Idle (the holder
    /// lost to the parser).
    Steal,
}

/// One P state change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcChange {
    /// CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    /// The M (OS TID) that made it.
    pub tid: Option<u32>,
    /// The M that held the P before it.
    pub holder: Option<u32>,
    pub proc: u32,
    pub from: ProcState,
    pub to: ProcState,
    pub kind: ProcChangeKind,
    /// The parser moved its time forward (as `GoChange::time_moved`).
    pub time_moved: bool,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl ProcChange {
    pub fn decode(b: &[u8; RECORD_BYTES]) -> io::Result<ProcChange> {
        let i32_at = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let state = |code: u8| {
            use ProcState::*;
            [Undetermined, NotExist, Running, Idle]
                .get(code as usize)
                .copied()
                .ok_or_else(|| invalid(format!("P state {code} unknown")))
        };
        let kind = {
            use ProcChangeKind::*;
            [Status, Start, Stop, Steal]
                .get(b[22] as usize)
                .copied()
                .ok_or_else(|| invalid(format!("P change kind {} unknown", b[22])))?
        };
        let thread = |v: i32| (v >= 0).then_some(v as u32);
        let proc = i32_at(16);
        if proc < 0 {
            return Err(invalid(format!("P {proc}")));
        }
        Ok(ProcChange {
            ts_ns: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            tid: thread(i32_at(8)),
            holder: thread(i32_at(12)),
            proc: proc as u32,
            from: state(b[20])?,
            to: state(b[21])?,
            kind,
            time_moved: b[23] & FLAG_TIME_MOVED != 0,
        })
    }
}

/// GO_SCHED_SUMMARY's `procs`: the reducer's counts of what GO_PROCS holds.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GoProcsCounts {
    pub format_version: u32,
    pub records: u64,
    pub ps_seen: u64,
    /// By kind: status, start, stop, steal.
    pub by_kind: BTreeMap<String, u64>,
    /// "From->To".
    pub transitions: BTreeMap<String, u64>,
    pub steals: u64,
    pub steals_holder_unknown: u64,
    /// Changes after the goroutines' records reached the reducer's cap: counted above, not
    /// written (reducers before the cap: 0).
    #[serde(default)]
    pub records_past_cap: u64,
    pub moved_by_parser: u64,
    pub threads: Vec<i64>,
}

/// Whether the run directory holds the Ps' records (a run reduced before they were written has
/// none: its figures are without the Ps, said).
pub fn has_records(dir: &Path) -> bool {
    dir.join(GO_PROCS).is_file()
}

/// The records, one at a time.
pub struct ProcChanges<R> {
    inner: R,
    /// Bytes at the end too few for a record (a file cut short).
    pub trailing_bytes: usize,
}

pub fn open_changes(dir: &Path) -> io::Result<ProcChanges<BufReader<File>>> {
    ProcChanges::new(BufReader::new(File::open(dir.join(GO_PROCS))?))
}

impl<R: Read> ProcChanges<R> {
    /// Checks the header: the magic, this version, this record size.
    pub fn new(mut inner: R) -> io::Result<Self> {
        let mut h = [0u8; HEADER_BYTES];
        inner.read_exact(&mut h)?;
        let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
        let size = u32::from_le_bytes(h[12..16].try_into().unwrap());
        if &h[..8] != MAGIC || version != FORMAT_VERSION || size as usize != RECORD_BYTES {
            return Err(invalid(format!(
                "not go-procs records of version {FORMAT_VERSION} ({RECORD_BYTES}-byte records): header {h:?}"
            )));
        }
        Ok(ProcChanges {
            inner,
            trailing_bytes: 0,
        })
    }
}

impl<R: Read> Iterator for ProcChanges<R> {
    type Item = io::Result<ProcChange>;

    fn next(&mut self) -> Option<Self::Item> {
        let b =
            super::next_fixed_record::<RECORD_BYTES>(&mut self.inner, &mut self.trailing_bytes)?;
        Some(b.and_then(|b| ProcChange::decode(&b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This reader takes each field where schema/go-proc-record.tsv puts it (the table the
    /// reducer's own test checks its writer against).
    #[test]
    fn the_layout_is_the_table() {
        let table = include_str!("../../../schema/go-proc-record.tsv");
        let values: BTreeMap<&str, u64> = [
            ("ts_ns", 0x0102030405060708u64),
            ("tid", 0x11121314),
            ("holder", 0x21222324),
            ("proc", 0x31323334),
            ("from", 2),
            ("to", 3),
            ("kind", 3),
            ("flags", 1),
        ]
        .into();
        let mut b = [0u8; RECORD_BYTES];
        let mut end = 0;
        let mut fields = 0;
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
            fields += 1;
            end = offset + size;
        }
        assert_eq!((end, fields), (RECORD_BYTES, values.len()));
        assert_eq!(
            ProcChange::decode(&b).unwrap(),
            ProcChange {
                ts_ns: 0x0102030405060708,
                tid: Some(0x11121314),
                holder: Some(0x21222324),
                proc: 0x31323334,
                from: ProcState::Running,
                to: ProcState::Idle,
                kind: ProcChangeKind::Steal,
                time_moved: true,
            }
        );
        b[8..12].copy_from_slice(&(-1i32).to_le_bytes());
        b[12..16].copy_from_slice(&(-1i32).to_le_bytes());
        let c = ProcChange::decode(&b).unwrap();
        assert_eq!((c.tid, c.holder), (None, None));
        b[22] = 4;
        assert!(
            ProcChange::decode(&b).is_err(),
            "an unknown kind is refused"
        );
    }

    #[test]
    fn a_header_of_another_format_is_refused_and_a_cut_record_counted() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend(FORMAT_VERSION.to_le_bytes());
        bytes.extend((RECORD_BYTES as u32).to_le_bytes());
        bytes.extend([0u8; RECORD_BYTES + 5]);
        let mut changes = ProcChanges::new(&bytes[..]).unwrap();
        assert_eq!(
            changes.next().unwrap().unwrap().kind,
            ProcChangeKind::Status
        );
        assert!(changes.next().is_none());
        assert_eq!(changes.trailing_bytes, 5);
        bytes[8] = 2;
        assert!(ProcChanges::new(&bytes[..]).is_err());
        bytes[8] = 1;
        bytes[0] = b'X';
        assert!(ProcChanges::new(&bytes[..]).is_err());
    }
}
