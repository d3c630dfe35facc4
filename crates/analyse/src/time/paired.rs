//! Alternating pairs of runs, one traced and one not (scripts/bench-overhead.sh): each ratio
//! traced/untraced as the mean of the per-pair ratios with a 95 % Student t-interval, the CPU time
//! the tracing adds, the part of it the BPF programs' own time explains and the part it does not.
//! Pairing cancels what the two runs of a pair share (the machine's state at the time); the
//! t-interval over the pairs says how far the mean could be from the true one, which a min – max
//! over a handful of pairs cannot.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level of every interval here.
pub const LEVEL: f64 = 0.95;

/// The mean of some values with its two-sided t-interval at `LEVEL`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeanInterval {
    pub n: usize,
    pub mean: f64,
    /// The sample standard deviation (n − 1 in the denominator); None with one value.
    pub sd: Option<f64>,
    /// Student's t quantile at (1 + LEVEL) / 2 with n − 1 degrees of freedom.
    pub t: Option<f64>,
    /// t · sd / √n: the interval is mean ± half_width.
    pub half_width: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// The t-interval of the mean of `values` (non-finite ones left out). None without a value; with
/// one value the mean alone (no spread, no interval).
pub fn t_interval(values: &[f64]) -> Option<MeanInterval> {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let mut out = MeanInterval {
        n,
        mean,
        sd: None,
        t: None,
        half_width: None,
        low: None,
        high: None,
    };
    if n >= 2 {
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
            .expect("n - 1 >= 1 degrees of freedom")
            .inverse_cdf((1.0 + LEVEL) / 2.0);
        let half = t * sd / (n as f64).sqrt();
        out.sd = Some(sd);
        out.t = Some(t);
        out.half_width = Some(half);
        out.low = Some(mean - half);
        out.high = Some(mean + half);
    }
    Some(out)
}

/// One row of the benchmark's pairs.csv: one pair's two runs, times in seconds. CPU time is the
/// run's cgroup counter from release to reap; `bpf_s` the traced run's probes' total (empty when
/// not measured).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Pair {
    pub workload: String,
    pub pair: u32,
    /// Which of the two ran first: `traced` or `untraced`.
    pub first: String,
    pub untraced_wall_s: f64,
    pub untraced_cpu_s: f64,
    pub traced_wall_s: f64,
    pub traced_cpu_s: f64,
    pub bpf_s: Option<f64>,
}

/// What the pairs of one workload say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedFigures {
    pub workload: String,
    pub level: f64,
    /// The pairs of this workload in the file, and those left out (the caller's outlier rule).
    pub pairs: usize,
    pub excluded: Vec<u32>,
    /// traced / untraced per pair: the workload's wall time and its CPU time.
    pub wall_ratio: Option<MeanInterval>,
    pub cpu_ratio: Option<MeanInterval>,
    /// traced − untraced CPU time per pair, s.
    pub cpu_difference_s: Option<MeanInterval>,
    /// The probes' own time (BPF programs' run time) per traced run, over the pairs that have it.
    pub bpf_s: Option<MeanInterval>,
    /// Per pair, the CPU difference less the traced run's BPF time: what the programs' own time
    /// does not explain (dispatch, the syscall slow path, noise), over the pairs that have it.
    pub unexplained_s: Option<MeanInterval>,
    /// The goal's margin on a ratio (0.01: one percentage point), and whether the CPU ratio's
    /// half-width is below it (false without an interval).
    pub margin: f64,
    pub cpu_ratio_within_margin: bool,
    /// With the traced runs' program runs (`pairs --programs`): per pair, the unexplained CPU
    /// time over the programs' runs, ns — what the tracing costs around each program run (the
    /// tracepoints' dispatch, the syscall slow path, the statistics' clock reads if they were
    /// on) as this benchmark's pairs put it: a description of their residual, not a model (a
    /// rate fitted on the benchmark cannot check it; the band from probe-cost's figures does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unexplained_ns_per_program_run: Option<MeanInterval>,
    /// The traced runs' program runs, over the same pairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_runs: Option<MeanInterval>,
}

/// Adds the unexplained time per program run to `figures`, from each used pair's traced-run
/// program runs (`runs`, by pair number); pairs without runs or BPF time are left out of it.
pub fn add_per_program_run(
    figures: &mut PairedFigures,
    pairs: &[Pair],
    exclude: &[u32],
    runs: &std::collections::BTreeMap<u32, u64>,
) {
    let used: Vec<(&Pair, f64)> = pairs
        .iter()
        .filter(|p| p.workload == figures.workload && !exclude.contains(&p.pair))
        .filter_map(|p| Some((p, *runs.get(&p.pair).filter(|&&r| r > 0)? as f64)))
        .collect();
    let per_run: Vec<f64> = used
        .iter()
        .filter_map(|(p, r)| Some((p.traced_cpu_s - p.untraced_cpu_s - p.bpf_s?) * 1e9 / r))
        .collect();
    let counted: Vec<f64> = used.iter().map(|(_, r)| *r).collect();
    figures.unexplained_ns_per_program_run = t_interval(&per_run);
    figures.program_runs = t_interval(&counted);
}

/// The figures of `workload`'s pairs, leaving out the pairs numbered in `exclude`. A pair whose
/// untraced time is not above 0 gives no ratio (it is left out of that ratio only).
pub fn figures(pairs: &[Pair], workload: &str, exclude: &[u32], margin: f64) -> PairedFigures {
    let all: Vec<&Pair> = pairs.iter().filter(|p| p.workload == workload).collect();
    let used: Vec<&Pair> = all
        .iter()
        .copied()
        .filter(|p| !exclude.contains(&p.pair))
        .collect();
    let ratio = |t: f64, u: f64| if u > 0.0 { t / u } else { f64::NAN };
    let wall: Vec<f64> = used
        .iter()
        .map(|p| ratio(p.traced_wall_s, p.untraced_wall_s))
        .collect();
    let cpu: Vec<f64> = used
        .iter()
        .map(|p| ratio(p.traced_cpu_s, p.untraced_cpu_s))
        .collect();
    let diff: Vec<f64> = used
        .iter()
        .map(|p| p.traced_cpu_s - p.untraced_cpu_s)
        .collect();
    let bpf: Vec<f64> = used.iter().filter_map(|p| p.bpf_s).collect();
    let unexplained: Vec<f64> = used
        .iter()
        .filter_map(|p| Some(p.traced_cpu_s - p.untraced_cpu_s - p.bpf_s?))
        .collect();
    let cpu_ratio = t_interval(&cpu);
    let within = cpu_ratio
        .as_ref()
        .and_then(|c| c.half_width)
        .is_some_and(|h| h < margin);
    let mut excluded: Vec<u32> = all
        .iter()
        .filter(|p| exclude.contains(&p.pair))
        .map(|p| p.pair)
        .collect();
    excluded.sort_unstable();
    PairedFigures {
        workload: workload.to_string(),
        level: LEVEL,
        pairs: all.len(),
        excluded,
        wall_ratio: t_interval(&wall),
        cpu_ratio,
        cpu_difference_s: t_interval(&diff),
        bpf_s: t_interval(&bpf),
        unexplained_s: t_interval(&unexplained),
        margin,
        cpu_ratio_within_margin: within,
        unexplained_ns_per_program_run: None,
        program_runs: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn a_t_interval_matches_the_textbook() {
        // 1.0 … 1.4: mean 1.2, sd = sqrt(0.025) = 0.158114, se = 0.0707107; t(0.975, 4) =
        // 2.776445 (any t table): half-width 0.196324. A normal 1.96 would give 0.138593.
        let c = t_interval(&[1.0, 1.1, 1.2, 1.3, 1.4]).unwrap();
        assert_eq!(c.n, 5);
        assert!(close(c.mean, 1.2, 1e-12), "{c:?}");
        assert!(close(c.sd.unwrap(), 0.025f64.sqrt(), 1e-12), "{c:?}");
        assert!(close(c.t.unwrap(), 2.776_445, 1e-6), "{c:?}");
        assert!(close(c.half_width.unwrap(), 0.196_324, 1e-6), "{c:?}");
        assert!(close(c.low.unwrap(), 1.2 - 0.196_324, 1e-6));
        assert!(close(c.high.unwrap(), 1.2 + 0.196_324, 1e-6));
    }

    #[test]
    fn two_values_have_one_degree_of_freedom() {
        // mean 1.01, sd 0.0141421, se 0.01, t(0.975, 1) = 12.706205: ± 0.127062.
        let c = t_interval(&[1.0, 1.02]).unwrap();
        assert!(close(c.t.unwrap(), 12.706_205, 1e-5), "{c:?}");
        assert!(close(c.half_width.unwrap(), 0.127_062, 1e-5), "{c:?}");
        // Thirty pairs: t(0.975, 29) = 2.045230.
        let v: Vec<f64> = (0..30).map(|i| 1.0 + f64::from(i) * 0.001).collect();
        assert!(close(t_interval(&v).unwrap().t.unwrap(), 2.045_230, 1e-5));
    }

    #[test]
    fn one_value_has_a_mean_but_no_interval_and_none_has_nothing() {
        let c = t_interval(&[1.05, f64::NAN]).unwrap();
        assert_eq!((c.n, c.mean), (1, 1.05));
        assert_eq!(
            (c.sd, c.half_width, c.low, c.high),
            (None, None, None, None)
        );
        assert!(t_interval(&[]).is_none());
    }

    fn pair(workload: &str, n: u32, u: (f64, f64), t: (f64, f64), bpf: Option<f64>) -> Pair {
        Pair {
            workload: workload.into(),
            pair: n,
            first: if n % 2 == 1 { "untraced" } else { "traced" }.into(),
            untraced_wall_s: u.0,
            untraced_cpu_s: u.1,
            traced_wall_s: t.0,
            traced_cpu_s: t.1,
            bpf_s: bpf,
        }
    }

    #[test]
    fn figures_are_per_pair_and_leave_out_the_excluded_and_other_workloads() {
        let pairs = [
            pair("threads", 1, (2.0, 4.0), (2.2, 4.4), Some(0.1)),
            pair("threads", 2, (2.0, 4.0), (2.0, 4.2), None),
            pair("threads", 3, (2.0, 4.0), (2.1, 4.8), Some(0.3)),
            // A slow untraced run the outlier rule threw out: it would pull the ratio below 1.
            pair("threads", 4, (9.0, 20.0), (2.0, 4.0), Some(0.2)),
            pair("goroutines", 1, (1.0, 1.0), (5.0, 5.0), Some(0.0)),
        ];
        let f = figures(&pairs, "threads", &[4], 0.01);
        assert_eq!((f.pairs, f.excluded.clone()), (4, vec![4]));
        // CPU ratios 1.1, 1.05, 1.2: the mean of the ratios, not the ratio of the means.
        let cpu = f.cpu_ratio.clone().unwrap();
        assert_eq!(cpu.n, 3);
        assert!(close(cpu.mean, (1.1 + 1.05 + 1.2) / 3.0, 1e-12), "{cpu:?}");
        let wall = f.wall_ratio.clone().unwrap();
        assert!(
            close(wall.mean, (1.1 + 1.0 + 1.05) / 3.0, 1e-12),
            "{wall:?}"
        );
        let diff = f.cpu_difference_s.clone().unwrap();
        assert!(close(diff.mean, (0.4 + 0.2 + 0.8) / 3.0, 1e-12));
        // BPF time where measured (pairs 1 and 3); unexplained = difference − BPF: 0.3, 0.5.
        let bpf = f.bpf_s.clone().unwrap();
        assert_eq!(bpf.n, 2);
        assert!(close(bpf.mean, 0.2, 1e-12));
        let un = f.unexplained_s.clone().unwrap();
        assert_eq!(un.n, 2);
        assert!(close(un.mean, 0.4, 1e-12), "{un:?}");
        // Spread of ±5 points over 3 pairs: far wider than 1 point.
        assert!(!f.cpu_ratio_within_margin);
    }

    #[test]
    fn the_margin_is_met_only_below_it() {
        // Ratios 1.020, 1.021, 1.019, 1.020: sd 0.000816, t(3) = 3.182446: ± 0.0012990.
        let pairs: Vec<Pair> = [1.020, 1.021, 1.019, 1.020]
            .iter()
            .zip(1..)
            .map(|(r, n)| pair("g", n, (1.0, 10.0), (1.0, 10.0 * r), None))
            .collect();
        let f = figures(&pairs, "g", &[], 0.01);
        let h = f.cpu_ratio.clone().unwrap().half_width.unwrap();
        assert!(close(h, 0.001_299, 1e-6), "{h}");
        assert!(f.cpu_ratio_within_margin);
        assert!(!figures(&pairs, "g", &[], 0.001).cpu_ratio_within_margin);
        assert!(figures(&pairs, "g", &[], 0.01).unexplained_s.is_none());
        // One pair left: a mean, no interval, so never within the margin.
        let one = figures(&pairs, "g", &[2, 3, 4], 0.5);
        assert!(!one.cpu_ratio_within_margin);
        assert_eq!(one.cpu_ratio.unwrap().n, 1);
    }

    #[test]
    fn the_unexplained_time_per_program_run_is_taken_pair_by_pair() {
        // Pair 1: 1.0 s more CPU, 0.4 s in the programs, 3 M program runs: 200 ns a run. Pair 2:
        // 0.8 s more, 0.2 s in the programs, 2 M runs: 300 ns. Pair 3 left out, pair 4 has no
        // runs recorded: neither counts.
        let pairs = vec![
            pair("t", 1, (1.0, 10.0), (1.0, 11.0), Some(0.4)),
            pair("t", 2, (1.0, 10.0), (1.0, 10.8), Some(0.2)),
            pair("t", 3, (1.0, 10.0), (1.0, 19.0), Some(0.2)),
            pair("t", 4, (1.0, 10.0), (1.0, 12.0), Some(0.2)),
        ];
        let runs = std::collections::BTreeMap::from([(1, 3_000_000), (2, 2_000_000), (3, 1)]);
        let mut f = figures(&pairs, "t", &[3], 0.01);
        assert!(
            f.unexplained_ns_per_program_run.is_none(),
            "only with --programs"
        );
        add_per_program_run(&mut f, &pairs, &[3], &runs);
        let per_run = f.unexplained_ns_per_program_run.unwrap();
        assert_eq!(per_run.n, 2);
        assert!(close(per_run.mean, 250.0, 1e-6), "{per_run:?}");
        assert!(close(f.program_runs.unwrap().mean, 2_500_000.0, 1e-6));
    }
}
