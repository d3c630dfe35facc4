//! Each thread's states over a traced run (running, runnable, sleeping, blocked), from the
//! scheduler trace's switches and wakeups, and the switch-ins the trace missed.

use spawnscope_collector::trace_events::{Kind, TraceEvent};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;

/// What a thread was doing over a span: the swimlane's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// On a CPU (switch-in to switch-out).
    Running,
    /// Woken or preempted, waiting for a CPU.
    Runnable,
    /// Switched out blocking (prev_state not 0), until woken.
    Blocked,
}

impl State {
    pub const ALL: [State; 3] = [State::Running, State::Runnable, State::Blocked];

    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Runnable => "runnable",
            State::Blocked => "blocked",
        }
    }
}

/// One span of one thread's state, on the trace's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSpan {
    pub state: State,
    pub begin: u64,
    pub end: u64,
}

/// The state spans of the threads in `tids`, from the records in time order (wrap the raw
/// records in [`TimeOrdered`]), by the same rule as wake-to-run: a wakeup (of a thread not on a
/// CPU) or a switch out still runnable makes a thread runnable, a blocking switch out blocked, a
/// switch-in running; its exit ends its last span (the switch out that follows it, TASK_DEAD, is
/// no state: a thread's records after its exit are passed over until a task_newtask reuses its
/// tid); a span still open at `end_ts` (the run's end) ends there. For report.html's swimlane.
/// Memory grows with the spans of the threads asked for only.
pub fn thread_states(
    events: impl Iterator<Item = io::Result<TraceEvent>>,
    tids: &BTreeSet<u32>,
    end_ts: u64,
) -> io::Result<BTreeMap<u32, Vec<StateSpan>>> {
    let mut s = States {
        tids,
        spans: BTreeMap::new(),
        open: HashMap::new(),
        exited: BTreeSet::new(),
    };
    for event in events {
        let e = event?;
        match e.kind {
            Kind::Switch => {
                let out = if e.preempted() {
                    State::Runnable
                } else {
                    State::Blocked
                };
                s.to(e.task.tid, Some(out), e.ts, false);
                s.to(e.other.tid, Some(State::Running), e.ts, false);
            }
            Kind::Wakeup | Kind::WakeupNew => s.to(e.task.tid, Some(State::Runnable), e.ts, true),
            Kind::Exit => s.to(e.task.tid, None, e.ts, false),
            Kind::NewTask => {
                s.exited.remove(&e.task.tid);
            }
            _ => {}
        }
    }
    for (tid, (state, begin)) in s.open {
        s.spans.entry(tid).or_default().push(StateSpan {
            state,
            begin,
            end: end_ts.max(begin),
        });
    }
    Ok(s.spans)
}

/// A stint of a thread on a CPU whose switch-in the kernel's trace missed: the thread switched
/// out (`out`) while the trace had it off its CPU. It was switched in somewhere after `since`
/// (its wakeup after a blocking switch-out, else that switch-out), and was on a CPU from
/// `seen_on_cpu` at the latest where a record of the trace shows it current before `out` (a wakeup
/// it made, or came in on, a wait it began or ended, a task it created).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissedSwitchIn {
    pub since: u64,
    pub seen_on_cpu: Option<u64>,
    pub out: u64,
}

/// Where the kernel's trace missed a switch-in of a thread in `tids` (records in time order;
/// collector.json's `switches_unseen` counts such switches). A thread's first record being a
/// switch-out is no miss: it ran from before the trace.
pub fn missed_switch_ins(
    events: impl Iterator<Item = io::Result<TraceEvent>>,
    tids: &BTreeSet<u32>,
) -> io::Result<BTreeMap<u32, Vec<MissedSwitchIn>>> {
    /// Off its CPU as the trace saw it: since when it may run, whether it still waits for its
    /// wakeup, and the first record showing it current anyway.
    struct Off {
        since: u64,
        blocked: bool,
        seen: Option<u64>,
    }
    let mut off: HashMap<u32, Off> = HashMap::new();
    let mut missed: BTreeMap<u32, Vec<MissedSwitchIn>> = BTreeMap::new();
    for event in events {
        let e = event?;
        // The task current on its CPU when this record was made, where the record names it.
        let current = match e.kind {
            Kind::Wakeup | Kind::WakeupNew | Kind::NewTask => Some(e.other.tid),
            Kind::WaitBegin | Kind::WaitEnd => Some(e.task.tid),
            _ => None,
        };
        if let Some(o) = current.and_then(|tid| off.get_mut(&tid)) {
            o.seen.get_or_insert(e.ts);
        }
        match e.kind {
            Kind::Switch => {
                if tids.contains(&e.task.tid) {
                    if let Some(o) = off.get(&e.task.tid) {
                        missed.entry(e.task.tid).or_default().push(MissedSwitchIn {
                            since: o.since,
                            seen_on_cpu: o.seen,
                            out: e.ts,
                        });
                    }
                    off.insert(
                        e.task.tid,
                        Off {
                            since: e.ts,
                            blocked: !e.preempted(),
                            seen: None,
                        },
                    );
                }
                off.remove(&e.other.tid);
            }
            Kind::Wakeup | Kind::WakeupNew => {
                if let Some(o) = off.get_mut(&e.task.tid).filter(|o| o.blocked) {
                    (o.since, o.blocked) = (e.ts, false);
                }
            }
            Kind::Exit | Kind::NewTask => {
                off.remove(&e.task.tid);
            }
            _ => {}
        }
    }
    Ok(missed)
}

/// [`thread_states`]' state: each asked-for thread's spans so far and its open one.
struct States<'a> {
    tids: &'a BTreeSet<u32>,
    spans: BTreeMap<u32, Vec<StateSpan>>,
    open: HashMap<u32, (State, u64)>,
    exited: BTreeSet<u32>,
}

impl States<'_> {
    /// `tid` goes into `state` at `ts` (None: it exited).
    fn to(&mut self, tid: u32, state: Option<State>, ts: u64, woken: bool) {
        if !self.tids.contains(&tid) || self.exited.contains(&tid) {
            return;
        }
        // A wakeup of a thread still on its CPU (it had not blocked yet) leaves it running.
        if woken
            && self
                .open
                .get(&tid)
                .is_some_and(|(was, _)| *was == State::Running)
        {
            return;
        }
        if let Some((was, begin)) = self.open.remove(&tid) {
            if state == Some(was) {
                self.open.insert(tid, (was, begin));
                return;
            }
            self.spans.entry(tid).or_default().push(StateSpan {
                state: was,
                begin,
                end: ts.max(begin),
            });
        }
        match state {
            Some(state) => {
                self.open.insert(tid, (state, ts));
            }
            None => {
                self.exited.insert(tid);
            }
        }
    }
}
