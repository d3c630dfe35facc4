//! Repeats of one experiment: every time figure as median (min … max) over the runs whose times
//! count (its untraced runs where it has any: analyse::times_from), its spread among the runs the
//! verdict calls trustworthy, and the outliers, each with its cause as the run's verdict names it.
//! Memory does not move between runs; time does, and this is where a reader sees by how much and
//! why.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::comparisons::regression::{spread, Spread};
use crate::run::summary::{ExitPath, Summary};
use crate::time::times_from::{timed, TimesFrom};
use crate::time::untraced_causes::{self, Figure, HandedBack, Untraced};
use units::count;

/// A run further than this factor from its experiment's median, either way (exactly this factor
/// is not), is an outlier: the same rule as scripts/lib/stats.sh `is_outlier`.
pub const OUTLIER_FACTOR: f64 = 1.25;

/// A time figure every run has: its key, its words, its unit, and how to read it from a summary.
pub struct TimeFigure {
    pub key: &'static str,
    pub label: &'static str,
    pub unit: &'static str,
    pub value: fn(&Summary) -> Option<f64>,
    /// It includes the threads' exit, whose kernel path is a race (ExitPath): runs on another
    /// path than most of their repeats are kept out of its trustworthy spread.
    pub includes_exit: bool,
}

/// System time of the named phases over the tasks, µs: the figures that keep the spawn apart
/// from the exit, whose kernel path varies on its own (whether each exiting thread frees its
/// stack before the process ends is a race).
fn phase_sys_per_task_us(s: &Summary, phases: &[&str]) -> Option<f64> {
    let tasks = s.tasks.filter(|&t| t > 0)? as f64;
    let mut found = false;
    let mut sys_ms = 0.0;
    for p in s
        .phases
        .iter()
        .filter(|p| phases.contains(&p.name.as_str()))
    {
        sys_ms += p.sys_ms?;
        found = true;
    }
    found.then(|| sys_ms * 1e3 / tasks)
}

pub const TIME_FIGURES: [TimeFigure; 6] = [
    TimeFigure {
        key: "spawn_us",
        label: "spawn time per task",
        unit: "µs",
        value: |s| s.time_per_task.as_ref()?.spawn_us,
        includes_exit: false,
    },
    TimeFigure {
        key: "user_us",
        label: "user time per task",
        unit: "µs",
        value: |s| Some(s.time_per_task.as_ref()?.user_us),
        includes_exit: true,
    },
    TimeFigure {
        key: "sys_us",
        label: "system time per task",
        unit: "µs",
        value: |s| Some(s.time_per_task.as_ref()?.sys_us),
        includes_exit: true,
    },
    TimeFigure {
        key: "sys_spawn_us",
        label: "system time per task while spawning",
        unit: "µs",
        value: |s| phase_sys_per_task_us(s, &["spawn"]),
        includes_exit: false,
    },
    TimeFigure {
        key: "sys_end_us",
        label: "system time per task after release (join, exit)",
        unit: "µs",
        value: |s| phase_sys_per_task_us(s, &["join", "exit"]),
        includes_exit: true,
    },
    TimeFigure {
        key: "wall_s",
        label: "wall time",
        unit: "s",
        value: |s| Some(s.wall_s),
        includes_exit: true,
    },
];

/// One figure of one experiment over its repeats.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FigureSpread {
    pub key: String,
    pub label: String,
    pub unit: String,
    /// Over every completed run.
    pub all: Spread,
    /// Over the runs the verdict calls trustworthy (None: none was).
    pub trustworthy: Option<Spread>,
}

impl FigureSpread {
    /// max / min among the trustworthy runs.
    pub fn trustworthy_ratio(&self) -> Option<f64> {
        self.trustworthy
            .as_ref()
            .filter(|s| s.min > 0.0)
            .map(|s| s.max / s.min)
    }
}

/// A run whose figure lies more than OUTLIER_FACTOR away from its experiment's median.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Outlier {
    pub run: String,
    pub figure: String,
    pub value: f64,
    /// value / median.
    pub factor: f64,
    /// The run's verdict on its time figures, or why there is none.
    pub cause: String,
}

/// One experiment (runtime, workload, N) repeated.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Repeated {
    pub label: String,
    /// The completed runs whose times the figures are of.
    pub runs: usize,
    /// Which runs those are: the untraced ones where the experiment has any (its traced runs'
    /// times carry the probes' cost and are left out, outliers and all), else the traced ones.
    /// Absent in sets written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times_from: Option<TimesFrom>,
    pub trustworthy_runs: usize,
    /// Runs without a verdict (recorded before the sentinels existed).
    pub unjudged_runs: usize,
    pub figures: Vec<FigureSpread>,
    pub outliers: Vec<Outlier>,
    /// Every run flagged suspect by its verdict, outlier or not: (run, verdict line).
    pub suspect: Vec<(String, String)>,
    /// Threads runs whose threads ended another way than most of their repeats' (ExitPath): the
    /// workload's own race, not noise; their figures that include the exit are left out of the
    /// trustworthy spread. (run, what happened).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_exit_path: Vec<(String, String)>,
}

/// One run of an experiment, as repeats take it.
#[derive(Clone, Debug)]
pub struct Run {
    /// Its directory, as shown.
    pub dir: String,
    pub summary: Summary,
    /// The eBPF collector was attached: its times carry the probes' cost.
    pub traced: bool,
    /// Its machine's id: memory handed back between runs is counted on one machine.
    pub machine: String,
}

/// Groups completed runs by experiment, each over the runs whose times count
/// (analyse::times_from); experiments timed once are left out (nothing to spread).
pub fn repeated(runs: &[Run]) -> Vec<Repeated> {
    // Over every run of the set, in time: what the machine handed back before each.
    let by_dir: Vec<(&str, &str, &Summary)> = runs
        .iter()
        .map(|r| (r.dir.as_str(), r.machine.as_str(), &r.summary))
        .collect();
    let handed_back = untraced_causes::handed_back_before(&by_dir);
    let mut labels: Vec<&str> = Vec::new();
    for r in runs.iter().filter(|r| r.summary.ok) {
        if !labels.contains(&r.summary.label.as_str()) {
            labels.push(&r.summary.label);
        }
    }
    labels
        .into_iter()
        .filter_map(|label| {
            let group: Vec<&Run> = runs
                .iter()
                .filter(|r| r.summary.ok && r.summary.label == label)
                .collect();
            let (timed_group, from) = timed(&group, |r| r.traced);
            (timed_group.len() >= 2)
                .then(|| one_experiment(label, &timed_group, from, &handed_back))
        })
        .collect()
}

/// The exit path most of the runs took, when one did (more than half of those with one). Only a
/// traced run tells its path (the collector counts the madvise calls): among untraced runs there
/// is none, and no run is set apart for it.
fn usual_exit_path(group: &[&Run]) -> Option<ExitPath> {
    let paths: Vec<ExitPath> = group
        .iter()
        .filter_map(|r| Some(ExitPath::of(&r.summary)?.0))
        .collect();
    [
        ExitPath::ThreadsFreedStacks,
        ExitPath::EndedWithProcess,
        ExitPath::Raced,
    ]
    .into_iter()
    .find(|p| 2 * paths.iter().filter(|q| *q == p).count() > paths.len())
}

fn one_experiment(
    label: &str,
    group: &[&Run],
    times_from: Option<TimesFrom>,
    handed_back: &HashMap<String, HandedBack>,
) -> Repeated {
    let trustworthy = |s: &Summary| s.verdict.as_ref().is_some_and(|v| v.trustworthy);
    let usual = usual_exit_path(group);
    // A run on another exit path than most: (its path, madvise calls, threads).
    let other_path = |s: &Summary| {
        let (path, freed, tasks) = ExitPath::of(s)?;
        (usual.is_some_and(|u| u != path)).then_some((path, freed, tasks))
    };
    let other_path_words = |s: &Summary| {
        other_path(s).map(|(path, freed, tasks)| {
            format!(
                "exit path: {} ({} madvise calls after release for {} threads; most repeats: {}) — the workload's race with its process's exit, not noise",
                path.words(),
                count(freed),
                count(tasks),
                usual.map_or("", ExitPath::words)
            )
        })
    };
    let mut figures = Vec::new();
    let mut outliers = Vec::new();
    for f in &TIME_FIGURES {
        let values: Vec<(&str, &Run, f64)> = group
            .iter()
            .filter_map(|r| Some((r.dir.as_str(), *r, (f.value)(&r.summary)?)))
            .collect();
        let all: Vec<f64> = values.iter().map(|v| v.2).collect();
        let Some(all_spread) = spread(&all) else {
            continue;
        };
        let good: Vec<f64> = values
            .iter()
            .filter(|v| {
                trustworthy(&v.1.summary)
                    && !(f.includes_exit && other_path(&v.1.summary).is_some())
            })
            .map(|v| v.2)
            .collect();
        for (dir, run, value) in &values {
            let factor = value / all_spread.median;
            if all_spread.median > 0.0 && !(1.0 / OUTLIER_FACTOR..=OUTLIER_FACTOR).contains(&factor)
            {
                let others: Vec<&Run> = group.iter().copied().filter(|r| r.dir != *dir).collect();
                let s = &run.summary;
                let figure = match f.key {
                    "user_us" => Figure::UserTime,
                    "sys_end_us" => Figure::SysAfterRelease,
                    _ => Figure::Other,
                };
                let why = cause(run, &others, handed_back, figure);
                outliers.push(Outlier {
                    run: dir.to_string(),
                    figure: f.label.into(),
                    value: *value,
                    factor,
                    cause: match (f.includes_exit, other_path_words(s)) {
                        (true, Some(path)) => format!("{path}; {why}"),
                        _ => why,
                    },
                });
            }
        }
        figures.push(FigureSpread {
            key: f.key.into(),
            label: f.label.into(),
            unit: f.unit.into(),
            all: all_spread,
            trustworthy: spread(&good),
        });
    }
    Repeated {
        label: label.into(),
        runs: group.len(),
        times_from,
        trustworthy_runs: group.iter().filter(|r| trustworthy(&r.summary)).count(),
        unjudged_runs: group.iter().filter(|r| r.summary.verdict.is_none()).count(),
        figures,
        outliers,
        suspect: group
            .iter()
            .filter_map(|r| {
                let v = r.summary.verdict.as_ref().filter(|v| !v.trustworthy)?;
                Some((r.dir.clone(), v.line()))
            })
            .collect(),
        other_exit_path: group
            .iter()
            .filter_map(|r| Some((r.dir.clone(), other_path_words(&r.summary)?)))
            .collect(),
    }
}

fn cause(
    run: &Run,
    others: &[&Run],
    handed_back: &HashMap<String, HandedBack>,
    figure: Figure,
) -> String {
    let s = &run.summary;
    match &s.verdict {
        None => "no verdict (recorded without noise sentinels)".into(),
        // An untraced run has no kernel counts to set beside its repeats', but what costs it
        // nothing: its rusage, the machine's counters, what was handed back before it.
        Some(v) if v.trustworthy && !run.traced => {
            fn untraced<'a>(r: &'a Run, handed_back: &HashMap<String, HandedBack>) -> Untraced<'a> {
                Untraced {
                    summary: &r.summary,
                    handed_back: handed_back.get(&r.dir).copied(),
                }
            }
            let theirs: Vec<Untraced> = others.iter().map(|r| untraced(r, handed_back)).collect();
            let mine = untraced(run, handed_back);
            let named = untraced_causes::causes(&mine, &theirs, figure);
            if named.is_empty() {
                // A user-time outlier of a run with the GC's figure: say the GC was looked at.
                let gc = (figure == Figure::UserTime)
                    .then(|| untraced_causes::go_gc_beside(&mine, &theirs))
                    .flatten()
                    .map_or(String::new(), |gc| format!("; {}", gc.not_the_cause()));
                format!("no sentinel explains it (untraced: no kernel counts to compare; nothing handed back to the host before it, no stall, reclaim or slower faults{gc})")
            } else {
                format!("untraced, the machine says: {}", named.join("; "))
            }
        }
        Some(v) if v.trustworthy => {
            let others: Vec<&Summary> = others.iter().map(|r| &r.summary).collect();
            let mut said = "no sentinel explains it".to_string();
            let unusual = unusual_in_the_kernel(s, &others);
            if !unusual.is_empty() {
                said.push_str("; unusual in the kernel: ");
                said.push_str(&unusual.join(", "));
            }
            said
        }
        Some(v) => v.line(),
    }
}

/// One kernel count of a run: its name, its value, and whether it is a time (ns).
struct KernelCount {
    name: String,
    value: f64,
    is_ns: bool,
}

/// A run's kernel counts that an outlier may differ in from its repeats: the probes' counts and
/// the waits' times, by name.
fn kernel_counts(s: &Summary) -> Vec<KernelCount> {
    let mut counts = Vec::new();
    if let Some(p) = &s.probes {
        for r in &p.rows {
            counts.push(KernelCount {
                name: r.metric.clone(),
                value: r.total as f64,
                is_ns: r.unit == "ns",
            });
        }
    }
    if let Some(w) = &s.waits {
        for r in &w.rows {
            counts.push(KernelCount {
                name: format!("{}, time", r.label),
                value: r.total_ns as f64,
                is_ns: true,
            });
        }
        let tlb = [
            ("TLB shootdowns asked of other CPUs", w.tlb.shootdowns),
            ("IPIs sent", w.tlb.ipis),
        ];
        for (name, v) in tlb {
            if let Some(v) = v {
                counts.push(KernelCount {
                    name: name.to_string(),
                    value: v as f64,
                    is_ns: false,
                });
            }
        }
    }
    counts
}

/// At most how many of the kernel's counts an outlier's cause names.
const UNUSUAL_NAMED: usize = 3;
/// A count is unusual at this factor from the median of the other repeats, either way.
const UNUSUAL_FACTOR: f64 = 3.0;
/// Below these, counts and times swing by large factors for nothing: the larger of the run's and
/// the median must reach them.
const SIZEABLE_COUNT: f64 = 1000.0;
const SIZEABLE_NS: f64 = 100e6;

/// The kernel counts where a run differs most from the median of its repeats (3× or more, either
/// way, largest first), as "TLB shootdowns asked of other CPUs 144,294 against a median of 3,838
/// (38×)": what the kernel did differently when no noise sentinel explains an outlier.
fn unusual_in_the_kernel(s: &Summary, others: &[&Summary]) -> Vec<String> {
    let theirs: Vec<Vec<KernelCount>> = others.iter().map(|o| kernel_counts(o)).collect();
    let mut unusual: Vec<(f64, String)> = kernel_counts(s)
        .into_iter()
        .filter_map(|mine| {
            let values: Vec<f64> = theirs
                .iter()
                .filter_map(|t| t.iter().find(|c| c.name == mine.name).map(|c| c.value))
                .collect();
            let median = spread(&values)?.median;
            let sizeable = if mine.is_ns {
                SIZEABLE_NS
            } else {
                SIZEABLE_COUNT
            };
            if mine.value.max(median) < sizeable {
                return None;
            }
            let (a, b) = (mine.value.max(1.0), median.max(1.0));
            let factor = (a / b).max(b / a);
            let shown = |v: f64| {
                if mine.is_ns {
                    format!("{:.2} s", v / 1e9)
                } else {
                    count(v as u64)
                }
            };
            (factor >= UNUSUAL_FACTOR).then(|| {
                (
                    factor,
                    format!(
                        "{} {} against a median of {} ({factor:.0}×)",
                        mine.name,
                        shown(mine.value),
                        shown(median)
                    ),
                )
            })
        })
        .collect();
    unusual.sort_by(|a, b| b.0.total_cmp(&a.0));
    unusual
        .into_iter()
        .take(UNUSUAL_NAMED)
        .map(|(_, s)| s)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::phases::PhaseCost;
    use crate::run::summary::TimePerTask;
    use crate::time::verdict::{Finding, Verdict};

    fn run(spawn_us: f64, sys_us: f64, verdict: Option<Verdict>) -> Summary {
        Summary {
            label: "threads hold --n 100000".into(),
            ok: true,
            wall_s: 8.0,
            time_per_task: Some(TimePerTask {
                spawn_us: Some(spawn_us),
                user_us: 6.0,
                sys_us,
                ..Default::default()
            }),
            verdict,
            ..Default::default()
        }
    }

    /// Traced runs, as every set before untraced timing runs.
    fn traced(runs: &[(String, Summary)]) -> Vec<Run> {
        runs.iter()
            .map(|(dir, summary)| Run {
                dir: dir.clone(),
                summary: summary.clone(),
                traced: true,
                machine: "M1".into(),
            })
            .collect()
    }

    fn clean() -> Option<Verdict> {
        Some(Verdict {
            trustworthy: true,
            findings: vec![],
            not_checked: vec![],
        })
    }

    fn stolen() -> Option<Verdict> {
        Some(Verdict {
            trustworthy: false,
            findings: vec![Finding {
                rule: "steal".into(),
                phase: "spawn".into(),
                found: "2.0 s stolen by the hypervisor (25 % of the CPUs)".into(),
            }],
            not_checked: vec![],
        })
    }

    #[test]
    fn spreads_over_trustworthy_runs_and_names_each_outliers_cause() {
        let runs = vec![
            ("a".to_string(), run(36.0, 90.0, clean())),
            ("b".to_string(), run(38.0, 95.0, clean())),
            ("c".to_string(), run(110.0, 220.0, stolen())),
            ("d".to_string(), run(35.0, 89.0, clean())),
        ];
        let r = repeated(&traced(&runs));
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!((r.runs, r.trustworthy_runs, r.unjudged_runs), (4, 3, 0));
        let spawn = &r.figures[0];
        assert_eq!(spawn.all.max, 110.0);
        assert_eq!(spawn.trustworthy.as_ref().unwrap().max, 38.0);
        assert!((spawn.trustworthy_ratio().unwrap() - 38.0 / 35.0).abs() < 1e-9);
        // c is the outlier in spawn and system time, with its verdict as the cause.
        let outliers: Vec<(&str, &str)> = r
            .outliers
            .iter()
            .map(|o| (o.run.as_str(), o.figure.as_str()))
            .collect();
        assert_eq!(
            outliers,
            [("c", "spawn time per task"), ("c", "system time per task")]
        );
        assert!(r.outliers[0].cause.starts_with("suspect: 2.0 s stolen"));
        assert_eq!(r.suspect.len(), 1);
    }

    #[test]
    fn system_time_is_split_between_the_spawn_and_the_end() {
        let phase = |name: &str, sys_ms: f64| PhaseCost {
            name: name.into(),
            wall_ms: 1000.0,
            user_ms: Some(0.0),
            sys_ms: Some(sys_ms),
        };
        // Two runs that spawned alike; the second's threads each freed their stack at exit.
        let ended = |exit_ms: f64| {
            let mut s = run(36.0, 90.0, clean());
            s.tasks = Some(100_000);
            s.phases = vec![
                phase("spawn", 6_000.0),
                phase("steady", 0.0),
                phase("join", 10.0),
                phase("exit", exit_ms),
            ];
            s
        };
        let figure =
            |key: &str, s: &Summary| (TIME_FIGURES.iter().find(|f| f.key == key).unwrap().value)(s);
        let (quick, slow) = (ended(2_490.0), ended(5_990.0));
        assert_eq!(figure("sys_spawn_us", &quick), Some(60.0));
        assert_eq!(figure("sys_spawn_us", &slow), Some(60.0));
        assert_eq!(figure("sys_end_us", &quick), Some(25.0));
        assert_eq!(figure("sys_end_us", &slow), Some(60.0));
        // A run without phases (a command) has neither.
        assert_eq!(figure("sys_spawn_us", &run(1.0, 1.0, clean())), None);
    }

    #[test]
    fn a_run_on_the_other_exit_path_keeps_its_spawn_and_leaves_its_exit_figures_out() {
        let threads = |spawn_us: f64, sys_us: f64, freed: u64| {
            let mut s = run(spawn_us, sys_us, clean());
            s.tasks = Some(100_000);
            s.spawned = Some(100_000);
            s.stacks_freed_by_threads = Some(freed);
            s
        };
        let runs = vec![
            ("a".to_string(), threads(30.0, 78.0, 1_363)),
            ("b".to_string(), threads(31.0, 80.0, 2_000)),
            ("c".to_string(), threads(29.0, 140.0, 100_000)),
            ("d".to_string(), threads(30.5, 79.0, 900)),
        ];
        let r = &repeated(&traced(&runs))[0];
        let fig = |key: &str| r.figures.iter().find(|f| f.key == key).unwrap();
        // c spawned like the others: in the spawn spread; its system time is not.
        assert_eq!(fig("spawn_us").trustworthy.as_ref().unwrap().min, 29.0);
        assert_eq!(fig("sys_us").trustworthy.as_ref().unwrap().max, 80.0);
        assert_eq!(fig("sys_us").all.max, 140.0);
        assert_eq!(r.other_exit_path.len(), 1);
        assert_eq!(r.other_exit_path[0].0, "c");
        let outlier = r.outliers.iter().find(|o| o.run == "c").unwrap();
        assert_eq!(outlier.figure, "system time per task");
        assert!(
            outlier.cause.starts_with("exit path: nearly every thread"),
            "{}",
            outlier.cause
        );
        // With no usual path (two and two), nobody is on "the other" one.
        let even = vec![runs[0].clone(), runs[2].clone()];
        assert!(repeated(&traced(&even))[0].other_exit_path.is_empty());
    }

    #[test]
    fn untraced_runs_are_the_repeats_where_there_are_any() {
        let untraced = |dir: &str, spawn_us: f64| Run {
            dir: dir.into(),
            summary: run(spawn_us, 90.0, clean()),
            traced: false,
            machine: "M1".into(),
        };
        // The traced run 13 % slower than the slowest, and one 1.5× (an outlier, were it timed).
        let mut runs = vec![
            untraced("a", 36.0),
            untraced("b", 38.0),
            Run {
                dir: "t".into(),
                summary: run(38.0 * 1.13, 90.0 * 1.13, clean()),
                traced: true,
                machine: "M1".into(),
            },
            untraced("c", 35.0),
        ];
        let r = &repeated(&runs)[0];
        assert_eq!((r.runs, r.trustworthy_runs), (3, 3));
        assert_eq!(
            r.times_from
                .map(|f| (f.untraced_runs, f.traced_runs, f.traced_left_out())),
            Some((3, 1, 1))
        );
        let spawn = &r.figures[0];
        assert_eq!(
            (spawn.all.min, spawn.all.median, spawn.all.max),
            (35.0, 36.0, 38.0)
        );
        assert_eq!(r.figures[2].all.max, 90.0);
        runs[2].summary = run(54.0, 135.0, clean());
        let r = &repeated(&runs)[0];
        assert!(r.outliers.is_empty(), "{:?}", r.outliers);
        // An untraced outlier has no kernel counts to be told by.
        runs.push(untraced("d", 80.0));
        let r = &repeated(&runs)[0];
        assert_eq!(r.outliers.len(), 1);
        assert!(
            r.outliers[0]
                .cause
                .starts_with("no sentinel explains it (untraced: no kernel counts to compare;"),
            "{}",
            r.outliers[0].cause
        );
        // One untraced run and a traced one: one run timed, nothing to spread.
        let pair = vec![untraced("a", 36.0), runs[2].clone()];
        assert!(repeated(&pair).is_empty());
    }

    /// The lead of issue 40: three untraced runs back to back, then one after the machine idled
    /// and handed 1,134 MiB back to its host — its system time 1.8× with the same faults.
    #[test]
    fn an_untraced_user_time_outlier_names_the_go_gc_when_it_accounts_for_it() {
        use crate::runtimes::go_gc::GoGc;
        // Untraced goroutines runs: user time per task and the GC's cycles and CPU.
        let untraced = |dir: &str, user_s: f64, sys_us: f64, gc: Option<(u64, f64)>| {
            let mut s = run(1.7, sys_us, clean());
            s.label = "goroutines hold --n 1000000".into();
            s.tasks = Some(1_000_000);
            s.user_s = user_s;
            s.time_per_task.as_mut().unwrap().user_us = user_s;
            s.go_gc = gc.map(|(cycles, cpu_s)| GoGc {
                cycles,
                cpu_s,
                ..Default::default()
            });
            Run {
                dir: dir.into(),
                summary: s,
                traced: false,
                machine: "M1".into(),
            }
        };
        let runs = vec![
            untraced("a", 4.0, 1.5, Some((4, 1.35))),
            untraced("b", 3.9, 1.5, Some((4, 1.30))),
            untraced("c", 4.1, 1.5, Some((4, 1.40))),
            // 0.73× the user time, the GC 0.73 s under; its system time an outlier too.
            untraced("d", 2.9, 2.5, Some((3, 0.62))),
        ];
        let r = &repeated(&runs)[0];
        let cause_of = |figure: &str| {
            r.outliers
                .iter()
                .find(|o| o.run == "d" && o.figure == figure)
                .unwrap_or_else(|| panic!("d's {figure} is an outlier"))
                .cause
                .clone()
        };
        let user = cause_of("user time per task");
        assert!(
            user.starts_with("untraced, the machine says: the Go GC took 0.62 s of CPU against a median of 1.35 s over its repeats (3 cycles against 4)"),
            "{user}"
        );
        // The GC's CPU is user time: the system-time outlier is not put on it.
        assert!(
            cause_of("system time per task").starts_with("no sentinel explains it"),
            "{}",
            cause_of("system time per task")
        );
        // The same user time with a GC that took as much as its repeats': not the GC, and said.
        let mut steady_gc = runs.clone();
        steady_gc[3] = untraced("d", 2.9, 2.5, Some((4, 1.33)));
        let r = &repeated(&steady_gc)[0];
        let user = &r
            .outliers
            .iter()
            .find(|o| o.run == "d" && o.figure == "user time per task")
            .unwrap()
            .cause;
        assert!(
            user.starts_with("no sentinel explains it (untraced: no kernel counts to compare; nothing handed back to the host before it, no stall, reclaim or slower faults; nor the Go GC: it took 1.33 s of CPU against a median of 1.35 s"),
            "{user}"
        );
    }

    #[test]
    fn an_untraced_outlier_after_memory_was_handed_back_names_it() {
        use crate::time::sentinels::{ReportedAt, SentinelFigures};
        // Each run 10 s long; `gap_s` idle before it, `kib` reported over that gap.
        let mut t_s = 0u64;
        let mut reported_kib = 1_000_000u64;
        let mut at = |gap_s: u64, kib: u64| {
            t_s += gap_s;
            reported_kib += kib;
            let r = ReportedAt {
                first_t_ns: t_s * 1_000_000_000,
                first_kib: reported_kib,
                last_t_ns: (t_s + 10) * 1_000_000_000,
                last_kib: reported_kib,
                boot_id: Some("b1".into()),
            };
            t_s += 10;
            r
        };
        let untraced = |dir: &str, sys_s: f64, reported: ReportedAt| {
            let mut s = run(1.7, sys_s * 1e6 / 1e6, clean());
            s.label = "goroutines hold --n 1000000".into();
            s.tasks = Some(1_000_000);
            s.sys_s = sys_s;
            s.minor_faults = 681_000;
            s.time_per_task.as_mut().unwrap().sys_us = sys_s;
            s.sentinels = Some(SentinelFigures {
                reported_at: Some(reported),
                ..Default::default()
            });
            Run {
                dir: dir.into(),
                summary: s,
                traced: false,
                machine: "M1".into(),
            }
        };
        let runs = vec![
            untraced("a", 1.64, at(0, 0)),
            untraced("b", 1.48, at(2, 0)),
            untraced("c", 1.55, at(2, 4 * 1024)),
            untraced("d", 2.77, at(150, 1_134 * 1024)),
        ];
        let r = &repeated(&runs)[0];
        let outlier = r
            .outliers
            .iter()
            .find(|o| o.run == "d")
            .expect("d is an outlier");
        assert!(
            outlier.cause.starts_with("untraced, the machine says: 1.1 GiB of free memory handed back to the host (free page reporting) in the 150 s before it, against a median of 2.0 MiB before its repeats: a first touch"),
            "{}",
            outlier.cause
        );
        assert!(
            outlier.cause.contains("system time per page fault 1.79× its repeats' median with as many faults (681,000 against 681,000)"),
            "{}",
            outlier.cause
        );
        // The same run on another machine's set sees nothing handed back before it.
        let mut other_machine = runs.clone();
        other_machine[3].machine = "M2".into();
        let outlier = repeated(&other_machine)[0]
            .outliers
            .iter()
            .find(|o| o.run == "d")
            .unwrap()
            .cause
            .clone();
        assert!(!outlier.contains("handed back"), "{outlier}");
        // Nor one read in another boot (its monotonic clock started again).
        let mut other_boot = runs.clone();
        if let Some(r) = other_boot[3]
            .summary
            .sentinels
            .as_mut()
            .and_then(|s| s.reported_at.as_mut())
        {
            r.boot_id = Some("b2".into());
        }
        let cause = repeated(&other_boot)[0]
            .outliers
            .iter()
            .find(|o| o.run == "d")
            .unwrap()
            .cause
            .clone();
        assert!(!cause.contains("handed back"), "{cause}");
    }

    #[test]
    fn an_unexplained_outlier_says_so_and_single_runs_are_left_out() {
        let mut runs = vec![
            ("a".to_string(), run(36.0, 90.0, clean())),
            ("b".to_string(), run(36.0, 90.0, clean())),
            ("c".to_string(), run(80.0, 90.0, clean())),
        ];
        let mut other = run(5.0, 5.0, None);
        other.label = "goroutines hold --n 1000000".into();
        runs.push(("g".to_string(), other));
        let r = repeated(&traced(&runs));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].outliers.len(), 1);
        assert!(r[0].outliers[0]
            .cause
            .starts_with("no sentinel explains it"));
    }
}
