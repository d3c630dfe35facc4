//! report.html's swimlane of a traced run, the model it is drawn from (before any pixel): which
//! of the run's threads get a lane and why ([`sample`]), each lane's running / runnable / blocked
//! spans (`sched_trace::thread_states`, the wake-to-run rule), and per CPU who held it — the
//! spawning thread, another of the run's threads, a task outside the run, or nothing (idle) —
//! over time, in [`CPU_BUCKETS`] buckets whose sums are exact.
//!
//! A second pass over the raw records, after `sched_trace::derive` (which names the run's
//! threads, their creation and their longest wait): memory grows with the sampled threads' spans
//! and the CPUs' buckets, never with the run's threads or records.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use serde::{Deserialize, Serialize};
use spawnscope_collector::trace_events::TraceEvent;

use crate::traces::run_tracks::Span;
use crate::traces::sched_trace::{SchedTrace, Thread, WHOLE_RUN};
use crate::traces::thread_states::{thread_states, State, StateSpan};

/// Thread lanes at most, the spawning thread's included.
pub const THREAD_LANES: usize = 32;
/// Of the other threads: the first created…
pub const FIRST_CREATED: usize = 8;
/// …the longest waits for a CPU…
pub const LONGEST_WAITS: usize = 8;
// …and the rest of the lanes spread evenly over creation order.

/// CPU lanes at most: the CPUs the run held longest (a 2-socket server has hundreds).
pub const CPU_LANES: usize = 32;
/// A CPU's time is kept in this many buckets over the trace (a figure's width in pixels is
/// about as many).
pub const CPU_BUCKETS: usize = 1024;

/// Which threads get a lane, in words.
pub fn rule() -> String {
    format!(
        "the launched process's main thread (the spawning thread) first; then, of the run's other threads in creation order (first record, then tid), the first {FIRST_CREATED} created, the {LONGEST_WAITS} with the longest wait for a CPU (wake-to-run or preempted-to-run), and {} spread evenly over the rest; every thread when {THREAD_LANES} lanes hold them all",
        THREAD_LANES - 1 - FIRST_CREATED - LONGEST_WAITS
    )
}

/// Why a thread has a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    Spawning,
    FirstCreated,
    LongestWait,
    Spread,
    /// Every thread has a lane (there are few).
    Every,
}

impl Why {
    pub fn name(self) -> &'static str {
        match self {
            Why::Spawning => "spawning thread",
            Why::FirstCreated => "first created",
            Why::LongestWait => "longest wait",
            Why::Spread => "spread",
            Why::Every => "every thread",
        }
    }
}

/// Who held a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// The spawning thread.
    Spawning,
    /// Another of the run's threads.
    Run,
    /// A task outside the run (its slice may span switches among outside tasks, which are not
    /// recorded).
    Outside,
    /// The idle task, until the next recorded switch.
    Idle,
}

impl Holder {
    pub const ALL: [Holder; 4] = [Holder::Spawning, Holder::Run, Holder::Outside, Holder::Idle];

    pub fn name(self) -> &'static str {
        match self {
            Holder::Spawning => "the spawning thread",
            Holder::Run => "another of the run's threads",
            Holder::Outside => "a task outside the run",
            Holder::Idle => "idle",
        }
    }
}

/// One thread's lane.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub tid: u32,
    pub name: String,
    pub why: Why,
    pub longest_wait_ns: u64,
    pub spans: Vec<StateSpan>,
}

/// One CPU's lane: ns held per [`Holder`] (in `Holder::ALL`'s order) per bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuLane {
    pub cpu: u32,
    pub buckets: Vec<[u64; 4]>,
}

impl CpuLane {
    /// ns held per holder over the whole trace.
    pub fn held(&self) -> [u64; 4] {
        let mut sum = [0u64; 4];
        for b in &self.buckets {
            for (s, v) in sum.iter_mut().zip(b) {
                *s += v;
            }
        }
        sum
    }
}

/// The swimlane of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Swimlane {
    /// The trace's first record and the run's end, on the trace's clock.
    pub begin: u64,
    pub end: u64,
    /// The CPU buckets' width (ns): bucket i starts at `begin + i * bucket_ns`.
    pub bucket_ns: u64,
    /// The run's phases, cut to [begin, end]; none where they could not be placed.
    pub phases: Vec<Span>,
    /// The spawning thread first, then the others in creation order.
    pub lanes: Vec<Lane>,
    /// In CPU order.
    pub cpus: Vec<CpuLane>,
    /// The run's threads the trace names.
    pub threads: u64,
    /// CPUs that had a switch touching the run.
    pub cpus_seen: u64,
}

/// The threads that get a lane, with why, in creation order after the spawning thread.
pub fn sample(trace: &SchedTrace, spawning: Option<u32>) -> Vec<(u32, Why)> {
    sample_of(trace, spawning, THREAD_LANES, |_| true)
}

/// `threads` threads chosen by the swimlane's rule (`report --perfetto --threads K` shares it):
/// the spawning thread, then of the others `among` admits a quarter first created
/// ([`FIRST_CREATED`] of [`THREAD_LANES`]), a quarter with the longest waits, the rest spread
/// evenly; every one admitted when they fit.
pub fn sample_of(
    trace: &SchedTrace,
    spawning: Option<u32>,
    threads: usize,
    among: impl Fn(&Thread) -> bool,
) -> Vec<(u32, Why)> {
    let spawning = spawning.filter(|tid| trace.threads.contains_key(tid));
    let mut picked: Vec<(u32, Why)> = spawning
        .map(|t| (t, Why::Spawning))
        .into_iter()
        .take(threads)
        .collect();
    let mut others: Vec<(u64, u32)> = trace
        .threads
        .iter()
        .filter(|(tid, t)| Some(**tid) != spawning && among(t))
        .map(|(tid, t)| (t.first_ts, *tid))
        .collect();
    others.sort_unstable();
    let room = threads - picked.len();
    if others.len() <= room {
        picked.extend(others.iter().map(|&(_, tid)| (tid, Why::Every)));
        return picked;
    }
    let first_created = threads * FIRST_CREATED / THREAD_LANES;
    let longest_waits = threads * LONGEST_WAITS / THREAD_LANES;
    let mut chosen: BTreeMap<usize, Why> = BTreeMap::new();
    for i in 0..first_created {
        chosen.insert(i, Why::FirstCreated);
    }
    // The longest waits, ties to the first created; a thread that never waited is no such one.
    let mut by_wait: Vec<(u64, usize)> = others
        .iter()
        .enumerate()
        .filter(|(i, _)| !chosen.contains_key(i))
        .map(|(i, (_, tid))| (trace.threads[tid].longest_wait_ns, i))
        .filter(|(w, _)| *w > 0)
        .collect();
    by_wait.sort_unstable_by_key(|&(w, i)| (std::cmp::Reverse(w), i));
    for &(_, i) in by_wait.iter().take(longest_waits) {
        chosen.insert(i, Why::LongestWait);
    }
    // The rest of the room spread evenly over the threads not chosen yet, the last included.
    let rest: Vec<usize> = (0..others.len())
        .filter(|i| !chosen.contains_key(i))
        .collect();
    let k = room - chosen.len();
    for j in 0..k {
        let at = if k == 1 {
            0
        } else {
            j * (rest.len() - 1) / (k - 1)
        };
        chosen.insert(rest[at], Why::Spread);
    }
    picked.extend(chosen.into_iter().map(|(i, why)| (others[i].1, why)));
    picked
}

/// Per CPU, who holds it from its latest switch on, and its buckets.
struct CpuTally {
    begin: u64,
    end: u64,
    bucket_ns: u64,
    last: BTreeMap<u32, (u64, Holder)>,
    buckets: BTreeMap<u32, Vec<[u64; 4]>>,
}

impl CpuTally {
    fn add(&mut self, cpu: u32, from: u64, to: u64, holder: Holder) {
        let (from, to) = (from.max(self.begin), to.min(self.end));
        if to <= from {
            return;
        }
        let h = holder as usize;
        let buckets = self
            .buckets
            .entry(cpu)
            .or_insert_with(|| vec![[0; 4]; CPU_BUCKETS]);
        let mut t = from;
        while t < to {
            let i = (((t - self.begin) / self.bucket_ns) as usize).min(CPU_BUCKETS - 1);
            let bucket_end = if i == CPU_BUCKETS - 1 {
                to
            } else {
                self.begin + (i as u64 + 1) * self.bucket_ns
            };
            let upto = to.min(bucket_end);
            buckets[i][h] += upto - t;
            t = upto;
        }
    }

    fn switch(&mut self, cpu: u32, ts: u64, next: Holder) {
        if let Some((from, holder)) = self.last.insert(cpu, (ts, next)) {
            self.add(cpu, from, ts, holder);
        }
    }

    fn close(&mut self) {
        let last = std::mem::take(&mut self.last);
        for (cpu, (from, holder)) in last {
            self.add(cpu, from, self.end, holder);
        }
    }
}

/// The swimlane from the raw records in time order (wrap them in `sched_trace::TimeOrdered`),
/// given the derived trace; `spawning`: the launched process (its main thread's tid).
pub fn build(
    events: impl Iterator<Item = io::Result<TraceEvent>>,
    trace: &SchedTrace,
    spawning: Option<u32>,
) -> io::Result<Swimlane> {
    let begin = trace.first_ts.unwrap_or(0);
    let end = trace.end_ts.max(begin);
    let bucket_ns = (end - begin).div_ceil(CPU_BUCKETS as u64).max(1);
    let picked = sample(trace, spawning);
    let tids: BTreeSet<u32> = picked.iter().map(|(t, _)| *t).collect();
    let holder = |tid: u32| match tid {
        0 => Holder::Idle,
        t if Some(t) == spawning => Holder::Spawning,
        t if trace.threads.contains_key(&t) => Holder::Run,
        _ => Holder::Outside,
    };
    let mut cpus = CpuTally {
        begin,
        end,
        bucket_ns,
        last: BTreeMap::new(),
        buckets: BTreeMap::new(),
    };
    let mut states = thread_states(
        events.inspect(|e| {
            if let Ok(e) = e {
                if e.kind == spawnscope_collector::trace_events::Kind::Switch {
                    cpus.switch(e.cpu, e.ts, holder(e.other.tid));
                }
            }
        }),
        &tids,
        end,
    )?;
    cpus.close();
    let cpus_seen = cpus.buckets.len() as u64;
    // The CPUs the run held longest, in CPU order.
    let mut kept: Vec<(u64, u32)> = cpus
        .buckets
        .iter()
        .map(|(cpu, b)| {
            let run: u64 = b
                .iter()
                .map(|h| h[Holder::Spawning as usize] + h[Holder::Run as usize])
                .sum();
            (run, *cpu)
        })
        .collect();
    kept.sort_unstable_by_key(|&(run, cpu)| (std::cmp::Reverse(run), cpu));
    let kept: BTreeSet<u32> = kept.iter().take(CPU_LANES).map(|(_, c)| *c).collect();
    let phases = if trace.phases.names == [WHOLE_RUN] {
        Vec::new()
    } else {
        let starts = &trace.phases.starts;
        trace
            .phases
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| Span {
                name: name.clone(),
                begin: starts[i].clamp(begin, end),
                end: starts.get(i + 1).copied().unwrap_or(end).clamp(begin, end),
            })
            .filter(|s| s.end > s.begin)
            .collect()
    };
    Ok(Swimlane {
        begin,
        end,
        bucket_ns,
        phases,
        lanes: picked
            .into_iter()
            .map(|(tid, why)| {
                let t = &trace.threads[&tid];
                Lane {
                    tid,
                    name: t.name.clone(),
                    why,
                    longest_wait_ns: t.longest_wait_ns,
                    spans: states.remove(&tid).unwrap_or_default(),
                }
            })
            .collect(),
        cpus: cpus
            .buckets
            .into_iter()
            .filter(|(cpu, _)| kept.contains(cpu))
            .map(|(cpu, buckets)| CpuLane { cpu, buckets })
            .collect(),
        threads: trace.threads.len() as u64,
        cpus_seen,
    })
}

/// One lane's figures: its state totals from the spans it is drawn from.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LaneFigures {
    pub tid: u32,
    pub name: String,
    /// spawning thread, first created, longest wait, spread, or every thread.
    pub why: String,
    /// Spans drawn from (before merging those narrower than a pixel).
    pub spans: u64,
    pub running_ns: u64,
    pub runnable_ns: u64,
    pub blocked_ns: u64,
    /// Its longest wake-to-run or preempted-to-run.
    pub longest_wait_ns: u64,
}

/// One CPU's figures: who held it, summed over its buckets.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CpuFigures {
    pub cpu: u32,
    /// The spawning thread.
    pub spawning_ns: u64,
    /// The run's other threads.
    pub run_ns: u64,
    /// Tasks outside the run (from a switch to one until the CPU's next recorded switch).
    pub outside_ns: u64,
    /// The idle task (likewise).
    pub idle_ns: u64,
}

/// The swimlane in summary.json: which threads it draws and why, and what each lane and CPU
/// holds.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SwimlaneFigures {
    /// Which threads get a lane.
    pub rule: String,
    /// The run's threads the trace names, of which `lanes` are drawn.
    pub threads: u64,
    /// The span drawn, on the trace's clock (BOOTTIME): its first record to the run's end.
    pub begin_ns: u64,
    pub end_ns: u64,
    pub lanes: Vec<LaneFigures>,
    /// CPUs with a switch touching the run, of which `cpus` are drawn (the longest held by it).
    pub cpus_seen: u64,
    pub cpus: Vec<CpuFigures>,
    /// A capped trace's kept window, in words (`TraceCapture::capped`): the lanes end there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_window: Option<String>,
}

impl Swimlane {
    /// Its figures; `kept_window`: a capped trace's window, said beside them.
    pub fn figures(&self, kept_window: Option<String>) -> SwimlaneFigures {
        SwimlaneFigures {
            kept_window,
            rule: rule(),
            threads: self.threads,
            begin_ns: self.begin,
            end_ns: self.end,
            lanes: self
                .lanes
                .iter()
                .map(|l| {
                    let total = |s: State| {
                        l.spans
                            .iter()
                            .filter(|x| x.state == s)
                            .map(|x| x.end - x.begin)
                            .sum()
                    };
                    LaneFigures {
                        tid: l.tid,
                        name: l.name.clone(),
                        why: l.why.name().into(),
                        spans: l.spans.len() as u64,
                        running_ns: total(State::Running),
                        runnable_ns: total(State::Runnable),
                        blocked_ns: total(State::Blocked),
                        longest_wait_ns: l.longest_wait_ns,
                    }
                })
                .collect(),
            cpus_seen: self.cpus_seen,
            cpus: self
                .cpus
                .iter()
                .map(|c| {
                    let [spawning_ns, run_ns, outside_ns, idle_ns] = c.held();
                    CpuFigures {
                        cpu: c.cpu,
                        spawning_ns,
                        run_ns,
                        outside_ns,
                        idle_ns,
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::sched_trace::{derive, Context, PhaseEdges};
    use spawnscope_collector::trace_events::{Kind, Task};

    const PID: u32 = 100;

    fn ev(ts: u64, kind: Kind, cpu: u32, task: Task, other: Task, arg: u64) -> TraceEvent {
        TraceEvent::nice_zero(ts, kind, cpu, task, other, arg, "t")
    }

    fn t(tid: u32) -> Task {
        Task { tid, tgid: PID }
    }

    /// Main spawns `n` threads, one per 100 ns; thread i waits `wait(i)` for CPU 1, runs 10 ns,
    /// exits.
    fn spawned(n: u32, wait: impl Fn(u32) -> u64) -> Vec<TraceEvent> {
        let mut events = vec![ev(0, Kind::Switch, 0, Task::default(), t(PID), 0)];
        for i in 0..n {
            let tid = PID + 1 + i;
            let at = 10 + i as u64 * 100;
            events.push(ev(at, Kind::NewTask, 0, t(tid), t(PID), 0));
            events.push(ev(at + 1, Kind::WakeupNew, 0, t(tid), t(PID), 0));
            let runs = at + 1 + wait(i);
            events.push(ev(runs, Kind::Switch, 1, Task::default(), t(tid), 0));
            events.push(ev(runs + 10, Kind::Exit, 1, t(tid), Task::default(), 0));
            events.push(ev(
                runs + 12,
                Kind::Switch,
                1,
                t(tid),
                Task::default(),
                0x80,
            ));
        }
        events
    }

    fn swimlane(events: &[TraceEvent]) -> (SchedTrace, Swimlane) {
        let context = Context {
            launched: Some(PID),
            phases: PhaseEdges {
                names: vec!["startup".into(), "spawn".into()],
                starts: vec![0, 10],
            },
            run_end_ts: None,
        };
        let trace = derive(events.iter().copied().map(Ok), &context).unwrap();
        let lanes = build(events.iter().copied().map(Ok), &trace, Some(PID)).unwrap();
        (trace, lanes)
    }

    #[test]
    fn few_threads_all_get_a_lane_the_spawning_one_first() {
        let (_, s) = swimlane(&spawned(3, |_| 5));
        let got: Vec<(u32, Why)> = s.lanes.iter().map(|l| (l.tid, l.why)).collect();
        assert_eq!(
            got,
            vec![
                (PID, Why::Spawning),
                (101, Why::Every),
                (102, Why::Every),
                (103, Why::Every)
            ]
        );
        assert_eq!(
            s.phases.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["startup", "spawn"]
        );
        let f = s.figures(None);
        // Thread 101: runnable 5 ns (wakeup_new at 11 to its switch-in at 16), running 10.
        assert_eq!((f.lanes[1].runnable_ns, f.lanes[1].running_ns), (5, 10));
    }

    #[test]
    fn many_threads_are_sampled_by_the_stated_rule() {
        let n = 1_000u32;
        // Threads 500..503 wait longest (4,000 ns, then 3,999…); the rest 5 ns.
        let wait = |i: u32| {
            if (500..510).contains(&i) {
                4_000 - (i - 500) as u64
            } else {
                5
            }
        };
        let (trace, s) = swimlane(&spawned(n, wait));
        assert_eq!(s.lanes.len(), THREAD_LANES);
        assert_eq!((s.lanes[0].tid, s.lanes[0].why), (PID, Why::Spawning));
        let of = |why: Why| -> Vec<u32> {
            s.lanes
                .iter()
                .filter(|l| l.why == why)
                .map(|l| l.tid)
                .collect()
        };
        assert_eq!(of(Why::FirstCreated), (101..109).collect::<Vec<_>>());
        assert_eq!(
            of(Why::LongestWait),
            (601..609).collect::<Vec<_>>(),
            "the 8 longest of the 10 long waits"
        );
        let spread = of(Why::Spread);
        assert_eq!(
            spread.len(),
            THREAD_LANES - 1 - FIRST_CREATED - LONGEST_WAITS
        );
        assert_eq!(spread.first(), Some(&109), "the first not chosen yet");
        assert_eq!(spread.last(), Some(&(PID + n)), "the last created");
        // In creation order after the spawning thread, each once.
        let tids: Vec<u32> = s.lanes[1..].iter().map(|l| l.tid).collect();
        assert!(tids.windows(2).all(|w| w[0] < w[1]), "{tids:?}");
        assert_eq!(s.threads, trace.threads.len() as u64);
        assert_eq!(sample(&trace, Some(PID)), sample(&trace, Some(PID)));
    }

    #[test]
    fn a_cpu_s_time_is_bucketed_exactly_by_holder() {
        let events = spawned(50, |i| 5 + i as u64);
        let (_, s) = swimlane(&events);
        let f = s.figures(None);
        let cpu1 = f.cpus.iter().find(|c| c.cpu == 1).unwrap();
        // Each thread holds CPU 1 from its switch-in to its switch out (12 ns), idle between.
        assert_eq!(cpu1.run_ns, 50 * 12);
        assert_eq!(cpu1.spawning_ns, 0);
        let first_in = events
            .iter()
            .find(|e| e.kind == Kind::Switch && e.cpu == 1)
            .unwrap()
            .ts;
        assert_eq!(cpu1.run_ns + cpu1.idle_ns, s.end - first_in);
        let cpu0 = f.cpus.iter().find(|c| c.cpu == 0).unwrap();
        assert_eq!(cpu0.spawning_ns, s.end - s.begin);
        assert!(s.bucket_ns * CPU_BUCKETS as u64 >= s.end - s.begin);
    }
}
