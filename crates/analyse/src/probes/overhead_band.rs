//! The overhead benchmark's check of the cost model (issue 40.3): the CPU difference traced −
//! untraced that `probe-cost`'s own figures predict for a traced run, as a band, set against the
//! difference the benchmark measured. Nothing here is fitted on the benchmark: the ns per event
//! are probe-cost's, measured in loops before the pairs; the events are each traced run's own.
//!
//! The band's ends, per program on a hook probe-cost timed, × the run's own events (its runs less
//! those filtered out):
//! - **low**: ours − floor, the statistics' ns a run of the lean program less those of the floor
//!   on the same hook. What the program does beyond the least any program there does; the
//!   statistics' own clock read, the increment and the part of the dispatch inside their window
//!   cancel out. Everything a program costs is at least this.
//! - **high**: the largest of what probe-cost measured the lean program at: its warm statistics'
//!   figure (one of their clock reads in it, which the measured run does not pay); where the
//!   hook's loop resolves an event, the loop's ns an event (what the workload paid an event with
//!   the statistics off, the dispatch and, for the raw_syscalls pair, the syscall-tracing slow
//!   path included); and its **coldest** statistics' figure, the loop emptying every cache before
//!   each event and its maps sized for 100,000 threads. A run's events find some of what a program
//!   touches in cache and some not (100,000 threads' slots and structures, a million goroutines'
//!   stacks streaming through between two events): the warm figures are what a program costs at
//!   best, the coldest what it costs when nothing of it is in any cache. A loop resolves an event when
//!   its untraced iteration is at most `LOOP_RESOLVES_NS` (getppid's, ~200 ns): a thread's start
//!   or a contended read takes microseconds, where an event's 100 ns is inside the loop's noise
//!   (negative figures there). Each hook of the pair is timed with only its own program attached,
//!   so each loop figure holds the whole slow path: their sum counts it twice, which keeps the high
//!   end an upper bound.
//!
//! Between the ends, **the estimate**: the run's own events at the lean program's cold figure (the
//! CPU's own caches emptied before each event, the shared one left: what a big run's events meet,
//! microseconds of other tasks' work apart), or its warm figure where no cold one was timed. Not a
//! bound but the model's prediction, checked as one: whether it lies inside the measured
//! difference's 95 % interval (`estimate_in_interval`). The ends bound it loosely (a program
//! coldest costs 7–20× its warm figure on M1).
//!
//! The host's share (the syscalls of other processes the pair filtered out × the pair's floor) is
//! said beside the band and not added to it: those syscalls' CPU time is their processes', outside
//! the run's cgroup, whose CPU the benchmark measures. A program on a hook probe-cost does not
//! time is listed with its events, unpriced.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::probes::probe_cost::{Figures, HookFigures};
use crate::time::paired::MeanInterval;
use record::probe_cost::State;

/// A hook's loop resolves an event's cost when its untraced iteration takes at most this.
pub const LOOP_RESOLVES_NS: f64 = 1_000.0;

/// One program of one pair's traced run, as the benchmark's programs.csv holds it.
#[derive(Clone, Debug, Deserialize)]
pub struct ProgramRow {
    pub workload: String,
    pub pair: u32,
    pub program: String,
    pub tracepoint: String,
    pub events: u64,
    /// Of `events`, another process's (absent in sets from before the pair counted them: 0).
    #[serde(default)]
    pub filtered_out: u64,
}

/// Which of probe-cost's figures a hook's high end is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HighFrom {
    /// The lean program's warm statistics' ns a run.
    Statistics,
    /// The loop's ns an event (it resolves one, and it is the largest).
    Loop,
    /// The lean program's coldest statistics' ns a run.
    Coldest,
}

/// What probe-cost prices an event of one hook at: the band's two ends, ns.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Price {
    pub hook: String,
    pub low_ns: f64,
    pub high_ns: f64,
    pub high_from: HighFrom,
    /// The estimate's price: the lean program cold (the CPU's own caches emptied), else warm.
    pub estimate_ns: f64,
    /// The floor's statistics ns a run: the host's share per filtered-out event.
    pub floor_ns: f64,
}

/// The check, over the benchmark's used pairs.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Band {
    pub prices: Vec<Price>,
    /// Means over the used pairs' traced runs, s.
    pub low_s: f64,
    pub high_s: f64,
    /// The run's own events at the estimate's prices (not a bound), s.
    pub estimate_s: f64,
    /// Beside the band, not in it: paid by other processes, outside the run's cgroup.
    pub host_share_s: f64,
    /// Programs on hooks probe-cost did not time, with their mean own events: unpriced.
    pub unpriced: Vec<(String, f64)>,
    /// The pairs the means are over.
    pub pairs: usize,
    /// Where the measured CPU difference falls, and in words (with the estimate's check).
    pub verdict: Verdict,
    /// The estimate lies inside the measured difference's 95 % interval (None without one): the
    /// model's point prediction checked, where the ends only bound it.
    pub estimate_in_interval: Option<bool>,
    pub says: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "where")]
pub enum Verdict {
    /// The difference's mean lies within the band.
    Inside,
    /// The mean lies outside, but its 95 % interval meets the band.
    IntervalMeets {
        mean_outside_by_s: f64,
    },
    /// The whole interval (or the mean, without one) lies below the low end / above the high end,
    /// by the distance from the band's nearer end to the interval's nearer end.
    Below {
        by_s: f64,
    },
    Above {
        by_s: f64,
    },
}

impl Verdict {
    /// In words, for the script to print (`Band::says`).
    pub fn words(&self) -> String {
        match self {
            Verdict::Inside => "inside the band".into(),
            Verdict::IntervalMeets { mean_outside_by_s } => format!(
                "the mean {:.3} s outside the band, its 95 % interval meeting it",
                mean_outside_by_s
            ),
            Verdict::Below { by_s } => format!("below the band by {by_s:.3} s"),
            Verdict::Above { by_s } => format!("above the band by {by_s:.3} s"),
        }
    }
}

/// Each hook's price from probe-cost's figures; hooks without both a lean and a floor state are
/// left out.
pub fn prices(figures: &Figures) -> Vec<Price> {
    figures.hooks.iter().filter_map(price).collect()
}

fn price(h: &HookFigures) -> Option<Price> {
    let of = |state: State| h.states.iter().find(|s| s.state == state);
    let (ours, floor) = (of(State::Lean)?, of(State::Floor)?);
    let (stat, floor_ns) = (ours.statistics_ns_per_run, floor.statistics_ns_per_run);
    if !(stat.is_finite() && floor_ns.is_finite()) {
        return None;
    }
    let loop_ns = ours.loop_ns_per_event;
    let loop_resolves = h.untraced_ns_per_iteration <= LOOP_RESOLVES_NS && loop_ns.is_finite();
    let cold_ns = h
        .cold
        .as_ref()
        .map(|c| c.ours_ns)
        .filter(|ns| ns.is_finite());
    let coldest_ns = h
        .cold
        .as_ref()
        .and_then(|c| c.coldest_ns)
        .filter(|ns| ns.is_finite());
    let (high_ns, high_from) = [
        Some((stat, HighFrom::Statistics)),
        loop_resolves.then_some((loop_ns, HighFrom::Loop)),
        coldest_ns.map(|ns| (ns, HighFrom::Coldest)),
    ]
    .into_iter()
    .flatten()
    .fold((stat, HighFrom::Statistics), |best, c| {
        if c.0 > best.0 {
            c
        } else {
            best
        }
    });
    Some(Price {
        hook: h.hook.clone(),
        low_ns: (stat - floor_ns).max(0.0),
        high_ns,
        high_from,
        estimate_ns: cold_ns.unwrap_or(stat),
        floor_ns,
    })
}

/// One pair's traced run's events at each price, ns.
#[derive(Default)]
struct Sums {
    low: f64,
    high: f64,
    estimate: f64,
    host: f64,
}

/// The band for `workload`'s pairs `used` (pair numbers), from `rows` and `prices`, set against
/// the measured CPU difference.
pub fn band(
    prices: &[Price],
    rows: &[ProgramRow],
    workload: &str,
    used: &[u32],
    difference: &MeanInterval,
) -> Band {
    let mut per_pair: BTreeMap<u32, Sums> = used.iter().map(|&p| (p, Sums::default())).collect();
    let mut unpriced: BTreeMap<String, f64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.workload == workload) {
        let Some(sums) = per_pair.get_mut(&r.pair) else {
            continue;
        };
        let own = r.events.saturating_sub(r.filtered_out) as f64;
        match prices.iter().find(|p| p.hook == r.tracepoint) {
            Some(p) => {
                sums.low += own * p.low_ns;
                sums.high += own * p.high_ns;
                sums.estimate += own * p.estimate_ns;
                sums.host += r.filtered_out as f64 * p.floor_ns;
            }
            None if own > 0.0 => *unpriced.entry(r.program.clone()).or_default() += own,
            None => {}
        }
    }
    let n = per_pair.len().max(1) as f64;
    let mean = |f: fn(&Sums) -> f64| per_pair.values().map(f).sum::<f64>() / n / 1e9;
    let (low_s, high_s, host_share_s) = (mean(|s| s.low), mean(|s| s.high), mean(|s| s.host));
    let estimate_s = mean(|s| s.estimate);
    let placed = verdict(low_s, high_s, difference);
    let estimate_in_interval = difference
        .low
        .zip(difference.high)
        .map(|(lo, hi)| (lo..=hi).contains(&estimate_s));
    let says = format!(
        "{}; the estimate {estimate_s:.3} s {}",
        placed.words(),
        match (estimate_in_interval, difference.low.zip(difference.high)) {
            (Some(true), Some((lo, hi))) => {
                format!("inside the measured difference's 95 % interval ({lo:.3} – {hi:.3} s)")
            }
            (Some(false), Some((lo, hi))) =>
                format!(
                "outside the measured difference's 95 % interval ({lo:.3} – {hi:.3} s), by {:.3} s",
                if estimate_s < lo { lo - estimate_s } else { estimate_s - hi }
            ),
            _ => format!("against a measured {:.3} s (no interval)", difference.mean),
        }
    );
    Band {
        prices: prices.to_vec(),
        low_s,
        high_s,
        estimate_s,
        host_share_s,
        unpriced: unpriced.into_iter().map(|(p, e)| (p, e / n)).collect(),
        pairs: per_pair.len(),
        says,
        verdict: placed,
        estimate_in_interval,
    }
}

fn verdict(low: f64, high: f64, d: &MeanInterval) -> Verdict {
    if (low..=high).contains(&d.mean) {
        return Verdict::Inside;
    }
    let (lo, hi) = (d.low.unwrap_or(d.mean), d.high.unwrap_or(d.mean));
    if hi < low {
        Verdict::Below { by_s: low - hi }
    } else if lo > high {
        Verdict::Above { by_s: lo - high }
    } else {
        Verdict::IntervalMeets {
            mean_outside_by_s: if d.mean < low {
                low - d.mean
            } else {
                d.mean - high
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::probe_cost::{Cold, StateFigures};

    fn state(state: State, loop_ns: f64, stat: f64) -> StateFigures {
        StateFigures {
            state,
            events_per_iteration: 1.0,
            loop_ns_per_event: loop_ns,
            statistics_ns_per_run: stat,
            statistics_add_ns_per_run: 30.0,
            recursion_misses: 0,
        }
    }

    fn hook(name: &str, untraced: f64, lean: (f64, f64), floor: (f64, f64)) -> HookFigures {
        HookFigures {
            hook: name.into(),
            loop_does: "a loop".into(),
            untraced_ns_per_iteration: untraced,
            states: vec![
                state(State::Floor, floor.0, floor.1),
                state(State::Lean, lean.0, lean.1),
            ],
            judged: None,
            cold: None,
        }
    }

    fn cold(ours_ns: f64, coldest_ns: f64) -> Option<Cold> {
        Some(Cold {
            ours_ns,
            floor_ns: 100.0,
            over_floor_ns: ours_ns - 100.0,
            events_per_iteration: 1.0,
            times_warm: f64::NAN,
            coldest_ns: Some(coldest_ns),
        })
    }

    fn interval(mean: f64, low: f64, high: f64) -> MeanInterval {
        MeanInterval {
            n: 5,
            mean,
            sd: Some(1.0),
            t: Some(2.776),
            half_width: Some((high - low) / 2.0),
            low: Some(low),
            high: Some(high),
        }
    }

    fn row(pair: u32, program: &str, tracepoint: &str, events: u64, filtered: u64) -> ProgramRow {
        ProgramRow {
            workload: "threads".into(),
            pair,
            program: program.into(),
            tracepoint: tracepoint.into(),
            events,
            filtered_out: filtered,
        }
    }

    #[test]
    fn each_hook_is_priced_ours_less_floor_to_the_largest_of_ours_its_resolving_loop_and_ours_cold()
    {
        let figures = Figures {
            hooks: vec![
                // getppid: a 190 ns iteration resolves an event; its loop (97 ns) is above ours.
                hook("raw_syscalls:sys_enter", 190.0, (97.0, 60.0), (98.0, 51.0)),
                // A 5.8 µs iteration does not: the statistics' figure, whatever the loop says.
                hook("sched:sched_switch", 5_800.0, (252.0, 83.0), (166.0, 56.0)),
                // Ours under its floor: nothing beyond it, not a negative cost.
                hook("sched:sched_wakeup", 6_000.0, (-4.0, 50.0), (-34.0, 57.0)),
                // Coldest above the loop and the warm statistics: the coldest figure; the
                // estimate the cold one.
                HookFigures {
                    cold: cold(150.0, 240.0),
                    ..hook("raw_syscalls:sys_exit", 190.0, (97.0, 60.0), (98.0, 51.0))
                },
                // Coldest below the warm figure (a cold round's noise): the warm one stays.
                HookFigures {
                    cold: cold(75.0, 70.0),
                    ..hook("lock:contention_end", 9_000.0, (300.0, 80.0), (200.0, 50.0))
                },
            ],
        };
        let p = prices(&figures);
        assert_eq!(p[0].low_ns, 9.0);
        assert_eq!((p[0].high_ns, p[0].high_from), (97.0, HighFrom::Loop));
        assert_eq!(p[1].low_ns, 27.0);
        assert_eq!((p[1].high_ns, p[1].high_from), (83.0, HighFrom::Statistics));
        assert_eq!((p[2].low_ns, p[2].high_ns), (0.0, 50.0));
        assert_eq!(p[0].floor_ns, 51.0);
        assert_eq!(
            (p[3].low_ns, p[3].high_ns, p[3].high_from),
            (9.0, 240.0, HighFrom::Coldest)
        );
        assert_eq!(p[3].estimate_ns, 150.0, "the cold figure");
        assert_eq!((p[4].high_ns, p[4].high_from), (80.0, HighFrom::Statistics));
        assert_eq!(
            p[0].estimate_ns, 60.0,
            "no cold figure: the warm statistics'"
        );
    }

    #[test]
    fn the_band_is_the_own_events_at_those_prices_and_the_difference_is_placed_against_it() {
        let prices = vec![
            Price {
                hook: "raw_syscalls:sys_enter".into(),
                low_ns: 10.0,
                high_ns: 100.0,
                high_from: HighFrom::Loop,
                estimate_ns: 40.0,
                floor_ns: 50.0,
            },
            Price {
                hook: "sched:sched_switch".into(),
                low_ns: 30.0,
                high_ns: 80.0,
                high_from: HighFrom::Statistics,
                estimate_ns: 60.0,
                floor_ns: 56.0,
            },
        ];
        let rows = vec![
            // Pair 1: 1 M own syscalls (200,000 filtered out), 1 M switches, an unpriced program.
            row(
                1,
                "btf_sys_enter",
                "raw_syscalls:sys_enter",
                1_200_000,
                200_000,
            ),
            row(1, "btf_sched_switch", "sched:sched_switch", 1_000_000, 0),
            row(1, "tp_exec", "sched:sched_process_exec", 2, 0),
            // Pair 2: three times as many, and pair 3 left out by the outlier rule.
            row(
                2,
                "btf_sys_enter",
                "raw_syscalls:sys_enter",
                3_600_000,
                600_000,
            ),
            row(2, "btf_sched_switch", "sched:sched_switch", 3_000_000, 0),
            row(3, "btf_sched_switch", "sched:sched_switch", 99_000_000, 0),
            row(1, "btf_sys_enter", "raw_syscalls:sys_enter", 9, 0).with_workload("goroutines"),
        ];
        let d = interval(0.25, 0.2, 0.3);
        let b = band(&prices, &rows, "threads", &[1, 2], &d);
        // Pair 1: low 1e6 × 10 + 1e6 × 30 = 40 ms, high 1e6 × 100 + 1e6 × 80 = 180 ms; pair 2
        // three times that: means 80 ms and 360 ms; the host 200,000 × 50 ns, 600,000 × 50 ns.
        assert!((b.low_s - 0.080).abs() < 1e-12, "{b:?}");
        assert!((b.high_s - 0.360).abs() < 1e-12, "{b:?}");
        assert!((b.host_share_s - 0.020).abs() < 1e-12, "{b:?}");
        // The estimate: pair 1 1e6 × 40 + 1e6 × 60 = 100 ms, pair 2 300 ms: mean 200 ms.
        assert!((b.estimate_s - 0.200).abs() < 1e-12, "{b:?}");
        assert_eq!(b.unpriced, vec![("tp_exec".to_string(), 1.0)]);
        assert_eq!(b.pairs, 2);
        assert_eq!(b.verdict, Verdict::Inside);
        // The estimate (0.200 s) inside the measured interval 0.2 – 0.3.
        assert_eq!(b.estimate_in_interval, Some(true));
        assert_eq!(
            b.says,
            "inside the band; the estimate 0.200 s inside the measured difference's 95 % interval (0.200 – 0.300 s)"
        );
        // Above: the interval's low end 0.1 s past the high end.
        let above = band(
            &prices,
            &rows,
            "threads",
            &[1, 2],
            &interval(0.5, 0.46, 0.54),
        );
        assert!(
            matches!(above.verdict, Verdict::Above { by_s } if (by_s - 0.1).abs() < 1e-9),
            "{:?}",
            above.verdict
        );
        assert!(above.says.starts_with("above the band by 0.100 s; the estimate 0.200 s outside the measured difference's 95 % interval (0.460 – 0.540 s), by 0.260 s"), "{}", above.says);
        assert_eq!(above.estimate_in_interval, Some(false));
        // Below, and a mean outside whose interval still meets the band.
        let below = band(
            &prices,
            &rows,
            "threads",
            &[1, 2],
            &interval(0.02, 0.0, 0.05),
        );
        assert!(matches!(below.verdict, Verdict::Below { by_s } if (by_s - 0.03).abs() < 1e-9));
        let meets = band(&prices, &rows, "threads", &[1, 2], &interval(0.4, 0.3, 0.5));
        assert!(
            matches!(meets.verdict, Verdict::IntervalMeets { mean_outside_by_s } if (mean_outside_by_s - 0.04).abs() < 1e-9),
            "{:?}",
            meets.verdict
        );
    }

    impl ProgramRow {
        fn with_workload(mut self, w: &str) -> ProgramRow {
            self.workload = w.into();
            self
        }
    }
}
