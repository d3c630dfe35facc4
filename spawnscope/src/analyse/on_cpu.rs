//! The on-CPU check of a runtime-traced run (issue 39.6): every event the runtime's own tracer
//! recorded was emitted by a thread (its TID), so that thread was on a CPU then, by the kernel's
//! switches (the kernel's trace's running spans of those threads, `sched_trace::thread_states`).
//! Shared by the goroutines' (analyse/go_sched.rs) and tokio's (analyse/tokio_sched.rs) events;
//! each says its clocks' tolerance and what it means when its events lie before their threads ran.

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

/// The runtime's events against the kernel's on-CPU spans of the threads that emitted them.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OnCpuCheck {
    /// Records with a thread that the kernel's trace followed.
    pub checked: u64,
    /// Within a running span of that thread, give or take `tolerance_ns`.
    pub inside: u64,
    /// How far outside (ns) the farthest one lay.
    pub farthest_outside_ns: u64,
    /// The runtime's clock against the kernel's: how far an event may lie outside and still count
    /// (Go: its tracer's 64 ns tick twice over, the event and the Sync snapshot that puts it on
    /// CLOCK_MONOTONIC; tokio's hooks: the reading of the clocks' offset).
    pub tolerance_ns: u64,
    /// Passes at `PASS_FRACTION` of the records inside or more.
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

/// Holds each event (CLOCK_MONOTONIC ns, the thread that emitted it) to that thread's running
/// spans (BOOTTIME, sorted); `offset_ns` = BOOTTIME − MONOTONIC. Threads the kernel's trace does
/// not follow are not checked (said in `says`).
pub fn check(
    events: impl Iterator<Item = io::Result<(u64, Option<u32>)>>,
    running: &BTreeMap<u32, Vec<(u64, u64)>>,
    offset_ns: i64,
    switches_unseen: Option<u64>,
    clocks: &Clocks,
) -> io::Result<OnCpuCheck> {
    let tol = clocks.tolerance_ns;
    let (mut checked, mut inside, mut farthest, mut unfollowed) = (0u64, 0u64, 0u64, 0u64);
    let mut before_first = 0u64;
    let mut outside_by_tid: BTreeMap<u32, u64> = BTreeMap::new();
    for e in events {
        let (ts_ns, tid) = e?;
        let Some(tid) = tid else { continue };
        let Some(spans) = running.get(&tid).filter(|s| !s.is_empty()) else {
            unfollowed += 1;
            continue;
        };
        checked += 1;
        let ts = crate::analyse::sched_trace::boot(ts_ns, offset_ns);
        // The last span beginning at or before ts (+ tolerance), and the distance to it.
        let i = spans.partition_point(|&(begin, _)| begin <= ts + tol);
        let distance = match i.checked_sub(1).map(|i| spans[i]) {
            Some((_, end)) if ts <= end + tol => 0,
            Some((_, end)) => {
                let after = ts - end;
                spans
                    .get(i)
                    .map_or(after, |&(begin, _)| after.min(begin - ts))
            }
            None => {
                before_first += 1;
                spans[0].0 - ts
            }
        };
        if distance == 0 {
            inside += 1;
        } else {
            farthest = farthest.max(distance);
            *outside_by_tid.entry(tid).or_default() += 1;
        }
    }
    let fraction = if checked == 0 {
        0.0
    } else {
        inside as f64 / checked as f64
    };
    let passed = checked > 0 && fraction >= PASS_FRACTION;
    let mut says = format!(
        "{inside} of {checked} runtime events ({:.3} %) lie within a kernel on-CPU span of the thread that emitted them (±{tol} ns)",
        100.0 * fraction
    );
    if !passed && checked > 0 {
        says.push_str(&format!(
            "; below {:.1} %: the farthest {farthest} ns outside{}",
            100.0 * PASS_FRACTION,
            if before_first * 2 > checked - inside {
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
        farthest_outside_ns: farthest,
        tolerance_ns: tol,
        passed,
        says,
    })
}
