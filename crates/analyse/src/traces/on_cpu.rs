//! The on-CPU check of a runtime-traced run (issue 39.6): every event the runtime's own tracer
//! recorded was emitted by a thread (its TID), so that thread was on a CPU then, by the kernel's
//! switches (the kernel's trace's running spans of those threads, `sched_trace::thread_states`).
//! Shared by the goroutines' (analyse/runtimes/go_sched.rs) and tokio's (analyse/runtimes/tokio_sched.rs) events;
//! each says its clocks' tolerance and what it means when its events lie before their threads ran.
//! Two kinds of event are not judged at a time, each counted apart and said: one whose time the
//! runtime's trace parser moved (Go: x/exp/trace), and one inside a stint of its thread whose
//! switch-in the kernel's trace missed.

use std::collections::{BTreeMap, HashMap};
use std::io;

use serde::{Deserialize, Serialize};

use crate::traces::thread_states::MissedSwitchIn;

/// The runtime's events against the kernel's on-CPU spans of the threads that emitted them. A
/// goroutine's or task's slice may still be open while the kernel has switched its thread out:
/// that is a slice, not an event, and not checked.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OnCpuCheck {
    /// Records with a thread that the kernel's trace followed.
    pub checked: u64,
    /// At their own time, within a running span of that thread, give or take `tolerance_ns`.
    pub inside: u64,
    /// Of `checked`, those whose time the trace's parser moved forward (x/exp/trace hands an
    /// event read after a later one of another thread that one's time + 1 ns): their own time
    /// is not in the trace as read, only that it lies between their thread's previous record of
    /// its own time and the moved one. Not judged at a time: one whose interval meets no running
    /// span of its thread is outside (against the check); the rest are `time_moved_consistent`.
    #[serde(default)]
    pub time_moved: u64,
    /// Of `time_moved`, those whose interval meets a running span of their thread: counted
    /// apart, neither inside nor against the check.
    #[serde(default)]
    pub time_moved_consistent: u64,
    /// Of `checked`, those outside every running span the kernel's trace recorded but within a
    /// stint whose switch-in it missed (their thread switched out while the trace had it off its
    /// CPU: `sched_trace::missed_switch_ins`): on a CPU then or not, the trace cannot say.
    /// Counted apart: neither inside nor against the check.
    #[serde(default)]
    pub in_missed_switch_ins: u64,
    /// How far outside (ns) the farthest one lay.
    pub farthest_outside_ns: u64,
    /// The runtime's clock against the kernel's: how far an event may lie outside and still count
    /// (Go: its tracer's 64 ns tick twice over, the event and the Sync snapshot that puts it on
    /// CLOCK_MONOTONIC; tokio's hooks: the reading of the clocks' offset).
    pub tolerance_ns: u64,
    /// Passes at `PASS_FRACTION` of the records inside or more (of those checked less those
    /// counted apart).
    pub passed: bool,
    pub says: String,
}

/// The share of the runtime's events that must lie on-CPU for the check to pass.
pub const PASS_FRACTION: f64 = 0.999;

/// A runtime's clock as the check takes it.
pub struct Clocks {
    pub tolerance_ns: u64,
    /// Said when most events outside lie before their thread's first switch-in.
    pub behind: &'static str,
}

/// One runtime event as the check takes it: CLOCK_MONOTONIC ns, the thread that emitted it, and
/// whether its time is the parser's, moved forward (an upper bound only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    pub tid: Option<u32>,
    pub time_moved: bool,
}

/// The kernel's view of the threads the check reads (BOOTTIME): each thread's running spans
/// (`sched_trace::thread_states`, and where its trace missed a switch-in, from a record showing
/// the thread current to its switch-out), and the windows before those where it may have run
/// unseen (`add_missed_switch_ins`).
#[derive(Clone, Debug, Default)]
pub struct OnCpuSpans {
    pub running: BTreeMap<u32, Vec<(u64, u64)>>,
    pub missed: BTreeMap<u32, Vec<(u64, u64)>>,
}

/// The stints whose switch-in the kernel's trace missed, into the check's terms: from where a
/// record shows the thread current to its switch-out it was on a CPU (added to `running`, which
/// stays sorted); before that, from when it could run, it may have been (the windows returned,
/// whose events are counted apart).
pub fn add_missed_switch_ins(
    running: &mut BTreeMap<u32, Vec<(u64, u64)>>,
    missed: BTreeMap<u32, Vec<MissedSwitchIn>>,
) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let mut windows = BTreeMap::new();
    for (tid, stints) in missed {
        let spans = running.entry(tid).or_default();
        let mut unknown = Vec::new();
        for m in stints {
            let seen = m.seen_on_cpu.unwrap_or(m.out);
            if seen < m.out {
                spans.push((seen, m.out));
            }
            unknown.push((m.since, seen));
        }
        spans.sort_unstable();
        windows.insert(tid, unknown);
    }
    windows
}

/// Whether a span of `spans` (sorted, disjoint) meets [lo, hi] widened by `tol`; else how far
/// the nearest one lies.
fn distance_to(spans: &[(u64, u64)], lo: u64, hi: u64, tol: u64) -> Option<u64> {
    // The last span beginning at or before hi (+ tolerance).
    let i = spans.partition_point(|&(begin, _)| begin <= hi + tol);
    match i.checked_sub(1).map(|i| spans[i]) {
        Some((_, end)) if lo <= end + tol => None,
        Some((_, end)) => {
            let after = lo - end;
            Some(
                spans
                    .get(i)
                    .map_or(after, |&(begin, _)| after.min(begin - hi)),
            )
        }
        None => Some(spans.first().map_or(u64::MAX, |&(begin, _)| begin - hi)),
    }
}

/// Holds each event to its thread's running spans (`kernel`, BOOTTIME, sorted); `offset_ns` =
/// BOOTTIME − MONOTONIC. An event whose time the parser moved is held over [its thread's last
/// record of its own time, the moved time]. Threads the kernel's trace does not follow are not
/// checked (said in `says`).
pub fn check(
    events: impl Iterator<Item = io::Result<Event>>,
    kernel: &OnCpuSpans,
    offset_ns: i64,
    switches_unseen: Option<u64>,
    clocks: &Clocks,
) -> io::Result<OnCpuCheck> {
    let tol = clocks.tolerance_ns;
    let (mut checked, mut inside, mut farthest, mut unfollowed) = (0u64, 0u64, 0u64, 0u64);
    let (mut before_first, mut moved, mut moved_consistent, mut apart) = (0u64, 0u64, 0u64, 0u64);
    let mut moved_outside = 0u64;
    let mut outside_by_tid: BTreeMap<u32, u64> = BTreeMap::new();
    // Each thread's last record of its own time (not moved), BOOTTIME.
    let mut own: HashMap<u32, u64> = HashMap::new();
    for e in events {
        let e = e?;
        let Some(tid) = e.tid else { continue };
        let Some(spans) = kernel.running.get(&tid).filter(|s| !s.is_empty()) else {
            unfollowed += 1;
            continue;
        };
        checked += 1;
        let ts = crate::traces::sched_trace::boot(e.ts_ns, offset_ns);
        // A moved time is an upper bound; its thread's previous own time a lower one.
        let lo = if e.time_moved {
            moved += 1;
            own.get(&tid).copied().unwrap_or(ts).min(ts)
        } else {
            own.insert(tid, ts);
            ts
        };
        let Some(distance) = distance_to(spans, lo, ts, tol) else {
            if e.time_moved {
                moved_consistent += 1;
            } else {
                inside += 1;
            }
            continue;
        };
        let missed = kernel.missed.get(&tid).map(|m| &m[..]).unwrap_or(&[]);
        if distance_to(missed, lo, ts, tol).is_none() {
            apart += 1;
            continue;
        }
        if ts + tol < spans[0].0 {
            before_first += 1;
        }
        moved_outside += u64::from(e.time_moved);
        farthest = farthest.max(distance);
        *outside_by_tid.entry(tid).or_default() += 1;
    }
    let judged = checked - apart - moved_consistent;
    let fraction = if judged == 0 {
        0.0
    } else {
        inside as f64 / judged as f64
    };
    let passed = judged > 0 && fraction >= PASS_FRACTION;
    let mut says = format!(
        "{inside} of {judged} runtime events ({:.3} %) lie within a kernel on-CPU span of the thread that emitted them (±{tol} ns)",
        100.0 * fraction
    );
    if moved > 0 {
        says.push_str(&format!(
            "; {moved} more carry a time the trace's parser moved forward to keep its order (x/exp/trace: an event read after a later one of another thread takes that one's time + 1 ns), their own not in the trace as read: not judged at a time, {moved_consistent} of them consistent (a running span of their thread meets [its previous own time, the moved time]), {moved_outside} not (outside, counted above){}",
            match moved - moved_consistent - moved_outside {
                0 => String::new(),
                n => format!(", {n} in a stint whose switch-in the kernel's trace missed (counted apart below)"),
            }
        ));
    }
    if apart > 0 {
        says.push_str(&format!(
            "; {apart} more not judged: outside the spans the kernel's trace recorded, within a stint of their thread whose switch-in it missed ({} switches unseen in collector.json's trace section)",
            switches_unseen.map_or("no count of".to_string(), |n| n.to_string())
        ));
    }
    if !passed && judged > 0 {
        says.push_str(&format!(
            "; below {:.1} %: the farthest {farthest} ns outside{}",
            100.0 * PASS_FRACTION,
            if before_first * 2 > judged - inside {
                format!(" — most before their thread's first switch-in: {}", clocks.behind)
            } else {
                match switches_unseen {
                    Some(n) if n > 0 => format!(" — the kernel's trace missed {n} switches of the run's tasks (collector.json's trace.switches_unseen): a stint of a thread on a CPU it did not record leaves the runtime's events of that stint outside"),
                    _ => " — the runtime's clock and the kernel's disagree".to_string(),
                }
            }
        ));
    }
    if !passed && !outside_by_tid.is_empty() {
        let mut by: Vec<(u32, u64)> = outside_by_tid.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let most: Vec<String> = by
            .iter()
            .take(3)
            .map(|(tid, n)| format!("TID {tid}: {n}"))
            .collect();
        says.push_str(&format!("; outside, by thread: {}", most.join(", ")));
    }
    if unfollowed > 0 {
        says.push_str(&format!(
            "; {unfollowed} events of threads the kernel's trace did not follow not checked"
        ));
    }
    Ok(OnCpuCheck {
        checked,
        inside,
        time_moved: moved,
        time_moved_consistent: moved_consistent,
        in_missed_switch_ins: apart,
        farthest_outside_ns: farthest,
        tolerance_ns: tol,
        passed,
        says,
    })
}
