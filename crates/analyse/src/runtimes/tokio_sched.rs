//! A runtime-traced tokio run (`run --runtime tokio --runtime-trace`), from its raw records
//! (record/tokio_sched.rs: the hooks build's task events, merged into time order, and tokio's
//! metrics): spawns and terminations, polls, tokio's scheduled→polled latency per phase (its
//! `schedule_latency`: the task's latest scheduling to the poll's start), the spawns beside the
//! workload's own count, each worker's parks and steals (beside the kernel's futex waits of its
//! thread, where the kernel's trace has them), and the polls the Perfetto trace puts on the
//! threads that ran them (`PollEdges`: begin to end on one thread).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;

use serde::{Deserialize, Serialize};
use spawnscope_collector::trace_events::{Kind, TraceEvent, Wait};

use crate::traces::on_cpu::{Clocks, OnCpuCheck};
use crate::traces::sched_trace::LatencyRow;
use crate::traces::sched_trace::{PhaseEdges, PhaseHistograms};
use record::tokio_sched::{HookEvent, HookKind, TokioSchedSummary};

const METHOD: &str = "tokio's task hooks (tokio_unstable: on_task_spawn, on_before_task_poll, on_after_task_poll, on_task_terminate) recorded per thread by the tokio workload's hooks build (tokio-tasks-hooks --tokio-trace; CLOCK_MONOTONIC by clock_gettime, the thread by gettid) and tokio's RuntimeMetrics at the exit; scheduled→polled: tokio's own schedule latency (track_task_schedule_latency: the task's latest transition to scheduled to the start of the poll), per phase of the poll's start";

/// The hooks' clock is the kernel's CLOCK_MONOTONIC read in the hook itself; what separates it
/// from the kernel trace's CLOCK_BOOTTIME is the offset the capture read once (two clock reads
/// back to back).
pub const ON_CPU_CLOCKS: Clocks = Clocks {
    tolerance_ns: 128,
    behind: "the hooks' CLOCK_MONOTONIC runs behind the kernel trace's CLOCK_BOOTTIME by more than the capture's offset says",
};

/// The runtime's view in a run's summary (summary.json's `tokio_trace`).
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TokioSchedFigures {
    /// How the figures were derived.
    pub method: String,
    /// This run ran with tokio's task hooks: its memory, fault and time figures carry the hooks'
    /// cost and are not tokio's own (issue 39: said apart, kept out of comparisons).
    pub runtime_traced: bool,
    /// Records read.
    pub records: u64,
    /// on_task_spawn, kept and dropped together.
    pub spawned: u64,
    /// on_task_terminate, kept and dropped together.
    pub terminated: u64,
    /// Terminations of tasks whose spawn no hook saw: the runtime's own (its workers run as
    /// blocking-pool tasks, which the spawn hook does not see).
    pub terminated_unspawned: u64,
    /// Polls begun, kept and dropped together.
    pub polls: u64,
    /// Polls per spawned task.
    pub polls_per_task: Option<f64>,
    /// Events past the hooks build's per-thread cap (`kept_per_thread`): counted by the workload,
    /// not kept, so not in the latencies, slices or checks.
    pub dropped: u64,
    pub kept_per_thread: u64,
    /// tokio's schedule latency (scheduled → polled), per phase of the poll then the whole run.
    pub scheduled_to_polled: Vec<LatencyRow>,
    /// The spawns the hooks saw against the workload's own count.
    pub spawn_check: SpawnCheck,
    /// The OS threads that polled tasks (the workers' TIDs).
    pub threads: Vec<u32>,
    /// Polls drawn as slices in the Perfetto trace (begin to end on one thread).
    pub poll_slices: u64,
    /// tokio's RuntimeMetrics per worker, with its thread's polls and the kernel's futex waits.
    pub workers: Vec<WorkerFigures>,
    /// Every hook event inside a kernel on-CPU span of the thread it ran on (with the kernel's
    /// trace; None without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cpu: Option<OnCpuCheck>,
    pub notes: Vec<String>,
}

/// Spawned by the hooks = the workload's `spawned`.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SpawnCheck {
    pub hooks_spawned: u64,
    /// The workload's result event's `spawned`.
    pub workload_spawned: Option<u64>,
    /// tokio's own count (RuntimeMetrics::spawned_tasks_count).
    pub runtime_spawned: u64,
    pub agrees: Option<bool>,
}

/// One worker as tokio counts it, and as the hooks and the kernel saw its thread.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkerFigures {
    pub worker: u64,
    pub tid: Option<u32>,
    /// Polls begun on its thread, by the hooks (kept records).
    pub hook_polls: u64,
    /// tokio's counts.
    pub poll_count: u64,
    pub park_count: u64,
    pub steal_count: u64,
    pub steal_operations: u64,
    pub busy_ns: u64,
    /// Futex waits of its thread in the kernel's trace (a parked worker waits on one), with the
    /// kernel's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_futex_waits: Option<u64>,
}

/// One edge of a poll's slice on its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollEdge {
    Begin { ts_ns: u64, tid: u32, task: u64 },
    End { ts_ns: u64, tid: u32 },
}

/// The polls of a stream of hook events in time order: a poll is on its thread from its begin to
/// its end. A begin on a thread with a poll still open ends that one first (counted in `cut`); an
/// end with none open is counted in `unmatched`; polls open at the end close at the last event.
pub struct PollEdges<I> {
    inner: I,
    open: HashMap<u32, u64>,
    pending: Vec<PollEdge>,
    last_ts: u64,
    done: bool,
    pub cut: u64,
    pub unmatched: u64,
}

impl<I: Iterator<Item = io::Result<HookEvent>>> PollEdges<I> {
    pub fn new(inner: I) -> Self {
        PollEdges {
            inner,
            open: HashMap::new(),
            pending: Vec::new(),
            last_ts: 0,
            done: false,
            cut: 0,
            unmatched: 0,
        }
    }

    fn step(&mut self, e: &HookEvent) {
        self.last_ts = self.last_ts.max(e.ts_ns);
        match e.kind {
            HookKind::PollBegin => {
                if self.open.insert(e.tid, e.task).is_some() {
                    self.cut += 1;
                    self.pending.push(PollEdge::End {
                        ts_ns: e.ts_ns,
                        tid: e.tid,
                    });
                }
                self.pending.push(PollEdge::Begin {
                    ts_ns: e.ts_ns,
                    tid: e.tid,
                    task: e.task,
                });
            }
            HookKind::PollEnd => {
                if self.open.remove(&e.tid).is_some() {
                    self.pending.push(PollEdge::End {
                        ts_ns: e.ts_ns,
                        tid: e.tid,
                    });
                } else {
                    self.unmatched += 1;
                }
            }
            HookKind::Spawn | HookKind::Terminate => {}
        }
    }
}

impl<I: Iterator<Item = io::Result<HookEvent>>> Iterator for PollEdges<I> {
    type Item = io::Result<PollEdge>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if !self.pending.is_empty() {
                return Some(Ok(self.pending.remove(0)));
            }
            if self.done {
                return None;
            }
            match self.inner.next() {
                Some(Ok(e)) => self.step(&e),
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    self.done = true;
                    let mut open: Vec<u32> = self.open.keys().copied().collect();
                    open.sort_unstable();
                    let ts = self.last_ts;
                    self.pending = open
                        .into_iter()
                        .map(|tid| PollEdge::End { ts_ns: ts, tid })
                        .collect();
                    self.open.clear();
                }
            }
        }
    }
}

/// The figures of a run's records (`events` in time order). `phases`: the run's phases on
/// CLOCK_MONOTONIC; `spawned`: the workload's result's count.
pub fn derive(
    events: impl Iterator<Item = io::Result<HookEvent>>,
    summary: &TokioSchedSummary,
    phases: &PhaseEdges,
    spawned: Option<u64>,
) -> io::Result<TokioSchedFigures> {
    let mut latency = PhaseHistograms::new(phases.names.len());
    let mut records = 0u64;
    let mut seen_spawned: HashSet<u64> = HashSet::new();
    let mut terminated_unspawned = 0u64;
    let mut polls_by_tid: BTreeMap<u32, u64> = BTreeMap::new();
    let mut poll_slices = 0u64;
    let mut samples = 0u64;
    let mut edges = PollEdges::new(events.inspect(|e| {
        let Ok(e) = e else { return };
        records += 1;
        match e.kind {
            HookKind::Spawn => {
                seen_spawned.insert(e.task);
            }
            HookKind::Terminate => {
                if !seen_spawned.remove(&e.task) {
                    terminated_unspawned += 1;
                }
            }
            HookKind::PollBegin => {
                *polls_by_tid.entry(e.tid).or_default() += 1;
                if let Some(l) = e.latency_ns {
                    samples += 1;
                    latency.record(phases.index(e.ts_ns), l);
                }
            }
            HookKind::PollEnd => {}
        }
    }));
    for edge in edges.by_ref() {
        if let PollEdge::Begin { .. } = edge? {
            poll_slices += 1;
        }
    }
    let (cut, unmatched) = (edges.cut, edges.unmatched);
    drop(edges);
    let c = &summary.counts;
    let d = &summary.dropped;
    let hooks_spawned = c.spawned + d.spawned;
    let polls = c.polls_begun + d.polls_begun;
    let mut notes = Vec::new();
    if records != summary.records {
        notes.push(format!(
            "{records} records read, the workload wrote {}: the records are cut short",
            summary.records
        ));
    }
    if d.total() > 0 {
        notes.push(format!(
            "{} events past the hooks build's {} records a thread were counted, not kept ({} polls begun, {} spawns): the latencies, slices and the on-CPU check are of the kept ones",
            d.total(),
            summary.kept_per_thread,
            d.polls_begun,
            d.spawned
        ));
    }
    if samples < c.polls_begun {
        notes.push(format!(
            "{} of {} polls carried no schedule latency",
            c.polls_begun - samples,
            c.polls_begun
        ));
    }
    if cut > 0 {
        notes.push(format!(
            "{cut} polls began on a thread whose poll before had not ended (the earlier one ended there)"
        ));
    }
    if unmatched > 0 {
        notes.push(format!("{unmatched} poll ends with no begin kept"));
    }
    let workers = summary
        .metrics
        .workers
        .iter()
        .map(|w| WorkerFigures {
            worker: w.worker,
            tid: w.tid,
            hook_polls: w
                .tid
                .and_then(|t| polls_by_tid.get(&t).copied())
                .unwrap_or(0),
            poll_count: w.poll_count,
            park_count: w.park_count,
            steal_count: w.steal_count,
            steal_operations: w.steal_operations,
            busy_ns: w.busy_ns,
            kernel_futex_waits: None,
        })
        .collect();
    Ok(TokioSchedFigures {
        method: METHOD.into(),
        runtime_traced: true,
        records,
        spawned: hooks_spawned,
        terminated: c.terminated + d.terminated,
        terminated_unspawned,
        polls,
        polls_per_task: (hooks_spawned > 0).then(|| polls as f64 / hooks_spawned as f64),
        dropped: d.total(),
        kept_per_thread: summary.kept_per_thread,
        scheduled_to_polled: latency.rows(phases),
        spawn_check: SpawnCheck {
            hooks_spawned,
            workload_spawned: spawned,
            runtime_spawned: summary.metrics.spawned_tasks_count,
            agrees: spawned.map(|s| s == hooks_spawned),
        },
        threads: polls_by_tid.keys().copied().collect(),
        poll_slices,
        workers,
        on_cpu: None,
        notes,
    })
}

/// The kernel's futex waits begun by each thread of `tids` (its trace's wait records).
pub fn futex_waits(
    events: impl Iterator<Item = io::Result<TraceEvent>>,
    tids: &BTreeSet<u32>,
) -> io::Result<BTreeMap<u32, u64>> {
    let mut waits: BTreeMap<u32, u64> = tids.iter().map(|&t| (t, 0)).collect();
    for e in events {
        let e = e?;
        if e.kind == Kind::WaitBegin && e.wait() == Some(Wait::Futex) {
            if let Some(n) = waits.get_mut(&e.task.tid) {
                *n += 1;
            }
        }
    }
    Ok(waits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::tokio_sched::{HookCounts, HookThread, TokioMetrics, WorkerMetrics};

    fn ev(ts_ns: u64, task: u64, tid: u32, kind: HookKind, latency_ns: Option<u64>) -> HookEvent {
        HookEvent {
            ts_ns,
            task,
            latency_ns,
            tid,
            kind,
        }
    }

    #[test]
    fn a_poll_is_on_its_thread_from_begin_to_end() {
        use HookKind::*;
        let events = vec![
            ev(10, 5, 1, Spawn, None),
            ev(20, 5, 2, PollBegin, Some(10)),
            ev(30, 6, 3, PollBegin, Some(4)),
            ev(35, 5, 2, PollEnd, Some(10)),
            // Task 7 begins on 3 while 6's poll was not seen ending: 6's is cut.
            ev(40, 7, 3, PollBegin, None),
            ev(45, 9, 4, PollEnd, None),
        ];
        let mut edges = PollEdges::new(events.into_iter().map(Ok));
        let got: Vec<PollEdge> = edges.by_ref().map(Result::unwrap).collect();
        use PollEdge::*;
        assert_eq!(
            got,
            vec![
                Begin {
                    ts_ns: 20,
                    tid: 2,
                    task: 5
                },
                Begin {
                    ts_ns: 30,
                    tid: 3,
                    task: 6
                },
                End { ts_ns: 35, tid: 2 },
                End { ts_ns: 40, tid: 3 },
                Begin {
                    ts_ns: 40,
                    tid: 3,
                    task: 7
                },
                // Open at the end: closed at the last event.
                End { ts_ns: 45, tid: 3 },
            ]
        );
        assert_eq!((edges.cut, edges.unmatched), (1, 1));
    }

    #[test]
    fn figures_count_spawns_polls_and_latencies_by_phase() {
        use HookKind::*;
        let events = vec![
            ev(1_000, 10, 1, Spawn, None),
            ev(1_100, 11, 1, Spawn, None),
            ev(2_000, 10, 2, PollBegin, Some(900)),
            ev(2_100, 10, 2, PollEnd, Some(900)),
            ev(12_000, 11, 3, PollBegin, Some(7_000)),
            ev(12_500, 11, 3, PollEnd, Some(7_000)),
            ev(12_600, 11, 3, Terminate, None),
            // A worker's own blocking task: no spawn hook.
            ev(13_000, 1, 2, Terminate, None),
        ];
        let summary = TokioSchedSummary {
            format_version: 1,
            records: 8,
            counts: HookCounts {
                spawned: 2,
                terminated: 2,
                polls_begun: 2,
                polls_ended: 2,
            },
            kept_per_thread: 100,
            dropped: HookCounts::default(),
            threads: vec![HookThread {
                tid: 1,
                records: 8,
                dropped: 0,
                main: true,
            }],
            metrics: TokioMetrics {
                workers: vec![WorkerMetrics {
                    worker: 0,
                    tid: Some(2),
                    park_count: 3,
                    steal_count: 1,
                    poll_count: 1,
                    ..Default::default()
                }],
                spawned_tasks_count: 2,
                threads_started: 2,
            },
        };
        let phases = PhaseEdges {
            names: vec!["spawn".into(), "steady".into()],
            starts: vec![0, 10_000],
        };
        let f = derive(events.into_iter().map(Ok), &summary, &phases, Some(2)).unwrap();
        assert_eq!((f.records, f.spawned, f.terminated, f.polls), (8, 2, 2, 2));
        assert_eq!(f.terminated_unspawned, 1);
        assert_eq!(f.poll_slices, 2);
        assert_eq!(f.threads, vec![2, 3]);
        assert_eq!(f.spawn_check.agrees, Some(true));
        assert_eq!(f.workers[0].hook_polls, 1);
        let rows: Vec<(&str, u64, u64)> = f
            .scheduled_to_polled
            .iter()
            .map(|r| (r.phase.as_str(), r.count, r.max_ns))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("spawn", 1, 900),
                ("steady", 1, 7_000),
                ("whole run", 2, 7_000)
            ]
        );
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        // Fewer spawns than the workload says, events dropped past the cap: said.
        let mut dropped = summary.clone();
        dropped.dropped.polls_begun = 5;
        let f = derive(Vec::new().into_iter(), &dropped, &phases, Some(3)).unwrap();
        assert_eq!(f.spawn_check.agrees, Some(false));
        assert_eq!(f.polls, 7);
        assert!(f.notes.iter().any(|n| n.contains("counted, not kept")));
        assert!(f.notes.iter().any(|n| n.contains("cut short")));
    }
}
