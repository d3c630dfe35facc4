//! Which runs an experiment's time figures come from. The eBPF collector's programs run in the
//! traced tasks' own context (on their system calls, faults and scheduler events) and add 7–13 %
//! to a traced thread's CPU time: a time figure must not carry the observer. So timing and
//! counting come from separate runs, as `perf stat` and `perf record` are separate: where an
//! experiment (machine, runtime, workload, N) has runs without the probes (`run --no-probes`),
//! every time figure is theirs alone; memory is measured the same way with or without the probes
//! and comes from every measured run; counts, waits and cross-checks exist only in the traced
//! runs. With traced runs only (every `compare` sweep, every set recorded before trace.sh timed
//! untraced runs) the times are theirs, the probes' cost included, and the reports say so.
//!
//! The rule is here once; cells, fits, repeats and headlines each apply it to their own group.

use serde::{Deserialize, Serialize};

/// The runs an experiment's times are medians of.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeRuns {
    /// Runs without the probes: the traced runs' times are left out.
    Untraced,
    /// Traced runs, the probes' cost included: the experiment has no other.
    Traced,
}

/// Where an experiment's time figures come from, with its measured runs of each kind.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimesFrom {
    /// Which runs every time figure is of (wall, user, system, spawn time, per-phase system
    /// time); memory is of every measured run, counts and waits of the traced runs.
    pub runs: TimeRuns,
    /// Measured runs without the probes.
    pub untraced_runs: usize,
    /// Measured runs with the probes attached: where counts, waits and cross-checks come from.
    pub traced_runs: usize,
}

impl TimesFrom {
    /// The experiment of these runs (whether each was traced); None without runs.
    pub fn of(traced: impl IntoIterator<Item = bool>) -> Option<TimesFrom> {
        let (mut untraced_runs, mut traced_runs) = (0, 0);
        for t in traced {
            if t {
                traced_runs += 1;
            } else {
                untraced_runs += 1;
            }
        }
        (untraced_runs + traced_runs > 0).then_some(TimesFrom {
            runs: if untraced_runs > 0 {
                TimeRuns::Untraced
            } else {
                TimeRuns::Traced
            },
            untraced_runs,
            traced_runs,
        })
    }

    /// Whether a run's times count in this experiment's time figures.
    pub fn counts(&self, traced: bool) -> bool {
        !traced || self.runs == TimeRuns::Traced
    }

    /// Traced runs whose times are left out (their counts are kept).
    pub fn traced_left_out(&self) -> usize {
        match self.runs {
            TimeRuns::Untraced => self.traced_runs,
            TimeRuns::Traced => 0,
        }
    }
}

/// One experiment's measured runs whose times count, and where they come from (None: no runs).
pub fn timed<'a, T>(
    runs: &[&'a T],
    traced: impl Fn(&T) -> bool,
) -> (Vec<&'a T>, Option<TimesFrom>) {
    let from = TimesFrom::of(runs.iter().map(|r| traced(r)));
    let kept = runs
        .iter()
        .copied()
        .filter(|r| from.is_some_and(|f| f.counts(traced(r))))
        .collect();
    (kept, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untraced_runs_take_the_times_where_there_are_any() {
        let runs = [true, false, false, false];
        let refs: Vec<&bool> = runs.iter().collect();
        let (kept, from) = timed(&refs, |t| *t);
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(|t| !**t));
        let from = from.unwrap();
        assert_eq!(
            from,
            TimesFrom {
                runs: TimeRuns::Untraced,
                untraced_runs: 3,
                traced_runs: 1
            }
        );
        assert_eq!(from.traced_left_out(), 1);
        // Traced only: every run counts, probes and all.
        let only = [true, true];
        let refs: Vec<&bool> = only.iter().collect();
        let (kept, from) = timed(&refs, |t| *t);
        assert_eq!(kept.len(), 2);
        assert_eq!(from.unwrap().runs, TimeRuns::Traced);
        assert_eq!(from.unwrap().traced_left_out(), 0);
        assert!(TimesFrom::of([]).is_none());
    }
}
