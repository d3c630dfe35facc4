//! `spawnscope probe-cost`'s figures from its rounds (record/probe_cost.rs): for each hook, what
//! an event costs in each state — from the loop's time (the state's median round against the
//! untraced median, per event the kernel counted) and from the kernel's run-time statistics (the
//! program's own ns per run) — and the lean program judged against the floor of its hook by the
//! statistics' figure: the program's own work, what a cut changes, to a few ns on a busy machine.
//! The loop's figure (what the workload paid, dispatch included) is beside it; for the loops whose
//! iteration is microseconds (a thread's start, a contended read) it is buried in their noise.
//! The cold rounds (the caches emptied before each event) give the floor's and the lean program's
//! statistics' ns a run where nothing of them is in cache.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::comparisons::regression::spread;
use record::probe_cost::{Measured, Round, State};

/// A lean program may cost up to this many times its hook's floor (issue 40: at most two
/// programs excepted, each with its reason on the probe cost page).
pub const WITHIN_FLOOR_TIMES: f64 = 2.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Figures {
    pub hooks: Vec<HookFigures>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HookFigures {
    /// `category:name`.
    pub hook: String,
    pub loop_does: String,
    /// Median ns an iteration of the loop, untraced.
    pub untraced_ns_per_iteration: f64,
    /// Each attached state that was timed.
    pub states: Vec<StateFigures>,
    /// The lean program against the floor, when both were timed.
    pub judged: Option<Judged>,
    /// The floor and the lean program with the caches emptied before each event, when both were
    /// timed (absent in sets from before the cold rounds).
    #[serde(default)]
    pub cold: Option<Cold>,
}

/// The statistics' ns a run with the loop cold: the program's own work where what it reads (its
/// maps, the task's structures, their TLB entries) is out of the CPU's own caches; and coldest,
/// out of every cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cold {
    pub ours_ns: f64,
    pub floor_ns: f64,
    pub over_floor_ns: f64,
    /// The lean program's runs an iteration in the cold rounds (median).
    pub events_per_iteration: f64,
    /// The cold figure over the warm one (the lean program's): what the CPU's caches were worth.
    pub times_warm: f64,
    /// The lean program coldest (every cache emptied), when timed.
    pub coldest_ns: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateFigures {
    pub state: State,
    /// The hook's program's runs an iteration (median over the rounds with the statistics on):
    /// how often the loop fired the hook, other tasks' events on the machine meanwhile included.
    pub events_per_iteration: f64,
    /// (median ns an iteration with the statistics off − untraced) / events an iteration: what
    /// the loop paid an event — the dispatch, the program, what it does to the caches.
    pub loop_ns_per_event: f64,
    /// The program's ns a run as the statistics counted them (all its rounds' ns / runs): the
    /// program alone, from the statistics' first clock read to their second.
    pub statistics_ns_per_run: f64,
    /// (median ns an iteration with the statistics on − off) / events: what the statistics add.
    pub statistics_add_ns_per_run: f64,
    /// Runs the kernel skipped over all rounds (the program busy on that CPU already).
    pub recursion_misses: u64,
}

/// The lean program against the floor of its hook: the statistics' ns a run (judged), and the
/// loop's ns an event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Judged {
    pub ours_ns: f64,
    pub floor_ns: f64,
    pub over_floor_ns: f64,
    pub times_floor: f64,
    pub ours_loop_ns: f64,
    pub floor_loop_ns: f64,
    pub loop_times_floor: f64,
    /// `times_floor` ≤ WITHIN_FLOOR_TIMES.
    pub within: bool,
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.collect();
    spread(&v).map(|s| s.median)
}

fn per_iteration(r: &Round) -> f64 {
    r.ns as f64 / r.iterations.max(1) as f64
}

/// The figures of every hook with an untraced round; a state is left out of a hook until it has a
/// round with the statistics on and one without.
pub fn figures(m: &Measured) -> Figures {
    let mut hooks = Vec::new();
    for l in &m.loops {
        let of_hook: Vec<&Round> = m.rounds.iter().filter(|r| r.hook == l.hook).collect();
        let rounds = |state: State, statistics: bool| {
            of_hook
                .iter()
                .filter(move |r| r.state == state && r.statistics == statistics)
                .copied()
        };
        let Some(untraced) = median(rounds(State::Untraced, false).map(per_iteration)) else {
            continue;
        };
        let mut states = Vec::new();
        for state in [
            State::Floor,
            State::Filtered,
            State::Lean,
            State::Full,
            State::Trace,
        ] {
            let (Some(off), Some(on)) = (
                median(rounds(state, false).map(per_iteration)),
                median(rounds(state, true).map(per_iteration)),
            ) else {
                continue;
            };
            let events = median(rounds(state, true).map(|r| {
                r.programs.iter().map(|p| p.runs).sum::<u64>() as f64 / r.iterations.max(1) as f64
            }))
            .unwrap_or(0.0);
            let (runs, ns, misses) = rounds(state, true)
                .flat_map(|r| &r.programs)
                .fold((0u64, 0u64, 0u64), |(r, n, m), p| {
                    (r + p.runs, n + p.ns, m + p.recursion_misses)
                });
            let per_event = |ns: f64| {
                if events > 0.0 {
                    ns / events
                } else {
                    f64::NAN
                }
            };
            states.push(StateFigures {
                state,
                events_per_iteration: events,
                loop_ns_per_event: per_event(off - untraced),
                statistics_ns_per_run: if runs > 0 {
                    ns as f64 / runs as f64
                } else {
                    f64::NAN
                },
                statistics_add_ns_per_run: per_event(on - off),
                recursion_misses: misses,
            });
        }
        let of = |state: State| states.iter().find(|s| s.state == state);
        let judged = match (of(State::Lean), of(State::Floor)) {
            (Some(ours), Some(floor)) => {
                let times = ours.statistics_ns_per_run / floor.statistics_ns_per_run;
                Some(Judged {
                    ours_ns: ours.statistics_ns_per_run,
                    floor_ns: floor.statistics_ns_per_run,
                    over_floor_ns: ours.statistics_ns_per_run - floor.statistics_ns_per_run,
                    times_floor: times,
                    ours_loop_ns: ours.loop_ns_per_event,
                    floor_loop_ns: floor.loop_ns_per_event,
                    loop_times_floor: ours.loop_ns_per_event / floor.loop_ns_per_event,
                    within: times <= WITHIN_FLOOR_TIMES,
                })
            }
            _ => None,
        };
        let cold_ns = |state: State| {
            let (runs, ns) = rounds(state, true)
                .flat_map(|r| &r.programs)
                .fold((0u64, 0u64), |(r, n), p| (r + p.runs, n + p.ns));
            (runs > 0).then(|| ns as f64 / runs as f64)
        };
        let cold = match (cold_ns(State::LeanCold), cold_ns(State::FloorCold)) {
            (Some(ours), Some(floor)) => Some(Cold {
                ours_ns: ours,
                floor_ns: floor,
                over_floor_ns: ours - floor,
                events_per_iteration: median(rounds(State::LeanCold, true).map(|r| {
                    r.programs.iter().map(|p| p.runs).sum::<u64>() as f64
                        / r.iterations.max(1) as f64
                }))
                .unwrap_or(0.0),
                times_warm: of(State::Lean).map_or(f64::NAN, |w| ours / w.statistics_ns_per_run),
                coldest_ns: cold_ns(State::LeanColdest),
            }),
            _ => None,
        };
        hooks.push(HookFigures {
            hook: l.hook.clone(),
            loop_does: l.loop_does.clone(),
            untraced_ns_per_iteration: untraced,
            states,
            judged,
            cold,
        });
    }
    Figures { hooks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::probe_cost::{HookLoop, ProgramRound};

    fn round(state: State, statistics: bool, ns: u64, runs: u64, prog_ns: u64) -> Round {
        Round {
            hook: "sched:sched_switch".into(),
            cycle: 0,
            state,
            statistics,
            iterations: 1000,
            ns,
            programs: if statistics {
                vec![ProgramRound {
                    program: "p".into(),
                    runs,
                    ns: prog_ns,
                    recursion_misses: 1,
                }]
            } else {
                vec![]
            },
        }
    }

    fn measured(rounds: Vec<Round>) -> Measured {
        Measured {
            kernel: "6.18".into(),
            cpus: 2,
            load_before: 0.5,
            load_after: 0.5,
            cycles: 2,
            loops: vec![HookLoop {
                hook: "sched:sched_switch".into(),
                loop_does: "pingpong".into(),
                iterations: 1000,
                cold_iterations: 10,
                coldest_iterations: 1,
                cold_does: "cold".into(),
            }],
            rounds,
            left_out: vec![],
        }
    }

    #[test]
    fn each_state_is_its_medians_against_the_untraced_per_counted_event() {
        let m = measured(vec![
            round(State::Untraced, false, 1_000_000, 0, 0),
            round(State::Untraced, false, 9_000_000, 0, 0), // interrupted: the median leaves it
            round(State::Untraced, false, 1_000_000, 0, 0),
            // Two events an iteration: 2,000 runs a round.
            round(State::Floor, false, 1_100_000, 0, 0),
            round(State::Floor, true, 1_140_000, 2_000, 20_000),
            round(State::Lean, false, 1_500_000, 0, 0),
            round(State::Lean, true, 1_540_000, 2_000, 200_000),
        ]);
        let f = figures(&m);
        let h = &f.hooks[0];
        assert_eq!(h.untraced_ns_per_iteration, 1000.0);
        let floor = &h.states[0];
        assert_eq!(floor.state, State::Floor);
        assert_eq!(floor.events_per_iteration, 2.0);
        assert_eq!(floor.loop_ns_per_event, 50.0);
        assert_eq!(floor.statistics_ns_per_run, 10.0);
        assert_eq!(floor.statistics_add_ns_per_run, 20.0);
        assert_eq!(floor.recursion_misses, 1);
        let j = h.judged.as_ref().unwrap();
        assert_eq!((j.ours_ns, j.floor_ns), (100.0, 10.0));
        assert_eq!((j.over_floor_ns, j.times_floor), (90.0, 10.0));
        assert_eq!((j.ours_loop_ns, j.floor_loop_ns), (250.0, 50.0));
        assert_eq!(j.loop_times_floor, 5.0);
        assert!(!j.within);
    }

    #[test]
    fn the_cold_figure_is_the_cold_rounds_statistics_against_the_cold_floor_and_the_warm_program() {
        let cold = |state: State, runs: u64, prog_ns: u64| Round {
            iterations: 10,
            ..round(state, true, 50_000_000, runs, prog_ns)
        };
        let m = measured(vec![
            round(State::Untraced, false, 1_000_000, 0, 0),
            round(State::Floor, false, 1_100_000, 0, 0),
            round(State::Floor, true, 1_140_000, 2_000, 20_000),
            round(State::Lean, false, 1_500_000, 0, 0),
            round(State::Lean, true, 1_540_000, 2_000, 200_000),
            // Two cold rounds of ours: 40 runs at 400 ns and 20 at 700 ns, 500 ns a run in all
            // (not the mean of the rounds' figures); the floor's 20 runs at 150.
            cold(State::LeanCold, 40, 16_000),
            cold(State::LeanCold, 20, 14_000),
            cold(State::FloorCold, 20, 3_000),
            cold(State::LeanColdest, 10, 20_000),
        ]);
        let h = &figures(&m).hooks[0];
        let c = h.cold.as_ref().expect("both cold states timed");
        assert_eq!(
            (c.ours_ns, c.floor_ns, c.over_floor_ns),
            (500.0, 150.0, 350.0)
        );
        assert_eq!(
            c.events_per_iteration, 3.0,
            "median of 4 and 2 an iteration"
        );
        assert_eq!(c.times_warm, 5.0, "500 against the warm 100");
        assert_eq!(c.coldest_ns, Some(2_000.0));
        assert_eq!(h.states.len(), 2, "the cold states are not warm states");
    }

    #[test]
    fn a_state_without_both_kinds_of_round_is_left_out_and_nothing_is_judged() {
        let m = measured(vec![
            round(State::Untraced, false, 1_000_000, 0, 0),
            round(State::Floor, false, 1_100_000, 0, 0),
            round(State::Lean, false, 1_500_000, 0, 0),
            round(State::Lean, true, 1_540_000, 2_000, 200_000),
        ]);
        let h = &figures(&m).hooks[0];
        assert_eq!(h.states.len(), 1);
        assert_eq!(h.judged, None);
        assert_eq!(h.cold, None, "no cold round: no cold figure");
        let none = figures(&measured(vec![round(State::Lean, false, 1, 0, 0)]));
        assert!(none.hooks.is_empty(), "no untraced round: no figures");
    }
}
