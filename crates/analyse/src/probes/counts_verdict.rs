//! The verdict on a run's counts: whether what the eBPF probes counted agrees with the kernel's
//! own accounting. The time verdict (`analyse/time/verdict.rs`) judges times by the machine's noise;
//! this one judges counts by their cross-checks (`spawnscope_collector`'s, summed up in
//! `analyse/probes/counts.rs`), and the two stay apart: a quiet machine does not make a count right, and
//! a probe that missed the workload's threads does not make a time wrong.
//!
//! A failed cross-check is never trustworthy: it means the probes did not see what the kernel saw
//! (tasks they did not follow, events they missed), so every figure they counted for the run —
//! counts, waits, latencies — may be short. The run says so beside its time verdict, in its
//! headline and in its exit code (5, `cli.rs`).

use serde::{Deserialize, Serialize};

use spawnscope_collector::{CrossCheck, Verdict as CheckVerdict};

use crate::probes::counts::ProbeSummary;
use units::count;

/// What the counts verdict found.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counts {
    /// Every cross-check that could be made passed.
    Checked,
    /// A cross-check failed: the probes' counts disagree with the kernel's.
    Wrong,
    /// No cross-check could be made (`why_not_checked` says why).
    NotChecked,
}

/// One cross-check that failed, as the verdict tells it.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedCheck {
    pub check: String,
    /// The kernel's count (rusage, less what it held at exec), or the tasks the run was said to
    /// create.
    pub expected: u64,
    /// What the probes counted, up to the entry of the workload's last getrusage call ...
    pub counted: u64,
    /// ... and up to its return (equal to `counted` when nothing ran meanwhile).
    pub counted_max: u64,
    pub tolerance: u64,
}

/// The verdict on a run's counts.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountsVerdict {
    pub counts: Counts,
    /// The cross-checks that passed, by name.
    pub passed: Vec<String>,
    /// The cross-checks that failed: expected against counted.
    pub failed: Vec<FailedCheck>,
    /// The cross-checks that could not be made (a probe they need is missing, or the target
    /// never exec'd), by name.
    pub not_measured: Vec<String>,
    /// Why no cross-check was made (`not_checked`): the probes left out (`--no-probes`, not root,
    /// not loaded), no rusage to check against, or every check not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not_checked: Option<String>,
}

/// Why there are no probe figures when the run does not say: its collector.json is missing.
const NO_COLLECTOR: &str = "the probes did not run (no collector.json)";

/// Judges a run's counts by its cross-checks. `probes`: the run's probe figures (None: the
/// collector did not run); `left_out`: what the run left out, in words (run.json), where the
/// reason the probes did not run is said ("eBPF probes: left out (--no-probes)").
pub fn judge(probes: Option<&ProbeSummary>, left_out: &[String]) -> CountsVerdict {
    let Some(p) = probes else {
        let why = left_out
            .iter()
            .find(|l| l.starts_with("eBPF probes") && !l.contains("not kept"))
            .cloned()
            .unwrap_or_else(|| NO_COLLECTOR.into());
        return not_checked(why);
    };
    if p.cross_checks.is_empty() {
        return not_checked(
            "no rusage to check the probes' counts against (neither the workload's result event \
             nor wait4 gave one)"
                .into(),
        );
    }
    let named = |v: CheckVerdict| -> Vec<&CrossCheck> {
        p.cross_checks.iter().filter(|c| c.verdict == v).collect()
    };
    let passed: Vec<String> = named(CheckVerdict::Pass)
        .into_iter()
        .map(|c| c.name.clone())
        .collect();
    let failed: Vec<FailedCheck> = named(CheckVerdict::Fail)
        .into_iter()
        .map(|c| FailedCheck {
            check: c.name.clone(),
            expected: c.expected,
            counted: c.observed,
            counted_max: c.observed_max,
            tolerance: c.tolerance,
        })
        .collect();
    let not_measured: Vec<String> = named(CheckVerdict::NotMeasured)
        .into_iter()
        .map(|c| c.name.clone())
        .collect();
    let (counts, why_not_checked) = if !failed.is_empty() {
        (Counts::Wrong, None)
    } else if passed.is_empty() {
        (
            Counts::NotChecked,
            Some(
                "no cross-check could be made: a probe each needs is missing, or the target \
                 never exec'd"
                    .into(),
            ),
        )
    } else {
        (Counts::Checked, None)
    };
    CountsVerdict {
        counts,
        passed,
        failed,
        not_measured,
        why_not_checked,
    }
}

fn not_checked(why: String) -> CountsVerdict {
    CountsVerdict {
        counts: Counts::NotChecked,
        passed: Vec::new(),
        failed: Vec::new(),
        not_measured: Vec::new(),
        why_not_checked: Some(why),
    }
}

impl FailedCheck {
    /// "threads created vs --tasks: expected 50, probes counted 0".
    pub fn said(&self) -> String {
        let counted = if self.counted == self.counted_max {
            count(self.counted)
        } else {
            format!("{}..{}", count(self.counted), count(self.counted_max))
        };
        let tolerance = if self.tolerance > 0 {
            format!(" (tolerance {})", count(self.tolerance))
        } else {
            String::new()
        };
        format!(
            "{}: expected {}, probes counted {counted}{tolerance}",
            self.check,
            count(self.expected)
        )
    }
}

impl CountsVerdict {
    pub fn is_wrong(&self) -> bool {
        self.counts == Counts::Wrong
    }

    /// One line: "checked (4 cross-checks passed)", "WRONG — threads created vs --tasks: expected
    /// 50, probes counted 0" or "not checked: eBPF probes: left out (--no-probes)".
    pub fn line(&self) -> String {
        let not_measured = if self.not_measured.is_empty() {
            String::new()
        } else {
            format!("; not measured: {}", self.not_measured.join(", "))
        };
        match self.counts {
            Counts::Checked => {
                let n = self.passed.len();
                format!(
                    "checked ({n} cross-check{} against the kernel's accounting passed{not_measured})",
                    if n == 1 { "" } else { "s" }
                )
            }
            Counts::Wrong => {
                let failed: Vec<String> = self.failed.iter().map(FailedCheck::said).collect();
                format!("WRONG — {}{not_measured}", failed.join("; "))
            }
            Counts::NotChecked => format!(
                "not checked: {}",
                self.why_not_checked.as_deref().unwrap_or(NO_COLLECTOR)
            ),
        }
    }

    /// Short, for a run's headline: "counts WRONG (1 cross-check failed)"; None unless wrong.
    pub fn headline_clause(&self) -> Option<String> {
        let n = self.failed.len();
        self.is_wrong().then(|| {
            format!(
                "counts WRONG ({n} cross-check{} failed)",
                if n == 1 { "" } else { "s" }
            )
        })
    }
}

/// Whether a run's counts verdict says its counts are wrong.
pub fn wrong(v: Option<&CountsVerdict>) -> bool {
    v.is_some_and(CountsVerdict::is_wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, verdict: CheckVerdict, expected: u64, observed: u64) -> CrossCheck {
        CrossCheck {
            name: name.into(),
            expected,
            observed,
            observed_max: observed,
            tolerance: 0,
            verdict,
            basis: String::new(),
        }
    }

    fn probes(checks: Vec<CrossCheck>) -> ProbeSummary {
        ProbeSummary {
            cross_checks_pass: checks.iter().all(CrossCheck::pass),
            cross_checks: checks,
            ..Default::default()
        }
    }

    fn passing() -> Vec<CrossCheck> {
        vec![
            check(
                "page faults vs rusage minflt+majflt",
                CheckVerdict::Pass,
                72,
                72,
            ),
            check(
                "involuntary switches vs rusage nivcsw",
                CheckVerdict::Pass,
                0,
                0,
            ),
            check(
                "voluntary switches vs rusage nvcsw",
                CheckVerdict::Pass,
                2,
                2,
            ),
        ]
    }

    #[test]
    fn every_check_passed_is_checked() {
        let v = judge(Some(&probes(passing())), &[]);
        assert_eq!(v.counts, Counts::Checked);
        assert!(!v.is_wrong());
        assert_eq!(
            v.line(),
            "checked (3 cross-checks against the kernel's accounting passed)"
        );
        assert_eq!(v.headline_clause(), None);
    }

    /// The run of the issue: `run --tasks 50 --task-kind thread -- sleep 1` (sleep creates no
    /// thread), and a fault count the probes missed.
    #[test]
    fn a_failed_check_makes_the_counts_wrong_and_says_expected_against_counted() {
        let mut checks = passing();
        checks[0] = CrossCheck {
            observed_max: 63,
            tolerance: 124,
            ..check(
                "page faults vs rusage minflt+majflt",
                CheckVerdict::Fail,
                12_266,
                61,
            )
        };
        checks.push(check(
            "threads created vs --tasks",
            CheckVerdict::Fail,
            50,
            0,
        ));
        let v = judge(Some(&probes(checks)), &[]);
        assert_eq!(v.counts, Counts::Wrong);
        assert!(v.is_wrong() && wrong(Some(&v)));
        assert_eq!(v.passed.len(), 2);
        assert_eq!(
            v.line(),
            "WRONG — page faults vs rusage minflt+majflt: expected 12,266, probes counted 61..63 \
             (tolerance 124); threads created vs --tasks: expected 50, probes counted 0"
        );
        assert_eq!(
            v.headline_clause().as_deref(),
            Some("counts WRONG (2 cross-checks failed)")
        );
    }

    #[test]
    fn a_failure_beside_checks_not_measured_is_still_wrong() {
        let checks = vec![
            check(
                "page faults vs rusage minflt+majflt",
                CheckVerdict::NotMeasured,
                7,
                0,
            ),
            check("threads created vs spawned", CheckVerdict::Fail, 3, 4),
        ];
        let v = judge(Some(&probes(checks)), &[]);
        assert_eq!(v.counts, Counts::Wrong);
        assert!(v
            .line()
            .ends_with("; not measured: page faults vs rusage minflt+majflt"));
    }

    #[test]
    fn what_could_not_be_checked_says_why_and_is_never_wrong() {
        // --no-probes: the run's own words.
        let left_out = [
            "no cgroup (not root): no memory limit".to_string(),
            "eBPF probes: left out (--no-probes)".to_string(),
        ];
        let v = judge(None, &left_out);
        assert_eq!(v.counts, Counts::NotChecked);
        assert_eq!(v.line(), "not checked: eBPF probes: left out (--no-probes)");
        assert!(!v.is_wrong());
        // Not root.
        let v = judge(None, &["eBPF probes and perf need root".to_string()]);
        assert_eq!(v.line(), "not checked: eBPF probes and perf need root");
        // Nothing said: the missing file.
        assert_eq!(
            judge(None, &[]).line(),
            format!("not checked: {NO_COLLECTOR}")
        );
        // Probes, but no rusage to check against.
        let v = judge(Some(&probes(vec![])), &[]);
        assert_eq!(v.counts, Counts::NotChecked);
        assert!(v.line().contains("no rusage"), "{}", v.line());
        // Every check not measured.
        let v = judge(
            Some(&probes(vec![check(
                "voluntary switches vs rusage nvcsw",
                CheckVerdict::NotMeasured,
                2,
                0,
            )])),
            &[],
        );
        assert_eq!(v.counts, Counts::NotChecked);
        assert_eq!(v.not_measured, ["voluntary switches vs rusage nvcsw"]);
        assert!(!wrong(None));
    }

    #[test]
    fn some_passed_and_some_not_measured_is_checked_naming_the_rest() {
        let mut checks = passing();
        checks.push(check(
            "threads created vs spawned",
            CheckVerdict::NotMeasured,
            3,
            0,
        ));
        let v = judge(Some(&probes(checks)), &[]);
        assert_eq!(v.counts, Counts::Checked);
        assert_eq!(
            v.line(),
            "checked (3 cross-checks against the kernel's accounting passed; not measured: \
             threads created vs spawned)"
        );
    }
}
