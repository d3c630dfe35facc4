//! Whether a per-task figure from a fit over N is resolved at the N measured, and if not, at
//! about which N it would be. A slope whose standard error is as large as itself (a goroutine's
//! RSS "381 B ± 373 B" at N = 1,000–2,000, where 1,000,000 gives 2.7 KiB) is below what these N
//! can resolve: it is said so, beside its raw numbers, never printed as a measured figure.
//!
//! The rule (`RULE`): a slope is resolved when its standard error is at most a quarter of it
//! (t = slope / s.e. ≥ 4) and it is not negative. Every figure fitted over N is a cost (memory,
//! time, counts): none can fall as tasks are added, so a negative slope is noise or something
//! other than a per-task cost. With no standard error (two points: no residual freedom) nothing
//! can be said, and that is said.

use serde::{Deserialize, Serialize};

use crate::comparisons::regression::LineFit;
use units::{bytes, count};

/// A slope is resolved when |slope| ≥ this many standard errors. 4 rather than the 2 of a ~95 %
/// interval: with the few points a sweep has (often one residual degree of freedom or two) the
/// standard error is itself rough, and a figure people quote should survive it being off 2×.
pub const RESOLVED_T: f64 = 4.0;

/// Within this many standard errors of 0 the slope is indistinguishable from 0: its sign is not
/// established, so it gives no scale to estimate a resolving N from.
pub const ZERO_WITHIN_SE: f64 = 1.0;

/// The rule in words, for the notes under the tables.
pub const RULE: &str = "A per-task figure is resolved at the N measured when its standard error is at most a quarter of it (t ≥ 4) and it is not negative (a cost cannot fall as tasks are added); with two points there is no standard error and it is not resolved. An unresolved figure says so, its fit after the verdict, and, when the slope is clear of 0 by one standard error or more, an estimate of the largest N that would resolve it: the same sweep scaled up until the rule passes, if the noise per run stays as it is (s.e. ∝ 1 / spread of N).";

/// Why a slope is not resolved.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unresolved {
    /// Two points: no residual freedom, so no standard error.
    NoStandardError,
    /// Within one standard error of 0 (or 0 with noise): no N follows from it.
    IndistinguishableFromZero,
    /// Below 0 by more than a standard error: not a per-task cost at these N.
    Negative,
    /// Clear of 0 but its standard error is more than a quarter of it.
    Imprecise,
    /// One run's memory per task, where the tasks alive at the moment measured held less than
    /// MIN_HELD_KB in all: a reading of free memory moves by as much without them.
    TooLittleHeld,
    /// One run's memory per task, where the run's task-holding processes are several and the
    /// moment measured lacks a walk of some of their mappings (smaps_rollup): without PSS, RSS
    /// summed over processes counts a page shared after fork once per process.
    NotEveryProcessWalked,
}

/// The verdict on one fitted slope (flattened into compare.json's fits beside the line).
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// Whether the slope is a figure at the N measured: its standard error at most a quarter of
    /// it, and it not negative. Files written before the rule lack it (read as resolved, as they
    /// were shown).
    #[serde(default = "before_the_rule")]
    pub resolved: bool,
    /// Why not, when not resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved: Option<Unresolved>,
    /// An estimate, not a measurement: the largest N of this sweep scaled up until the rule
    /// would pass, if the noise per run stays as it is (two significant figures, rounded up).
    /// Absent when resolved, or when no N follows (no standard error, a slope indistinguishable
    /// from 0 or negative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_at_n: Option<u64>,
    /// The verdict in words, as the tables show it; empty when resolved.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resolution_note: String,
}

fn before_the_rule() -> bool {
    true
}

impl Default for Resolution {
    fn default() -> Self {
        Resolution {
            resolved: true,
            unresolved: None,
            resolve_at_n: None,
            resolution_note: String::new(),
        }
    }
}

/// Judges `line`, fitted over x from `x_min` to `x_max` (tasks alive or spawned: N).
pub fn judge(line: &LineFit, x_min: f64, x_max: f64) -> Resolution {
    let range = format!("N = {}–{}", count(x_min as u64), count(x_max as u64));
    let largest = count(x_max as u64);
    let unresolved = |why: Unresolved, resolve_at_n: Option<u64>, note: String| Resolution {
        resolved: false,
        unresolved: Some(why),
        resolve_at_n,
        resolution_note: note,
    };
    let slope = line.slope;
    let Some(se) = line.slope_stderr else {
        return unresolved(
            Unresolved::NoStandardError,
            None,
            format!(
                "not resolved at {range} ({} points: no s.e.; one more N or repeat needed)",
                line.points
            ),
        );
    };
    if slope.abs() < ZERO_WITHIN_SE * se {
        return unresolved(
            Unresolved::IndistinguishableFromZero,
            None,
            format!("not resolved: slope indistinguishable from 0 at N up to {largest}"),
        );
    }
    if slope < 0.0 {
        return unresolved(
            Unresolved::Negative,
            None,
            format!("not resolved: negative at N up to {largest}, and a cost cannot fall as tasks are added"),
        );
    }
    if RESOLVED_T * se <= slope {
        return Resolution::default();
    }
    let at = resolving_n(slope, se, x_max);
    unresolved(
        Unresolved::Imprecise,
        Some(at),
        format!(
            "not resolved at {range}: s.e. {:.0} % of the slope; needs ≈ N = {} (an estimate)",
            100.0 * se / slope,
            count(at)
        ),
    )
}

/// One run's memory per task is resolved when the tasks alive at the moment measured held at
/// least this much in all (KiB). Why 16 MiB: between two readings on a quiet machine free memory
/// moves by up to ~0.8 MiB without the run (per-CPU lists, slab, RCU's deferred frees: goroutine
/// `hold` runs of 1,000–2,000 scattered ±0.75 MiB, their "381 B ± 373 B" a task), and 0.8 MiB is
/// the ±5 % a run must add up within at 16 MiB. Below it, a `churn` whose --batch lets ~100
/// threads live at once (4 MiB) read −158 % and +37 % in the kernel matrix's VMs.
pub const MIN_HELD_KB: f64 = 16.0 * 1024.0;

/// Judges one run's memory per task: `held_kb`, what the tasks alive at the moment measured held
/// in all (the parts, averaged over the moments read), `per_task_kb` each, `alive` of them.
pub fn judge_held(held_kb: f64, per_task_kb: f64, alive: u64) -> Resolution {
    if held_kb >= MIN_HELD_KB {
        return Resolution::default();
    }
    let resolve_at_n = (per_task_kb > 0.0).then(|| round_up_two_figures(MIN_HELD_KB / per_task_kb));
    Resolution {
        resolved: false,
        unresolved: Some(Unresolved::TooLittleHeld),
        resolve_at_n,
        resolution_note: format!(
            "not resolved: the {} tasks alive at the moment measured held {} in all, below the {} one reading of free memory resolves within ±5 %{}",
            count(alive),
            bytes(held_kb * 1024.0),
            bytes(MIN_HELD_KB * 1024.0),
            resolve_at_n.map_or(String::new(), |n| format!(
                "; needs ≈ {} tasks alive at once (an estimate)",
                count(n)
            ))
        ),
    }
}

/// The verdict on a run's memory per task counted from several processes when `without` of
/// the `holders` that hold its tasks have no smaps_rollup at the moment measured.
pub fn not_every_process_walked(without: usize, holders: usize) -> Resolution {
    Resolution {
        resolved: false,
        unresolved: Some(Unresolved::NotEveryProcessWalked),
        resolve_at_n: None,
        resolution_note: format!(
            "not resolved: at the moment measured {without} of the {holders} processes holding the tasks had no smaps_rollup reading (their walk could not be taken then), and RSS summed over processes would count each page shared after fork once per process"
        ),
    }
}

/// The largest N at which a sweep like this one would resolve a slope clear of 0 but imprecise
/// (`slope > 0`, `se > slope / RESOLVED_T`).
///
/// Why this estimate: a slope's standard error is σ / √Sxx (σ the noise per run, Sxx the spread
/// of N about their mean). Scaling every N of the sweep by k multiplies √Sxx by k; if σ stays as
/// it is in absolute units, the s.e. falls k-fold while the slope stays, so the rule passes at
/// k = RESOLVED_T · s.e. / slope. It is the row's own rule on its own points and repeats, so a
/// sweep at that N would pass if the noise holds; where noise grows with N (time on a busy
/// machine) it is optimistic, hence "≈" and "an estimate". Clear of 0 means k ≤ RESOLVED_T /
/// ZERO_WITHIN_SE: never an N more than 4× the largest measured.
pub fn resolving_n(slope: f64, se: f64, x_max: f64) -> u64 {
    let scale = RESOLVED_T * se / slope;
    round_up_two_figures(x_max * scale)
}

/// 7,843 → 7,900; 12,001 → 13,000: an estimate is not given to more figures than it has.
fn round_up_two_figures(x: f64) -> u64 {
    if x <= 0.0 || !x.is_finite() {
        return 0;
    }
    let step = 10f64.powi((x.log10().floor() as i32 - 1).max(0));
    ((x / step).ceil() * step) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparisons::regression::fit;

    /// A sweep over `ns`, each N run twice with the residual +d and -d about `slope · N + 1000`:
    /// the residuals cancel at each N, so the fit is the true line and its s.e. comes from d.
    fn sweep(ns: &[f64], slope: f64, d: f64) -> LineFit {
        let pts: Vec<(f64, f64)> = ns
            .iter()
            .flat_map(|&n| [(n, slope * n + 1_000.0 + d), (n, slope * n + 1_000.0 - d)])
            .collect();
        fit(&pts).unwrap()
    }

    fn judged(line: &LineFit, ns: &[f64]) -> Resolution {
        judge(line, ns[0], *ns.last().unwrap())
    }

    #[test]
    fn a_well_resolved_fit_passes() {
        let ns = [1_000.0, 10_000.0, 100_000.0];
        let line = sweep(&ns, 2.5, 500.0);
        let se = line.slope_stderr.unwrap();
        assert!(se > 0.0 && RESOLVED_T * se <= 2.5, "{line:?}");
        let r = judged(&line, &ns);
        assert_eq!(r, Resolution::default());
        assert!(r.resolved && r.resolution_note.is_empty());
        // An exact line, a zero cost included (a goroutine's kernel stack), is resolved.
        assert!(judged(&sweep(&ns, 0.0, 0.0), &ns).resolved);
        assert!(judged(&sweep(&ns, 16.0, 0.0), &ns).resolved);
    }

    #[test]
    fn a_run_holding_less_than_the_floor_is_not_resolved_and_names_the_n() {
        // churn in a VM: 137 threads of 40 KiB alive at the moment measured, 5.4 MiB in all.
        let r = judge_held(137.0 * 40.0, 40.0, 137);
        assert!(!r.resolved);
        assert_eq!(r.unresolved, Some(Unresolved::TooLittleHeld));
        // 16 MiB / 40 KiB = 409.6 → 410 tasks.
        assert_eq!(r.resolve_at_n, Some(410));
        assert!(
            r.resolution_note.contains("137 tasks"),
            "{}",
            r.resolution_note
        );
        // 2,000 threads of 40 KiB (78 MiB) and 100,000 tokio tasks of 0.42 KiB (41 MiB) are.
        assert!(judge_held(2_000.0 * 40.0, 40.0, 2_000).resolved);
        assert!(judge_held(100_000.0 * 0.42, 0.42, 100_000).resolved);
        // A negative or zero part gives no N.
        assert_eq!(judge_held(-10.0, -0.01, 1_000).resolve_at_n, None);
    }

    #[test]
    fn a_noisy_small_n_fit_is_flagged_with_the_n_that_would_resolve_it() {
        let ns = [1_000.0, 2_000.0];
        // se = √(4d² / 2 / Sxx), Sxx = 4 · 500²: d = 500 gives se = 0.707, t = 2.
        let line = sweep(&ns, 1.414, 500.0);
        let r = judged(&line, &ns);
        assert!(!r.resolved);
        assert_eq!(r.unresolved, Some(Unresolved::Imprecise));
        let at = r.resolve_at_n.unwrap();
        assert!(at > 2_000, "{r:?}");
        assert!(
            r.resolution_note.starts_with(
                "not resolved at N = 1,000–2,000: s.e. 50 % of the slope; needs ≈ N = "
            ) && r.resolution_note.contains(&count(at)),
            "{r:?}"
        );
    }

    #[test]
    fn two_points_give_no_standard_error_and_say_so() {
        let line = fit(&[(1_000.0, 3_000.0), (3_000.0, 9_000.0)]).unwrap();
        let r = judge(&line, 1_000.0, 3_000.0);
        assert_eq!(r.unresolved, Some(Unresolved::NoStandardError));
        assert_eq!(r.resolve_at_n, None);
        assert_eq!(
            r.resolution_note,
            "not resolved at N = 1,000–3,000 (2 points: no s.e.; one more N or repeat needed)"
        );
    }

    #[test]
    fn a_negative_slope_is_flagged_and_given_no_n() {
        let ns = [1_000.0, 2_000.0, 4_000.0];
        // Clearly below 0: negative.
        let r = judged(&sweep(&ns, -1.75, 10.0), &ns);
        assert_eq!(r.unresolved, Some(Unresolved::Negative));
        assert_eq!(r.resolve_at_n, None);
        assert!(
            r.resolution_note.contains("negative at N up to 4,000"),
            "{r:?}"
        );
        // Below 0 within a standard error, or above it within one: indistinguishable from 0.
        for slope in [-0.1, 0.1] {
            let r = judged(&sweep(&ns, slope, 1_000.0), &ns);
            assert_eq!(
                r.unresolved,
                Some(Unresolved::IndistinguishableFromZero),
                "{r:?}"
            );
            assert_eq!(r.resolve_at_n, None);
            assert_eq!(
                r.resolution_note,
                "not resolved: slope indistinguishable from 0 at N up to 4,000"
            );
        }
    }

    /// The estimate is what it claims: the same sweep at the estimated N, with the same noise,
    /// passes the rule, and the same sweep a little short of it does not.
    #[test]
    fn the_sweep_scaled_to_the_estimate_is_resolved_and_one_short_of_it_is_not() {
        let (slope, d) = (2.0, 1_500.0);
        let ns = [1_000.0, 2_000.0, 3_000.0];
        let r = judged(&sweep(&ns, slope, d), &ns);
        assert_eq!(r.unresolved, Some(Unresolved::Imprecise), "{r:?}");
        let at = r.resolve_at_n.unwrap() as f64;
        let scaled = |k: f64| ns.map(|n| n * k);
        let there = scaled(at / 3_000.0);
        assert!(judged(&sweep(&there, slope, d), &there).resolved);
        let short = scaled(0.97 * at / 3_000.0);
        assert!(!judged(&sweep(&short, slope, d), &short).resolved);
        // And its value: 3,000 · 4 · se / slope, rounded up to two figures.
        let se = sweep(&ns, slope, d).slope_stderr.unwrap();
        assert_eq!(at, round_up_two_figures(3_000.0 * 4.0 * se / slope) as f64);
    }

    #[test]
    fn the_estimate_grows_with_the_noise_and_falls_with_the_slope() {
        let mut last = 0;
        for se in [0.3, 0.4, 0.5, 0.7, 0.9, 1.0] {
            let at = resolving_n(1.0, se, 2_000.0);
            assert!(at >= last, "se {se}: {at} < {last}");
            last = at;
        }
        assert_eq!(last, 8_000, "at one s.e. from 0: 4× the largest N");
        let mut last = u64::MAX;
        for slope in [0.3, 0.5, 1.0, 2.0, 3.9] {
            let at = resolving_n(slope, 1.0, 2_000.0);
            assert!(at <= last, "slope {slope}: {at} > {last}");
            last = at;
        }
    }

    #[test]
    fn estimates_round_up_to_two_figures() {
        assert_eq!(round_up_two_figures(7_843.0), 7_900);
        assert_eq!(round_up_two_figures(12_001.0), 13_000);
        assert_eq!(round_up_two_figures(2_000.0), 2_000);
        assert_eq!(round_up_two_figures(37.2), 38);
        assert_eq!(round_up_two_figures(3.2), 4);
    }
}
