//! A cut of a run's Perfetto trace (`report DIR --perfetto --from/--to/--window/--threads/--tids`),
//! for a trace larger than Perfetto's UI opens: which window and which threads ([`Window`],
//! [`choose`]), and the records, phases and counters clipped to them ([`Cut`], [`cut_trace`],
//! [`clip_tracks`]). render/traces/perfetto.rs encodes what it is handed, as for the full trace;
//! commands/perfetto_cut.rs writes it. The full trace (`trace.perfetto-trace`) is left as it is.
//!
//! What a cut holds, within its window [from, to] on CLOCK_BOOTTIME (the records' clock), given
//! as seconds from the trace's first record (where swimlane.svg and the full trace's timeline
//! begin) or as one of the run's phases:
//! - every record of a kept thread: its switches (as prev or as next), wakeups, creation, renames,
//!   exit and waits; a wait open at the window's start begins at the start, one open at its end
//!   ends there;
//! - the run's other threads as one placeholder thread per process ([`PLACEHOLDER_NAME`], tid
//!   [`placeholder_tid`]): a switch between a kept thread and another of the run's goes out with
//!   the placeholder on that side, and so does a switch between a thread left out and an outside
//!   task or the idle one, so that each CPU still shows when the run held it; a switch between two
//!   threads left out of one process changes nothing the cut shows and goes;
//! - descriptors of the kept threads and of the placeholders; the phases and counters clipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;

use spawnscope_collector::trace_events::{comm_bytes, Kind, Task, TraceEvent};

use crate::traces::run_tracks::{Counter, RunTracks, Span};
use crate::traces::sched_trace::{PhaseEdges, WHOLE_RUN};
use crate::traces::sched_trace::{SchedTrace, Thread, WaitStacks};
use crate::traces::swimlane::{self, THREAD_LANES};
/// Perfetto's UI holds a trace in the browser's memory, "2gb is typical" of the limit, and a proto
/// trace takes "2-4x" its size there: https://perfetto.dev/docs/visualization/large-traces
/// ("Visualising large traces": "The exact memory limit can vary by browser, architecture, and OS
/// however 2gb is typical … The exact inflation factor … can be 2-4x for uncompressed proto
/// traces").
pub const UI_MEMORY_BYTES: u64 = 2_000_000_000;
/// The documented inflation at its worst.
pub const UI_INFLATION: u64 = 4;
/// A trace larger than this may not open in ui.perfetto.dev: `run` says how to cut it.
pub const UI_TRACE_BYTES: u64 = UI_MEMORY_BYTES / UI_INFLATION;

/// What the run's threads left out of a cut are called, one per process.
pub const PLACEHOLDER_NAME: &str = "other threads of the run (not in the sample)";
/// The placeholder's comm in the CPUs' switches (15 bytes at most, as the kernel's).
pub const PLACEHOLDER_COMM: &str = "not sampled";

/// A process's placeholder thread: above every tid the kernel gives (PID_MAX_LIMIT is 2^22).
pub fn placeholder_tid(tgid: u32) -> u32 {
    1 << 30 | tgid
}

/// The window asked for: seconds from the trace's first record, or a phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowAsked {
    pub from_s: Option<f64>,
    pub to_s: Option<f64>,
    pub phase: Option<String>,
}

/// The window on the trace's clock (BOOTTIME, ns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// The trace's first record: what seconds are counted from.
    pub start: u64,
    pub from: u64,
    pub to: u64,
    /// The phase asked for, when one was.
    pub phase: Option<String>,
}

/// Seconds as people write them: "1.5", "3", "0.042".
pub fn seconds(ns: u64) -> String {
    let s = format!("{:.3}", ns as f64 / 1e9);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Window {
    /// The window asked for on `trace`, or why it cannot be cut (one line).
    pub fn resolve(asked: &WindowAsked, trace: &SchedTrace) -> Result<Window, String> {
        let Some(start) = trace.first_ts else {
            return Err("the raw records hold no record: there is nothing to cut".into());
        };
        let end = trace.end_ts.max(start);
        let length = seconds(end - start);
        if let Some(name) = &asked.phase {
            return phase_window(name, &trace.phases, start, end);
        }
        let at = |flag: &str, s: f64| -> Result<u64, String> {
            if !s.is_finite() || s < 0.0 {
                return Err(format!(
                    "{flag} {s}: seconds from the trace's first record, 0 or more"
                ));
            }
            let ns = (s * 1e9).round() as u64;
            if ns > end - start {
                return Err(format!(
                    "{flag} {s} s is outside the run: its trace ends {length} s after its first record"
                ));
            }
            Ok(start + ns)
        };
        let from = asked.from_s.map(|s| at("--from", s)).transpose()?;
        let to = asked.to_s.map(|s| at("--to", s)).transpose()?;
        let (from, to) = (from.unwrap_or(start), to.unwrap_or(end));
        if from >= to {
            return Err(format!(
                "the window from {} s to {} s is empty: --from must be before --to (the trace ends {length} s after its first record)",
                seconds(from - start),
                seconds(to - start)
            ));
        }
        Ok(Window {
            start,
            from,
            to,
            phase: None,
        })
    }

    /// The window in words: "1.5 s to 3 s after the trace's first record (CLOCK_BOOTTIME): the
    /// phase spawn".
    pub fn words(&self) -> String {
        format!(
            "{} s to {} s after the trace's first record (CLOCK_BOOTTIME){}",
            seconds(self.from - self.start),
            seconds(self.to - self.start),
            self.phase
                .as_ref()
                .map(|p| format!(": the phase {p}"))
                .unwrap_or_default()
        )
    }

    /// How the window names a cut's file: the phase, else "1.5s-3s".
    pub fn label(&self) -> String {
        self.phase.clone().unwrap_or_else(|| {
            format!(
                "{}s-{}s",
                seconds(self.from - self.start),
                seconds(self.to - self.start)
            )
        })
    }
}

fn phase_window(name: &str, phases: &PhaseEdges, start: u64, end: u64) -> Result<Window, String> {
    if phases.names == [WHOLE_RUN] {
        return Err(format!(
            "--window {name}: this run's phases cannot be placed on the trace's clock (its capture gave no clock offset); give --from and --to in seconds"
        ));
    }
    let Some(i) = phases.names.iter().position(|n| n == name) else {
        return Err(format!(
            "--window {name}: no such phase in this run (its phases: {})",
            phases.names.join(", ")
        ));
    };
    let from = phases.starts[i].clamp(start, end);
    let to = phases
        .starts
        .get(i + 1)
        .copied()
        .unwrap_or(end)
        .clamp(start, end);
    if from >= to {
        return Err(format!(
            "--window {name}: that phase is outside the run's trace records"
        ));
    }
    Ok(Window {
        start,
        from,
        to,
        phase: Some(name.to_string()),
    })
}

/// Which threads a cut keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sample {
    /// Every thread alive in the window.
    Every,
    /// K threads chosen by the swimlane's rule (`swimlane::sample_of`) among those alive in the
    /// window, the spawning thread always in.
    Threads(usize),
    /// These TIDs exactly.
    Tids(Vec<u32>),
}

impl Sample {
    /// How the sample names a cut's file.
    pub fn label(&self) -> String {
        match self {
            Sample::Every => "allthreads".into(),
            Sample::Threads(k) => format!("{k}threads"),
            Sample::Tids(tids) if tids.len() <= 4 => format!(
                "tids-{}",
                tids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join("-")
            ),
            Sample::Tids(tids) => format!("{}tids", tids.len()),
        }
    }

    /// The rule in words.
    pub fn rule(&self) -> String {
        match self {
            Sample::Every => "every thread alive in the window".into(),
            Sample::Threads(k) => format!(
                "{k} chosen by the swimlane's rule: the spawning thread, then of the threads alive in the window a quarter first created, a quarter with the longest wait for a CPU over the run, the rest spread evenly over creation order"
            ),
            Sample::Tids(_) => "the TIDs asked for".into(),
        }
    }
}

/// Whether a thread has a record in the window (created before its end, not exited before its
/// start).
fn alive_in(t: &Thread, w: &Window) -> bool {
    t.first_ts <= w.to && t.exit_ts.is_none_or(|x| x >= w.from)
}

/// The threads a cut keeps, or why the sample cannot be taken (one line).
pub fn choose(
    trace: &SchedTrace,
    spawning: Option<u32>,
    window: &Window,
    sample: &Sample,
) -> Result<BTreeSet<u32>, String> {
    match sample {
        Sample::Every => Ok(trace
            .threads
            .iter()
            .filter(|(_, t)| alive_in(t, window))
            .map(|(tid, _)| *tid)
            .collect()),
        Sample::Threads(0) => Err("--threads 0: a sample holds one thread at least".into()),
        Sample::Threads(k) => Ok(
            swimlane::sample_of(trace, spawning, *k, |t| alive_in(t, window))
                .into_iter()
                .map(|(tid, _)| tid)
                .collect(),
        ),
        Sample::Tids(tids) => {
            if let Some(tid) = tids.iter().find(|t| !trace.threads.contains_key(t)) {
                return Err(format!(
                    "--tids: {tid} is not one of the run's threads (its raw records name {})",
                    units::count(trace.threads.len() as u64)
                ));
            }
            Ok(tids.iter().copied().collect())
        }
    }
}

/// What a cut passed on and what it clipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CutCounts {
    /// Records read within the window.
    pub in_window: u64,
    /// Records passed on (the waits begun at the window's start not among them).
    pub kept: u64,
    /// Switches with a kept thread as prev or next.
    pub kept_thread_switches: u64,
    /// Switches between a placeholder and an outside task, the idle one or another process's
    /// placeholder.
    pub placeholder_switches: u64,
    /// Waits of kept threads open at the window's start, begun there.
    pub waits_open_at_start: u64,
    /// Waits of kept threads open at the window's end, ended there.
    pub waits_open_at_end: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Kept,
    LeftOut(u32),
    Outside,
}

/// The records of a cut, from the run's raw records in time order (wrap them in
/// `sched_trace::TimeOrdered`): the records before the window are read for the waits they leave
/// open, reading stops at the first record past it. `counts` holds what it did once drained.
pub struct Cut<'a, I> {
    inner: I,
    trace: &'a SchedTrace,
    kept: &'a BTreeSet<u32>,
    window: Window,
    waits: WaitStacks,
    pending: VecDeque<TraceEvent>,
    entered: bool,
    done: bool,
    pub counts: CutCounts,
}

impl<'a, I> Cut<'a, I> {
    pub fn new(inner: I, trace: &'a SchedTrace, kept: &'a BTreeSet<u32>, window: Window) -> Self {
        Cut {
            inner,
            trace,
            kept,
            window,
            waits: WaitStacks::default(),
            pending: VecDeque::new(),
            entered: false,
            done: false,
            counts: CutCounts::default(),
        }
    }

    fn side(&self, t: Task) -> Side {
        if t.tid == 0 {
            return Side::Outside;
        }
        match self.trace.threads.get(&t.tid) {
            Some(_) if self.kept.contains(&t.tid) => Side::Kept,
            Some(th) => Side::LeftOut(th.tgid),
            None => Side::Outside,
        }
    }

    fn shown(t: Task, side: Side) -> Task {
        match side {
            Side::LeftOut(tgid) => Task {
                tid: placeholder_tid(tgid),
                tgid,
            },
            _ => t,
        }
    }

    /// The kept threads' waits, followed as the encoder follows them (nested, closed at exit).
    fn follow_waits(&mut self, e: &TraceEvent) {
        if self.side(e.task) != Side::Kept {
            return;
        }
        match (e.kind, e.wait()) {
            (Kind::WaitBegin, Some(w)) => self.waits.begin(e.task.tid, w, e.ts),
            (Kind::WaitEnd, Some(w)) => {
                self.waits.end(e.task.tid, w, e.ts);
            }
            (Kind::Exit, _) => {
                self.waits.close_thread(e.task.tid, e.ts);
            }
            _ => {}
        }
    }

    /// At the window's start: the kept threads' open waits begin there, outermost first.
    fn enter(&mut self) {
        if self.entered {
            return;
        }
        self.entered = true;
        for (tid, wait, _) in self.waits.open_waits() {
            let task = Task {
                tid,
                tgid: self.trace.threads[&tid].tgid,
            };
            self.pending.push_back(TraceEvent::nice_zero(
                self.window.from,
                Kind::WaitBegin,
                0,
                task,
                Task::default(),
                wait as u64,
                "",
            ));
            self.counts.waits_open_at_start += 1;
        }
    }

    fn finish(&mut self) {
        self.enter();
        self.counts.waits_open_at_end = self.waits.open_waits().len() as u64;
        self.done = true;
    }

    /// The record as the cut shows it, or None when it goes.
    fn cut(&mut self, e: TraceEvent) -> Option<TraceEvent> {
        let side = self.side(e.task);
        let mut out = e;
        match e.kind {
            Kind::Switch => {
                let next = self.side(e.other);
                out.task = Self::shown(e.task, side);
                out.other = Self::shown(e.other, next);
                if matches!(next, Side::LeftOut(_)) {
                    out.comm = comm_bytes(PLACEHOLDER_COMM);
                }
                if side == Side::Kept || next == Side::Kept {
                    self.counts.kept_thread_switches += 1;
                } else if out.task.tid == out.other.tid {
                    return None;
                } else {
                    self.counts.placeholder_switches += 1;
                }
            }
            Kind::NewTask => {
                if side != Side::Kept {
                    return None;
                }
                out.other = Self::shown(e.other, self.side(e.other));
            }
            Kind::Wakeup
            | Kind::WakeupNew
            | Kind::Rename
            | Kind::Exit
            | Kind::WaitBegin
            | Kind::WaitEnd => {
                if side != Side::Kept {
                    return None;
                }
            }
        }
        self.counts.kept += 1;
        Some(out)
    }
}

impl<I: Iterator<Item = io::Result<TraceEvent>>> Iterator for Cut<'_, I> {
    type Item = io::Result<TraceEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(Ok(e));
            }
            if self.done {
                return None;
            }
            let e = match self.inner.next() {
                None => {
                    self.finish();
                    continue;
                }
                Some(Err(err)) => return Some(Err(err)),
                Some(Ok(e)) => e,
            };
            if e.ts > self.window.to {
                self.finish();
                continue;
            }
            // Before the window (or a record later than the reorder window put back): only its
            // waits count.
            if e.ts < self.window.from {
                self.follow_waits(&e);
                continue;
            }
            self.enter();
            self.counts.in_window += 1;
            self.follow_waits(&e);
            if let Some(out) = self.cut(e) {
                self.pending.push_back(out);
            }
        }
    }
}

/// The derived trace as the cut's encoder needs it: the kept threads and one placeholder per
/// process with a thread left out, their processes, the window as its first record and its end
/// (where waits still open are closed).
pub fn cut_trace(trace: &SchedTrace, kept: &BTreeSet<u32>, window: &Window) -> SchedTrace {
    let mut threads: BTreeMap<u32, Thread> = kept
        .iter()
        .map(|tid| (*tid, trace.threads[tid].clone()))
        .collect();
    let left_out: BTreeSet<u32> = trace
        .threads
        .iter()
        .filter(|(tid, _)| !kept.contains(tid))
        .map(|(_, t)| t.tgid)
        .collect();
    for tgid in left_out {
        threads.insert(
            placeholder_tid(tgid),
            Thread {
                tgid,
                name: PLACEHOLDER_NAME.into(),
                renames: Vec::new(),
                first_ts: window.from,
                created_by: None,
                exit_ts: None,
                longest_wait_ns: 0,
            },
        );
    }
    let tgids: BTreeSet<u32> = threads.values().map(|t| t.tgid).collect();
    SchedTrace {
        records: trace.records,
        first_ts: Some(window.from),
        last_ts: Some(window.to),
        processes: trace
            .processes
            .iter()
            .filter(|(pid, _)| tgids.contains(pid))
            .map(|(pid, p)| (*pid, p.clone()))
            .collect(),
        threads,
        cpus: trace.cpus.clone(),
        switches: trace.switches,
        waits: trace.waits.clone(),
        phases: trace.phases.clone(),
        wake_to_run: trace.wake_to_run.clone(),
        preempted_to_run: trace.preempted_to_run.clone(),
        late_records: trace.late_records,
        end_ts: window.to,
    }
}

/// The run's phases and counters clipped to the window (a counter's value holding at the
/// window's start put at its start), and the cut's notes before the run's own.
pub fn clip_tracks(
    tracks: &RunTracks,
    window: &Window,
    sample: &Sample,
    kept: usize,
    threads: usize,
) -> RunTracks {
    let (from, to) = (window.from, window.to);
    let phases = tracks
        .phases
        .iter()
        .map(|p| Span {
            name: p.name.clone(),
            begin: p.begin.clamp(from, to),
            end: p.end.clamp(from, to),
        })
        .filter(|p| p.end > p.begin)
        .collect();
    let counters = tracks
        .counters
        .iter()
        .map(|c| {
            let holding = c.points.iter().rev().find(|(ts, _)| *ts < from);
            Counter {
                name: c.name.clone(),
                unit: c.unit,
                points: holding
                    .map(|&(_, v)| (from, v))
                    .into_iter()
                    .chain(
                        c.points
                            .iter()
                            .copied()
                            .filter(|(ts, _)| (from..=to).contains(ts)),
                    )
                    .collect(),
            }
        })
        .collect();
    let mut notes = vec![
        format!(
            "a cut of the run's trace (spawnscope report --perfetto): {}; {} of the run's {} threads: {}",
            window.words(),
            units::count(kept as u64),
            units::count(threads as u64),
            sample.rule()
        ),
        format!(
            "the run's threads left out of the sample are one thread per process, \"{PLACEHOLDER_NAME}\" (tid 2^30 + the process's id): a switch between one of them and a kept thread, an outside task or the idle one is kept, so each CPU shows when the run held it; a switch between two of one process is left out, and so are their wakeups, waits, creations and exits"
        ),
        "a wait open at the window's start begins at its start, one open at its end ends there; the phases and counters are clipped to the window (a counter's value at the window's start is put at its start); a CPU's first slice begins at its first switch in the window".into(),
    ];
    notes.extend(tracks.notes.iter().cloned());
    RunTracks {
        offset_ns: tracks.offset_ns,
        phases,
        counters,
        records_lost: tracks.records_lost,
        notes,
    }
}

/// When a full trace of `bytes` is larger than the UI opens: what `run` says, with the exact
/// command that cuts it (`dir` as the user reaches it): the window shortened in proportion (from
/// the trace's first record) and the swimlane's sample of threads.
pub fn too_big_for_the_ui(bytes: u64, dir: &str, trace: &SchedTrace) -> Option<String> {
    if bytes <= UI_TRACE_BYTES {
        return None;
    }
    let start = trace.first_ts?;
    let length = trace.end_ts.saturating_sub(start);
    // A tenth of room for what the records' density varies by.
    let to = (length as f64 * 0.9 * UI_TRACE_BYTES as f64 / bytes as f64) as u64;
    Some(format!(
        "the trace is {}, more than ui.perfetto.dev may open (it holds a trace in the browser's memory, typically 2 GB at most, and a trace takes 2-4x its size there: about {} of trace): cut it with `spawnscope report {dir} --perfetto --from 0 --to {} --threads {THREAD_LANES}`, or open the whole one with trace_processor",
        units::bytes(bytes as f64),
        units::bytes(UI_TRACE_BYTES as f64),
        seconds(to.max(1_000_000)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PID: u32 = 100;

    fn t(tid: u32) -> Task {
        Task { tid, tgid: PID }
    }

    fn ev(ts: u64, kind: Kind, cpu: u32, task: Task, other: Task, arg: u64) -> TraceEvent {
        TraceEvent::nice_zero(ts, kind, cpu, task, other, arg, "w")
    }

    fn trace_of(events: &[TraceEvent], phases: PhaseEdges) -> SchedTrace {
        crate::test_support::sched_trace_of(events, PID, phases)
    }

    fn asked(from_s: Option<f64>, to_s: Option<f64>) -> WindowAsked {
        WindowAsked {
            from_s,
            to_s,
            phase: None,
        }
    }

    /// Main (CPU 0) and threads 101, 102 on CPU 1, a second apart; 101 waits in a futex across
    /// the window's start, 102 across its end.
    fn records() -> Vec<TraceEvent> {
        let s = 1_000_000_000;
        let futex = spawnscope_collector::trace_events::Wait::Futex as u64;
        let idle = Task::default();
        vec![
            ev(0, Kind::Switch, 0, idle, t(PID), 0),
            ev(s, Kind::WaitBegin, 1, t(101), idle, futex),
            ev(s + 1, Kind::Switch, 1, idle, t(101), 0),
            ev(s + 2, Kind::Switch, 1, t(101), t(102), 0),
            ev(2 * s, Kind::Switch, 1, t(102), Task { tid: 7, tgid: 7 }, 0),
            ev(
                2 * s + 1,
                Kind::Switch,
                1,
                Task { tid: 7, tgid: 7 },
                t(102),
                0,
            ),
            ev(2 * s + 2, Kind::WaitEnd, 1, t(101), idle, futex),
            ev(3 * s, Kind::WaitBegin, 1, t(102), idle, futex),
            ev(3 * s + 1, Kind::Switch, 1, t(102), t(101), 1),
            ev(3 * s + 2, Kind::Switch, 1, t(101), t(103), 1),
            ev(3 * s + 3, Kind::Switch, 1, t(103), idle, 1),
            ev(5 * s, Kind::WaitEnd, 1, t(102), idle, futex),
        ]
    }

    #[test]
    fn a_window_is_seconds_from_the_first_record_or_a_phase_and_bad_ones_are_said() {
        let trace = trace_of(
            &records(),
            PhaseEdges {
                names: vec!["startup".into(), "spawn".into()],
                starts: vec![0, 2_000_000_000],
            },
        );
        let w = Window::resolve(&asked(Some(1.5), Some(3.0)), &trace).unwrap();
        assert_eq!((w.from, w.to), (1_500_000_000, 3_000_000_000));
        assert_eq!(w.label(), "1.5s-3s");
        let whole = Window::resolve(&asked(None, None), &trace).unwrap();
        assert_eq!((whole.from, whole.to), (0, 5_000_000_000));
        let spawn = Window::resolve(
            &WindowAsked {
                phase: Some("spawn".into()),
                ..WindowAsked::default()
            },
            &trace,
        )
        .unwrap();
        assert_eq!(
            (spawn.from, spawn.to, spawn.label().as_str()),
            (2_000_000_000, 5_000_000_000, "spawn")
        );
        for (bad, says) in [
            (asked(Some(6.0), None), "outside the run"),
            (asked(None, Some(9.0)), "outside the run"),
            (asked(Some(3.0), Some(2.0)), "must be before"),
            (asked(Some(-1.0), None), "0 or more"),
            (
                WindowAsked {
                    phase: Some("join".into()),
                    ..WindowAsked::default()
                },
                "no such phase",
            ),
        ] {
            let err = Window::resolve(&bad, &trace).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn the_cut_keeps_the_sample_s_records_shows_the_others_as_a_placeholder_and_clips_waits() {
        let events = records();
        let trace = trace_of(&events, PhaseEdges::whole_run());
        let w = Window::resolve(&asked(Some(1.5), Some(4.0)), &trace).unwrap();
        let kept: BTreeSet<u32> = choose(&trace, Some(PID), &w, &Sample::Tids(vec![101])).unwrap();
        let mut cut = Cut::new(events.iter().copied().map(Ok), &trace, &kept, w.clone());
        let out: Vec<TraceEvent> = cut.by_ref().map(|e| e.unwrap()).collect();
        let p = placeholder_tid(PID);
        let got: Vec<(u64, Kind, u32, u32)> = out
            .iter()
            .map(|e| (e.ts, e.kind, e.task.tid, e.other.tid))
            .collect();
        let s = 1_000_000_000;
        assert_eq!(
            got,
            vec![
                // 101's futex wait, open at the window's start, begins there.
                (w.from, Kind::WaitBegin, 101, 0),
                // 102 ↔ an outside task: the CPU's state, with 102 as the placeholder.
                (2 * s, Kind::Switch, p, 7),
                (2 * s + 1, Kind::Switch, 7, p),
                (2 * s + 2, Kind::WaitEnd, 101, 0),
                (3 * s + 1, Kind::Switch, p, 101),
                (3 * s + 2, Kind::Switch, 101, p),
                // 103 → idle: the placeholder leaves the CPU.
                (3 * s + 3, Kind::Switch, p, 0),
            ]
        );
        assert_eq!(out[1].comm(), "w");
        assert_eq!(out[6].comm(), "w");
        assert_eq!(out[5].comm(), PLACEHOLDER_COMM);
        assert_eq!(
            cut.counts,
            CutCounts {
                in_window: 7,
                kept: 6,
                kept_thread_switches: 2,
                placeholder_switches: 3,
                waits_open_at_start: 1,
                waits_open_at_end: 0,
            }
        );
        let shown = cut_trace(&trace, &kept, &w);
        assert_eq!(
            shown.threads.keys().copied().collect::<Vec<_>>(),
            vec![101, p]
        );
        assert_eq!(shown.threads[&p].name, PLACEHOLDER_NAME);
        assert_eq!((shown.first_ts, shown.end_ts), (Some(w.from), w.to));
    }

    #[test]
    fn a_sample_takes_the_spawning_thread_and_refuses_what_the_run_lacks() {
        let trace = trace_of(&records(), PhaseEdges::whole_run());
        let w = Window::resolve(&asked(None, None), &trace).unwrap();
        let two = choose(&trace, Some(PID), &w, &Sample::Threads(2)).unwrap();
        assert_eq!(two.len(), 2);
        assert!(two.contains(&PID));
        assert!(choose(&trace, Some(PID), &w, &Sample::Threads(0))
            .unwrap_err()
            .contains("one thread at least"));
        assert!(choose(&trace, Some(PID), &w, &Sample::Tids(vec![101, 999]))
            .unwrap_err()
            .contains("999 is not one of the run's threads"));
        // Alive in the window: 103 appears only at 3 s.
        let early = Window::resolve(&asked(Some(0.5), Some(1.5)), &trace).unwrap();
        let every = choose(&trace, Some(PID), &early, &Sample::Every).unwrap();
        assert!(!every.contains(&103), "{every:?}");
    }

    #[test]
    fn counters_and_phases_are_clipped_and_the_value_holding_at_the_start_kept() {
        let tracks = RunTracks {
            offset_ns: Some(0),
            phases: vec![
                Span {
                    name: "spawn".into(),
                    begin: 0,
                    end: 10,
                },
                Span {
                    name: "join".into(),
                    begin: 10,
                    end: 30,
                },
            ],
            counters: vec![Counter {
                name: "memory".into(),
                unit: crate::traces::run_tracks::CounterUnit::Bytes,
                points: vec![(0, 1), (4, 2), (12, 3), (25, 4)],
            }],
            records_lost: Some(0),
            notes: vec!["the run's own".into()],
        };
        let w = Window {
            start: 0,
            from: 5,
            to: 20,
            phase: None,
        };
        let clipped = clip_tracks(&tracks, &w, &Sample::Threads(4), 4, 10);
        assert_eq!(
            clipped
                .phases
                .iter()
                .map(|p| (p.name.as_str(), p.begin, p.end))
                .collect::<Vec<_>>(),
            vec![("spawn", 5, 10), ("join", 10, 20)]
        );
        assert_eq!(clipped.counters[0].points, vec![(5, 2), (12, 3)]);
        assert!(clipped.notes[0].contains("4 of the run's 10 threads"));
        assert_eq!(clipped.notes.last().unwrap(), "the run's own");
    }

    #[test]
    fn a_trace_too_big_for_the_ui_is_said_with_the_command_that_cuts_it() {
        let trace = trace_of(&records(), PhaseEdges::whole_run());
        assert_eq!(too_big_for_the_ui(UI_TRACE_BYTES, "d", &trace), None);
        let said = too_big_for_the_ui(10 * UI_TRACE_BYTES, "results/r", &trace).unwrap();
        // 5 s of trace, 10 times too big: 0.45 s.
        assert!(
            said.contains(
                "`spawnscope report results/r --perfetto --from 0 --to 0.45 --threads 32`"
            ),
            "{said}"
        );
    }
}
