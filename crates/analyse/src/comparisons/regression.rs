//! Least squares over N: what one more task costs (the slope) and what the run costs whatever N
//! is (the intercept), with how well a line explains the points. A per-task figure from one run
//! (total / N) mixes the two; the slope over several N does not, which is how "8 KB per thread"
//! becomes a number with an error bar. Also min / median / max over repeats, as hyperfine shows.

use serde::{Deserialize, Serialize};

/// A straight line through (x, y) points by ordinary least squares.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LineFit {
    /// Points used, and how many distinct x among them.
    pub points: usize,
    pub distinct_x: usize,
    /// Marginal cost of one more task.
    pub slope: f64,
    /// Fixed cost (the line at x = 0).
    pub intercept: f64,
    /// 1 - SSE/SST; 1 when the points lie exactly on the line.
    pub r2: f64,
    /// Standard error of the slope; None with fewer than three points (no residual freedom).
    pub slope_stderr: Option<f64>,
}

/// Fits y = slope * x + intercept. None with fewer than two distinct x (no line is defined).
pub fn fit(points: &[(f64, f64)]) -> Option<LineFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let n = pts.len();
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() < 2 {
        return None;
    }
    let nf = n as f64;
    let mean_x = pts.iter().map(|p| p.0).sum::<f64>() / nf;
    let mean_y = pts.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let sse: f64 = pts
        .iter()
        .map(|p| (p.1 - (slope * p.0 + intercept)).powi(2))
        .sum();
    // Exact lines leave rounding residue: call it zero below a relative 1e-12.
    let sse = if sse <= syy * 1e-12 { 0.0 } else { sse };
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    let slope_stderr = (n > 2).then(|| (sse / (nf - 2.0) / sxx).sqrt());
    Some(LineFit {
        points: n,
        distinct_x: xs.len(),
        slope,
        intercept,
        r2,
        slope_stderr,
    })
}

/// Min, median and max of the repeats of one cell.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// None when there are no finite values.
pub fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    };
    Some(Spread {
        min: v[0],
        median,
        max: v[v.len() - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_line_is_found_exactly() {
        let pts: Vec<(f64, f64)> = [1_000.0, 10_000.0, 100_000.0]
            .iter()
            .flat_map(|&x| [(x, 36.5 * x + 2_048.0), (x, 36.5 * x + 2_048.0)])
            .collect();
        let f = fit(&pts).unwrap();
        assert_eq!(f.points, 6);
        assert_eq!(f.distinct_x, 3);
        assert!((f.slope - 36.5).abs() < 1e-12, "{f:?}");
        assert!((f.intercept - 2_048.0).abs() < 1e-6, "{f:?}");
        assert_eq!(f.r2, 1.0);
        assert_eq!(f.slope_stderr, Some(0.0));
    }

    #[test]
    fn noise_lowers_r2_and_gives_a_standard_error() {
        // y = 2x + 1 with residuals +1, -1, -1, +1 at x = 0, 1, 2, 3: the fit is still 2x + 1.
        let pts = [(0.0, 2.0), (1.0, 2.0), (2.0, 4.0), (3.0, 8.0)];
        let f = fit(&pts).unwrap();
        assert!((f.slope - 2.0).abs() < 1e-12);
        assert!((f.intercept - 1.0).abs() < 1e-12);
        // SSE = 4, SST = 24: R² = 5/6; se = sqrt(4 / 2 / 5).
        assert!((f.r2 - 5.0 / 6.0).abs() < 1e-12, "{f:?}");
        assert!((f.slope_stderr.unwrap() - (0.4f64).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn one_x_defines_no_line() {
        assert!(fit(&[(5.0, 1.0), (5.0, 2.0)]).is_none());
        assert!(fit(&[]).is_none());
        let two = fit(&[(1.0, 1.0), (2.0, 3.0)]).unwrap();
        assert_eq!(two.slope_stderr, None);
    }

    #[test]
    fn spreads() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0]).unwrap().median, 2.5);
        assert!(spread(&[f64::NAN]).is_none());
    }
}
