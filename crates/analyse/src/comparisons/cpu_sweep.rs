//! A CPU sweep (`compare --cpu-counts 1,2,…`): each runtime's cost per task against the number of
//! CPUs it was held to, and where a curve bends, what bent it. One series per machine × runtime ×
//! workload × N, one point per K: spawn, system and wall time per task, throughput (pingpong,
//! chain), and the kernel's waits per task (mmap_lock and futex with the lean probes, run-queue
//! with the full ones). Times from the untraced runs where a point has any (analyse/time/times_from.rs),
//! waits from the traced ones. The headline names where a runtime stops scaling and the wait
//! that grew most over that step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::comparisons::regression::spread;
use crate::comparisons::run_point::RunPoint;
use crate::run::summary::Summary;
use crate::time::times_from::{timed, TimesFrom};
use runtime::{Runtime, WorkloadKind};
use units::count;

/// A step from K to the next K scales when the figure improves by at least this share of the
/// ideal (the ratio of the CPUs): half of it, so 1 → 2 CPUs must make a task at least 1.5× faster.
pub const SCALING_SHARE: f64 = 0.5;

/// A wait "grew" over a step when its time per task is at least this many times what it was.
pub const GREW_FACTOR: f64 = 1.5;

/// A wait is named only where it is material: its time per task at least this share of the
/// step's wall time per task (summed over the tasks, against the run's wall time). A wait of a
/// nanosecond a task that "appears" beside microseconds of wall time bent nothing (the 16-core
/// set: goroutines' mmap_lock 0 → 1 ns a task beside 3.4 µs).
pub const MATERIAL_SHARE: f64 = 0.01;

/// The workloads whose scaling is judged by their throughput (round trips, messages a second),
/// the others by wall time per task.
fn by_throughput(workload: &str) -> bool {
    workload == WorkloadKind::Pingpong.name() || workload == WorkloadKind::Chain.name()
}

/// One K of a series: medians over its runs.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuPoint {
    /// K: the CPUs the runs were held to.
    pub cpu_count: u32,
    /// Measured runs at this K.
    pub runs: usize,
    /// Which runs the times are of (untraced where there are any).
    pub times_from: Option<TimesFrom>,
    /// The workload's own spawn time per task (its spawn phase over N), µs.
    pub spawn_us: Option<f64>,
    /// System and wall time per task spawned, µs.
    pub sys_us: Option<f64>,
    pub wall_us: Option<f64>,
    /// pingpong and chain: the workload's throughput (its unit: round trips or messages a second).
    pub throughput_per_s: Option<f64>,
    /// Waits per task, ns, from the traced runs: mmap_lock (read and write), futex, and the
    /// run-queue (full probes only). None: not measured at this K (no traced run, or a probe
    /// this run did not have).
    pub mmap_lock_wait_ns: Option<f64>,
    pub futex_wait_ns: Option<f64>,
    pub runq_wait_ns: Option<f64>,
}

/// One runtime × workload × N over K.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuSeries {
    pub machine: String,
    pub runtime: String,
    pub workload: String,
    pub n: u64,
    /// K upwards.
    pub points: Vec<CpuPoint>,
    /// The first K past which the runtime stops scaling (a step that gains less than
    /// `SCALING_SHARE` of the ideal), None where every step scales.
    pub stops_scaling_past: Option<u32>,
    /// The wait per task that grew most over that step (one that appeared from none first).
    pub grew: Option<GrownWait>,
}

/// A wait per task that grew over the step where a runtime stops scaling.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GrownWait {
    /// "mmap_lock", "futex" or "run-queue".
    pub wait: String,
    /// Its time per task at the step's two K, ns.
    pub from_ns: f64,
    pub to_ns: f64,
}

impl GrownWait {
    /// "grow 6.0×", or "appear (0 → 16.0 ms)" where there were none.
    pub fn how(&self) -> String {
        if self.from_ns > 0.0 {
            format!("grow {:.1}×", self.to_ns / self.from_ns)
        } else {
            format!("appear (none → {} per task)", ns_text(self.to_ns))
        }
    }

    /// How it ranks among the step's waits: one that appeared first, by its size; then by factor.
    fn rank(&self) -> (bool, f64) {
        if self.from_ns > 0.0 {
            (false, self.to_ns / self.from_ns)
        } else {
            (true, self.to_ns)
        }
    }
}

/// A time per task as people read it: "850 ns", "16.0 µs", "2.3 ms", "1.9 s".
pub fn ns_text(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.1} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Everything a CPU sweep adds to a comparison.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuSweep {
    /// The rule a step is judged by, in words.
    pub rule: String,
    pub series: Vec<CpuSeries>,
    /// One line per machine × workload (at its largest N): who stops scaling where and why.
    pub headlines: Vec<String>,
}

/// The rule, in words (compare.md and compare.json say it).
pub fn rule() -> String {
    format!(
        "a step from K to the next K scales when wall time per task (pingpong, chain: throughput) improves by at least {:.0} % of the ideal K'/K; a wait grew when its time per task is {GREW_FACTOR}× or more, and is named only where it is at least {:.0} % of the wall time per task",
        SCALING_SHARE * 100.0,
        MATERIAL_SHARE * 100.0
    )
}

/// The figures of one run a point takes.
struct Taken<'a> {
    point: &'a RunPoint,
    summary: &'a Summary,
}

fn per_task(total: f64, tasks: Option<u64>) -> Option<f64> {
    tasks.filter(|&t| t > 0).map(|t| total / t as f64)
}

fn mmap_lock_ns(s: &Summary) -> Option<f64> {
    let waits = s.waits.as_ref()?;
    let rows: Vec<_> = waits
        .rows
        .iter()
        .filter(|r| r.metric.starts_with("mmap_lock_"))
        .collect();
    (!rows.is_empty()).then(|| rows.iter().map(|r| r.total_ns as f64).sum())
}

fn futex_ns(s: &Summary) -> Option<f64> {
    s.waits.as_ref()?.futex.as_ref().map(|f| f.wait_ns as f64)
}

fn runq_ns(s: &Summary) -> Option<f64> {
    s.probes
        .as_ref()?
        .rows
        .iter()
        .find(|r| r.metric == "runq_ns")
        .map(|r| r.total as f64)
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    spread(&values.collect::<Vec<f64>>()).map(|s| s.median)
}

fn point(k: u32, runs: &[&Taken]) -> CpuPoint {
    let (timed_runs, times_from) = timed(runs, |t| t.point.has_collector);
    let traced: Vec<&&Taken> = runs.iter().filter(|t| t.point.has_collector).collect();
    let time = |f: &dyn Fn(&Taken) -> Option<f64>| median(timed_runs.iter().filter_map(|t| f(t)));
    let wait = |f: fn(&Summary) -> Option<f64>| {
        median(
            traced
                .iter()
                .filter_map(|t| per_task(f(t.summary)?, t.point.spawned)),
        )
    };
    CpuPoint {
        cpu_count: k,
        runs: runs.len(),
        times_from,
        spawn_us: time(&|t| t.point.program.get("spawn_ns_per_task").map(|ns| ns / 1e3)),
        sys_us: time(&|t| per_task(t.point.sys_s * 1e6, t.point.spawned)),
        wall_us: time(&|t| per_task(t.point.wall_s * 1e6, t.point.spawned)),
        throughput_per_s: time(&|t| {
            t.point
                .program
                .get("throughput_per_s")
                .copied()
                .filter(|_| by_throughput(t.point.workload.as_deref().unwrap_or("")))
        }),
        mmap_lock_wait_ns: wait(mmap_lock_ns),
        futex_wait_ns: wait(futex_ns),
        runq_wait_ns: wait(runq_ns),
    }
}

/// How much better `b` (the larger K) is than `a`: > 1 is faster.
fn gain(workload: &str, a: &CpuPoint, b: &CpuPoint) -> Option<f64> {
    if by_throughput(workload) {
        let (x, y) = (a.throughput_per_s?, b.throughput_per_s?);
        (x > 0.0).then(|| y / x)
    } else {
        let (x, y) = (a.wall_us?, b.wall_us?);
        (y > 0.0).then(|| x / y)
    }
}

/// The waits of a point by name, as the headline says them.
fn waits_of(p: &CpuPoint) -> [(&'static str, Option<f64>); 3] {
    [
        ("mmap_lock", p.mmap_lock_wait_ns),
        ("futex", p.futex_wait_ns),
        ("run-queue", p.runq_wait_ns),
    ]
}

/// Where the series stops scaling, and the wait that grew most over that step.
fn judge(series: &mut CpuSeries) {
    for pair in series.points.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let Some(g) = gain(&series.workload, a, b) else {
            continue;
        };
        let ideal = b.cpu_count as f64 / a.cpu_count as f64;
        if g >= 1.0 + SCALING_SHARE * (ideal - 1.0) {
            continue;
        }
        series.stops_scaling_past = Some(a.cpu_count);
        let material_ns = b.wall_us.map_or(0.0, |w| w * 1e3 * MATERIAL_SHARE);
        series.grew = waits_of(a)
            .iter()
            .zip(waits_of(b))
            .filter_map(|((name, x), (_, y))| {
                let (x, y) = ((*x)?, y?);
                if y < material_ns {
                    return None;
                }
                let grew = if x > 0.0 {
                    y / x >= GREW_FACTOR
                } else {
                    y > 0.0
                };
                grew.then(|| GrownWait {
                    wait: name.to_string(),
                    from_ns: x,
                    to_ns: y,
                })
            })
            .max_by(|p, q| {
                let (a, b) = (p.rank(), q.rank());
                a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
            });
        return;
    }
}

/// The series of a set (each run's summary beside its point): None when no run was held to K
/// CPUs.
pub fn cpu_sweep(runs: &[(&Summary, &RunPoint)]) -> Option<CpuSweep> {
    type Key = (String, String, String, u64);
    let mut groups: BTreeMap<Key, BTreeMap<u32, Vec<Taken>>> = BTreeMap::new();
    for &(summary, p) in runs {
        let (Some(k), Some(rt), Some(wl), Some(n), true) =
            (p.cpu_count, &p.runtime, &p.workload, p.n, p.measured)
        else {
            continue;
        };
        groups
            .entry((p.machine.clone(), rt.clone(), wl.clone(), n))
            .or_default()
            .entry(k)
            .or_default()
            .push(Taken { point: p, summary });
    }
    if groups.is_empty() {
        return None;
    }
    let mut series: Vec<CpuSeries> = groups
        .into_iter()
        .map(|((machine, runtime, workload, n), by_k)| {
            let points = by_k
                .iter()
                .map(|(&k, runs)| point(k, &runs.iter().collect::<Vec<_>>()))
                .collect();
            let mut s = CpuSeries {
                machine,
                runtime,
                workload,
                n,
                points,
                stops_scaling_past: None,
                grew: None,
            };
            judge(&mut s);
            s
        })
        .collect();
    series.sort_by(|a, b| {
        (
            &a.machine,
            WorkloadKind::order_of(&a.workload),
            a.n,
            Runtime::order_of(&a.runtime),
            &a.runtime,
        )
            .cmp(&(
                &b.machine,
                WorkloadKind::order_of(&b.workload),
                b.n,
                Runtime::order_of(&b.runtime),
                &b.runtime,
            ))
    });
    let headlines = headlines(&series);
    Some(CpuSweep {
        rule: rule(),
        series,
        headlines,
    })
}

fn cpus(k: u32) -> String {
    format!("{k} CPU{}", if k == 1 { "" } else { "s" })
}

/// One clause per runtime of a workload at its largest N swept over two K or more.
fn clause(s: &CpuSeries) -> Option<String> {
    let (first, last) = (s.points.first()?, s.points.last()?);
    if first.cpu_count == last.cpu_count {
        return None;
    }
    let what = if by_throughput(&s.workload) {
        "throughput"
    } else {
        "wall time per task"
    };
    Some(match s.stops_scaling_past {
        Some(k) => {
            let next = s
                .points
                .iter()
                .find(|p| p.cpu_count > k)
                .map_or(last.cpu_count, |p| p.cpu_count);
            let why = match &s.grew {
                Some(g) => format!(": {} waits per task {} from {k} to {next}", g.wait, g.how()),
                None => format!(
                    ": no wait measured grew {GREW_FACTOR}× to a material share of the wall time from {k} to {next}"
                ),
            };
            format!("{} stop scaling past {}{why}", plural(&s.runtime), cpus(k))
        }
        None => {
            let g = gain(&s.workload, first, last).unwrap_or(1.0);
            format!(
                "{} scale from {} to {} ({what} {g:.1}× better)",
                plural(&s.runtime),
                cpus(first.cpu_count),
                cpus(last.cpu_count)
            )
        }
    })
}

/// "threads", "goroutines", "processes", "tokio tasks"; a command's label as it is.
fn plural(runtime: &str) -> String {
    if runtime == Runtime::Tokio.name() {
        "tokio tasks".into()
    } else {
        runtime.into()
    }
}

/// The CPU sweep's result in one line per machine × workload, at each workload's largest N:
/// each runtime that stops scaling with where and the wait that grew, the others as scaling; or,
/// where none bends, that nothing bends.
pub fn headlines(series: &[CpuSeries]) -> Vec<String> {
    let mut by_workload: BTreeMap<(&str, usize, &str), Vec<&CpuSeries>> = BTreeMap::new();
    for s in series {
        by_workload
            .entry((&s.machine, WorkloadKind::order_of(&s.workload), &s.workload))
            .or_default()
            .push(s);
    }
    let several_machines = series
        .iter()
        .any(|s| series.first().is_some_and(|f| f.machine != s.machine));
    let mut out = Vec::new();
    for ((machine, _, workload), all) in by_workload {
        let n = all.iter().map(|s| s.n).max().unwrap_or(0);
        let at_n: Vec<&CpuSeries> = all.into_iter().filter(|s| s.n == n).collect();
        let clauses: Vec<String> = at_n.iter().filter_map(|s| clause(s)).collect();
        if clauses.is_empty() {
            continue;
        }
        let on = if several_machines {
            format!(" on {machine}")
        } else {
            String::new()
        };
        let subject = format!("{workload} {}{on}", count(n));
        if at_n.iter().all(|s| s.stops_scaling_past.is_none()) {
            out.push(format!("{subject}: nothing bends — {}", clauses.join("; ")));
        } else {
            out.push(format!("{subject}: {}", clauses.join("; ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(k: u32, wall_us: f64, mmap_ns: f64, futex_ns: f64) -> CpuPoint {
        CpuPoint {
            cpu_count: k,
            runs: 1,
            wall_us: Some(wall_us),
            mmap_lock_wait_ns: Some(mmap_ns),
            futex_wait_ns: Some(futex_ns),
            ..CpuPoint::default()
        }
    }

    fn series(runtime: &str, workload: &str, points: Vec<CpuPoint>) -> CpuSeries {
        let mut s = CpuSeries {
            machine: "M1".into(),
            runtime: runtime.into(),
            workload: workload.into(),
            n: 10_000,
            points,
            ..CpuSeries::default()
        };
        judge(&mut s);
        s
    }

    #[test]
    fn threads_that_stop_scaling_name_the_wait_that_grew() {
        // Threads: 1 → 2 CPUs barely faster (1.05×), mmap_lock waits per thread 6× more;
        // goroutines: 1.8× faster from 1 to 2 (scales), 1.7× from 2 to 4 (scales: ≥ 1.5).
        let threads = series(
            "threads",
            "hold",
            vec![
                pt(1, 21.0, 100.0, 50.0),
                pt(2, 20.0, 600.0, 60.0),
                pt(4, 19.0, 900.0, 70.0),
            ],
        );
        assert_eq!(threads.stops_scaling_past, Some(1));
        let grew = threads.grew.clone().unwrap();
        assert_eq!(grew.wait, "mmap_lock");
        assert_eq!((grew.from_ns, grew.to_ns), (100.0, 600.0));
        let goroutines = series(
            "goroutines",
            "hold",
            vec![
                pt(1, 1.8, 0.0, 10.0),
                pt(2, 1.0, 0.0, 10.0),
                pt(4, 0.58, 0.0, 10.0),
            ],
        );
        assert_eq!(goroutines.stops_scaling_past, None);
        let lines = headlines(&[threads, goroutines]);
        assert_eq!(
            lines,
            vec![
                "hold 10,000: threads stop scaling past 1 CPU: mmap_lock waits per task grow 6.0× from 1 to 2; goroutines scale from 1 CPU to 4 CPUs (wall time per task 3.1× better)"
            ]
        );
    }

    #[test]
    fn a_runtime_that_scales_then_stops_is_judged_at_the_step_that_bends() {
        // 1 → 2 scales (1.9×), 2 → 4 does not (1.1×, ideal 2×): bends past 2; futex grew 3×,
        // mmap_lock did not move.
        let tokio = series(
            "tokio",
            "hold",
            vec![
                pt(1, 1.9, 5.0, 10.0),
                pt(2, 1.0, 5.0, 10.0),
                pt(4, 0.9, 5.0, 30.0),
            ],
        );
        assert_eq!(tokio.stops_scaling_past, Some(2));
        assert_eq!(tokio.grew.as_ref().map(|g| g.wait.as_str()), Some("futex"));
        assert_eq!(
            clause(&tokio).unwrap(),
            "tokio tasks stop scaling past 2 CPUs: futex waits per task grow 3.0× from 2 to 4"
        );
    }

    #[test]
    fn where_nothing_bends_the_headline_says_so() {
        let threads = series(
            "threads",
            "hold",
            vec![pt(1, 20.0, 100.0, 0.0), pt(2, 11.0, 120.0, 0.0)],
        );
        let tokio = series(
            "tokio",
            "hold",
            vec![pt(1, 2.0, 0.0, 0.0), pt(2, 1.1, 0.0, 0.0)],
        );
        let lines = headlines(&[threads, tokio]);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("hold 10,000: nothing bends — threads scale from 1 CPU to 2 CPUs (wall time per task 1.8× better)"), "{}", lines[0]);
    }

    #[test]
    fn a_bend_with_no_wait_grown_says_none_did_and_pingpong_is_judged_by_throughput() {
        let mut a = pt(1, 50.0, 0.0, 100.0);
        let mut b = pt(2, 10.0, 0.0, 110.0);
        // Wall per task fell 5× but the round trips a second did not rise: pingpong bends.
        a.throughput_per_s = Some(1e6);
        b.throughput_per_s = Some(1.1e6);
        let s = series("threads", "pingpong", vec![a, b]);
        assert_eq!(s.stops_scaling_past, Some(1));
        assert_eq!(s.grew, None);
        assert_eq!(
            clause(&s).unwrap(),
            "threads stop scaling past 1 CPU: no wait measured grew 1.5× to a material share of the wall time from 1 to 2"
        );
    }

    #[test]
    fn a_wait_that_appears_from_none_outranks_one_that_grew() {
        // mmap_lock 0 → 16 ms per task, futex 10 → 100 ns (10×): the one that appeared is named.
        let s = series(
            "threads",
            "hold",
            vec![pt(1, 20.0, 0.0, 10.0), pt(2, 19.0, 16e6, 100.0)],
        );
        assert_eq!(
            clause(&s).unwrap(),
            "threads stop scaling past 1 CPU: mmap_lock waits per task appear (none → 16.0 ms per task) from 1 to 2"
        );
    }

    #[test]
    fn a_wait_of_nanoseconds_beside_microseconds_is_not_named() {
        // The 16-core set's goroutines hold 1,000,000: wall 4.62 → 3.39 µs a task (1.36×, under
        // 1.5×), mmap_lock 0 → 1 ns a task (under 1 % of 3.39 µs), futex 4.5 → 3.5 µs (shrank).
        let s = series(
            "goroutines",
            "hold",
            vec![pt(1, 4.62, 0.0, 4500.0), pt(2, 3.39, 1.0, 3500.0)],
        );
        assert_eq!(
            clause(&s).unwrap(),
            "goroutines stop scaling past 1 CPU: no wait measured grew 1.5× to a material share of the wall time from 1 to 2"
        );
        // The same step with the wait at 40 ns a task (over 1 % of 3.39 µs) names it.
        let s = series(
            "goroutines",
            "hold",
            vec![pt(1, 4.62, 0.0, 4500.0), pt(2, 3.39, 40.0, 3500.0)],
        );
        assert_eq!(
            clause(&s).unwrap(),
            "goroutines stop scaling past 1 CPU: mmap_lock waits per task appear (none → 40 ns per task) from 1 to 2"
        );
    }

    #[test]
    fn one_k_alone_makes_no_headline() {
        let s = series("threads", "hold", vec![pt(2, 20.0, 0.0, 0.0)]);
        assert!(headlines(&[s]).is_empty());
    }
}
