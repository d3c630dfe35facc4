//! A runtime-traced goroutines run (`run --runtime-trace`), from its raw records (record/go_sched.rs:
//! gotrace-reduce's goroutine state changes): the runtime's counts, its readied→running
//! distribution per phase (the reducer's rule: a creation or an unblock to the goroutine's next
//! start), the goroutines created beside the workload's own count, and the running slices the
//! Perfetto trace puts on their OS threads (`SliceEdges`: a goroutine is on its thread from
//! Running or Syscall entered to either left; its thread is the one it started on).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io;

use serde::{Deserialize, Serialize};

use crate::traces::sched_trace::LatencyRow;
use crate::traces::sched_trace::{PhaseEdges, PhaseHistograms};
use record::go_sched::{GoChange, GoSchedSummary};

/// The package a workload's own goroutines start in: the goroutines binary is package main.
pub const WORKLOAD_PACKAGE: &str = "main.";

const METHOD: &str = "the Go runtime's execution trace (runtime/trace, goroutines --go-trace) reduced by gotrace-reduce (golang.org/x/exp/trace) to one record per goroutine state change; readied→running: a goroutine made runnable by its creation or an unblock, to its next start on a thread (a preemption, a yield or a syscall's return does not ready it), per phase of the start; times on CLOCK_MONOTONIC by the trace's Sync clock snapshots";

/// The runtime's view in a run's summary.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GoSchedFigures {
    /// How the figures were derived.
    pub method: String,
    /// This run ran with the runtime's tracer: its memory, fault and time figures carry the
    /// tracer's cost and are not the runtime's own (issue 39: said apart, kept out of comparisons).
    pub runtime_traced: bool,
    /// The records read (the kept ones: see `kept`).
    pub records: u64,
    /// Where the reducer cut a long trace (format 3); None: an older reduction, every change
    /// kept. The counts are of every change; the latencies, slices and on-CPU check of the kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptRecords>,
    /// NotExist → Runnable (or Waiting, Syscall), all goroutines.
    pub created: u64,
    /// The created goroutines by start function.
    pub created_by_function: BTreeMap<String, u64>,
    /// Already there when the trace began.
    pub at_start: u64,
    pub started: u64,
    pub blocked: u64,
    /// By the runtime's reason: chan receive, chan send, select, sync, sleep, …
    pub blocked_by_reason: BTreeMap<String, u64>,
    pub unblocked: u64,
    /// Running → Runnable: preempted or yielded, by reason.
    pub stopped_by_reason: BTreeMap<String, u64>,
    pub syscalls: u64,
    pub destroyed: u64,
    /// A goroutine readied (created or unblocked) → its next start, per phase then the whole run
    /// (the waits at parser-moved times left out).
    pub readied_to_running: Vec<LatencyRow>,
    /// Waits read whose start or end is a time the trace's parser moved: not in the
    /// distribution, their length unknown.
    #[serde(default)]
    pub waits_at_moved_times: u64,
    /// The goroutines the trace saw created against the workload's own count.
    pub created_check: CreatedCheck,
    /// The OS threads goroutines ran on (the Ms' TIDs).
    pub threads: Vec<u32>,
    /// Running slices (on-thread spans) as the Perfetto trace draws them.
    pub running_slices: u64,
    /// Every runtime event inside a kernel on-CPU span of the thread that emitted it (with the
    /// kernel's trace; None without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cpu: Option<OnCpuCheck>,
    pub notes: Vec<String>,
}

pub use crate::traces::on_cpu::{OnCpuCheck, OnCpuSpans};

/// The reducer's cut: the trace's first `records_kept` changes in its time order, the rest counted.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KeptRecords {
    /// The reducer's cap (`gotrace-reduce --max-records`).
    pub max_records: u64,
    pub records_kept: u64,
    /// The last kept change, seconds after the trace's first; every change before it is kept.
    pub kept_until_s: f64,
    /// The latest kept change whose time the parser did not move, seconds after the trace's
    /// first: the kept records' own times reach here (the parser may move many far forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_times_until_s: Option<f64>,
    /// The trace's first change to its last, seconds.
    pub trace_s: f64,
    /// The run's phase the cut falls in, where the phases are placed (and the cap was reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_in_phase: Option<String>,
    /// Changes past the cap: in the counts, not in the records.
    pub past_cap: u64,
    /// The same by "From->To".
    pub past_cap_by_transition: BTreeMap<String, u64>,
    /// Readied→running waits past the cap: not in the latencies.
    pub past_cap_readied_to_running: u64,
}

impl KeptRecords {
    fn of(summary: &GoSchedSummary, phases: &PhaseEdges) -> Option<KeptRecords> {
        let max_records = summary.max_records?;
        let past = &summary.records_past_cap;
        let first = summary.clock.first_ns;
        let until = summary.kept_until_ns.unwrap_or(summary.clock.last_ns);
        let seconds = |ns: u64| ns.saturating_sub(first) as f64 / 1e9;
        Some(KeptRecords {
            max_records,
            records_kept: summary.records_kept,
            kept_until_s: seconds(until),
            own_times_until_s: summary.kept_until_own_ns.map(seconds),
            trace_s: seconds(summary.clock.last_ns),
            cut_in_phase: (past.records > 0 && phases.names.len() > 1)
                .then(|| phases.names[phases.index(until)].clone()),
            past_cap: past.records,
            past_cap_by_transition: past.transitions.clone(),
            past_cap_readied_to_running: past.readied_to_running,
        })
    }
}

/// The tracer's 64 ns tick, for the event and for its clock snapshot.
pub const ON_CPU_TOLERANCE_NS: u64 = 2 * 64;

/// Holds each change with a thread to that thread's running spans (analyse/traces/on_cpu.rs: the
/// kernel's trace, BOOTTIME; `offset_ns` = BOOTTIME − MONOTONIC puts the changes there). Each
/// change was emitted by its thread (`tid`), so that thread was on a CPU then; a change whose
/// time the parser moved is held over [its thread's last record of its own time, the moved time].
pub fn on_cpu_check(
    changes: impl Iterator<Item = io::Result<GoChange>>,
    kernel: &OnCpuSpans,
    offset_ns: i64,
    switches_unseen: Option<u64>,
) -> io::Result<OnCpuCheck> {
    crate::traces::on_cpu::check(
        changes.map(|c| {
            c.map(|c| crate::traces::on_cpu::Event {
                ts_ns: c.ts_ns,
                tid: c.tid,
                time_moved: c.time_moved,
            })
        }),
        kernel,
        offset_ns,
        switches_unseen,
        &crate::traces::on_cpu::Clocks {
            tolerance_ns: ON_CPU_TOLERANCE_NS,
            behind: "the runtime's clock runs behind the kernel's (the Sync snapshot's MONOTONIC against the capture's BOOTTIME offset)",
        },
    )
}

/// Created in the trace = the workload's `spawned` + the runtime's own goroutines, named.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CreatedCheck {
    /// Created with a start function in the workload's package (`main.`).
    pub by_the_workload: u64,
    /// The workload's result event's `spawned`.
    pub workload_spawned: Option<u64>,
    /// The rest: the runtime's and the standard library's own, by start function.
    pub runtime_own: BTreeMap<String, u64>,
    pub agrees: Option<bool>,
    /// Why there was no count to hold them against (a command: [`NO_COUNT_FOR_A_COMMAND`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
}

/// What the goroutines created in package main are held against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountedAgainst {
    /// A workload's result event's `spawned` (None: its result said none).
    Workload(Option<u64>),
    /// A command run with `$SPAWNSCOPE_GO_TRACE`: it says no count of its own.
    Command,
}

/// A command's created check: its goroutines in package main are given, not checked.
pub const NO_COUNT_FOR_A_COMMAND: &str = "no workload count for a command";

/// One edge of a goroutine's running slice on its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceEdge {
    Begin {
        ts_ns: u64,
        tid: u32,
        goid: u64,
        /// The start function's index in the reducer's `functions`, when its creation was seen.
        function: Option<u32>,
    },
    End {
        ts_ns: u64,
        tid: u32,
    },
}

/// The running slices of a stream of changes, in its order. A thread holds one goroutine at a
/// time: a start on a thread whose last goroutine was not seen leaving it ends that one first
/// (counted in `cut`).
pub struct SliceEdges<I> {
    inner: I,
    open_by_goid: HashMap<u64, u32>,
    open_by_tid: HashMap<u32, u64>,
    functions: HashMap<u64, u32>,
    pending: VecDeque<SliceEdge>,
    last_ts: u64,
    done: bool,
    pub cut: u64,
    /// Starts without a thread in the record (none expected).
    pub threadless: u64,
}

impl<I: Iterator<Item = io::Result<GoChange>>> SliceEdges<I> {
    pub fn new(inner: I) -> Self {
        SliceEdges {
            inner,
            open_by_goid: HashMap::new(),
            open_by_tid: HashMap::new(),
            functions: HashMap::new(),
            pending: VecDeque::new(),
            last_ts: 0,
            done: false,
            cut: 0,
            threadless: 0,
        }
    }

    fn end(&mut self, goid: u64, ts_ns: u64) {
        if let Some(tid) = self.open_by_goid.remove(&goid) {
            if self.open_by_tid.get(&tid) == Some(&goid) {
                self.open_by_tid.remove(&tid);
            }
            self.pending.push_back(SliceEdge::End { ts_ns, tid });
        }
    }

    fn step(&mut self, c: &GoChange) {
        self.last_ts = self.last_ts.max(c.ts_ns);
        if let Some(f) = c.function {
            self.functions.insert(c.goid, f);
        }
        let was_on = c.from.on_thread() && self.open_by_goid.contains_key(&c.goid);
        if was_on && !c.to.on_thread() {
            self.end(c.goid, c.ts_ns);
        } else if !was_on && c.to.on_thread() {
            let Some(tid) = c.tid else {
                self.threadless += 1;
                return;
            };
            if let Some(&other) = self.open_by_tid.get(&tid) {
                self.cut += 1;
                self.end(other, c.ts_ns);
            }
            self.open_by_goid.insert(c.goid, tid);
            self.open_by_tid.insert(tid, c.goid);
            self.pending.push_back(SliceEdge::Begin {
                ts_ns: c.ts_ns,
                tid,
                goid: c.goid,
                function: self.functions.get(&c.goid).copied(),
            });
        }
        if c.to == record::go_sched::GoState::NotExist {
            self.functions.remove(&c.goid);
        }
    }
}

impl<I: Iterator<Item = io::Result<GoChange>>> Iterator for SliceEdges<I> {
    type Item = io::Result<SliceEdge>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(edge) = self.pending.pop_front() {
                return Some(Ok(edge));
            }
            if self.done {
                return None;
            }
            match self.inner.next() {
                Some(Ok(c)) => self.step(&c),
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    // Slices still open at the trace's end close at its last moment, in goroutine
                    // order (deterministic bytes).
                    self.done = true;
                    let mut open: Vec<u64> = self.open_by_goid.keys().copied().collect();
                    open.sort_unstable();
                    let ts = self.last_ts;
                    for goid in open {
                        self.end(goid, ts);
                    }
                }
            }
        }
    }
}

/// The figures of a run's records. `phases`: the run's phases on CLOCK_MONOTONIC;
/// `against`: the workload's result's count, or a command's none.
pub fn derive(
    changes: impl Iterator<Item = io::Result<GoChange>>,
    summary: &GoSchedSummary,
    phases: &PhaseEdges,
    against: CountedAgainst,
) -> io::Result<GoSchedFigures> {
    let spawned = match against {
        CountedAgainst::Workload(spawned) => spawned,
        CountedAgainst::Command => None,
    };
    let mut readied = PhaseHistograms::new(phases.names.len());
    let mut threads = BTreeSet::new();
    let mut records = 0u64;
    let mut running_slices = 0u64;
    let mut seen_waits = 0u64;
    let mut waits_at_moved_times = 0u64;
    let mut edges = SliceEdges::new(changes.inspect(|c| {
        if let Ok(c) = c {
            records += 1;
            if let Some(w) = c.wait_ns {
                seen_waits += 1;
                // A wait whose start or end is the parser's time has no known length (a
                // long trace's parser moves most times: their waits read as 1–2 ns).
                if c.time_moved || c.wait_start_moved {
                    waits_at_moved_times += 1;
                } else {
                    readied.record(phases.index(c.ts_ns), w);
                }
            }
        }
    }));
    for edge in edges.by_ref() {
        if let SliceEdge::Begin { tid, .. } = edge? {
            running_slices += 1;
            threads.insert(tid);
        }
    }
    let (cut, threadless) = (edges.cut, edges.threadless);
    drop(edges);
    let c = &summary.counts;
    let (workload, runtime_own): (BTreeMap<String, u64>, BTreeMap<String, u64>) = c
        .created_by_function
        .iter()
        .map(|(f, n)| (f.clone(), *n))
        .partition(|(f, _)| f.starts_with(WORKLOAD_PACKAGE));
    let by_the_workload = workload.values().sum();
    let mut notes = Vec::new();
    if records != summary.records_kept {
        notes.push(format!(
            "{records} records read, the reducer wrote {}: the records are cut short",
            summary.records_kept
        ));
    }
    let past = &summary.records_past_cap;
    let kept_waits = c.readied_to_running.saturating_sub(past.readied_to_running);
    if seen_waits != kept_waits {
        notes.push(format!(
            "{seen_waits} readied→running samples read, the reducer counted {kept_waits} in the kept records"
        ));
    }
    if cut > 0 {
        notes.push(format!("{cut} running slices ended where another goroutine started on the same thread without the first seen leaving it"));
    }
    if threadless > 0 {
        notes.push(format!(
            "{threadless} starts carried no thread and are not drawn"
        ));
    }
    if waits_at_moved_times > 0 {
        notes.push(format!(
            "{} of the {} readied→running waits read begin or end at a time the trace's parser moved ({}): left out of the distribution, their length unknown",
            waits_at_moved_times,
            seen_waits,
            if summary.format_version >= 4 {
                "start or end"
            } else {
                "the end: this reduction predates flagging a moved start"
            }
        ));
    }
    if summary.clock.moved_by_parser > 0 {
        notes.push(format!(
            "{} records carry a time the trace's parser moved forward to keep its one order (x/exp/trace: an event read after a later one of another thread takes that one's time + 1 ns; flagged in {}): their slices' edges and readied→running waits are at that time, the event's own lying at or before it",
            summary.clock.moved_by_parser,
            record::GO_SCHED
        ));
    }
    if summary.clock.snapshots == 0 {
        notes.push("the trace has no clock snapshot (Go before 1.25): its clock is taken as CLOCK_MONOTONIC as it is".into());
    } else if summary.clock.first_mono_minus_trace_ns != summary.clock.last_mono_minus_trace_ns {
        notes.push(format!(
            "the trace's clock moved against CLOCK_MONOTONIC by {} ns over the run",
            summary.clock.last_mono_minus_trace_ns - summary.clock.first_mono_minus_trace_ns
        ));
    }
    Ok(GoSchedFigures {
        method: METHOD.into(),
        runtime_traced: true,
        records,
        kept: KeptRecords::of(summary, phases),
        created: c.created,
        created_by_function: c.created_by_function.clone(),
        at_start: c.at_start,
        started: c.started,
        blocked: c.blocked,
        blocked_by_reason: c.blocked_by_reason.clone(),
        unblocked: c.unblocked,
        stopped_by_reason: c.stopped_by_reason.clone(),
        syscalls: c.syscalls,
        destroyed: c.destroyed,
        readied_to_running: readied.rows(phases),
        created_check: CreatedCheck {
            by_the_workload,
            workload_spawned: spawned,
            runtime_own,
            agrees: spawned.map(|s| s == by_the_workload),
            not_checked: (against == CountedAgainst::Command)
                .then(|| NO_COUNT_FOR_A_COMMAND.to_string()),
        },
        threads: threads.into_iter().collect(),
        running_slices,
        waits_at_moved_times,
        on_cpu: None,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::on_cpu::add_missed_switch_ins;
    use crate::traces::thread_states::MissedSwitchIn;
    use record::go_sched::GoState::{self, *};

    fn change(ts_ns: u64, goid: u64, tid: u32, from: GoState, to: GoState) -> GoChange {
        GoChange {
            ts_ns,
            goid,
            wait_ns: None,
            tid: Some(tid),
            proc: Some(0),
            from,
            to,
            reason: 0,
            function: None,
            time_moved: false,
            wait_start_moved: false,
        }
    }

    #[test]
    fn a_goroutine_is_on_its_thread_from_running_to_leaving_it_syscalls_included() {
        let mut created = change(10, 7, 100, NotExist, Runnable);
        created.function = Some(3);
        let changes = vec![
            created,
            change(20, 7, 100, Runnable, Running),
            change(30, 7, 100, Running, Syscall),
            change(40, 7, 100, Syscall, Running),
            change(50, 7, 100, Running, Waiting),
            // The unblock is emitted on the readier's thread: no slice there.
            change(60, 7, 200, Waiting, Runnable),
            change(70, 7, 200, Runnable, Running),
            // Goroutine 8 starts on 200 while 7 was not seen leaving it: 7's slice is cut.
            change(80, 8, 200, Runnable, Running),
            change(90, 8, 200, Running, NotExist),
        ];
        let mut edges = SliceEdges::new(changes.into_iter().map(Ok));
        let got: Vec<SliceEdge> = edges.by_ref().map(Result::unwrap).collect();
        use SliceEdge::*;
        assert_eq!(
            got,
            vec![
                Begin {
                    ts_ns: 20,
                    tid: 100,
                    goid: 7,
                    function: Some(3)
                },
                End {
                    ts_ns: 50,
                    tid: 100
                },
                Begin {
                    ts_ns: 70,
                    tid: 200,
                    goid: 7,
                    function: Some(3)
                },
                End {
                    ts_ns: 80,
                    tid: 200
                },
                Begin {
                    ts_ns: 80,
                    tid: 200,
                    goid: 8,
                    function: None
                },
                End {
                    ts_ns: 90,
                    tid: 200
                },
            ]
        );
        assert_eq!(edges.cut, 1);
    }

    #[test]
    fn the_on_cpu_check_holds_each_event_to_its_threads_running_spans() {
        // Thread 100 on a CPU over [1000, 2000] and [5000, 6000] on BOOTTIME; offset 500.
        let kernel = OnCpuSpans {
            running: [(100, vec![(1_000, 2_000), (5_000, 6_000)])].into(),
            missed: BTreeMap::new(),
        };
        let at = |mono: u64, tid: u32| Ok(change(mono, 1, tid, Runnable, Running));
        let check = |changes: Vec<io::Result<GoChange>>| {
            on_cpu_check(changes.into_iter(), &kernel, 500, Some(0)).unwrap()
        };
        // Inside, at an edge within the tolerance, on an unfollowed thread.
        let c = check(vec![
            at(600, 100),
            at(1_500, 100),
            at(1_500 + ON_CPU_TOLERANCE_NS, 100),
            at(9, 200),
        ]);
        assert_eq!((c.checked, c.inside, c.passed), (3, 3, true), "{}", c.says);
        assert!(c
            .says
            .contains("1 events of threads the kernel's trace did not follow"));
        // Between the spans: 1,000 ns after the first ends, 2,000 before the second begins.
        let c = check(vec![at(2_500, 100), at(1_000, 100)]);
        assert_eq!(
            (c.checked, c.inside, c.farthest_outside_ns, c.passed),
            (2, 1, 1_000, false)
        );
        assert!(
            c.says.contains("below 99.9 %") && c.says.contains("clock"),
            "{}",
            c.says
        );
        let between = vec![at(2_500, 100)];
        let c = on_cpu_check(between.into_iter(), &kernel, 500, Some(3)).unwrap();
        assert!(c.says.contains("missed 3 switches"), "{}", c.says);
        // Before the thread ever ran: the runtime's clock behind the kernel's, said so.
        let c = check(vec![at(0, 100), at(100, 100)]);
        assert_eq!(c.farthest_outside_ns, 500);
        assert!(c.says.contains("runs behind"), "{}", c.says);
    }

    /// The pattern found at goroutines hold 1,000,000: an M writes the next generation's events
    /// and is preempted while the others finish the last one; x/exp/trace reads the generations
    /// in turn, so those events come after later ones and take their time + 1 ns, into the span
    /// where the kernel had the M preempted. Their own time is not in the trace as read: they
    /// are not judged at a time, only held to [the M's previous own time, the moved time], and
    /// fail the check where no running span meets even that.
    #[test]
    fn a_time_the_parser_moved_is_held_from_its_threads_previous_own_time() {
        // 100 runs over [1000, 2000], is preempted, runs again from 9000.
        let kernel = OnCpuSpans {
            running: [(100, vec![(1_000, 2_000), (9_000, 10_000)])].into(),
            missed: BTreeMap::new(),
        };
        let own = |ts: u64| Ok(change(ts, 1, 100, Runnable, Running));
        let moved = |ts: u64| {
            let mut c = change(ts, 2, 100, NotExist, Runnable);
            c.time_moved = true;
            Ok(c)
        };
        let changes = vec![own(1_900), moved(5_001), moved(5_002), moved(5_003)];
        let c = on_cpu_check(changes.into_iter(), &kernel, 0, Some(0)).unwrap();
        assert_eq!(
            (
                c.checked,
                c.inside,
                c.time_moved,
                c.time_moved_consistent,
                c.passed
            ),
            (4, 1, 3, 3, true)
        );
        assert!(c.says.contains("1 of 1 runtime events"), "{}", c.says);
        assert!(
            c.says
                .contains("3 more carry a time the trace's parser moved")
                && c.says.contains("3 of them consistent"),
            "{}",
            c.says
        );
        // Moved, with no own time of the thread before it in the spans: outside, and failing.
        let changes = vec![own(3_000), moved(5_001)];
        let c = on_cpu_check(changes.into_iter(), &kernel, 0, Some(0)).unwrap();
        assert_eq!(
            (c.checked, c.inside, c.time_moved_consistent, c.passed),
            (2, 0, 0, false),
            "{}",
            c.says
        );
        assert_eq!(c.farthest_outside_ns, 1_000);
        // The same times not moved: outside.
        let changes = vec![own(1_900), own(5_001)];
        let c = on_cpu_check(changes.into_iter(), &kernel, 0, Some(0)).unwrap();
        assert_eq!((c.inside, c.passed), (1, false));
    }

    /// A stint whose switch-in the kernel's trace missed: its events are neither inside nor
    /// against the check, counted apart and said; outside such a window they still fail it.
    #[test]
    fn events_in_a_stint_whose_switch_in_the_kernel_missed_are_counted_apart() {
        let kernel = OnCpuSpans {
            running: [(100, vec![(1_000, 2_000)])].into(),
            missed: [(100, vec![(4_000, 6_000)])].into(),
        };
        let at = |ts: u64| Ok(change(ts, 1, 100, Runnable, Running));
        let c = on_cpu_check(
            vec![at(1_500), at(4_500), at(5_900)].into_iter(),
            &kernel,
            0,
            Some(1),
        )
        .unwrap();
        assert_eq!(
            (c.checked, c.inside, c.in_missed_switch_ins, c.passed),
            (3, 1, 2, true)
        );
        assert!(c.says.contains("1 of 1 runtime events"), "{}", c.says);
        assert!(c.says.contains("2 more not judged"), "{}", c.says);
        let c = on_cpu_check(vec![at(1_500), at(3_000)].into_iter(), &kernel, 0, Some(1)).unwrap();
        assert_eq!((c.in_missed_switch_ins, c.passed), (0, false));
    }

    #[test]
    fn a_missed_switch_in_runs_from_where_a_record_shows_its_thread_current() {
        let mut running: BTreeMap<u32, Vec<(u64, u64)>> =
            [(100, vec![(1_000, 2_000), (9_000, 9_500)])].into();
        let missed = [(
            100,
            vec![
                MissedSwitchIn {
                    since: 3_000,
                    seen_on_cpu: Some(4_000),
                    out: 6_000,
                },
                MissedSwitchIn {
                    since: 6_000,
                    seen_on_cpu: None,
                    out: 7_000,
                },
            ],
        )]
        .into();
        let windows = add_missed_switch_ins(&mut running, missed);
        assert_eq!(
            running[&100],
            vec![(1_000, 2_000), (4_000, 6_000), (9_000, 9_500)]
        );
        assert_eq!(windows[&100], vec![(3_000, 4_000), (6_000, 7_000)]);
        let kernel = OnCpuSpans {
            running,
            missed: windows,
        };
        let at = |ts: u64| Ok(change(ts, 1, 100, Runnable, Running));
        let c = on_cpu_check(
            vec![at(1_500), at(3_500), at(5_000), at(6_500), at(8_000)].into_iter(),
            &kernel,
            0,
            Some(2),
        )
        .unwrap();
        // 5,000 inside the stint seen on its CPU; 3,500 and 6,500 apart; 8,000 outside.
        assert_eq!((c.checked, c.inside, c.in_missed_switch_ins), (5, 2, 2));
        assert_eq!(c.farthest_outside_ns, 1_000);
    }

    /// A wait that begins or ends at a parser-moved time has no known length: counted apart,
    /// never in the distribution.
    #[test]
    fn waits_at_parser_moved_times_are_left_out_of_the_distribution() {
        let wait = |ts: u64, goid: u64, ns: u64, end_moved: bool, start_moved: bool| {
            let mut c = change(ts, goid, 100, Runnable, Running);
            c.wait_ns = Some(ns);
            c.time_moved = end_moved;
            c.wait_start_moved = start_moved;
            c
        };
        let changes = vec![
            wait(1_000, 1, 500, false, false),
            wait(2_001, 2, 1, true, false),
            wait(3_000, 3, 2, false, true),
            wait(4_001, 4, 1, true, true),
        ];
        let summary = GoSchedSummary {
            format_version: 4,
            records_kept: 4,
            counts: record::go_sched::GoCounts {
                readied_to_running: 4,
                ..Default::default()
            },
            ..Default::default()
        };
        let phases = PhaseEdges {
            names: vec!["steady".into()],
            starts: vec![0],
        };
        let f = derive(
            changes.into_iter().map(Ok),
            &summary,
            &phases,
            CountedAgainst::Command,
        )
        .unwrap();
        assert_eq!(f.waits_at_moved_times, 3);
        let whole = f.readied_to_running.last().unwrap();
        assert_eq!((whole.count, whole.max_ns), (1, 500));
        assert!(
            f.notes
                .iter()
                .any(|n| n.starts_with("3 of the 4 readied→running waits")),
            "{:?}",
            f.notes
        );
    }

    #[test]
    fn slices_open_at_the_end_close_at_the_last_record_and_waits_fill_the_phases() {
        let mut start = change(5_000, 1, 100, Runnable, Running);
        start.wait_ns = Some(400);
        let mut late = change(15_000, 2, 101, Runnable, Running);
        late.wait_ns = Some(9_000);
        let changes = vec![change(1_000, 1, 100, Undetermined, Runnable), start, late];
        let summary = GoSchedSummary {
            records_kept: 3,
            counts: record::go_sched::GoCounts {
                created_by_function: [
                    ("main.holdTask".to_string(), 2),
                    ("runtime.gcBgMarkWorker".to_string(), 1),
                ]
                .into(),
                readied_to_running: 2,
                ..Default::default()
            },
            clock: record::go_sched::GoClock {
                snapshots: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let phases = PhaseEdges {
            names: vec!["spawn".into(), "steady".into()],
            starts: vec![0, 10_000],
        };
        let f = derive(
            changes.into_iter().map(Ok),
            &summary,
            &phases,
            CountedAgainst::Workload(Some(2)),
        )
        .unwrap();
        assert_eq!(f.records, 3);
        assert_eq!(f.running_slices, 2);
        assert_eq!(f.threads, vec![100, 101]);
        let rows: Vec<(&str, u64, u64)> = f
            .readied_to_running
            .iter()
            .map(|r| (r.phase.as_str(), r.count, r.max_ns))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("spawn", 1, 400),
                ("steady", 1, 9_000),
                ("whole run", 2, 9_000)
            ]
        );
        assert_eq!(f.created_check.by_the_workload, 2);
        assert_eq!(f.created_check.agrees, Some(true));
        assert_eq!(
            f.created_check.runtime_own.keys().collect::<Vec<_>>(),
            ["runtime.gcBgMarkWorker"]
        );
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        assert_eq!(f.created_check.not_checked, None);
        let f = derive(
            Vec::new().into_iter(),
            &summary,
            &phases,
            CountedAgainst::Workload(Some(3)),
        )
        .unwrap();
        assert_eq!(f.created_check.agrees, Some(false));
        assert_eq!(f.notes.len(), 2, "{:?}", f.notes);
        // A command says no count: its goroutines in package main are given, not checked.
        let f = derive(
            Vec::new().into_iter(),
            &summary,
            &phases,
            CountedAgainst::Command,
        )
        .unwrap();
        assert_eq!(f.created_check.by_the_workload, 2);
        assert_eq!(f.created_check.agrees, None);
        assert_eq!(
            f.created_check.not_checked.as_deref(),
            Some(NO_COUNT_FOR_A_COMMAND)
        );
    }

    /// A reduction cut at its cap: the counts stay the whole trace's, the waits are checked
    /// against the kept records' (the whole trace's less those past the cap), and the cut is
    /// placed in the trace's time and the run's phase.
    #[test]
    fn a_cut_reduction_says_where_and_checks_the_kept_waits() {
        let mut start = change(5_000, 1, 100, Runnable, Running);
        start.wait_ns = Some(400);
        let summary: GoSchedSummary = serde_json::from_value(serde_json::json!({
            "format_version": 3, "record_bytes": 40, "max_records": 2,
            "records_kept": 2, "kept_until_ns": 5_000, "kept_until_own_ns": 3_000,
            "records_past_cap": {"records": 7, "readied_to_running": 3,
                                 "transitions": {"Runnable->Running": 3, "Running->Waiting": 4}},
            "reasons": [""], "functions": [],
            "clock": {"snapshots": 1, "first_mono_minus_trace_ns": 0,
                      "last_mono_minus_trace_ns": 0, "first_ns": 1_000, "last_ns": 2_000_001_000,
                      "moved_by_parser": 0},
            "counts": {"created": 9, "created_by_function": {"main.f": 9}, "at_start": 0,
                       "started": 4, "blocked": 4, "blocked_by_reason": {}, "unblocked": 0,
                       "stopped": 0, "stopped_by_reason": {}, "syscalls": 0,
                       "syscalls_blocked": 0, "destroyed": 0, "readied_to_running": 4,
                       "transitions": {}},
            "threads": []
        }))
        .unwrap();
        let phases = PhaseEdges {
            names: vec!["spawn".into(), "steady".into()],
            starts: vec![0, 4_000],
        };
        let changes = vec![change(1_000, 1, 100, NotExist, Runnable), start];
        let f = derive(
            changes.into_iter().map(Ok),
            &summary,
            &phases,
            CountedAgainst::Workload(Some(9)),
        )
        .unwrap();
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        assert_eq!((f.records, f.created), (2, 9));
        assert_eq!(f.created_check.agrees, Some(true));
        let k = f.kept.expect("a format 3 reduction says its cut");
        assert_eq!((k.max_records, k.records_kept, k.past_cap), (2, 2, 7));
        assert_eq!(k.past_cap_readied_to_running, 3);
        assert_eq!((k.kept_until_s, k.trace_s), (4e-6, 2.0));
        assert_eq!(k.own_times_until_s, Some(2e-6));
        assert_eq!(k.cut_in_phase.as_deref(), Some("steady"));
        // One kept wait fewer than the reducer counted in the kept records: said.
        let f = derive(
            vec![change(1_000, 1, 100, NotExist, Runnable)]
                .into_iter()
                .map(Ok),
            &summary,
            &phases,
            CountedAgainst::Workload(Some(9)),
        )
        .unwrap();
        assert_eq!(f.notes.len(), 2, "{:?}", f.notes);
        assert!(f.notes[1].contains("counted 1 in the kept records"));
    }

    /// An older reduction (format 1, every change kept, `records`) reads, and says no cut.
    #[test]
    fn an_older_reduction_kept_every_change() {
        let summary: GoSchedSummary = serde_json::from_value(serde_json::json!({
            "format_version": 1, "record_bytes": 40, "records": 5,
            "reasons": [""], "functions": [],
            "clock": {"snapshots": 1, "first_mono_minus_trace_ns": 0,
                      "last_mono_minus_trace_ns": 0},
            "counts": {"created": 0, "created_by_function": {}, "at_start": 0,
                       "started": 0, "blocked": 0, "blocked_by_reason": {}, "unblocked": 0,
                       "stopped": 0, "stopped_by_reason": {}, "syscalls": 0,
                       "syscalls_blocked": 0, "destroyed": 0, "readied_to_running": 0}
        }))
        .unwrap();
        assert_eq!(summary.records_kept, 5);
        assert_eq!(summary.max_records, None);
        let f = derive(
            Vec::new().into_iter(),
            &summary,
            &PhaseEdges::whole_run(),
            CountedAgainst::Command,
        )
        .unwrap();
        assert_eq!(f.kept, None);
    }
}
