//! What names an untraced outlier's cause. An untraced run carries no kernel counts (no probes),
//! but it still has what costs it nothing: its rusage (system time, page faults), its sentinels'
//! machine counters (PSI, reclaim, compaction and THP in /proc/vmstat) and the free page
//! reporting counter read at its first and last marks. Set beside its repeats' medians, these
//! name what the run met that they did not. A goroutines run also carries the Go GC's own
//! account of its CPU (analyse::go_gc): set beside its repeats' the same way, it names a
//! user-time outlier when it accounts for it (`go_gc_beside`, the rule at GC_SHARE).
//!
//! The lead that made this (issue 40, measured on M1): after ~150 s idle the VM had handed
//! 1,134 MiB of free memory back to its host (free page reporting); the next `goroutines hold
//! --n 1000000` took 2.77 s of system time against ~1.5 s, with the same 681k page faults — each
//! first touch of a reported page faults it back in from the host. Reporting happened between
//! runs, outside every run's window, so the run's own sentinels saw nothing: what the machine
//! handed back between the previous run's last mark and this run's first is the sentinel.

use std::collections::HashMap;

use crate::comparisons::regression::spread;
use crate::run::summary::Summary;
use crate::runtimes::go_gc::cycles;
use crate::time::sentinels::{PhaseSentinels, ReportedAt};
use units::{bytes, count};

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

/// The share of a run's user-time difference from its repeats' median that its GC CPU
/// difference, of the same sign, must reach to name the GC as its cause. Half: the GC then
/// accounts for most of the gap, though the runtime's estimate (an upper bound, see go_gc) and
/// rusage are not the same measure.
const GC_SHARE: f64 = 0.5;

/// The system time from the release on (steady, join, exit) within this share of its repeats'
/// median: the same work, so an outlier of the join and exit alone moved across the release mark.
const SAME_WORK: f64 = 0.15;

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

/// A goroutines run's GC CPU and user time beside its repeats' medians.
#[derive(Clone, Debug, PartialEq)]
pub struct GcBeside {
    pub cpu_s: f64,
    pub median_cpu_s: f64,
    pub cycles: u64,
    pub median_cycles: f64,
    pub user_s: f64,
    pub median_user_s: f64,
    /// Where the run's cycles fell ("spawn 2 cycles 0.40 s, join 1 cycle 0.22 s").
    pub where_: String,
}

impl GcBeside {
    /// The rule: the GC's CPU differs from its repeats' median in the same direction as the user
    /// time does, and by at least GC_SHARE of the user-time difference. A GC difference too
    /// small, or of the other sign, names nothing.
    pub fn accounts(&self) -> bool {
        let user = self.user_s - self.median_user_s;
        let gc = self.cpu_s - self.median_cpu_s;
        user != 0.0 && gc * user > 0.0 && gc.abs() >= GC_SHARE * user.abs()
    }

    fn figures(&self) -> String {
        format!(
            "{:.2} s of CPU against a median of {:.2} s over its repeats ({} against {:.0}{})",
            self.cpu_s,
            self.median_cpu_s,
            cycles(self.cycles),
            self.median_cycles,
            if self.where_.is_empty() {
                String::new()
            } else {
                format!("; this run's: {}", self.where_)
            }
        )
    }

    /// The cause, when `accounts`.
    pub fn cause(&self) -> String {
        let more = |d: f64| if d >= 0.0 { "more" } else { "less" };
        let (user, gc) = (
            self.user_s - self.median_user_s,
            self.cpu_s - self.median_cpu_s,
        );
        format!(
            "the Go GC took {}: {:.2} s {}, for a user time {:.2} s {} than its repeats' median (runtime/metrics' estimate; the GC marks every live goroutine's stack each cycle, so its cycles' number and timing move the user time)",
            self.figures(),
            gc.abs(),
            more(gc),
            user.abs(),
            more(user)
        )
    }

    /// Said when the GC does not account for the outlier.
    pub fn not_the_cause(&self) -> String {
        format!(
            "nor the Go GC: it took {}, not half the user time's gap of {:.2} s in the same direction",
            self.figures(),
            self.user_s - self.median_user_s
        )
    }
}

/// A goroutines run's GC beside its repeats'; None where the run or all its repeats lack the
/// figure (other runtimes, runs recorded before the workload reported it).
pub fn go_gc_beside(run: &Untraced, others: &[Untraced]) -> Option<GcBeside> {
    let s = run.summary;
    let mine = s.go_gc.as_ref()?;
    let theirs: Vec<(&Summary, &crate::runtimes::go_gc::GoGc)> = others
        .iter()
        .filter_map(|o| Some((o.summary, o.summary.go_gc.as_ref()?)))
        .collect();
    Some(GcBeside {
        cpu_s: mine.cpu_s,
        median_cpu_s: median(theirs.iter().map(|(_, g)| g.cpu_s))?,
        cycles: mine.cycles,
        median_cycles: median(theirs.iter().map(|(_, g)| g.cycles as f64))?,
        user_s: s.user_s,
        // Over the same repeats as the GC's: those that report it.
        median_user_s: median(theirs.iter().map(|(o, _)| o.user_s))?,
        where_: mine.where_cycles_fell(),
    })
}

/// Which of a run's figures is the outlier, as the causes take it: the GC names only user time,
/// a shift across the release mark only the system time after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    UserTime,
    SysAfterRelease,
    Other,
}

/// A phase's system time, ms (None where the run has no such phase or no time for it).
fn phase_sys_ms(s: &Summary, name: &str) -> Option<f64> {
    s.phases.iter().find(|p| p.name == name)?.sys_ms
}

/// The system time of `names` together, ms; None unless every one is there.
fn phases_sys_ms(s: &Summary, names: &[&str]) -> Option<f64> {
    names.iter().map(|n| phase_sys_ms(s, n)).sum()
}

/// A run's join-and-exit system time an outlier while steady + join + exit is not: the time moved
/// between the steady phase and those after it, across the mark the workload writes at the
/// release (a thread's exit work counted on either side of it), not more work. Its words, or None.
fn shifted_across_release(s: &Summary, others: &[Untraced]) -> Option<String> {
    const AFTER: [&str; 3] = ["steady", "join", "exit"];
    let mine = phases_sys_ms(s, &AFTER)?;
    let theirs = median(
        others
            .iter()
            .filter_map(|o| phases_sys_ms(o.summary, &AFTER)),
    )?;
    let steady = phase_sys_ms(s, "steady")?;
    let their_steady = median(
        others
            .iter()
            .filter_map(|o| phase_sys_ms(o.summary, "steady")),
    )?;
    let end = phases_sys_ms(s, &["join", "exit"])?;
    let their_end = median(
        others
            .iter()
            .filter_map(|o| phases_sys_ms(o.summary, &["join", "exit"])),
    )?;
    // The same work, and the join and exit's difference made up by the steady phase's.
    let same_work = theirs > 0.0 && (mine / theirs - 1.0).abs() <= SAME_WORK;
    let made_up = (end - their_end) * (steady - their_steady) < 0.0;
    (same_work && made_up).then(|| {
        format!(
            "the system time moved across the release mark: steady {steady:.0} ms against a median of {their_steady:.0}, join and exit {end:.0} ms against {their_end:.0}, while steady, join and exit together took {mine:.0} ms, {:.2}× their median of {theirs:.0} — where the mark fell among the threads' exit work, not more work",
            mine / theirs
        )
    })
}

/// What the run met that its repeats did not, most telling first; empty when nothing did.
pub fn causes(run: &Untraced, others: &[Untraced], figure: Figure) -> Vec<String> {
    let s = run.summary;
    let mut said = Vec::new();
    if figure == Figure::UserTime {
        if let Some(gc) = go_gc_beside(run, others).filter(GcBeside::accounts) {
            said.push(gc.cause());
        }
    }
    if figure == Figure::SysAfterRelease {
        said.extend(shifted_across_release(s, others));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::phases::PhaseCost;
    use crate::runtimes::go_gc::{GcSpan, GoGc};

    /// A goroutines run: its user time and, when given, the GC's cycles and CPU.
    fn goroutines(user_s: f64, gc: Option<(u64, f64)>) -> Summary {
        Summary {
            label: "goroutines hold --n 1000000".into(),
            ok: true,
            user_s,
            go_gc: gc.map(|(cycles, cpu_s)| GoGc {
                cycles,
                cpu_s,
                per_phase: vec![GcSpan {
                    name: "spawn".into(),
                    cycles,
                    cpu_s,
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn named(run: &Summary, others: &[Summary], figure: Figure) -> Vec<String> {
        let bare = |s| Untraced {
            summary: s,
            handed_back: None,
        };
        let theirs: Vec<Untraced> = others.iter().map(bare).collect();
        causes(&bare(run), &theirs, figure)
    }

    /// Repeats at 4.0 s of user time, the GC 1.35 s of it over 4 cycles.
    fn repeats() -> Vec<Summary> {
        vec![
            goroutines(3.9, Some((4, 1.30))),
            goroutines(4.0, Some((4, 1.35))),
            goroutines(4.1, Some((4, 1.40))),
        ]
    }

    /// A threads run whose steady, join and exit phases took these ms of system time.
    fn threads(steady: f64, join: f64, exit: f64) -> Summary {
        let phase = |name: &str, sys: f64| PhaseCost {
            name: name.into(),
            wall_ms: 0.0,
            user_ms: Some(0.0),
            sys_ms: Some(sys),
        };
        Summary {
            label: "threads hold --n 100000".into(),
            ok: true,
            phases: vec![
                phase("spawn", 12_000.0),
                phase("steady", steady),
                phase("join", join),
                phase("exit", exit),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_join_and_exit_outlier_made_up_by_the_steady_phase_moved_across_the_release_mark() {
        // Repeats: steady ~1,200 ms, join + exit ~1,550 ms, together ~2,750.
        let repeats = vec![
            threads(1_200.0, 700.0, 850.0),
            threads(960.0, 900.0, 880.0),
            threads(1_500.0, 500.0, 800.0),
        ];
        // 081907Z's shape: steady 160 ms, join + exit 2,600 ms, together 2,760.
        let shifted = threads(160.0, 1_000.0, 1_600.0);
        let said = named(&shifted, &repeats, Figure::SysAfterRelease);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("the system time moved across the release mark: steady 160 ms against a median of 1200, join and exit 2600 ms against 1550"), "{}", said[0]);
        // Not for another figure.
        assert!(named(&shifted, &repeats, Figure::Other).is_empty());
        // More work after the release (together 1.4× the median): not a shift.
        let more = threads(1_200.0, 1_500.0, 1_200.0);
        assert!(named(&more, &repeats, Figure::SysAfterRelease).is_empty());
        // Join and exit high and steady high too: nothing was made up.
        let both = threads(1_300.0, 800.0, 900.0);
        assert!(named(&both, &repeats, Figure::SysAfterRelease).is_empty());
        // A run without the steady phase: nothing to say.
        let mut no_steady = shifted.clone();
        no_steady.phases.retain(|p| p.name != "steady");
        assert!(named(&no_steady, &repeats, Figure::SysAfterRelease).is_empty());
    }

    #[test]
    fn the_gc_names_a_user_time_outlier_it_accounts_for_either_way() {
        // 1.0 s less user time, the GC 0.73 s less: it accounts for it.
        let less = goroutines(3.0, Some((3, 0.62)));
        let said = named(&less, &repeats(), Figure::UserTime);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("the Go GC took 0.62 s of CPU against a median of 1.35 s over its repeats (3 cycles against 4; this run's: spawn 3 cycles 0.62 s): 0.73 s less, for a user time 1.00 s less"),
            "{}",
            said[0]
        );
        // 1.0 s more, the GC 0.55 s more (over half): named, as more.
        let more = goroutines(5.0, Some((5, 1.90)));
        let said = named(&more, &repeats(), Figure::UserTime);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains(": 0.55 s more, for a user time 1.00 s more"));
    }

    #[test]
    fn a_gc_difference_too_small_or_of_the_other_sign_names_nothing() {
        // 1.0 s less user time, the GC only 0.45 s less: under half.
        let small = goroutines(3.0, Some((4, 0.90)));
        assert!(named(&small, &repeats(), Figure::UserTime).is_empty());
        // Exactly half names it: the rule's edge.
        let half = goroutines(3.0, Some((4, 0.85)));
        assert_eq!(named(&half, &repeats(), Figure::UserTime).len(), 1);
        // 1.0 s more user time while the GC took 0.6 s less: the other sign.
        let other_sign = goroutines(5.0, Some((3, 0.75)));
        assert!(named(&other_sign, &repeats(), Figure::UserTime).is_empty());
        let beside = go_gc_beside(
            &Untraced {
                summary: &other_sign,
                handed_back: None,
            },
            &repeats()
                .iter()
                .map(|s| Untraced {
                    summary: s,
                    handed_back: None,
                })
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(!beside.accounts());
        assert!(beside
            .not_the_cause()
            .starts_with("nor the Go GC: it took 0.75 s of CPU against a median of 1.35 s"));
    }

    #[test]
    fn the_gc_names_only_user_time_and_nothing_without_its_figure() {
        let less = goroutines(3.0, Some((3, 0.62)));
        // Another figure of the same run (system time, wall time): the GC's CPU is user time.
        assert!(named(&less, &repeats(), Figure::Other).is_empty());
        // Old runs, other runtimes: no figure on the run, or on none of its repeats.
        let old = goroutines(3.0, None);
        assert!(named(&old, &repeats(), Figure::UserTime).is_empty());
        let old_repeats: Vec<Summary> = [3.9, 4.0, 4.1]
            .iter()
            .map(|&u| goroutines(u, None))
            .collect();
        assert!(named(&less, &old_repeats, Figure::UserTime).is_empty());
    }
}
