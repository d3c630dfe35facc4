//! A run's scheduler trace (`--perfetto`'s raw records, `spawnscope_collector::trace_events`)
//! derived, in one streaming pass with bounded memory: state per thread, never per event.
//!
//! - the processes and threads of the run (tid, tgid, names, renames followed);
//! - per CPU, how many switches touched the run;
//! - the waits the collector times, as begin/end pairs per thread ([`WaitStacks`], shared with the
//!   trace's encoder so both close the same pairs);
//! - **wake-to-run** (a wakeup of the run's task → its next switch-in) and **preempted-to-run**
//!   (a switch out still runnable, prev_state 0 → the next switch-in), per phase (the one the
//!   switch-in falls in) — in HDR histograms ([`SIGNIFICANT_DIGITS`]): percentiles within 1 %,
//!   counts and maxima exact, without keeping a sample.
//!
//! Which of a switch's sides is the run's: the BPF filter keeps a switch when either side is, and
//! every other record is about one of the run's tasks; so a task is the run's when its process
//! (tgid) is the launched one or was named by a record other than a switch (a new task, a wakeup,
//! an exit…), which always comes before that process's first switch.
//!
//! The records come in ring-buffer order: per CPU in time order, across CPUs nearly so. They are
//! put in time order by [`TimeOrdered`] (a window of [`REORDER_WINDOW_NS`]); a record later than
//! that is counted (`late_records`), never dropped.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::io;

use hdrhistogram::Histogram;
use spawnscope_collector::trace_events::{Kind, Task, TraceEvent, Wait};

use crate::run::phases::phase_marks;
use record::trace::TraceCapture;
use record::{MemoryRecord, RunRecord};
use serde::{Deserialize, Serialize};

/// How far records may come out of time order and still be put back in it: the ring buffer is
/// shared by every CPU, each reserving its record microseconds after reading the clock, so a
/// tenth of a second is far beyond any skew seen, and holds at most that long's records.
pub const REORDER_WINDOW_NS: u64 = 100_000_000;

/// HDR histograms with 2 significant digits: a percentile is within 1 % of the true sample's
/// value (exact percentiles over millions of samples without keeping them).
pub const SIGNIFICANT_DIGITS: u8 = 2;

/// The words summary and compare say the method in.
pub const METHOD: &str = "from the raw trace records: every wakeup (or switch out still runnable) of the run's threads to their next switch-in, per phase of the switch-in; p50/p90/p99 from an HDR histogram within 1 %, count and max exact";

struct Keyed {
    ts: u64,
    seq: u64,
    event: TraceEvent,
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        (self.ts, self.seq) == (other.ts, other.seq)
    }
}
impl Eq for Keyed {}
impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.ts, self.seq).cmp(&(other.ts, other.seq))
    }
}

/// Raw records in time order (ties in file order), holding back at most [`REORDER_WINDOW_NS`]
/// of them.
pub struct TimeOrdered<I> {
    inner: I,
    heap: BinaryHeap<Reverse<Keyed>>,
    seq: u64,
    newest_read: u64,
    newest_out: u64,
    done: bool,
    /// Records that came later than the window: passed on out of order.
    pub late: u64,
}

impl<I> TimeOrdered<I> {
    pub fn new(inner: I) -> Self {
        TimeOrdered {
            inner,
            heap: BinaryHeap::new(),
            seq: 0,
            newest_read: 0,
            newest_out: 0,
            done: false,
            late: 0,
        }
    }
}

impl<I: Iterator<Item = io::Result<TraceEvent>>> Iterator for TimeOrdered<I> {
    type Item = io::Result<TraceEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if let Some(Reverse(oldest)) = self.heap.peek() {
                if self.newest_read.saturating_sub(oldest.ts) > REORDER_WINDOW_NS {
                    break;
                }
            }
            match self.inner.next() {
                None => self.done = true,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(event)) => {
                    if event.ts < self.newest_out {
                        self.late += 1;
                    }
                    self.newest_read = self.newest_read.max(event.ts);
                    self.seq += 1;
                    self.heap.push(Reverse(Keyed {
                        ts: event.ts,
                        seq: self.seq,
                        event,
                    }));
                }
            }
        }
        let Reverse(k) = self.heap.pop()?;
        self.newest_out = self.newest_out.max(k.ts);
        Some(Ok(k.event))
    }
}

/// Where the run's phases start on the trace's clock (BOOTTIME), in time order. A moment before
/// the first belongs to the first, after the last to the last.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseEdges {
    pub names: Vec<String>,
    pub starts: Vec<u64>,
}

/// The one phase of a run whose phases cannot be placed on the trace's clock (no marks, or no
/// offset between the clocks).
pub const WHOLE_RUN: &str = "whole run";

impl PhaseEdges {
    pub fn whole_run() -> Self {
        PhaseEdges {
            names: vec![WHOLE_RUN.into()],
            starts: vec![0],
        }
    }

    /// The run's phases (analyse::phases, `reaped` ends the last), moved onto BOOTTIME by the
    /// capture's offset; the whole run as one when either is missing.
    pub fn of_run(run: &RunRecord, memory: &MemoryRecord, offset_ns: Option<i64>) -> Self {
        let marks = phase_marks(run, memory);
        let Some(offset) = offset_ns else {
            return PhaseEdges::whole_run();
        };
        let (names, starts): (Vec<String>, Vec<u64>) = marks
            .into_iter()
            .filter(|m| m.name != "reaped")
            .map(|m| (m.name, boot(m.t_ns, offset)))
            .unzip();
        if names.is_empty() {
            return PhaseEdges::whole_run();
        }
        PhaseEdges { names, starts }
    }

    pub fn index(&self, ts: u64) -> usize {
        self.starts.partition_point(|&s| s <= ts).saturating_sub(1)
    }
}

/// A CLOCK_MONOTONIC moment on CLOCK_BOOTTIME.
pub fn boot(monotonic_ns: u64, offset_ns: i64) -> u64 {
    (monotonic_ns as i128 + offset_ns as i128).max(0) as u64
}

/// One renaming (task_rename: a prctl, a write to /proc/…/comm, an exec).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rename {
    pub ts: u64,
    pub from: String,
    pub to: String,
}

/// One of the run's threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    pub tgid: u32,
    /// Its last name (comm), renames followed.
    pub name: String,
    pub renames: Vec<Rename>,
    /// Its first record.
    pub first_ts: u64,
    /// Its task_newtask record, when the trace saw it created: the creator's tid.
    pub created_by: Option<u32>,
    pub exit_ts: Option<u64>,
    /// Its longest wake-to-run or preempted-to-run wait (ns): how the swimlane picks the threads
    /// that waited longest for a CPU.
    pub longest_wait_ns: u64,
}

/// One of the run's processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// Its main thread's name, else its first thread's.
    pub name: String,
    pub threads: u64,
}

/// Switches on one CPU that touched the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSwitches {
    pub switches: u64,
    pub first_ts: u64,
    pub last_ts: u64,
}

/// The pairs of one wait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitTally {
    /// Pairs closed (by their end, or closed for them as below).
    pub pairs: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Closed because an outer wait of the thread ended first (slices nest).
    pub cut: u64,
    /// Still open when their thread exited: closed there.
    pub closed_at_exit: u64,
    /// Still open at the run's end: closed there.
    pub closed_at_end: u64,
    /// Ends with no begin (begun before the capture).
    pub unmatched_ends: u64,
}

/// A wait closed: its thread, kind and span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedWait {
    pub tid: u32,
    pub wait: Wait,
    pub begin: u64,
    pub end: u64,
}

/// Why a wait was closed where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    Ended,
    Cut,
    AtExit,
    AtEnd,
}

/// The waits open per thread, as a stack (slices on a thread nest): a wait's end closes the
/// innermost open wait of its kind, and any opened inside it (cut).
#[derive(Default)]
pub struct WaitStacks {
    open: HashMap<u32, Vec<(Wait, u64)>>,
}

impl WaitStacks {
    pub fn begin(&mut self, tid: u32, wait: Wait, ts: u64) {
        self.open.entry(tid).or_default().push((wait, ts));
    }

    /// The waits this end closes, innermost first (the last is `wait` itself); None when no
    /// such wait is open.
    pub fn end(&mut self, tid: u32, wait: Wait, ts: u64) -> Option<Vec<(ClosedWait, Closed)>> {
        let stack = self.open.get_mut(&tid)?;
        let at = stack.iter().rposition(|(w, _)| *w == wait)?;
        // Drained innermost last: reversed, the matched wait (at `at`) comes last and ends; those
        // opened inside it were cut by its end.
        let drained: Vec<(Wait, u64)> = stack.drain(at..).rev().collect();
        if stack.is_empty() {
            self.open.remove(&tid);
        }
        let n = drained.len();
        Some(
            drained
                .into_iter()
                .enumerate()
                .map(|(i, (w, begin))| {
                    let closed = ClosedWait {
                        tid,
                        wait: w,
                        begin,
                        end: ts.max(begin),
                    };
                    (
                        closed,
                        if i + 1 == n {
                            Closed::Ended
                        } else {
                            Closed::Cut
                        },
                    )
                })
                .collect(),
        )
    }

    /// Every wait a thread still has open, closed at `ts` (its exit), innermost first.
    pub fn close_thread(&mut self, tid: u32, ts: u64) -> Vec<ClosedWait> {
        self.open
            .remove(&tid)
            .unwrap_or_default()
            .into_iter()
            .rev()
            .map(|(wait, begin)| ClosedWait {
                tid,
                wait,
                begin,
                end: ts.max(begin),
            })
            .collect()
    }

    /// The waits open now, by thread, outermost first: (tid, wait, begun).
    pub fn open_waits(&self) -> Vec<(u32, Wait, u64)> {
        let tids: BTreeSet<u32> = self.open.keys().copied().collect();
        tids.into_iter()
            .flat_map(|tid| self.open[&tid].iter().map(move |&(w, ts)| (tid, w, ts)))
            .collect()
    }

    /// Every wait still open, closed at `ts` (the run's end): by thread, innermost first.
    pub fn close_all(&mut self, ts: u64) -> Vec<ClosedWait> {
        let tids: BTreeSet<u32> = self.open.keys().copied().collect();
        tids.into_iter()
            .flat_map(|tid| self.close_thread(tid, ts))
            .collect()
    }
}

/// One latency in one phase.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LatencyRow {
    /// The phase the switch-ins fall in, or "whole run".
    pub phase: String,
    pub count: u64,
    /// Within 1 % (HDR histogram, 2 significant digits).
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    /// Exact.
    pub max_ns: u64,
}

/// Samples of one latency per phase, and over the whole run.
#[derive(Clone, Debug)]
pub struct PhaseHistograms {
    per_phase: Vec<Latency>,
    pub(crate) whole: Latency,
}

#[derive(Clone, Debug)]
pub(crate) struct Latency {
    pub(crate) hist: Histogram<u64>,
    max: u64,
}

impl Latency {
    fn new() -> Self {
        Latency {
            hist: Histogram::new(SIGNIFICANT_DIGITS).expect("2 significant digits are allowed"),
            max: 0,
        }
    }

    fn record(&mut self, ns: u64) {
        // The histogram grows to hold any value below 2^62 ns (146 years); above, it saturates.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
        self.max = self.max.max(ns);
    }

    fn row(&self, phase: &str) -> LatencyRow {
        // The bucket's highest value, never above the exact maximum.
        let q = |q: f64| self.hist.value_at_quantile(q).min(self.max);
        LatencyRow {
            phase: phase.to_string(),
            count: self.hist.len(),
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            max_ns: self.max,
        }
    }
}

impl PhaseHistograms {
    pub fn new(phases: usize) -> Self {
        PhaseHistograms {
            per_phase: vec![Latency::new(); phases],
            whole: Latency::new(),
        }
    }

    pub fn record(&mut self, phase: usize, ns: u64) {
        self.per_phase[phase].record(ns);
        self.whole.record(ns);
    }

    /// One row per phase with samples, in time order, then the whole run (when there are
    /// several phases).
    pub fn rows(&self, phases: &PhaseEdges) -> Vec<LatencyRow> {
        let mut rows: Vec<LatencyRow> = self
            .per_phase
            .iter()
            .zip(&phases.names)
            .filter(|(l, _)| !l.hist.is_empty())
            .map(|(l, name)| l.row(name))
            .collect();
        if phases.names.len() > 1 {
            rows.push(self.whole.row(WHOLE_RUN));
        }
        rows
    }
}

/// What a task waits on its way to a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queued {
    Woken(u64),
    Preempted(u64),
}

/// A run's scheduler trace, derived.
#[derive(Clone, Debug)]
pub struct SchedTrace {
    /// Records read (known kinds).
    pub records: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    pub threads: BTreeMap<u32, Thread>,
    pub processes: BTreeMap<u32, Process>,
    pub cpus: BTreeMap<u32, CpuSwitches>,
    /// Switch records (each has the run's task on one side at least).
    pub switches: u64,
    /// Per wait, in `Wait::ALL`'s order.
    pub waits: Vec<(Wait, WaitTally)>,
    pub phases: PhaseEdges,
    pub wake_to_run: PhaseHistograms,
    pub preempted_to_run: PhaseHistograms,
    /// Records put back in order beyond the window (see [`TimeOrdered`]).
    pub late_records: u64,
    /// Where open waits were closed: the run's end on the trace's clock.
    pub end_ts: u64,
}

/// What the derivation needs of the run's other records.
pub struct Context {
    /// The launched process: its threads are the run's from their first switch.
    pub launched: Option<u32>,
    pub phases: PhaseEdges,
    /// The reap on the trace's clock, when known: open waits are closed there. A capped trace's
    /// end is where its kept window ends (`TraceCapture::kept_until_ns`): a wait open there is
    /// closed there, not stretched over the records not kept.
    pub run_end_ts: Option<u64>,
}

impl Context {
    pub fn of_run(run: &RunRecord, memory: &MemoryRecord, capture: Option<&TraceCapture>) -> Self {
        let offset = capture.and_then(|c| c.boottime_minus_monotonic_ns);
        Context {
            launched: run.pid,
            phases: PhaseEdges::of_run(run, memory, offset),
            run_end_ts: match capture.and_then(|c| c.kept_until_ns) {
                Some(kept_until) => Some(kept_until),
                None => offset.zip(run.reaped_t_ns).map(|(o, t)| boot(t, o)),
            },
        }
    }
}

struct Deriving {
    out: SchedTrace,
    run_tgids: BTreeSet<u32>,
    queued: HashMap<u32, Queued>,
    waits: WaitStacks,
}

impl Deriving {
    /// `task` with its tgid: the classic (non-BTF) programs' records leave some tgids 0 (a
    /// switch's next, a woken task), which a thread already known supplies. Unknown: tgid 0,
    /// which is never a process of the run.
    fn resolve(&self, task: Task) -> Task {
        if task.tgid != 0 || task.tid == 0 {
            return task;
        }
        self.out.threads.get(&task.tid).map_or(task, |t| Task {
            tid: task.tid,
            tgid: t.tgid,
        })
    }

    fn is_run(&self, task: Task) -> bool {
        let task = self.resolve(task);
        task.tid != 0 && task.tgid != 0 && self.run_tgids.contains(&task.tgid)
    }

    fn touch(&mut self, task: Task, ts: u64, comm: &str) -> &mut Thread {
        let task = self.resolve(task);
        if task.tgid != 0 {
            self.run_tgids.insert(task.tgid);
        }
        let thread = self.out.threads.entry(task.tid).or_insert_with(|| Thread {
            tgid: task.tgid,
            name: String::new(),
            renames: Vec::new(),
            first_ts: ts,
            created_by: None,
            exit_ts: None,
            longest_wait_ns: 0,
        });
        if !comm.is_empty() {
            thread.name = comm.to_string();
        }
        thread
    }

    fn tally(&mut self, c: &ClosedWait, how: Closed) {
        let t = &mut self.out.waits[c.wait as usize].1;
        t.pairs += 1;
        let ns = c.end.saturating_sub(c.begin);
        t.total_ns += ns;
        t.max_ns = t.max_ns.max(ns);
        match how {
            Closed::Ended => {}
            Closed::Cut => t.cut += 1,
            Closed::AtExit => t.closed_at_exit += 1,
            Closed::AtEnd => t.closed_at_end += 1,
        }
    }

    fn step(&mut self, e: &TraceEvent) {
        let o = &mut self.out;
        o.records += 1;
        o.first_ts = Some(o.first_ts.map_or(e.ts, |t| t.min(e.ts)));
        o.last_ts = Some(o.last_ts.map_or(e.ts, |t| t.max(e.ts)));
        let comm = e.comm();
        match e.kind {
            Kind::Switch => {
                o.switches += 1;
                let cpu = o.cpus.entry(e.cpu).or_insert(CpuSwitches {
                    first_ts: e.ts,
                    ..CpuSwitches::default()
                });
                cpu.switches += 1;
                cpu.last_ts = e.ts;
                if self.is_run(e.task) {
                    self.touch(e.task, e.ts, "");
                    if e.preempted() {
                        self.queued.insert(e.task.tid, Queued::Preempted(e.ts));
                    } else {
                        self.queued.remove(&e.task.tid);
                    }
                }
                if self.is_run(e.other) {
                    self.touch(e.other, e.ts, &comm);
                    let phase = self.out.phases.index(e.ts);
                    let waited = match self.queued.remove(&e.other.tid) {
                        Some(Queued::Woken(t)) => {
                            let ns = e.ts.saturating_sub(t);
                            self.out.wake_to_run.record(phase, ns);
                            ns
                        }
                        Some(Queued::Preempted(t)) => {
                            let ns = e.ts.saturating_sub(t);
                            self.out.preempted_to_run.record(phase, ns);
                            ns
                        }
                        None => 0,
                    };
                    if let Some(t) = self.out.threads.get_mut(&e.other.tid) {
                        t.longest_wait_ns = t.longest_wait_ns.max(waited);
                    }
                }
            }
            Kind::Wakeup | Kind::WakeupNew => {
                // Only the run's tasks' wakeups are recorded; one whose process the record does
                // not say (classic, tgid 0) and no earlier record told waits for one that does.
                if self.resolve(e.task).tgid != 0 {
                    self.touch(e.task, e.ts, &comm);
                }
                self.queued.insert(e.task.tid, Queued::Woken(e.ts));
            }
            Kind::NewTask => {
                let creator = e.other.tid;
                let t = self.touch(e.task, e.ts, &comm);
                t.created_by = Some(creator);
            }
            Kind::Rename => {
                let t = self.touch(e.task, e.ts, "");
                if t.name != comm {
                    t.renames.push(Rename {
                        ts: e.ts,
                        from: std::mem::take(&mut t.name),
                        to: comm.clone(),
                    });
                }
                t.name = comm;
            }
            Kind::Exit => {
                self.touch(e.task, e.ts, &comm).exit_ts = Some(e.ts);
                self.queued.remove(&e.task.tid);
                for c in self.waits.close_thread(e.task.tid, e.ts) {
                    self.tally(&c, Closed::AtExit);
                }
            }
            Kind::WaitBegin | Kind::WaitEnd => {
                self.touch(e.task, e.ts, "");
                let Some(wait) = e.wait() else { return };
                if e.kind == Kind::WaitBegin {
                    self.waits.begin(e.task.tid, wait, e.ts);
                } else {
                    match self.waits.end(e.task.tid, wait, e.ts) {
                        Some(closed) => {
                            for (c, how) in closed {
                                self.tally(&c, how);
                            }
                        }
                        None => self.out.waits[wait as usize].1.unmatched_ends += 1,
                    }
                }
            }
        }
    }
}

/// Derives a run's scheduler trace from its raw records (in file order: they are put in time
/// order here).
pub fn derive(
    events: impl Iterator<Item = io::Result<TraceEvent>>,
    context: &Context,
) -> io::Result<SchedTrace> {
    let phases = context.phases.clone();
    let n = phases.names.len();
    let mut d = Deriving {
        out: SchedTrace {
            records: 0,
            first_ts: None,
            last_ts: None,
            threads: BTreeMap::new(),
            processes: BTreeMap::new(),
            cpus: BTreeMap::new(),
            switches: 0,
            waits: Wait::ALL
                .iter()
                .map(|w| (*w, WaitTally::default()))
                .collect(),
            phases,
            wake_to_run: PhaseHistograms::new(n),
            preempted_to_run: PhaseHistograms::new(n),
            late_records: 0,
            end_ts: 0,
        },
        run_tgids: context.launched.into_iter().collect(),
        queued: HashMap::new(),
        waits: WaitStacks::default(),
    };
    let mut ordered = TimeOrdered::new(events);
    for event in ordered.by_ref() {
        d.step(&event?);
    }
    let end = d
        .out
        .last_ts
        .unwrap_or(0)
        .max(context.run_end_ts.unwrap_or(0));
    for c in d.waits.close_all(end) {
        d.tally(&c, Closed::AtEnd);
    }
    let mut out = d.out;
    out.end_ts = end;
    out.late_records = ordered.late;
    out.processes = processes_of(&out.threads);
    Ok(out)
}

fn processes_of(threads: &BTreeMap<u32, Thread>) -> BTreeMap<u32, Process> {
    let mut processes: BTreeMap<u32, Process> = BTreeMap::new();
    for (tid, t) in threads {
        let p = processes.entry(t.tgid).or_insert_with(|| Process {
            name: t.name.clone(),
            threads: 0,
        });
        p.threads += 1;
        if *tid == t.tgid {
            p.name = t.name.clone();
        }
    }
    processes
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::traces::thread_states::*;

    const CPU0: u32 = 0;
    const CPU1: u32 = 1;
    const PID: u32 = 100;

    fn t(tid: u32) -> Task {
        Task { tid, tgid: PID }
    }

    fn outside(tid: u32) -> Task {
        Task { tid, tgid: tid }
    }

    fn ev(
        ts: u64,
        kind: Kind,
        cpu: u32,
        task: Task,
        other: Task,
        arg: u64,
        comm: &str,
    ) -> TraceEvent {
        TraceEvent::nice_zero(ts, kind, cpu, task, other, arg, comm)
    }

    fn switch(
        ts: u64,
        cpu: u32,
        prev: Task,
        next: Task,
        prev_state: u64,
        next_comm: &str,
    ) -> TraceEvent {
        ev(ts, Kind::Switch, cpu, prev, next, prev_state, next_comm)
    }

    fn run(events: &[TraceEvent], phases: PhaseEdges) -> SchedTrace {
        crate::test_support::sched_trace_of(events, PID, phases)
    }

    fn two_phases() -> PhaseEdges {
        PhaseEdges {
            names: vec!["startup".into(), "spawn".into()],
            starts: vec![0, 1_000],
        }
    }

    #[test]
    fn classic_records_without_a_tgid_take_the_known_threads_and_never_make_process_0() {
        let idle = Task { tid: 0, tgid: 0 };
        // The classic programs' switch leaves next's tgid 0, their wakeup the woken task's.
        let no_tgid = |tid: u32| Task { tid, tgid: 0 };
        let events = [
            ev(5, Kind::Rename, CPU0, t(PID), Task::default(), 0, "main"),
            ev(20, Kind::NewTask, CPU0, t(101), t(PID), 0x3d0f00, "w"),
            ev(21, Kind::WakeupNew, CPU0, no_tgid(101), t(PID), 1, "w"),
            switch(30, CPU1, idle, no_tgid(101), 0, "w"),
            // The run's thread switches to an outside task, whose tgid is not said either.
            switch(40, CPU1, t(101), no_tgid(7), 0, "kworker"),
            switch(50, CPU1, no_tgid(7), no_tgid(101), 0, "w"),
            // A wakeup of a task no record has told: waits, makes no thread.
            ev(60, Kind::Wakeup, CPU0, no_tgid(555), t(PID), 0, "who"),
        ];
        let trace = run(&events, PhaseEdges::whole_run());
        assert!(
            trace.threads.values().all(|th| th.tgid == PID),
            "{:?}",
            trace.threads
        );
        assert_eq!(
            trace.threads.keys().copied().collect::<Vec<_>>(),
            [PID, 101]
        );
        // Woken at 21, in at 30; preempted at 40, in again at 50.
        assert_eq!(trace.wake_to_run.whole.hist.len(), 1);
        assert_eq!(trace.preempted_to_run.whole.hist.len(), 1);
    }

    #[test]
    fn wake_to_run_and_preempted_to_run_follow_each_thread_to_its_next_switch_in() {
        let idle = Task { tid: 0, tgid: 0 };
        let events = [
            switch(10, CPU0, idle, t(PID), 0, "main"),
            ev(20, Kind::NewTask, CPU0, t(101), t(PID), 0x3d0f00, "main"),
            ev(21, Kind::WakeupNew, CPU0, t(101), t(PID), 1, "main"),
            // Renamed before it runs; woken on CPU0, runs on CPU1 (its record comes first in
            // the file: across CPUs the ring is only nearly in time order).
            ev(
                25,
                Kind::Rename,
                CPU0,
                t(101),
                Task::default(),
                0,
                "worker-1",
            ),
            switch(71, CPU1, idle, t(101), 0, "worker-1"),
            // main preempted by an outside task at 1,100, back at 1,400 (spawn phase).
            switch(1_100, CPU0, t(PID), outside(7), 0, "kworker"),
            switch(1_400, CPU0, outside(7), t(PID), 0, "main"),
            // worker blocks (prev_state 1), is woken at 1,500, runs at 1,530.
            switch(1_200, CPU1, t(101), idle, 1, "swapper/1"),
            ev(1_500, Kind::Wakeup, CPU0, t(101), t(PID), 1, "worker-1"),
            switch(1_530, CPU1, idle, t(101), 0, "worker-1"),
            // woken while still running (it had not switched out yet): no sample.
            ev(1_600, Kind::Wakeup, CPU0, t(101), t(PID), 1, "worker-1"),
            switch(1_700, CPU1, t(101), idle, 1, "swapper/1"),
            ev(
                1_800,
                Kind::Exit,
                CPU1,
                t(101),
                Task::default(),
                0,
                "worker-1",
            ),
        ];
        let mut file_order = events.to_vec();
        file_order.swap(3, 4);
        let trace = run(&file_order, two_phases());
        let wake = trace.wake_to_run.rows(&trace.phases);
        assert_eq!(
            wake.iter()
                .map(|r| (r.phase.as_str(), r.count, r.max_ns))
                .collect::<Vec<_>>(),
            vec![("startup", 1, 50), ("spawn", 1, 30), (WHOLE_RUN, 2, 50)]
        );
        let preempted = trace.preempted_to_run.rows(&trace.phases);
        assert_eq!(
            preempted
                .iter()
                .map(|r| (r.phase.as_str(), r.count, r.p50_ns))
                .collect::<Vec<_>>(),
            vec![("spawn", 1, 300), (WHOLE_RUN, 1, 300)]
        );
        assert_eq!(trace.late_records, 0);
        assert_eq!(trace.switches, 7);
        assert_eq!(trace.cpus[&CPU0].switches, 3);
        // The outside task is not a thread of the run; the renamed worker is, in main's process.
        assert_eq!(
            trace.threads.keys().copied().collect::<Vec<_>>(),
            vec![PID, 101]
        );
        let w = &trace.threads[&101];
        assert_eq!(
            (w.name.as_str(), w.created_by, w.exit_ts),
            ("worker-1", Some(PID), Some(1_800))
        );
        assert_eq!(
            w.renames,
            vec![Rename {
                ts: 25,
                from: "main".into(),
                to: "worker-1".into()
            }]
        );
        assert_eq!(
            trace.processes[&PID],
            Process {
                name: "main".into(),
                threads: 2
            }
        );
    }

    #[test]
    fn a_thread_s_states_follow_its_wakeups_and_switches() {
        let idle = Task::default();
        let events = [
            ev(10, Kind::WakeupNew, CPU0, t(101), t(PID), 1, "w"),
            switch(15, CPU1, idle, t(101), 0, "w"),
            // Woken while still running: it stays running.
            ev(17, Kind::Wakeup, CPU0, t(101), t(PID), 1, "w"),
            switch(20, CPU1, t(101), outside(7), 0, "k"),
            switch(26, CPU1, outside(7), t(101), 0, "w"),
            switch(30, CPU1, t(101), idle, 1, "swapper/1"),
            ev(40, Kind::Wakeup, CPU0, t(101), t(PID), 1, "w"),
            switch(41, CPU1, idle, t(101), 0, "w"),
            ev(45, Kind::Exit, CPU1, t(101), idle, 0, "w"),
            // Its last switch out (TASK_DEAD) is no state; 102 blocks and never wakes: closed at
            // the run's end.
            switch(46, CPU1, t(101), t(102), 0x80, "w2"),
            switch(50, CPU1, t(102), idle, 1, "swapper/1"),
        ];
        let tids: BTreeSet<u32> = [101, 102].into();
        let spans = thread_states(events.iter().copied().map(Ok), &tids, 60).unwrap();
        let got: Vec<(State, u64, u64)> = spans[&101]
            .iter()
            .map(|s| (s.state, s.begin, s.end))
            .collect();
        assert_eq!(
            got,
            vec![
                (State::Runnable, 10, 15),
                (State::Running, 15, 20),
                (State::Runnable, 20, 26),
                (State::Running, 26, 30),
                (State::Blocked, 30, 40),
                (State::Runnable, 40, 41),
                (State::Running, 41, 45),
            ]
        );
        assert_eq!(
            spans[&102],
            vec![
                StateSpan {
                    state: State::Running,
                    begin: 46,
                    end: 50
                },
                StateSpan {
                    state: State::Blocked,
                    begin: 50,
                    end: 60
                }
            ]
        );
        assert!(!spans.contains_key(&7));
    }

    /// The pattern found at goroutines hold 1,000,000 (6.18 guest): a thread blocks, is woken,
    /// runs on a CPU whose switch to it no program saw, and switches out again.
    #[test]
    fn a_switch_out_while_off_its_cpu_is_a_missed_switch_in_from_when_it_could_run() {
        let rustc = outside(900);
        let wake = |ts: u64, tid: u32| ev(ts, Kind::Wakeup, CPU1, t(tid), rustc, 1, "");
        let events = [
            // 101 ran from before the trace: its first record, a switch-out, misses nothing.
            switch(5, CPU0, t(101), rustc, 1, "rustc"),
            switch(10, CPU1, rustc, t(PID), 0, "goroutines"),
            switch(20, CPU1, t(PID), rustc, 1, "rustc"),
            wake(25, PID),
            // ... switched in unseen (its futex wait ends at 40: on a CPU from then at the
            // latest), then out (preempted) at 60: missed within [25, 60].
            ev(40, Kind::WaitEnd, CPU1, t(PID), Task::default(), 0, ""),
            switch(60, CPU1, t(PID), rustc, 0, "rustc"),
            // Preempted, then out again without a switch-in: within [60, 90]; a wakeup while
            // runnable does not move when it could run.
            wake(70, PID),
            switch(90, CPU1, t(PID), rustc, 1, "rustc"),
            // Seen in and out: nothing missed.
            wake(95, PID),
            switch(100, CPU1, rustc, t(PID), 0, "goroutines"),
            switch(110, CPU1, t(PID), rustc, 1, "rustc"),
            // Blocked and no wakeup seen: from the switch-out.
            switch(130, CPU1, t(PID), rustc, 1, "rustc"),
            // A thread not asked for.
            switch(140, CPU0, t(102), rustc, 1, "rustc"),
            switch(150, CPU0, t(102), rustc, 1, "rustc"),
        ];
        let tids: BTreeSet<u32> = [PID, 101].into();
        let missed = missed_switch_ins(events.into_iter().map(Ok), &tids).unwrap();
        let m = |since, seen_on_cpu, out| MissedSwitchIn {
            since,
            seen_on_cpu,
            out,
        };
        assert_eq!(
            missed,
            [(
                PID,
                vec![m(25, Some(40), 60), m(60, None, 90), m(110, None, 130)]
            )]
            .into()
        );
    }

    #[test]
    fn percentiles_are_within_one_percent_and_the_max_exact() {
        let mut l = Latency::new();
        for v in 1..=10_000u64 {
            l.record(v * 1_000);
        }
        let row = l.row("x");
        assert_eq!((row.count, row.max_ns), (10_000, 10_000_000));
        for (got, want) in [
            (row.p50_ns, 5_000_000f64),
            (row.p90_ns, 9_000_000.0),
            (row.p99_ns, 9_900_000.0),
        ] {
            assert!((got as f64 - want).abs() / want <= 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn waits_pair_per_thread_nest_and_are_closed_at_exit_or_the_end() {
        let futex = Wait::Futex as u64;
        let mmap = Wait::MmapLockRead as u64;
        let events = [
            ev(
                10,
                Kind::WaitBegin,
                CPU0,
                t(PID),
                Task::default(),
                futex,
                "",
            ),
            ev(
                12,
                Kind::WaitBegin,
                CPU1,
                t(101),
                Task::default(),
                futex,
                "",
            ),
            ev(15, Kind::WaitEnd, CPU0, t(PID), Task::default(), futex, ""),
            // 101: an mmap_lock wait inside the futex one is cut by the futex's end.
            ev(16, Kind::WaitBegin, CPU1, t(101), Task::default(), mmap, ""),
            ev(20, Kind::WaitEnd, CPU1, t(101), Task::default(), futex, ""),
            ev(21, Kind::WaitEnd, CPU1, t(101), Task::default(), mmap, ""),
            // 102 exits waiting; main's last wait never ends.
            ev(
                30,
                Kind::WaitBegin,
                CPU1,
                t(102),
                Task::default(),
                futex,
                "",
            ),
            ev(35, Kind::Exit, CPU1, t(102), Task::default(), 0, "w"),
            ev(40, Kind::WaitBegin, CPU0, t(PID), Task::default(), mmap, ""),
            ev(50, Kind::Wakeup, CPU0, t(101), Task::default(), 0, "w"),
        ];
        let trace = run(&events, PhaseEdges::whole_run());
        let (_, f) = &trace.waits[Wait::Futex as usize];
        assert_eq!(
            (
                f.pairs,
                f.total_ns,
                f.max_ns,
                f.closed_at_exit,
                f.unmatched_ends
            ),
            (3, 5 + 8 + 5, 8, 1, 0)
        );
        let (_, m) = &trace.waits[Wait::MmapLockRead as usize];
        assert_eq!(
            (m.pairs, m.cut, m.closed_at_end, m.unmatched_ends),
            (2, 1, 1, 1)
        );
        assert_eq!(trace.end_ts, 50);
    }

    #[test]
    fn records_are_put_in_time_order_within_the_window_and_later_ones_counted() {
        let a = ev(5, Kind::Rename, CPU0, t(PID), Task::default(), 0, "a");
        let mut b = a;
        b.ts = 3;
        let mut far = a;
        far.ts = 5 + 2 * REORDER_WINDOW_NS;
        let mut late = a;
        late.ts = 4;
        let mut ordered = TimeOrdered::new([a, b, far, late].into_iter().map(Ok));
        let ts: Vec<u64> = ordered.by_ref().map(|e| e.unwrap().ts).collect();
        assert_eq!(ts, vec![3, 5, 4, far.ts]);
        assert_eq!(ordered.late, 1);
    }

    #[test]
    fn phases_move_onto_the_boot_clock() {
        let edges = PhaseEdges {
            names: vec!["startup".into(), "spawn".into(), "exit".into()],
            starts: vec![100, 200, 300],
        };
        assert_eq!(edges.index(50), 0);
        assert_eq!(edges.index(200), 1);
        assert_eq!(edges.index(10_000), 2);
        assert_eq!(boot(1_000, -400), 600);
        assert_eq!(boot(100, -400), 0);
    }
}
