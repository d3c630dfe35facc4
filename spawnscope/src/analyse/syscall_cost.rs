//! `spawnscope syscall-cost`'s figures from its rounds (measure/syscall_cost.rs): the median ns a
//! getppid() call in each state, what the attached syscall pair adds to every syscall, and what
//! the kernel's run-time statistics add to each program run.

use serde::Serialize;

use crate::analyse::regression::spread;
use crate::record::syscall_cost::{Measured, State};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figures {
    /// Median ns a call over each state's rounds.
    pub untraced_ns: f64,
    pub traced_ns: f64,
    pub statistics_on_ns: f64,
    /// traced − untraced: what the attached pair costs every syscall its programs filter out
    /// (the tracing slow path, two tracepoint dispatches, two programs' first test).
    pub pair_ns_per_syscall: f64,
    /// (statistics on − traced) / 2: what the statistics add to each of the two program runs.
    pub statistics_ns_per_run: f64,
    /// Each of the pair's programs' ns per run as the statistics timed it (their own clock read
    /// in each).
    pub timed: Vec<ProgramRate>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProgramRate {
    pub program: String,
    pub ns_per_run: f64,
}

/// None unless every state was timed.
pub fn figures(m: &Measured) -> Option<Figures> {
    let median = |state: State| {
        let per_call: Vec<f64> = m
            .rounds
            .iter()
            .filter(|r| r.state == state && r.calls > 0)
            .map(|r| r.ns as f64 / r.calls as f64)
            .collect();
        spread(&per_call).map(|s| s.median)
    };
    let untraced = median(State::Untraced)?;
    let traced = median(State::Traced)?;
    let on = median(State::StatisticsOn)?;
    Some(Figures {
        untraced_ns: untraced,
        traced_ns: traced,
        statistics_on_ns: on,
        pair_ns_per_syscall: traced - untraced,
        statistics_ns_per_run: (on - traced) / 2.0,
        timed: m
            .programs
            .iter()
            .filter(|p| p.timed_runs > 0)
            .map(|p| ProgramRate {
                program: p.program.clone(),
                ns_per_run: p.timed_ns as f64 / p.timed_runs as f64,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::syscall_cost::{ProgramTimed, Round};

    fn round(state: State, ns: u64) -> Round {
        Round {
            state,
            calls: 1000,
            ns,
        }
    }

    #[test]
    fn each_state_is_its_median_and_the_differences_follow() {
        let m = Measured {
            kernel: "6.18".into(),
            cpus: 2,
            rounds: vec![
                round(State::Untraced, 250_000),
                round(State::Untraced, 900_000), // an interrupted round: the median ignores it
                round(State::Untraced, 240_000),
                round(State::Traced, 470_000),
                round(State::Traced, 480_000),
                round(State::StatisticsOn, 670_000),
            ],
            programs: vec![ProgramTimed {
                program: "btf_sys_enter".into(),
                tracepoint: "raw_syscalls:sys_enter".into(),
                runs: 9_000,
                timed_runs: 2_000,
                timed_ns: 140_000,
            }],
        };
        let f = figures(&m).unwrap();
        assert_eq!(f.untraced_ns, 250.0);
        assert_eq!(f.traced_ns, 475.0);
        assert_eq!(f.statistics_on_ns, 670.0);
        assert_eq!(f.pair_ns_per_syscall, 225.0);
        assert_eq!(f.statistics_ns_per_run, 97.5);
        assert_eq!(
            f.timed,
            vec![ProgramRate {
                program: "btf_sys_enter".into(),
                ns_per_run: 70.0
            }]
        );
    }

    #[test]
    fn a_state_never_timed_gives_no_figures() {
        let m = Measured {
            kernel: String::new(),
            cpus: 1,
            rounds: vec![round(State::Untraced, 1), round(State::Traced, 2)],
            programs: vec![],
        };
        assert_eq!(figures(&m), None);
    }
}
