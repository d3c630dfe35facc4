//! How long a woken task waits to run, each runtime by its own scheduler's clock: a thread (or a
//! process) by the kernel's wake→run (the scheduler trace, `--perfetto`), a goroutine by its
//! runtime's readied→running, a tokio task by scheduled→polled (the runtime's trace,
//! `--runtime-trace`). [`of`] is the one place a summary's runtime latency is read from; the
//! comparison's table per workload × N ([`table`]) and the headline's clause for pingpong and chain
//! ([`clause`]) are built on it.
//!
//! The kernel's side comes from a cell's ordinary runs (their trace), the runtime's from its
//! runtime-traced run (run.json's `runtime_traced`): that run's memory and times are the tracer's
//! too and count nowhere else, but its latencies are what it was run for.

use serde::{Deserialize, Serialize};

use crate::comparisons::regression::spread;
use crate::comparisons::run_point::RunPoint;
use crate::run::summary::Summary;
use crate::traces::sched_trace::LatencyRow;
use crate::traces::sched_trace::WHOLE_RUN;
use runtime::{Runtime, DESCRIPTORS};
use units::{count, in_unit};

/// A runtime's own scheduling latency in one summary (a runtime-traced run's).
pub struct RuntimeLatency<'a> {
    pub runtime: Runtime,
    /// What is timed ([`what`]).
    pub what: &'static str,
    /// Per phase, the whole run last.
    pub rows: &'a [LatencyRow],
}

/// The runtime's latency of a run whose summary has its runtime's figures.
pub fn of(summary: &Summary) -> Option<RuntimeLatency<'_>> {
    let runtime = Runtime::ALL
        .into_iter()
        .find(|r| Some(r.name()) == summary.runtime.as_deref())?;
    let rows: &[LatencyRow] = match runtime {
        Runtime::Goroutines => &summary.runtime_trace.as_ref()?.readied_to_running,
        Runtime::Tokio => &summary.tokio_trace.as_ref()?.scheduled_to_polled,
        // Their scheduler is the kernel's: the scheduler trace's wake→run, not a runtime's.
        Runtime::Threads | Runtime::Processes => return None,
    };
    Some(RuntimeLatency {
        runtime,
        what: what(runtime),
        rows,
    })
}

/// What a runtime's latency times: the kernel's wake→run for the runtimes whose tasks the kernel
/// schedules, the runtime's own transition for the others.
pub fn what(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Threads | Runtime::Processes => "wake→run",
        Runtime::Goroutines => "readied→running",
        Runtime::Tokio => "scheduled→polled",
    }
}

/// Whose clock: the kernel's (the scheduler trace) or the runtime's own (its trace).
fn by_kernel(runtime: Runtime) -> bool {
    let d = runtime.describe();
    d.tasks_are_threads || d.tasks_are_processes
}

/// One runtime in a cell of the latency table.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LatencySide {
    pub runtime: String,
    pub n: u64,
    /// wake→run (the kernel's), readied→running (Go's), scheduled→polled (tokio's).
    pub what: String,
    /// True: the kernel's scheduler trace of the cell's ordinary runs; false: the runtime's own
    /// trace, of its runtime-traced run.
    pub kernel: bool,
    /// The runs it is taken from.
    pub runs: usize,
    /// Over the whole run; with several runs, each figure the median of theirs.
    pub latency: Option<LatencyRow>,
    /// Why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// One workload × N of a set with runtime-traced runs: every runtime measured there.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LatencyCell {
    pub machine: String,
    pub workload: String,
    pub n: u64,
    pub sides: Vec<LatencySide>,
}

/// A run as the table takes it: its point (machine, cell, kind) and its summary.
pub struct Taken<'a> {
    pub point: &'a RunPoint,
    pub summary: &'a Summary,
}

fn whole(rows: &[LatencyRow]) -> Option<&LatencyRow> {
    rows.iter()
        .rev()
        .find(|r| r.phase == WHOLE_RUN)
        .filter(|r| r.count > 0)
}

/// Each figure the median of the rows' (one row: itself).
fn median_row(rows: &[&LatencyRow]) -> Option<LatencyRow> {
    let med = |f: fn(&LatencyRow) -> u64| -> Option<u64> {
        let values: Vec<f64> = rows.iter().map(|r| f(r) as f64).collect();
        spread(&values).map(|s| s.median.round() as u64)
    };
    Some(LatencyRow {
        phase: WHOLE_RUN.into(),
        count: med(|r| r.count)?,
        p50_ns: med(|r| r.p50_ns)?,
        p90_ns: med(|r| r.p90_ns)?,
        p99_ns: med(|r| r.p99_ns)?,
        max_ns: med(|r| r.max_ns)?,
    })
}

/// The latency table: for each machine × workload × N where a runtime-traced run was measured,
/// every runtime measured there, in the descriptors' order. Empty without runtime-traced runs.
pub fn table(runs: &[Taken]) -> Vec<LatencyCell> {
    let measured: Vec<&Taken> = runs.iter().filter(|t| t.point.measured).collect();
    let mut keys: Vec<(&str, &str, u64)> = Vec::new();
    for t in measured.iter().filter(|t| t.point.runtime_traced) {
        if let (Some(w), Some(n)) = (t.point.workload.as_deref(), t.point.n) {
            if !keys.contains(&(t.point.machine.as_str(), w, n)) {
                keys.push((&t.point.machine, w, n));
            }
        }
    }
    keys.sort_by_key(|&(m, w, n)| (m, runtime::WorkloadKind::order_of(w), n));
    keys.into_iter()
        .map(|(machine, workload, n)| {
            let here: Vec<&Taken> = measured
                .iter()
                .copied()
                .filter(|t| {
                    t.point.machine == machine
                        && t.point.workload.as_deref() == Some(workload)
                        && t.point.n == Some(n)
                })
                .collect();
            LatencyCell {
                machine: machine.into(),
                workload: workload.into(),
                n,
                sides: DESCRIPTORS
                    .iter()
                    .filter(|d| {
                        here.iter()
                            .any(|t| t.point.runtime.as_deref() == Some(d.name))
                    })
                    .map(|d| side(d.runtime, n, &here))
                    .collect(),
            }
        })
        .collect()
}

/// One runtime's side at one cell: the kernel's from its ordinary runs, or the runtime's from its
/// runtime-traced ones; missing says why.
fn side(runtime: Runtime, n: u64, here: &[&Taken]) -> LatencySide {
    let mine: Vec<&Taken> = here
        .iter()
        .copied()
        .filter(|t| t.point.runtime.as_deref() == Some(runtime.name()))
        .collect();
    let kernel = by_kernel(runtime);
    let (from, rows): (Vec<&Taken>, Vec<&LatencyRow>) = if kernel {
        let ordinary: Vec<&Taken> = mine
            .into_iter()
            .filter(|t| !t.point.runtime_traced)
            .collect();
        let rows = ordinary
            .iter()
            .filter_map(|t| whole(&t.summary.scheduler_trace.as_ref()?.wake_to_run))
            .collect();
        (ordinary, rows)
    } else {
        let traced: Vec<&Taken> = mine
            .into_iter()
            .filter(|t| t.point.runtime_traced)
            .collect();
        let rows = traced
            .iter()
            .filter_map(|t| {
                of(t.summary).filter(|l| l.runtime == runtime && l.what == what(runtime))
            })
            .filter_map(|l| whole(l.rows))
            .collect();
        (traced, rows)
    };
    let missing = rows.is_empty().then(|| match (kernel, from.is_empty()) {
        (true, _) => "no scheduler trace in its runs (--perfetto)".to_string(),
        (false, true) => match runtime.runtime_trace_flag() {
            Err(why) => why,
            Ok(_) => "no runtime-traced run (--runtime-trace)".to_string(),
        },
        (false, false) => "its runtime-traced run gave none (its summary says why)".to_string(),
    });
    LatencySide {
        runtime: runtime.name().into(),
        n,
        what: what(runtime).into(),
        kernel,
        runs: rows.len(),
        latency: median_row(&rows),
        missing,
    }
}

/// A workload's sides for its headline: each runtime at the largest N where it has its latency,
/// else (missing) at its largest N. Empty where the table has none of this machine and workload.
pub fn headline_sides(table: &[LatencyCell], machine: &str, workload: &str) -> Vec<LatencySide> {
    let cells: Vec<&LatencyCell> = table
        .iter()
        .filter(|c| c.machine == machine && c.workload == workload)
        .collect();
    DESCRIPTORS
        .iter()
        .filter_map(|d| {
            let sides: Vec<&LatencySide> = cells
                .iter()
                .flat_map(|c| &c.sides)
                .filter(|s| s.runtime == d.name)
                .collect();
            let best = |with: bool| {
                sides
                    .iter()
                    .filter(|s| s.latency.is_some() == with)
                    .max_by_key(|s| s.n)
                    .copied()
            };
            best(true).or_else(|| best(false)).cloned()
        })
        .collect()
}

fn one_task(runtime: &str) -> &str {
    DESCRIPTORS
        .iter()
        .find(|d| d.name == runtime)
        .map_or(runtime, |d| d.one_task)
}

/// The headline's clause: "; a woken thread waits 13.0 µs to run, a goroutine 3.0 µs (p50; p99
/// 40.0 µs, 9.0 µs; N = 10,000; the thread's the kernel's wake→run, the goroutine's its runtime's
/// readied→running); a tokio task's scheduled→polled is missing: …".
pub fn clause(sides: &[LatencySide]) -> String {
    let present: Vec<(&LatencySide, &LatencyRow)> = sides
        .iter()
        .filter_map(|s| Some((s, s.latency.as_ref()?)))
        .collect();
    let mut text = String::new();
    if !present.is_empty() {
        let p50s: Vec<String> = present
            .iter()
            .enumerate()
            .map(|(i, (s, row))| {
                let p50 = in_unit(row.p50_ns as f64, "ns");
                if i == 0 {
                    format!("a woken {} waits {p50} to run", one_task(&s.runtime))
                } else {
                    format!("a {} {p50}", one_task(&s.runtime))
                }
            })
            .collect();
        let p99s: Vec<String> = present
            .iter()
            .map(|(_, row)| in_unit(row.p99_ns as f64, "ns"))
            .collect();
        let ns = if present.iter().all(|(s, _)| s.n == present[0].0.n) {
            format!("N = {}", count(present[0].0.n))
        } else {
            present
                .iter()
                .map(|(s, _)| format!("{} at N = {}", s.runtime, count(s.n)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let whose: Vec<String> = present
            .iter()
            .map(|(s, _)| {
                format!(
                    "the {}'s {} {}",
                    one_task(&s.runtime),
                    if s.kernel {
                        "the kernel's"
                    } else {
                        "its runtime's"
                    },
                    s.what
                )
            })
            .collect();
        let medians = if present.iter().any(|(s, _)| s.runs > 1) {
            ", medians over runs"
        } else {
            ""
        };
        text.push_str(&format!(
            "; {} (p50; p99 {}; {ns}{medians}; {})",
            p50s.join(", "),
            p99s.join(", "),
            whose.join(", ")
        ));
    }
    for s in sides {
        if let (None, Some(why)) = (&s.latency, &s.missing) {
            text.push_str(&format!(
                "; a {}'s {} is missing: {why}",
                one_task(&s.runtime),
                s.what
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::go_sched::GoSchedFigures;
    use crate::test_support::run_point;
    use crate::traces::sched_figures::SchedFigures;

    /// A scheduler trace's figures with these wake→run rows, the rest empty.
    fn sched_figures(wake_to_run: Vec<LatencyRow>) -> SchedFigures {
        serde_json::from_value(serde_json::json!({
            "method": "", "wake_to_run": wake_to_run, "preempted_to_run": [], "records": 0,
            "processes": 1, "threads": 0, "switches": 0, "waits": [], "records_lost": 0,
            "late_records": 0, "notes": []
        }))
        .unwrap()
    }

    /// The Go runtime's figures with these readied→running rows, the rest empty.
    fn go_figures(readied_to_running: Vec<LatencyRow>) -> GoSchedFigures {
        serde_json::from_value(serde_json::json!({
            "method": "", "runtime_traced": true, "records": 0, "created": 0,
            "created_by_function": {}, "at_start": 0, "started": 0, "blocked": 0,
            "blocked_by_reason": {}, "unblocked": 0, "stopped_by_reason": {}, "syscalls": 0,
            "destroyed": 0, "readied_to_running": readied_to_running,
            "created_check": {"by_the_workload": 0, "workload_spawned": null, "runtime_own": {},
                              "agrees": null},
            "threads": [], "running_slices": 0, "notes": []
        }))
        .unwrap()
    }

    fn row(p50_us: u64, count: u64) -> LatencyRow {
        LatencyRow {
            phase: WHOLE_RUN.into(),
            count,
            p50_ns: p50_us * 1_000,
            p90_ns: p50_us * 2_000,
            p99_ns: p50_us * 4_000,
            max_ns: p50_us * 10_000,
        }
    }

    /// A pingpong run of `runtime` at N: with the kernel's wake→run (a scheduler trace), or
    /// runtime-traced with the runtime's readied→running.
    fn run(
        runtime: &str,
        n: u64,
        kernel_p50_us: Option<u64>,
        runtime_p50_us: Option<u64>,
    ) -> (RunPoint, Summary) {
        let mut point = run_point(runtime, "pingpong", n);
        point.runtime_traced = runtime_p50_us.is_some();
        let summary = Summary {
            runtime: Some(runtime.into()),
            workload: Some("pingpong".into()),
            n: Some(n),
            scheduler_trace: kernel_p50_us.map(|p| sched_figures(vec![row(p, 2 * n)])),
            runtime_trace: runtime_p50_us.map(|p| {
                go_figures(vec![
                    LatencyRow {
                        phase: "spawn".into(),
                        ..row(p * 3, 10)
                    },
                    row(p, 4 * n),
                ])
            }),
            ..Default::default()
        };
        (point, summary)
    }

    fn taken(runs: &[(RunPoint, Summary)]) -> Vec<Taken<'_>> {
        runs.iter()
            .map(|(point, summary)| Taken { point, summary })
            .collect()
    }

    #[test]
    fn goroutines_read_their_runtime_s_whole_run_and_the_kernel_s_runtimes_none() {
        let (_, go) = run("goroutines", 100, None, Some(3));
        let l = of(&go).unwrap();
        assert_eq!(
            (l.runtime, l.what),
            (Runtime::Goroutines, "readied→running")
        );
        assert_eq!(whole(l.rows).unwrap().p50_ns, 3_000);
        let (_, threads) = run("threads", 100, Some(13), None);
        assert!(of(&threads).is_none());
        let tokio = Summary {
            runtime: Some("tokio".into()),
            ..Default::default()
        };
        assert!(of(&tokio).is_none());
    }

    #[test]
    fn the_table_takes_the_kernel_s_from_ordinary_runs_and_the_runtime_s_from_its_traced_run() {
        let runs = vec![
            run("threads", 10_000, Some(13), None),
            run("threads", 10_000, Some(15), None),
            // Goroutines' ordinary run has a kernel trace of its Ms: not their side.
            run("goroutines", 10_000, Some(50), None),
            run("goroutines", 10_000, Some(50), Some(3)),
            run("tokio", 10_000, Some(40), None),
        ];
        let t = table(&taken(&runs));
        assert_eq!(t.len(), 1);
        let c = &t[0];
        assert_eq!((c.workload.as_str(), c.n), ("pingpong", 10_000));
        let names: Vec<&str> = c.sides.iter().map(|s| s.runtime.as_str()).collect();
        assert_eq!(names, ["threads", "goroutines", "tokio"]);
        assert_eq!(c.sides[0].runs, 2);
        assert_eq!(c.sides[0].latency.as_ref().unwrap().p50_ns, 14_000);
        assert!(c.sides[0].kernel);
        assert_eq!(c.sides[1].latency, Some(row(3, 40_000)));
        assert_eq!(c.sides[1].runs, 1);
        assert_eq!(c.sides[2].latency, None);
        assert_eq!(
            c.sides[2].missing.as_deref(),
            Some("no runtime-traced run (--runtime-trace)")
        );
        // Without a runtime-traced run there is no table.
        assert!(table(&taken(&runs[..3])).is_empty());
    }

    #[test]
    fn the_clause_says_each_side_and_where_one_is_missing_and_why() {
        let runs = vec![
            run("threads", 10_000, Some(13), None),
            run("goroutines", 10_000, None, Some(3)),
            run("tokio", 10_000, None, None),
        ];
        let t = table(&taken(&runs));
        let sides = headline_sides(&t, "M1", "pingpong");
        assert_eq!(
            clause(&sides),
            "; a woken thread waits 13.0 µs to run, a goroutine 3.0 µs (p50; p99 52.0 µs, 12.0 µs; \
             N = 10,000; the thread's the kernel's wake→run, the goroutine's its runtime's \
             readied→running); a tokio task's scheduled→polled is missing: no runtime-traced run \
             (--runtime-trace)"
        );
    }

    #[test]
    fn a_synthetic_tokio_side_and_sides_at_different_n_are_said_so() {
        let tokio = LatencySide {
            runtime: "tokio".into(),
            n: 100_000,
            what: what(Runtime::Tokio).into(),
            kernel: false,
            runs: 1,
            latency: Some(row(2, 400_000)),
            missing: None,
        };
        let threads = LatencySide {
            runtime: "threads".into(),
            n: 10_000,
            what: what(Runtime::Threads).into(),
            kernel: true,
            runs: 3,
            latency: Some(row(13, 20_000)),
            missing: None,
        };
        let goroutines = LatencySide {
            runtime: "goroutines".into(),
            n: 10_000,
            what: what(Runtime::Goroutines).into(),
            kernel: false,
            runs: 0,
            latency: None,
            missing: Some("no runtime-traced run (--runtime-trace)".into()),
        };
        assert_eq!(
            clause(&[threads, goroutines, tokio]),
            "; a woken thread waits 13.0 µs to run, a tokio task 2.0 µs (p50; p99 52.0 µs, 8.0 µs; \
             threads at N = 10,000, tokio at N = 100,000, medians over runs; the thread's the \
             kernel's wake→run, the tokio task's its runtime's scheduled→polled); a goroutine's \
             readied→running is missing: no runtime-traced run (--runtime-trace)"
        );
    }

    #[test]
    fn a_runtime_traced_run_without_figures_and_threads_without_a_trace_say_why() {
        let runs = vec![
            run("threads", 1_000, None, None),
            (
                RunPoint {
                    runtime_traced: true,
                    ..run_point("goroutines", "pingpong", 1_000)
                },
                Summary {
                    runtime: Some("goroutines".into()),
                    ..Default::default()
                },
            ),
        ];
        let t = table(&taken(&runs));
        let sides = headline_sides(&t, "M1", "pingpong");
        assert_eq!(
            clause(&sides),
            "; a thread's wake→run is missing: no scheduler trace in its runs (--perfetto); a \
             goroutine's readied→running is missing: its runtime-traced run gave none (its summary \
             says why)"
        );
    }
}
