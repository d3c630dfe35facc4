//! What the collector costs around its programs, which the kernel's run-time statistics do not
//! see: the tracepoints' dispatch, the syscall-tracing slow path every task takes while a syscall
//! tracepoint is attached, and the statistics' own clock reads where they were on (the committed
//! set's traced runs had them off: measure/probe_rates.rs). No counter measures it in a run, so it
//! is estimated from the overhead benchmark (`scripts/bench-overhead.sh`): per alternating pair,
//! the CPU time the tracing added less the programs' own time, divided by the programs' runs in
//! that traced run — ns per program run, with its 95 % interval over the pairs. The figures in use
//! are the committed set's (`docs/bench-overhead/figures-*.json`, the same files the manual
//! quotes): re-running the benchmark and committing its set changes the estimate, and nothing else
//! does.

use serde::{Deserialize, Serialize};

use crate::runtime::Runtime;

/// One workload's fit, as `spawnscope pairs --programs` writes it into the benchmark's figures.
#[derive(Clone, Debug, Deserialize)]
struct Fitted {
    workload: String,
    n: u64,
    #[serde(default)]
    recorded_utc: Option<String>,
    #[serde(default)]
    kernel: Option<String>,
    #[serde(default)]
    cpus: Option<u32>,
    unexplained_ns_per_program_run: Option<Interval>,
}

#[derive(Clone, Debug, Deserialize)]
struct Interval {
    n: usize,
    mean: f64,
    low: Option<f64>,
    high: Option<f64>,
}

const THREADS: &str = include_str!("../../../docs/bench-overhead/figures-threads.json");
const GOROUTINES: &str = include_str!("../../../docs/bench-overhead/figures-goroutines.json");

/// The estimate for one run: its programs' runs at the benchmark's ns per run.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AroundPrograms {
    /// ns per program run (mean, and the 95 % interval over the benchmark's pairs).
    pub ns_per_run: f64,
    pub ns_per_run_low: Option<f64>,
    pub ns_per_run_high: Option<f64>,
    /// This run's programs' runs at those rates, ns.
    pub estimate_ns: f64,
    pub estimate_low_ns: Option<f64>,
    pub estimate_high_ns: Option<f64>,
    /// Where the rate was fitted, in words: workload, N, pairs, machine and date.
    pub fitted_on: String,
}

/// The benchmark's fit for a run of `runtime`: goroutines' for goroutines, the threads' (the
/// largest and best-resolved difference) for every other runtime and for commands. None when the
/// committed figures hold no fit.
fn fitted_for(runtime: Option<Runtime>) -> Option<Fitted> {
    let text = match runtime {
        Some(Runtime::Goroutines) => GOROUTINES,
        _ => THREADS,
    };
    serde_json::from_str(text).ok()
}

/// What the run's `runs` program runs cost around the programs, by the benchmark's fit.
pub fn around_programs(runtime: Option<Runtime>, runs: u64) -> Option<AroundPrograms> {
    let fit = fitted_for(runtime)?;
    let rate = fit.unexplained_ns_per_program_run.as_ref()?;
    let machine = match (&fit.kernel, fit.cpus) {
        (Some(k), Some(c)) => format!(" on {c} CPUs, kernel {k}"),
        (Some(k), None) => format!(" on kernel {k}"),
        _ => String::new(),
    };
    let date = fit
        .recorded_utc
        .as_deref()
        .and_then(|d| d.get(..10))
        .map(|d| format!(", {d}"))
        .unwrap_or_default();
    let x = runs as f64;
    Some(AroundPrograms {
        ns_per_run: rate.mean,
        ns_per_run_low: rate.low,
        ns_per_run_high: rate.high,
        estimate_ns: rate.mean * x,
        estimate_low_ns: rate.low.map(|l| l * x),
        estimate_high_ns: rate.high.map(|h| h * x),
        fitted_on: format!(
            "{} hold --n {}, {} pairs{machine}{date} (docs/bench-overhead)",
            fit.workload, fit.n, rate.n
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_benchmark_gives_each_runtime_a_rate_and_a_run_its_estimate() {
        let threads = around_programs(Some(Runtime::Threads), 1_000_000).expect("threads' fit");
        let goroutines = around_programs(Some(Runtime::Goroutines), 1_000_000).expect("a fit");
        // Each runtime its own workload's fit; a command the threads'.
        assert!(threads.fitted_on.starts_with("threads hold --n 100000"));
        assert!(goroutines
            .fitted_on
            .starts_with("goroutines hold --n 1000000"));
        assert_eq!(around_programs(None, 1_000_000), Some(threads.clone()));
        // The estimate is the runs at the rate, its interval the rate's.
        assert!(threads.ns_per_run > 0.0, "{threads:?}");
        assert!((threads.estimate_ns - threads.ns_per_run * 1e6).abs() < 1e-3);
        let (low, high) = (
            threads.estimate_low_ns.unwrap(),
            threads.estimate_high_ns.unwrap(),
        );
        assert!(
            low <= threads.estimate_ns && threads.estimate_ns <= high,
            "{threads:?}"
        );
        // No runs, nothing around them.
        assert_eq!(
            around_programs(Some(Runtime::Threads), 0)
                .unwrap()
                .estimate_ns,
            0.0
        );
    }
}
