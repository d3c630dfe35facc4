//! What names an untraced outlier's cause. An untraced run carries no kernel counts (no probes),
//! but it still has what costs it nothing: its rusage (system time, page faults), its sentinels'
//! machine counters (PSI, reclaim, compaction and THP in /proc/vmstat) and the free page
//! reporting counter read at its first and last marks. Set beside its repeats' medians, these
//! name what the run met that they did not.
//!
//! The lead that made this (issue 40, measured on M1): after ~150 s idle the VM had handed
//! 1,134 MiB of free memory back to its host (free page reporting); the next `goroutines hold
//! --n 1000000` took 2.77 s of system time against ~1.5 s, with the same 681k page faults — each
//! first touch of a reported page faults it back in from the host. Reporting happened between
//! runs, outside every run's window, so the run's own sentinels saw nothing: what the machine
//! handed back between the previous run's last mark and this run's first is the sentinel.

use std::collections::HashMap;

use crate::analyse::regression::spread;
use crate::analyse::sentinels::{PhaseSentinels, ReportedAt};
use crate::analyse::summary::Summary;
use crate::units::{bytes, count};

/// Memory handed back to the host between the run before (any run of the set, on the same
/// machine and boot: the counter only grows) and this one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HandedBack {
    pub kib: u64,
    /// From the run before's last sentinel mark to this run's first.
    pub idle_ns: u64,
}

/// For each run (its directory, its machine, its summary), what was handed back since the run
/// before it in time on its machine; absent for the first, or without the counter.
pub fn handed_back_before(runs: &[(&str, &str, &Summary)]) -> HashMap<String, HandedBack> {
    let at: Vec<(&str, &str, ReportedAt)> = runs
        .iter()
        .filter_map(|(dir, machine, s)| {
            Some((*dir, *machine, s.sentinels.as_ref()?.reported_at.clone()?))
        })
        .collect();
    at.iter()
        .filter_map(|(dir, machine, mine)| {
            let before = at
                .iter()
                // One boot (its monotonic clock and counters), known on both sides.
                .filter(|(d, m, r)| {
                    d != dir
                        && m == machine
                        && mine.boot_id.is_some()
                        && r.boot_id == mine.boot_id
                        && r.last_t_ns <= mine.first_t_ns
                })
                .max_by_key(|(_, _, r)| r.last_t_ns)?
                .2
                .clone();
            // A counter that went down: reset (the module reloaded).
            let kib = mine.first_kib.checked_sub(before.last_kib)?;
            Some((
                dir.to_string(),
                HandedBack {
                    kib,
                    idle_ns: mine.first_t_ns - before.last_t_ns,
                },
            ))
        })
        .collect()
}

/// A run's figure beside its repeats' median is unusual at this factor, either way.
const UNUSUAL: f64 = 3.0;
/// Memory handed back before a run that names a cause: below it, first touches cost too little.
const HANDED_BACK_SIZEABLE_KIB: u64 = 64 * 1024;
/// PSI stall time that names a cause (ns, whole run).
const STALL_SIZEABLE_NS: f64 = 50e6;
/// Machine counters (reclaim, compaction stalls, THP fallbacks) that name a cause.
const EVENTS_SIZEABLE: f64 = 100.0;
/// System time per page fault this far above the repeats' median, with about as many faults,
/// says the faults themselves were slower.
const SYS_PER_FAULT_SLOWER: f64 = 1.25;
/// "About as many faults": within this share of the median.
const SAME_FAULTS: f64 = 0.2;

/// One run with what preceded it, as the causes take it.
pub struct Untraced<'a> {
    pub summary: &'a Summary,
    pub handed_back: Option<HandedBack>,
}

/// A sentinel figure of one phase.
type PhaseFigure = fn(&PhaseSentinels) -> Option<u64>;

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    spread(&values.collect::<Vec<_>>()).map(|s| s.median)
}

/// A sentinel figure summed over the run's phases; None where no phase has it.
fn whole_run(s: &Summary, figure: PhaseFigure) -> Option<f64> {
    let phases = &s.sentinels.as_ref()?.per_phase;
    let values: Vec<u64> = phases.iter().filter_map(figure).collect();
    (!values.is_empty()).then(|| values.iter().sum::<u64>() as f64)
}

fn sys_per_fault(s: &Summary) -> Option<f64> {
    (s.minor_faults > 0 && s.sys_s > 0.0).then(|| s.sys_s / s.minor_faults as f64)
}

/// What the run met that its repeats did not, most telling first; empty when nothing did.
pub fn causes(run: &Untraced, others: &[Untraced]) -> Vec<String> {
    let s = run.summary;
    let mut said = Vec::new();
    if let Some(mine) = run.handed_back {
        let theirs = median(
            others
                .iter()
                .filter_map(|o| o.handed_back)
                .map(|h| h.kib as f64),
        );
        let unusual = theirs.is_none_or(|m| mine.kib as f64 >= UNUSUAL * m.max(1.0));
        if mine.kib >= HANDED_BACK_SIZEABLE_KIB && unusual {
            said.push(format!(
                "{} of free memory handed back to the host (free page reporting) in the {:.0} s before it{}: a first touch of that memory faults it in from the host again, slowly",
                bytes(mine.kib as f64 * 1024.0),
                mine.idle_ns as f64 / 1e9,
                theirs.map_or(String::new(), |m| format!(
                    ", against a median of {} before its repeats",
                    bytes(m * 1024.0)
                ))
            ));
        }
    }
    if let (Some(mine), Some(theirs), Some(faults)) = (
        sys_per_fault(s),
        median(others.iter().filter_map(|o| sys_per_fault(o.summary))),
        median(others.iter().map(|o| o.summary.minor_faults as f64)),
    ) {
        let same_faults = (s.minor_faults as f64 - faults).abs() <= SAME_FAULTS * faults;
        if same_faults && mine >= SYS_PER_FAULT_SLOWER * theirs {
            said.push(format!(
                "system time per page fault {:.2}× its repeats' median with as many faults ({} against {}): the faults themselves were slower",
                mine / theirs,
                count(s.minor_faults),
                count(faults as u64)
            ));
        }
    }
    let stalls: [(&str, PhaseFigure); 2] = [
        ("memory", |p| p.memory_pressure_ns),
        ("I/O", |p| p.io_pressure_ns),
    ];
    for (resource, figure) in stalls {
        let Some(mine) = whole_run(s, figure) else {
            continue;
        };
        let theirs = median(others.iter().filter_map(|o| whole_run(o.summary, figure)));
        if mine >= STALL_SIZEABLE_NS && theirs.is_none_or(|m| mine >= UNUSUAL * m.max(1.0)) {
            said.push(format!(
                "tasks stalled on {resource} {:.0} ms (PSI, the machine's){}",
                mine / 1e6,
                theirs.map_or(String::new(), |m| format!(
                    ", against a median of {:.0} ms",
                    m / 1e6
                ))
            ));
        }
    }
    let events: [(&str, PhaseFigure); 3] = [
        ("allocations that entered direct reclaim", |p| {
            p.direct_reclaim_stalls
        }),
        ("compaction stalls", |p| p.compaction_stalls),
        ("huge-page faults that fell back to small pages", |p| {
            p.thp_fault_fallback
        }),
    ];
    for (name, figure) in events {
        let Some(mine) = whole_run(s, figure) else {
            continue;
        };
        let theirs = median(others.iter().filter_map(|o| whole_run(o.summary, figure)));
        if mine >= EVENTS_SIZEABLE && theirs.is_none_or(|m| mine >= UNUSUAL * m.max(1.0)) {
            said.push(format!(
                "{name}: {}{}",
                count(mine as u64),
                theirs.map_or(String::new(), |m| format!(
                    ", against a median of {}",
                    count(m as u64)
                ))
            ));
        }
    }
    said
}
