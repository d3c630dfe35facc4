//! A runtime-traced tokio run's raw records (`run --runtime tokio --runtime-trace`): what the
//! workload's hooks build wrote — one record per task hook's event (TOKIO_SCHED, laid out as
//! schema/tokio-sched-record.tsv says; a unit test checks this reader against that table), thread
//! after thread, and beside it its threads, counts and tokio's RuntimeMetrics (TOKIO_SCHED_SUMMARY).
//! Pure reads; [`open_merged`] puts the threads' records in time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

use crate::{TOKIO_SCHED, TOKIO_SCHED_SUMMARY};

/// The file's first bytes: the magic, then the format version and the record size (u32 each).
pub const MAGIC: &[u8; 8] = b"SPTOKIO1";
pub const HEADER_BYTES: usize = 16;
pub const FORMAT_VERSION: u32 = 1;
pub const RECORD_BYTES: usize = 32;

/// Which hook ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookKind {
    /// `on_task_spawn`, on the spawning thread.
    Spawn,
    /// `on_task_terminate`.
    Terminate,
    /// `on_before_task_poll`.
    PollBegin,
    /// `on_after_task_poll`.
    PollEnd,
}

impl HookKind {
    fn of(code: u8) -> Option<HookKind> {
        use HookKind::*;
        [Spawn, Terminate, PollBegin, PollEnd]
            .get(code as usize)
            .copied()
    }
}

/// One hook's event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HookEvent {
    /// CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    /// tokio's task id.
    pub task: u64,
    /// A poll's schedule latency (the task's latest scheduling to this poll), as tokio gives it.
    pub latency_ns: Option<u64>,
    /// The OS thread the hook ran on.
    pub tid: u32,
    pub kind: HookKind,
}

impl HookEvent {
    pub fn decode(b: &[u8; RECORD_BYTES]) -> io::Result<HookEvent> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Ok(HookEvent {
            ts_ns: u64_at(0),
            task: u64_at(8),
            latency_ns: Some(u64_at(16)).filter(|&l| l != u64::MAX),
            tid: u32::from_le_bytes(b[24..28].try_into().unwrap()),
            kind: HookKind::of(b[28]).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("tokio hook kind {} unknown", b[28]),
                )
            })?,
        })
    }
}

/// TOKIO_SCHED_SUMMARY: what the hooks build wrote beside its records.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct TokioSchedSummary {
    pub format_version: u32,
    pub records: u64,
    pub counts: HookCounts,
    /// The most records a thread kept; the rest were counted in `dropped`.
    pub kept_per_thread: u64,
    pub dropped: HookCounts,
    /// In the file's order: each thread's records follow the one before's.
    pub threads: Vec<HookThread>,
    pub metrics: TokioMetrics,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct HookCounts {
    pub spawned: u64,
    pub terminated: u64,
    pub polls_begun: u64,
    pub polls_ended: u64,
}

impl HookCounts {
    pub fn total(&self) -> u64 {
        self.spawned + self.terminated + self.polls_begun + self.polls_ended
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct HookThread {
    pub tid: u32,
    pub records: u64,
    pub dropped: u64,
    /// The process's main thread (it spawns the workload's tasks).
    pub main: bool,
}

/// tokio's RuntimeMetrics at the exit.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct TokioMetrics {
    pub workers: Vec<WorkerMetrics>,
    pub spawned_tasks_count: u64,
    pub threads_started: u64,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct WorkerMetrics {
    pub worker: u64,
    /// Its OS thread, where its start was seen.
    pub tid: Option<u32>,
    pub park_count: u64,
    pub park_unpark_count: u64,
    pub steal_count: u64,
    pub steal_operations: u64,
    pub poll_count: u64,
    pub noop_count: u64,
    pub busy_ns: u64,
}

/// Whether the run directory holds the hooks build's records.
pub fn has_records(dir: &Path) -> bool {
    dir.join(TOKIO_SCHED).is_file() && dir.join(TOKIO_SCHED_SUMMARY).is_file()
}

pub fn read_summary(dir: &Path) -> anyhow::Result<TokioSchedSummary> {
    crate::read_json(dir, TOKIO_SCHED_SUMMARY)
}

/// Checks the header: the magic, this version, this record size.
fn check_header(inner: &mut impl Read) -> io::Result<()> {
    let mut h = [0u8; HEADER_BYTES];
    inner.read_exact(&mut h)?;
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
    let size = u32::from_le_bytes(h[12..16].try_into().unwrap());
    if &h[..8] != MAGIC || version != FORMAT_VERSION || size as usize != RECORD_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not tokio-sched records of version {FORMAT_VERSION} ({RECORD_BYTES}-byte records): header {h:?}"),
        ));
    }
    Ok(())
}

/// One thread's run of records (or the whole file), one at a time.
pub struct Events<R> {
    inner: R,
    left: u64,
    /// Bytes at the end too few for a record (a file cut short).
    pub trailing_bytes: usize,
}

impl<R: Read> Events<R> {
    /// The records after a header (all of them).
    pub fn new(mut inner: R) -> io::Result<Self> {
        check_header(&mut inner)?;
        Ok(Events {
            inner,
            left: u64::MAX,
            trailing_bytes: 0,
        })
    }
}

impl<R: Read> Iterator for Events<R> {
    type Item = io::Result<HookEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let b = match super::next_fixed_record::<RECORD_BYTES>(
            &mut self.inner,
            &mut self.trailing_bytes,
        ) {
            None => {
                self.left = 0;
                return None;
            }
            Some(Err(e)) => return Some(Err(e)),
            Some(Ok(b)) => b,
        };
        self.left = self.left.saturating_sub(1);
        Some(HookEvent::decode(&b))
    }
}

/// Every record in the file's order (thread after thread).
pub fn open_events(dir: &Path) -> io::Result<Events<BufReader<File>>> {
    let file = File::open(dir.join(TOKIO_SCHED))?;
    Events::new(BufReader::with_capacity(1 << 20, file))
}

/// The threads' records merged into time order (each thread's are already), one reader per
/// thread at its run's offset (bounded memory); ties in thread order.
pub struct Merged {
    threads: Vec<Events<BufReader<File>>>,
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Vec<Option<HookEvent>>,
    /// Records the summary promised that the file did not hold.
    pub missing: u64,
}

pub fn open_merged(dir: &Path, summary: &TokioSchedSummary) -> io::Result<Merged> {
    let mut file = File::open(dir.join(TOKIO_SCHED))?;
    check_header(&mut file)?;
    let mut offset = HEADER_BYTES as u64;
    let mut threads = Vec::new();
    for t in &summary.threads {
        let mut f = File::open(dir.join(TOKIO_SCHED))?;
        f.seek(SeekFrom::Start(offset))?;
        threads.push(Events {
            inner: BufReader::with_capacity(1 << 16, f),
            left: t.records,
            trailing_bytes: 0,
        });
        offset += t.records * RECORD_BYTES as u64;
    }
    let mut m = Merged {
        pending: vec![None; threads.len()],
        threads,
        heads: BinaryHeap::new(),
        missing: 0,
    };
    for i in 0..m.threads.len() {
        m.refill(i)?;
    }
    Ok(m)
}

impl Merged {
    fn refill(&mut self, i: usize) -> io::Result<()> {
        let left = self.threads[i].left;
        match self.threads[i].next() {
            Some(e) => {
                let e = e?;
                self.heads.push(Reverse((e.ts_ns, i)));
                self.pending[i] = Some(e);
            }
            None if left != 0 && left != u64::MAX => self.missing += left,
            None => {}
        }
        Ok(())
    }
}

impl Iterator for Merged {
    type Item = io::Result<HookEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        let Reverse((_, i)) = self.heads.pop()?;
        let e = self.pending[i].take()?;
        if let Err(err) = self.refill(i) {
            return Some(Err(err));
        }
        Some(Ok(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// This reader takes each field where schema/tokio-sched-record.tsv puts it (the table the
    /// hooks build writes by).
    #[test]
    fn the_layout_is_the_tables() {
        let table = include_str!("../../../schema/tokio-sched-record.tsv");
        let mut b = [0u8; RECORD_BYTES];
        let mut end = 0;
        let values: BTreeMap<&str, u64> = [
            ("ts_ns", 0x0102030405060708u64),
            ("task", 0x1112131415161718),
            ("latency_ns", 0x2122232425262728),
            ("tid", 0x31323334),
            ("kind", 2),
            ("pad", 0),
            ("reserved", 0),
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
                "u32" => 4,
                "u16" => 2,
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
        assert_eq!(
            HookEvent::decode(&b).unwrap(),
            HookEvent {
                ts_ns: 0x0102030405060708,
                task: 0x1112131415161718,
                latency_ns: Some(0x2122232425262728),
                tid: 0x31323334,
                kind: HookKind::PollBegin,
            }
        );
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        b[28] = 4;
        assert!(HookEvent::decode(&b).is_err(), "kind 4 is none");
        b[28] = 3;
        assert_eq!(HookEvent::decode(&b).unwrap().latency_ns, None);
    }

    fn record(ts: u64, task: u64, tid: u32, kind: u8) -> [u8; RECORD_BYTES] {
        let mut r = [0u8; RECORD_BYTES];
        r[0..8].copy_from_slice(&ts.to_le_bytes());
        r[8..16].copy_from_slice(&task.to_le_bytes());
        r[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        r[24..28].copy_from_slice(&tid.to_le_bytes());
        r[28] = kind;
        r
    }

    #[test]
    fn threads_merge_into_time_order_and_a_short_file_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend(FORMAT_VERSION.to_le_bytes());
        bytes.extend((RECORD_BYTES as u32).to_le_bytes());
        for r in [
            record(10, 1, 7, 0),
            record(40, 2, 7, 0),
            record(20, 1, 8, 2),
            record(30, 1, 8, 3),
            record(50, 2, 8, 2),
        ] {
            bytes.extend(r);
        }
        std::fs::write(dir.path().join(TOKIO_SCHED), &bytes).unwrap();
        let thread = |tid, records| HookThread {
            tid,
            records,
            dropped: 0,
            main: false,
        };
        let mut summary = TokioSchedSummary {
            threads: vec![thread(7, 2), thread(8, 3)],
            ..Default::default()
        };
        let merged: Vec<u64> = open_merged(dir.path(), &summary)
            .unwrap()
            .map(|e| e.unwrap().ts_ns)
            .collect();
        assert_eq!(merged, [10, 20, 30, 40, 50]);
        assert_eq!(open_events(dir.path()).unwrap().count(), 5);
        summary.threads[1].records = 4;
        let mut m = open_merged(dir.path(), &summary).unwrap();
        assert_eq!(m.by_ref().count(), 5);
        assert_eq!(m.missing, 1);
        bytes[8] = 2;
        std::fs::write(dir.path().join(TOKIO_SCHED), &bytes).unwrap();
        assert!(open_events(dir.path()).is_err());
    }
}
