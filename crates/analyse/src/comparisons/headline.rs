//! A comparison's result in one line per workload, the way hyperfine states its own: "hold: a
//! thread costs 13.5× a goroutine in memory and 12.7× in spawn time". Per machine and workload,
//! each runtime at the largest N it was measured at (per-task figures, so runtimes measured at
//! different N compare), medians over its repeats there: memory over every measured run, the spawn
//! time over those whose times count (the untraced ones where there are any: analyse::times_from).
//!
//! With three runtimes or more, every runtime is stated against the cheapest in memory, dearest
//! first ("a thread costs 80× a tokio task …, and a goroutine costs 6× a tokio task …"): one base
//! for all keeps each factor read the same way and the ends' distance in plain sight, where a
//! chain (each against the next) would hide it, and the factors between the dearer ones follow by
//! division. With two it is the one pair, as before.
//!
//! A run whose cross-checks failed (`analyse/probes/counts_verdict.rs`) is named in the line: its
//! counts are wrong, and a headline read alone must not hide it. One run's own line, its outcome,
//! says so too ([`of_run`]).

use serde::{Deserialize, Serialize};

use crate::comparisons::regression::spread;
use crate::memory::per_task::memory_unresolved;
use crate::probes::counts_verdict;
use crate::run::summary::Summary;
use crate::time::times_from::timed;
use crate::traces::runtime_latency::{self, LatencySide};
use runtime::DESCRIPTORS;
use units::{bytes, count, in_unit};

/// One runtime's side of a headline.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Side {
    pub runtime: String,
    pub n: u64,
    pub runs: usize,
    /// Medians: memory per task alive (KiB), spawn time per task spawned (µs).
    pub memory_kib: Option<f64>,
    pub spawn_us: Option<f64>,
    /// A run at this N held too little memory to resolve its memory per task
    /// (`resolution::judge_held`): the line says the memory factor is not resolved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_unresolved: bool,
    /// Of `runs`, those whose counts are wrong (a cross-check failed): the line says so.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub counts_wrong_runs: usize,
    /// The spawn time's runs when every one of them is suspect (the time verdict found a
    /// sentinel past its rule in each): the figure rests on no trustworthy run, and the line
    /// marks it (`SUSPECT_MARK`). 0: some run was trustworthy, or none had a verdict.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spawn_from_suspect_runs: usize,
}

/// What marks a time figure that rests on no trustworthy run (every run it is the median of is
/// suspect), beside † (emulated), ‡ (memory not resolved) and § (counts wrong).
pub const SUSPECT_MARK: &str = "¶";

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Headline {
    /// The machine's id when the set has several, else None.
    pub machine: Option<String>,
    pub workload: String,
    /// The dearest in memory per task.
    pub dearer: Side,
    /// The cheapest in memory per task: the others are stated against it.
    pub cheaper: Side,
    /// With three runtimes or more, those between the two, dearest first (absent with two).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub between: Vec<Side>,
    /// The machine's CPU was emulated: spawn times are left out of the line (they are the
    /// emulator's), which says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub times_emulated: bool,
    /// pingpong and chain, runs with a scheduler trace: how long a woken thread waits to run,
    /// per runtime (absent elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub woken: Vec<Woken>,
    /// pingpong and chain without a run that could say it (neither `--perfetto` nor
    /// `--probes full`): the line says how to get it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub woken_untold: bool,
    /// pingpong and chain in a set with runtime-traced runs: each runtime's wait by its own
    /// scheduler (the kernel's wake→run, a runtime's readied→running or scheduled→polled),
    /// said instead of `woken` (analyse/traces/runtime_latency.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<LatencySide>,
}

/// The workloads whose headline says how long a woken thread waits to run: their tasks wake each
/// other, so that wait is what they measure.
pub const WAKE_WORKLOADS: [&str; 2] = ["pingpong", "chain"];

/// One runtime's wake-to-run in a headline: the median over its traced runs at its largest N of
/// each run's p50 — from the scheduler trace (analyse::sched_trace), else from the full probes'
/// `wake_to_run_ns` histogram, whose p50 is a log2 bucket's upper bound.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Woken {
    pub runtime: String,
    pub n: u64,
    pub runs: usize,
    pub p50_ns: f64,
    /// p50_ns is an upper bound (the probes' log2 buckets), not the trace's value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_most: bool,
}

/// A run's wake-to-run p50: the trace's, else the full probes' bound (true).
fn wake_p50(summary: &Summary) -> Option<(f64, bool)> {
    if let Some(row) = summary
        .scheduler_trace
        .as_ref()
        .and_then(|t| t.wake_whole())
    {
        return (row.count > 0).then_some((row.p50_ns as f64, false));
    }
    let probes = summary.probes.as_ref()?;
    let h = probes
        .latencies
        .iter()
        .find(|l| l.name == "wake_to_run_ns" && l.count > 0)?;
    Some((h.p50_ns? as f64, true))
}

/// Per runtime (in the descriptors' order), the wake-to-run of a workload's traced runs.
fn woken(runs: &[Measured], machine: &str, workload: &str) -> Vec<Woken> {
    if !WAKE_WORKLOADS.contains(&workload) {
        return Vec::new();
    }
    DESCRIPTORS
        .iter()
        .filter_map(|d| {
            let traced: Vec<(u64, f64, bool)> = runs
                .iter()
                .filter(|r| {
                    r.measured
                        && r.machine == machine
                        && r.summary.workload.as_deref() == Some(workload)
                        && r.summary.runtime.as_deref() == Some(d.name)
                })
                .filter_map(|r| {
                    let (p50, at_most) = wake_p50(r.summary)?;
                    Some((r.summary.n?, p50, at_most))
                })
                .collect();
            // The trace's values where any run has one, the probes' bounds only without.
            let exact = traced.iter().any(|t| !t.2);
            let traced: Vec<_> = traced.into_iter().filter(|t| t.2 != exact).collect();
            let n = traced.iter().map(|t| t.0).max()?;
            let at_n: Vec<f64> = traced.iter().filter(|t| t.0 == n).map(|t| t.1).collect();
            Some(Woken {
                runtime: d.name.into(),
                n,
                runs: at_n.len(),
                p50_ns: median(at_n.into_iter())?,
                at_most: !exact,
            })
        })
        .collect()
}

/// A run as the headline takes it: its machine's id and its summary.
pub struct Measured<'a> {
    pub machine: &'a str,
    pub summary: &'a Summary,
    /// Its figures were measured (completed, or stopped at a limit with its tasks measured).
    pub measured: bool,
    /// Its machine's CPU was emulated (QEMU's TCG): its times are not the kernel's.
    pub emulated: bool,
    /// The eBPF collector was attached: its spawn time carries the probes' cost, and is left out
    /// where untraced runs of the same experiment were measured (analyse::times_from).
    pub traced: bool,
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    spread(&values.collect::<Vec<_>>()).map(|s| s.median)
}

/// One headline per machine and workload that two runtimes or more were measured on.
pub fn headlines(runs: &[Measured], several_machines: bool) -> Vec<Headline> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in runs.iter().filter(|r| r.measured) {
        if let Some(w) = r.summary.workload.as_deref() {
            if !keys.contains(&(r.machine, w)) {
                keys.push((r.machine, w));
            }
        }
    }
    keys.into_iter()
        .filter_map(|(machine, workload)| {
            let emulated = runs.iter().any(|r| r.machine == machine && r.emulated);
            let sides: Vec<Side> = DESCRIPTORS
                .iter()
                .filter_map(|d| {
                    let mine: Vec<&Measured> = runs
                        .iter()
                        .filter(|r| {
                            r.measured
                                && r.machine == machine
                                && r.summary.workload.as_deref() == Some(workload)
                                && r.summary.runtime.as_deref() == Some(d.name)
                        })
                        .collect();
                    let n = mine.iter().filter_map(|r| r.summary.n).max()?;
                    let at_n: Vec<&Measured> = mine
                        .into_iter()
                        .filter(|r| r.summary.n == Some(n))
                        .collect();
                    // Memory over every run at N; the spawn time over those whose times count.
                    let (timed_at_n, _) = timed(&at_n, |r| r.traced);
                    let at_n: Vec<&Summary> = at_n.iter().map(|r| r.summary).collect();
                    Some(Side {
                        runtime: d.name.into(),
                        n,
                        runs: at_n.len(),
                        memory_kib: median(
                            at_n.iter()
                                .filter_map(|s| Some(s.memory_per_task.as_ref()?.total_kb)),
                        ),
                        memory_unresolved: at_n
                            .iter()
                            .any(|s| memory_unresolved(s.memory_per_task.as_ref())),
                        counts_wrong_runs: at_n
                            .iter()
                            .filter(|s| counts_verdict::wrong(s.counts_verdict.as_ref()))
                            .count(),
                        spawn_us: median(
                            timed_at_n
                                .iter()
                                .filter_map(|r| r.summary.time_per_task.as_ref()?.spawn_us),
                        )
                        .filter(|_| !emulated),
                        spawn_from_suspect_runs: suspect_only(&timed_at_n),
                    })
                })
                .filter(|s| s.memory_kib.is_some())
                .collect();
            Headline::of_sides(
                several_machines.then(|| machine.to_string()),
                workload,
                sides,
                emulated,
            )
            .map(|h| {
                let woken = woken(runs, machine, workload);
                Headline {
                    woken_untold: woken.is_empty() && WAKE_WORKLOADS.contains(&workload),
                    woken,
                    ..h
                }
            })
        })
        .collect()
}

/// How many runs a time figure is the median of, when each of them is suspect; 0 when one is
/// trustworthy or a run has no verdict (records from before it).
fn suspect_only(timed: &[&Measured]) -> usize {
    let timed: Vec<&&Measured> = timed
        .iter()
        .filter(|r| {
            r.summary
                .time_per_task
                .as_ref()
                .is_some_and(|t| t.spawn_us.is_some())
        })
        .collect();
    let all_suspect = !timed.is_empty()
        && timed
            .iter()
            .all(|r| r.summary.verdict.as_ref().is_some_and(|v| !v.trustworthy));
    if all_suspect {
        timed.len()
    } else {
        0
    }
}

fn one_task(runtime: &str) -> &str {
    DESCRIPTORS
        .iter()
        .find(|d| d.name == runtime)
        .map_or(runtime, |d| d.one_task)
}

fn factor(dearer: f64, cheaper: f64) -> f64 {
    dearer / cheaper.max(f64::MIN_POSITIVE)
}

impl Headline {
    /// The headline of a workload's sides (one per runtime): the dearest in memory against the
    /// cheapest, the others between; None with fewer than two.
    pub fn of_sides(
        machine: Option<String>,
        workload: &str,
        mut sides: Vec<Side>,
        times_emulated: bool,
    ) -> Option<Headline> {
        if sides.len() < 2 {
            return None;
        }
        sides.sort_by(|a, b| {
            b.memory_kib
                .unwrap_or(0.0)
                .total_cmp(&a.memory_kib.unwrap_or(0.0))
        });
        let cheaper = sides.pop()?;
        let dearer = sides.remove(0);
        Some(Headline {
            machine,
            workload: workload.into(),
            dearer,
            cheaper,
            between: sides,
            times_emulated,
            woken: Vec::new(),
            woken_untold: false,
            latency: Vec::new(),
        })
    }

    /// "hold: a thread costs 13.5× a goroutine in memory (36.5 KiB against 2.7 KiB per task) and
    /// 12.7× in spawn time (40.5 µs against 3.2 µs); threads at N = 100,000 (3 runs), goroutines
    /// at N = 1,000,000 (3 runs), medians". With three runtimes, one such clause per runtime
    /// against the cheapest, dearest first, joined by ", and ".
    pub fn line(&self) -> String {
        let base = &self.cheaper;
        let dearer: Vec<&Side> = std::iter::once(&self.dearer).chain(&self.between).collect();
        let mut line = String::new();
        if let Some(m) = &self.machine {
            line.push_str(&format!("on {m}, "));
        }
        line.push_str(&format!("{}: ", self.workload));
        let clauses: Vec<String> = dearer.iter().map(|a| clause(a, base)).collect();
        line.push_str(&clauses.join(", and "));
        let runs = |k: usize| {
            if k == 1 {
                "1 run".to_string()
            } else {
                format!("{k} runs")
            }
        };
        let sizes: Vec<String> = dearer
            .iter()
            .copied()
            .chain([base])
            .map(|s| format!("{} at N = {} ({})", s.runtime, count(s.n), runs(s.runs)))
            .collect();
        line.push_str(&format!("; {}, medians", sizes.join(", ")));
        if self.times_emulated {
            line.push_str(" (spawn times left out: the CPU was emulated)");
        }
        let wrong: Vec<String> = dearer
            .iter()
            .copied()
            .chain([base])
            .filter(|s| s.counts_wrong_runs > 0)
            .map(|s| format!("{} of {} {} runs", s.counts_wrong_runs, s.runs, s.runtime))
            .collect();
        if !wrong.is_empty() {
            line.push_str(&format!(
                "; counts WRONG in {} (a cross-check failed)",
                wrong.join(" and ")
            ));
        }
        let suspect: Vec<String> = dearer
            .iter()
            .copied()
            .chain([base])
            .filter(|s| s.spawn_from_suspect_runs > 0 && s.spawn_us.is_some())
            .map(|s| {
                format!(
                    "{} spawn time from {} suspect run{}",
                    s.runtime,
                    s.spawn_from_suspect_runs,
                    if s.spawn_from_suspect_runs == 1 {
                        ""
                    } else {
                        "s"
                    }
                )
            })
            .collect();
        if !suspect.is_empty() {
            line.push_str(&format!(
                "; {SUSPECT_MARK} {} (no trustworthy run: each run's summary says why)",
                suspect.join(" and ")
            ));
        }
        let woken: Vec<String> = self
            .woken
            .iter()
            .enumerate()
            .map(|(i, w)| {
                format!(
                    "{}{}{} ({} {}, N = {}{})",
                    if w.at_most { "≤ " } else { "" },
                    in_unit(w.p50_ns, "ns"),
                    if i == 0 { " to run" } else { "" },
                    w.runtime,
                    self.workload,
                    count(w.n),
                    if w.runs == 1 {
                        String::new()
                    } else {
                        format!(", median of {} runs", w.runs)
                    }
                )
            })
            .collect();
        if !self.latency.is_empty() {
            line.push_str(&runtime_latency::clause(&self.latency));
        } else if !woken.is_empty() {
            let from = if self.woken.iter().any(|w| w.at_most) {
                "p50 from the full probes' wake-to-run histogram, an upper bound of its log2 bucket; --perfetto gives the value"
            } else {
                "p50 from the scheduler trace"
            };
            line.push_str(&format!(
                "; a woken thread waits {} ({from})",
                woken.join(" and ")
            ));
        } else if self.woken_untold {
            line.push_str(
                "; how long a woken thread waits to run needs a scheduler trace (--perfetto) or --probes full",
            );
        }
        line
    }
}

/// One run's result in one line, as its terminal view and summary.md give it: its outcome, and,
/// when a cross-check failed, that its counts are wrong ("completed — counts WRONG (1
/// cross-check failed)").
pub fn of_run(s: &Summary) -> String {
    match s.counts_verdict.as_ref().and_then(|v| v.headline_clause()) {
        Some(clause) => format!("{} — {clause}", s.outcome),
        None => s.outcome.clone(),
    }
}

/// "a thread costs 13.5× a goroutine in memory (36.5 KiB against 2.7 KiB per task) and 12.7× in
/// spawn time (40.5 µs against 3.2 µs)".
fn clause(a: &Side, b: &Side) -> String {
    let (ma, mb) = (a.memory_kib.unwrap_or(0.0), b.memory_kib.unwrap_or(0.0));
    // Said inside the parenthesis it qualifies: the factor is not a figure at these N.
    let unresolved = if a.memory_unresolved || b.memory_unresolved {
        "; not resolved at these N"
    } else {
        ""
    };
    let mut text = format!(
        "a {} costs {:.1}× a {} in memory ({} against {} per task{unresolved})",
        one_task(&a.runtime),
        factor(ma, mb),
        one_task(&b.runtime),
        bytes(ma * 1024.0),
        bytes(mb * 1024.0)
    );
    if let (Some(sa), Some(sb)) = (a.spawn_us, b.spawn_us) {
        let f = factor(sa, sb);
        // Within 5 % a factor says nothing ("1.0× less").
        let how = if (f - 1.0).abs() < 0.05 {
            "and about the same in spawn time".to_string()
        } else if f >= 1.0 {
            format!("and {f:.1}× in spawn time")
        } else {
            format!("but {:.1}× less in spawn time", 1.0 / f)
        };
        let mark = |side: &Side| {
            if side.spawn_from_suspect_runs > 0 {
                format!(" {SUSPECT_MARK}")
            } else {
                String::new()
            }
        };
        text.push_str(&format!(
            " {how} ({sa:.1} µs{} against {sb:.1} µs{})",
            mark(a),
            mark(b)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::per_task::MemoryPerTask;
    use crate::probes::counts::ProbeSummary;
    use crate::run::summary::TimePerTask;
    use spawnscope_collector::{CrossCheck, Verdict as CheckVerdict};

    fn run(runtime: &str, n: u64, memory_kb: f64, spawn_us: f64) -> Summary {
        Summary {
            runtime: Some(runtime.into()),
            workload: Some("hold".into()),
            n: Some(n),
            ok: true,
            memory_per_task: Some(MemoryPerTask {
                total_kb: memory_kb,
                ..Default::default()
            }),
            time_per_task: Some(TimePerTask {
                spawn_us: Some(spawn_us),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn on_m1(summaries: &[Summary]) -> Vec<Measured<'_>> {
        summaries
            .iter()
            .map(|s| Measured {
                machine: "M1",
                summary: s,
                measured: true,
                emulated: false,
                traced: true,
            })
            .collect()
    }

    /// A summary whose cross-check of threads created failed (`run --tasks 50 --task-kind thread
    /// -- sleep 1`: sleep creates none).
    fn counts_wrong(mut s: Summary) -> Summary {
        let probes = ProbeSummary {
            cross_checks: vec![CrossCheck {
                name: "threads created vs --tasks".into(),
                expected: 50,
                observed: 0,
                observed_max: 0,
                tolerance: 0,
                verdict: CheckVerdict::Fail,
                basis: String::new(),
            }],
            ..Default::default()
        };
        s.counts_verdict = Some(counts_verdict::judge(Some(&probes), &[]));
        s
    }

    /// A pingpong run with a scheduler trace whose whole-run wake-to-run has this p50.
    fn pingpong_traced(runtime: &str, n: u64, memory_kb: f64, wake_p50_ns: u64) -> Summary {
        use crate::traces::sched_figures::SchedFigures;
        use crate::traces::sched_trace::LatencyRow;
        use crate::traces::sched_trace::WHOLE_RUN;
        let mut s = run(runtime, n, memory_kb, 10.0);
        s.workload = Some("pingpong".into());
        s.scheduler_trace = Some(SchedFigures {
            kept_window: None,
            method: String::new(),
            wake_to_run: vec![LatencyRow {
                phase: WHOLE_RUN.into(),
                count: 2 * n,
                p50_ns: wake_p50_ns,
                p90_ns: wake_p50_ns,
                p99_ns: wake_p50_ns,
                max_ns: wake_p50_ns,
            }],
            preempted_to_run: Vec::new(),
            records: 0,
            processes: 1,
            threads: n,
            switches: 0,
            waits: Vec::new(),
            records_lost: Some(0),
            late_records: 0,
            probes_runq: None,
            notes: Vec::new(),
            too_big_for_the_ui: None,
        });
        s
    }

    #[test]
    fn pingpong_s_headline_says_how_long_a_woken_thread_waits_naming_runtime_and_n() {
        let runs = [
            pingpong_traced("threads", 1_000, 40.0, 12_000),
            pingpong_traced("threads", 1_000, 40.0, 14_000),
            pingpong_traced("goroutines", 1_000, 4.0, 3_000),
            // A hold run's trace never joins hold's headline.
            run("goroutines", 1_000, 4.0, 1.0),
            run("threads", 1_000, 40.0, 10.0),
        ];
        let mut hold_traced = pingpong_traced("threads", 1_000, 40.0, 9_000);
        hold_traced.workload = Some("hold".into());
        let mut all = runs.to_vec();
        all.push(hold_traced);
        let lines = headlines(&on_m1(&all), false);
        let pingpong = lines.iter().find(|h| h.workload == "pingpong").unwrap();
        assert!(
            pingpong.line().ends_with("; a woken thread waits 13.0 µs to run (threads pingpong, N = 1,000, median of 2 runs) and 3.0 µs (goroutines pingpong, N = 1,000) (p50 from the scheduler trace)"),
            "{}",
            pingpong.line()
        );
        let hold = lines.iter().find(|h| h.workload == "hold").unwrap();
        assert!(hold.woken.is_empty() && !hold.line().contains("woken"));
    }

    /// A pingpong run with the full probes only: their wake-to-run histogram's p50 bound.
    fn pingpong_full(runtime: &str, n: u64, memory_kb: f64, p50_at_most_ns: u64) -> Summary {
        use crate::probes::counts::Latency;
        let mut s = run(runtime, n, memory_kb, 10.0);
        s.workload = Some("pingpong".into());
        s.probes = Some(ProbeSummary {
            latencies: vec![Latency {
                name: "wake_to_run_ns".into(),
                count: 2 * n,
                p50_ns: Some(p50_at_most_ns),
                p99_ns: Some(p50_at_most_ns),
            }],
            ..Default::default()
        });
        s
    }

    #[test]
    fn without_a_trace_the_full_probes_bound_says_it_and_else_the_line_says_how() {
        // The trace's value wins over the probes' bound; the bound stands where it is all.
        let runs = [
            pingpong_full("threads", 1_000, 40.0, 16_384),
            pingpong_traced("goroutines", 1_000, 4.0, 3_000),
            pingpong_full("goroutines", 1_000, 4.0, 4_096),
        ];
        let line = headlines(&on_m1(&runs), false)[0].line();
        assert!(
            line.ends_with("; a woken thread waits ≤ 16.4 µs to run (threads pingpong, N = 1,000) and 3.0 µs (goroutines pingpong, N = 1,000) (p50 from the full probes' wake-to-run histogram, an upper bound of its log2 bucket; --perfetto gives the value)"),
            "{line}"
        );
        // Neither: the line says what would tell it.
        let runs = [
            run("threads", 1_000, 40.0, 10.0),
            run("goroutines", 1_000, 4.0, 1.0),
        ]
        .map(|mut s| {
            s.workload = Some("chain".into());
            s
        });
        let lines = headlines(&on_m1(&runs), false);
        assert!(lines[0].woken_untold);
        assert!(
            lines[0].line().ends_with("; how long a woken thread waits to run needs a scheduler trace (--perfetto) or --probes full"),
            "{}",
            lines[0].line()
        );
    }

    #[test]
    fn a_run_whose_counts_are_wrong_says_so_in_its_own_line() {
        let mut s = run("threads", 50, 40.0, 30.0);
        s.outcome = "completed".into();
        s.counts_verdict = Some(counts_verdict::judge(None, &[]));
        assert_eq!(of_run(&s), "completed", "not checked is no news");
        let s = counts_wrong(s);
        assert_eq!(
            of_run(&s),
            "completed — counts WRONG (1 cross-check failed)"
        );
    }

    #[test]
    fn a_headline_over_a_run_whose_counts_are_wrong_names_it() {
        let summaries = [
            run("threads", 100_000, 36.5, 40.0),
            counts_wrong(run("threads", 100_000, 36.5, 41.0)),
            run("goroutines", 1_000_000, 2.7, 3.2),
        ];
        let h = headlines(&on_m1(&summaries), false);
        assert_eq!(h[0].dearer.counts_wrong_runs, 1);
        assert_eq!(h[0].cheaper.counts_wrong_runs, 0);
        assert_eq!(
            h[0].line(),
            "hold: a thread costs 13.5× a goroutine in memory (36.5 KiB against 2.7 KiB per task) \
             and 12.7× in spawn time (40.5 µs against 3.2 µs); threads at N = 100,000 (2 runs), \
             goroutines at N = 1,000,000 (1 run), medians; counts WRONG in 1 of 2 threads runs \
             (a cross-check failed)"
        );
        // compare.json keeps its shape where every count was right.
        let right = headlines(&on_m1(&summaries[..1]), false);
        assert!(right.is_empty());
        let two = [summaries[0].clone(), summaries[2].clone()];
        let json = serde_json::to_value(&headlines(&on_m1(&two), false)[0]).unwrap();
        assert!(json["dearer"].get("counts_wrong_runs").is_none(), "{json}");
    }

    /// A spawn time whose every run is suspect is marked in the line, with how many runs it
    /// rests on; one trustworthy run among them, or no verdict at all, and it is not.
    #[test]
    fn a_spawn_time_from_suspect_runs_only_is_marked() {
        use crate::time::verdict::Verdict;
        let verdict = |trustworthy| {
            Some(Verdict {
                trustworthy,
                findings: Vec::new(),
                not_checked: Vec::new(),
            })
        };
        let judged = |mut s: Summary, trustworthy| {
            s.verdict = verdict(trustworthy);
            s
        };
        let summaries = [
            judged(run("threads", 100_000, 36.5, 40.0), false),
            judged(run("threads", 100_000, 36.5, 41.0), false),
            judged(run("goroutines", 1_000_000, 2.7, 3.2), true),
            judged(run("goroutines", 1_000_000, 2.7, 3.2), false),
        ];
        let h = headlines(&on_m1(&summaries), false);
        assert_eq!(
            (
                h[0].dearer.spawn_from_suspect_runs,
                h[0].cheaper.spawn_from_suspect_runs
            ),
            (2, 0)
        );
        assert_eq!(
            h[0].line(),
            "hold: a thread costs 13.5× a goroutine in memory (36.5 KiB against 2.7 KiB per task) \
             and 12.7× in spawn time (40.5 µs ¶ against 3.2 µs); threads at N = 100,000 (2 runs), \
             goroutines at N = 1,000,000 (2 runs), medians; ¶ threads spawn time from 2 suspect \
             runs (no trustworthy run: each run's summary says why)"
        );
        let mut one_good = summaries.clone();
        one_good[1].verdict = verdict(true);
        assert!(!headlines(&on_m1(&one_good), false)[0]
            .line()
            .contains(SUSPECT_MARK));
        let unjudged: Vec<Summary> = summaries
            .iter()
            .cloned()
            .map(|mut s| {
                s.verdict = None;
                s
            })
            .collect();
        assert!(!headlines(&on_m1(&unjudged), false)[0]
            .line()
            .contains(SUSPECT_MARK));
    }

    #[test]
    fn a_memory_factor_not_resolved_at_its_n_says_so_in_its_clause() {
        let resolved = Side {
            runtime: "threads".into(),
            n: 3_000,
            runs: 1,
            memory_kib: Some(36.5),
            spawn_us: None,
            memory_unresolved: false,
            counts_wrong_runs: 0,
            spawn_from_suspect_runs: 0,
        };
        let unresolved = Side {
            runtime: "goroutines".into(),
            memory_kib: Some(2.7),
            memory_unresolved: true,
            ..resolved.clone()
        };
        assert_eq!(
            clause(&resolved, &unresolved),
            "a thread costs 13.5× a goroutine in memory (36.5 KiB against 2.7 KiB per task; not resolved at these N)"
        );
        let both = Side {
            memory_unresolved: false,
            ..unresolved
        };
        assert!(!clause(&resolved, &both).contains("not resolved"));
    }

    #[test]
    fn an_emulated_machine_keeps_its_memory_and_leaves_its_spawn_times_out_saying_why() {
        let summaries = [
            run("threads", 2_000, 41.5, 1616.0),
            run("goroutines", 100_000, 2.7, 75.1),
        ];
        let mut runs = on_m1(&summaries);
        runs.iter_mut().for_each(|r| r.emulated = true);
        let h = headlines(&runs, false);
        assert_eq!(
            h[0].line(),
            "hold: a thread costs 15.4× a goroutine in memory (41.5 KiB against 2.7 KiB per task); \
             threads at N = 2,000 (1 run), goroutines at N = 100,000 (1 run), medians \
             (spawn times left out: the CPU was emulated)"
        );
    }

    #[test]
    fn the_dearest_against_the_cheapest_at_each_ones_largest_n() {
        let summaries = [
            run("threads", 1_000, 40.0, 30.0), // a smaller N: left out
            run("threads", 100_000, 36.5, 40.0),
            run("threads", 100_000, 36.5, 41.0),
            run("goroutines", 1_000_000, 2.7, 3.2),
        ];
        let runs = on_m1(&summaries);
        let h = headlines(&runs, false);
        assert_eq!(h.len(), 1);
        assert_eq!(
            h[0].line(),
            "hold: a thread costs 13.5× a goroutine in memory (36.5 KiB against 2.7 KiB per task) \
             and 12.7× in spawn time (40.5 µs against 3.2 µs); threads at N = 100,000 (2 runs), \
             goroutines at N = 1,000,000 (1 run), medians"
        );
    }

    #[test]
    fn one_runtime_alone_has_no_headline_and_cheaper_spawns_are_said_so() {
        let one = [run("threads", 1_000, 36.5, 40.0)];
        let runs = on_m1(&one);
        assert!(headlines(&runs, false).is_empty());
        let two = [
            run("threads", 1_000, 36.5, 2.0),
            run("goroutines", 1_000, 2.7, 4.0),
        ];
        let runs = on_m1(&two);
        let h = headlines(&runs, true);
        assert!(h[0].line().starts_with("on M1, hold: a thread costs"));
        assert!(
            h[0].line().contains("but 2.0× less in spawn time") && !h[0].line().contains("and but"),
            "{}",
            h[0].line()
        );
        let level = [
            run("threads", 1_000, 36.5, 7.0),
            run("goroutines", 1_000, 2.7, 7.1),
        ];
        let line = headlines(&on_m1(&level), false)[0].line();
        assert!(
            line.contains("and about the same in spawn time (7.0 µs against 7.1 µs)"),
            "{line}"
        );
    }

    #[test]
    fn three_runtimes_are_each_stated_against_the_cheapest_dearest_first() {
        let summaries = [
            run("tokio", 1_000_000, 0.5, 1.0),
            run("goroutines", 1_000_000, 2.5, 3.0),
            run("threads", 100_000, 40.0, 40.0),
        ];
        let runs = on_m1(&summaries);
        let h = headlines(&runs, false);
        assert_eq!(h.len(), 1);
        let names = |sides: &[&Side]| sides.iter().map(|s| s.runtime.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&[&h[0].dearer, &h[0].between[0], &h[0].cheaper]),
            ["threads", "goroutines", "tokio"]
        );
        assert_eq!(
            h[0].line(),
            "hold: a thread costs 80.0× a tokio task in memory (40.0 KiB against 512 B per task) \
             and 40.0× in spawn time (40.0 µs against 1.0 µs), and a goroutine costs 5.0× a tokio \
             task in memory (2.5 KiB against 512 B per task) and 3.0× in spawn time (3.0 µs \
             against 1.0 µs); threads at N = 100,000 (1 run), goroutines at N = 1,000,000 (1 run), \
             tokio at N = 1,000,000 (1 run), medians"
        );
        // Two runtimes keep compare.json's shape: no `between`.
        let two = on_m1(&summaries[..2]);
        let json = serde_json::to_value(&headlines(&two, false)[0]).unwrap();
        assert!(json.get("between").is_none(), "{json}");
    }
}
