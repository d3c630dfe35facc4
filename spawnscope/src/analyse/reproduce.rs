//! Published experiments beside ours, with the caveats that make them comparable or not: Hansen
//! 2023 ("Threads and Goroutines"), its `/usr/bin/time` figures and the same rows from our runs;
//! async-runtimes-benchmarks 2024 ("Take 2"), its megabytes per runtime and N beside what the
//! same programs took here, with what it never had: kernel memory per task and whether the tasks
//! coexisted.

use serde::{Deserialize, Serialize};

use crate::analyse::regression::{fit, spread};
use crate::analyse::run_point::RunPoint;
use crate::analyse::summary::MemoryPerTask;
use crate::measure::examples::{is_jvm, ASYNC_2024_NS, EXAMPLES, TASK_SLEEP};
use crate::record::Plan;
use crate::units::{bytes, count};

/// The article's published figures ("Threads and Goroutines", Hansen, 2023; see
/// shared/anchors.md): `/usr/bin/time` of 1,000,000 tasks each sleeping 1 s, one run each.
pub struct Published {
    pub runtime: &'static str,
    pub tasks: u64,
    pub user_s: f64,
    pub sys_s: f64,
    pub wall_s: f64,
    pub cpu_percent: f64,
    pub maxrss_kb: u64,
    pub minor_faults: u64,
    pub conclusion: &'static str,
}

pub const HANSEN_2023_SOURCE: &str =
    "Hansen, \"Threads and Goroutines\" (2023): /usr/bin/time, one run, hardware not named";

pub const HANSEN_2023: [Published; 2] = [
    Published {
        runtime: "threads",
        // Its loop ran 1..count: 999,999 threads.
        tasks: 999_999,
        user_s: 6.17,
        sys_s: 80.41,
        wall_s: 38.55,
        cpu_percent: 224.0,
        maxrss_kb: 8_500_640,
        minor_faults: 2_125_114,
        conclusion: "~8 KB per thread",
    },
    Published {
        runtime: "goroutines",
        tasks: 1_000_000,
        user_s: 16.66,
        sys_s: 0.68,
        wall_s: 2.44,
        cpu_percent: 709.0,
        maxrss_kb: 2_122_296,
        minor_faults: 529_900,
        conclusion: "~2 KB per goroutine",
    },
];

/// The reproduction table: columns of figures, rows by figure.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reproduce {
    /// What is reproduced: "Hansen 2023" (also where it is missing: recorded before it) or
    /// "async-runtimes-benchmarks 2024".
    #[serde(default = "hansen_title")]
    pub title: String,
    pub source: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
    pub caveats: Vec<String>,
}

fn hansen_title() -> String {
    "Hansen 2023".into()
}

fn pick<'a>(runs: &'a [RunPoint], runtime: &str, workload: &str) -> Option<&'a RunPoint> {
    // The largest N that completed (the reproduction runs one of each).
    runs.iter()
        .filter(|r| {
            r.runtime.as_deref() == Some(runtime) && r.workload.as_deref() == Some(workload)
        })
        .max_by_key(|r| (r.measured, r.n.unwrap_or(0)))
}

pub fn reproduce_table(runs: &[RunPoint]) -> Reproduce {
    struct Col<'a> {
        title: String,
        published: Option<&'a Published>,
        run: Option<&'a RunPoint>,
    }
    let mut cols: Vec<Col> = Vec::new();
    for p in &HANSEN_2023 {
        cols.push(Col {
            title: format!("article: {} sleep 1 s", p.runtime),
            published: Some(p),
            run: None,
        });
        if let Some(r) = pick(runs, p.runtime, "sleep") {
            cols.push(Col {
                title: format!("here: {} sleep {}", p.runtime, count(r.n.unwrap_or(0))),
                published: None,
                run: Some(r),
            });
        }
    }
    for runtime in ["threads", "goroutines"] {
        if let Some(r) = pick(runs, runtime, "hold") {
            cols.push(Col {
                title: format!(
                    "here: {runtime} hold {} (all alive)",
                    count(r.n.unwrap_or(0))
                ),
                published: None,
                run: Some(r),
            });
        }
    }
    fn kb(v: f64) -> String {
        bytes(v * 1024.0)
    }
    type RowFn = fn(&Published) -> String;
    type RunFn = fn(&RunPoint) -> Option<String>;
    let rows: Vec<(&str, RowFn, RunFn)> = vec![
        ("tasks", |p| count(p.tasks), |r| r.spawned.map(count)),
        (
            "user time",
            |p| format!("{:.2} s", p.user_s),
            |r| Some(format!("{:.2} s", r.user_s)),
        ),
        (
            "system time",
            |p| format!("{:.2} s", p.sys_s),
            |r| Some(format!("{:.2} s", r.sys_s)),
        ),
        (
            "elapsed",
            |p| format!("{:.2} s", p.wall_s),
            |r| Some(format!("{:.2} s", r.wall_s)),
        ),
        (
            "CPU",
            |p| format!("{:.0} %", p.cpu_percent),
            |r| Some(format!("{:.0} %", r.cpu_percent)),
        ),
        (
            "max RSS",
            |p| format!("{} KB", count(p.maxrss_kb)),
            |r| Some(format!("{} KB", count(r.maxrss_kb))),
        ),
        (
            "minor faults",
            |p| count(p.minor_faults),
            |r| Some(count(r.minor_faults)),
        ),
        (
            "max RSS / tasks (the article's per-task figure)",
            |p| format!("{:.1} KB", p.maxrss_kb as f64 / p.tasks as f64),
            |r| {
                r.spawned
                    .filter(|&s| s > 0)
                    .map(|s| format!("{:.1} KB", r.maxrss_kb as f64 / s as f64))
            },
        ),
        (
            "tasks alive at the peak",
            |_| "not measured".into(),
            |r| r.alive_at_peak.map(count),
        ),
        (
            "most tasks alive at once",
            |_| "not measured".into(),
            |r| r.alive_max.map(count),
        ),
        (
            "RSS per task alive",
            |_| "—".into(),
            |r| r.memory_per_task.as_ref().map(|m| kb(m.rss_kb)),
        ),
        (
            "kernel memory per task alive (stack + page tables + slab)",
            |_| "not visible to max RSS".into(),
            |r| {
                r.memory_per_task
                    .as_ref()
                    .map(|m| kb(m.kernel_stack_kb + m.page_tables_kb + m.slab_kb))
            },
        ),
        (
            "total per task alive (RSS + kernel)",
            |_| "—".into(),
            |r| r.memory_per_task.as_ref().map(|m| kb(m.total_kb)),
        ),
        (
            "MemAvailable drop per task alive",
            |_| "—".into(),
            |r| {
                r.memory_per_task
                    .as_ref()
                    .map(|m| kb(m.mem_available_drop_kb))
            },
        ),
        (
            "outcome",
            |p| p.conclusion.into(),
            |r| Some(r.outcome.split(':').next().unwrap_or("").to_string()),
        ),
    ];
    let table_rows = rows
        .iter()
        .map(|(label, published, measured)| {
            let values = cols
                .iter()
                .map(|c| match (c.published, c.run) {
                    (Some(p), _) => published(p),
                    (_, Some(r)) => measured(r).unwrap_or_else(|| "?".into()),
                    _ => "?".into(),
                })
                .collect();
            (label.to_string(), values)
        })
        .collect();
    let mut caveats = Vec::new();
    for runtime in ["threads", "goroutines"] {
        let Some(r) = pick(runs, runtime, "sleep") else {
            caveats.push(format!("{runtime} sleep 1,000,000 did not run"));
            continue;
        };
        let spawned = r.spawned.unwrap_or(0);
        if let (Some(alive), Some(max)) = (r.alive_at_peak, r.alive_max) {
            caveats.push(format!(
                "{runtime} sleep: of {} tasks spawned, at most {} ({:.0} %) were alive at once, {} at the peak snapshot: {}",
                count(spawned),
                count(max),
                max as f64 / spawned.max(1) as f64 * 100.0,
                count(alive),
                if max < spawned {
                    "the million never coexisted; max RSS / N divides the memory of the tasks alive at once by all of them"
                } else {
                    "all coexisted"
                }
            ));
        }
        if let Some(m) = &r.memory_per_task {
            let kernel = m.kernel_stack_kb + m.page_tables_kb + m.slab_kb;
            caveats.push(format!(
                "{runtime} sleep: per task alive, {} RSS but {} of kernel memory (kernel stack {}, page tables {}, slab {}) that max RSS does not count",
                kb(m.rss_kb),
                kb(kernel),
                kb(m.kernel_stack_kb),
                kb(m.page_tables_kb),
                kb(m.slab_kb)
            ));
        }
    }
    if let Some(r) = pick(runs, "threads", "hold") {
        if r.n.unwrap_or(0) < 1_000_000 {
            caveats.push(format!(
                "threads hold ran at {} (the largest N the preflight let fit), not 1,000,000: a million coexisting threads do not fit in this machine's memory",
                count(r.n.unwrap_or(0))
            ));
        }
    }
    Reproduce {
        title: hansen_title(),
        source: HANSEN_2023_SOURCE.into(),
        columns: cols.into_iter().map(|c| c.title).collect(),
        rows: table_rows,
        caveats,
    }
}

// ---------------------------------------------------------------------------------------------
// async-runtimes-benchmarks 2024 ("Take 2")

/// What the 2024 article published for a row.
pub enum Figures {
    /// Megabytes at each of `ASYNC_2024_NS`.
    Mb([f64; 4]),
    /// None here, and why.
    None(&'static str),
}

/// One runtime's row of the 2024 article's table.
pub struct PublishedMb {
    /// As the article names it; examples of ours name the row they reproduce
    /// (measure/examples.rs, `Example::article`).
    pub runtime: &'static str,
    pub mb: Figures,
}

pub const ASYNC_2024_SOURCE: &str = "hez2010, async-runtimes-benchmarks-2024, RESULT.md (\"Take 2\", 2024): memory in MB of N tasks each sleeping 10 s, one run each, i7-13700K, Debian 12; how memory was read is not stated";

/// The article's table (shared/anchors.md), in its order, with the rows of ours it has no
/// figures for beside the runtime they belong to.
pub const ASYNC_2024_TABLE: [PublishedMb; 9] = [
    PublishedMb {
        runtime: "Rust tokio",
        mb: Figures::Mb([4.72, 9.04, 46.2, 439.1]),
    },
    PublishedMb {
        runtime: "Rust async-std",
        mb: Figures::None(
            "the article ran async-std too; its figures are not carried here (shared/anchors.md has none)",
        ),
    },
    PublishedMb {
        runtime: "Rust futures (join_all)",
        mb: Figures::Mb([3.04, 4.78, 22.8, 207.4]),
    },
    PublishedMb {
        runtime: "C# NativeAOT",
        mb: Figures::Mb([3.59, 7.56, 30.0, 196.6]),
    },
    PublishedMb {
        runtime: "Go",
        mb: Figures::Mb([3.55, 34.3, 262.7, 2585.6]),
    },
    PublishedMb {
        runtime: "Java virtual threads (OpenJDK 23)",
        mb: Figures::Mb([46.9, 108.4, 197.0, 1095.2]),
    },
    PublishedMb {
        runtime: "Java platform threads",
        mb: Figures::None(
            "not in the article: ours, the JVM's other kind of thread (one OS thread each) beside its virtual threads",
        ),
    },
    PublishedMb {
        runtime: "Node 23",
        mb: Figures::Mb([41.9, 64.8, 125.1, 563.9]),
    },
    PublishedMb {
        runtime: "Python 3.13",
        mb: Figures::Mb([19.5, 33.3, 146.5, 1275.7]),
    },
];

/// The columns of the 2024 table, after the runtime.
const ASYNC_2024_COLUMNS: [&str; 9] = [
    "tasks",
    "article: MB",
    "here: max RSS, MB",
    "here: anon RSS + kernel, MB",
    "RSS / task",
    "kernel / task (stack + page tables + slab)",
    "tasks alive at the moment measured",
    "coexisted",
    "outcome",
];

/// KiB as the article's "MB" (max RSS in KiB / 1024, as `/usr/bin/time`'s KiB would give).
fn mb(kib: f64) -> String {
    format!("{:.1}", kib / 1024.0)
}

/// The article's figures beside ours: a row per runtime and N. A runtime this host has no program
/// for keeps its published figures, "not run here"; one whose program could not run here says why.
pub fn async_2024_table(runs: &[RunPoint], plan: &Plan) -> Reproduce {
    let mut rows = Vec::new();
    let mut caveats = vec![
        "MB as the article's: KiB / 1024. Max RSS is what /usr/bin/time reports (ru_maxrss), the likeliest reading of the article's undocumented figure; anon RSS + kernel is what the tasks held at the moment measured: the process's anonymous memory and the kernel stacks, page tables and slab max RSS leaves out.".to_string(),
        format!(
            "A user-space runtime's tasks cannot be counted from outside. Each task sleeps {s} s and the program waits for all of them, so the last started at most wall − {s} s after the start (wall: to the reap, so this is the latest it can be) and none ended before {s} s: all N were alive together from then to {s} s, when that span is not empty (\"coexisted\"). Memory is measured at the most memory in use within the first {s} s; the tasks alive then are all N when that moment falls in the span.",
            s = TASK_SLEEP.as_secs()
        ),
    ];
    for c in &plan.commands {
        caveats.push(format!(
            "{} here: {}{}",
            c.label,
            c.command.join(" "),
            c.version
                .as_ref()
                .map_or(String::new(), |v| format!(" ({v})"))
        ));
    }
    for published in &ASYNC_2024_TABLE {
        let example = EXAMPLES.iter().find(|e| e.article == published.runtime);
        let skipped = example.and_then(|e| plan.skipped.iter().find(|s| s.label == e.label));
        let label = match example {
            Some(e) => format!("{} ({})", published.runtime, e.label),
            None => published.runtime.to_string(),
        };
        if let Figures::None(why) = published.mb {
            caveats.push(format!(
                "{}: no published figures: {why}",
                published.runtime
            ));
        }
        for (k, &n) in ASYNC_2024_NS.iter().enumerate() {
            let article = match published.mb {
                Figures::Mb(mb) => format!("{:.1}", mb[k]),
                Figures::None(_) => "—".into(),
            };
            let mut values = vec![count(n), article];
            let not_here = match (skipped, example) {
                (Some(s), _) => Some(format!("skipped here: {}", s.why)),
                (_, None) => Some("not run here".into()),
                _ => None,
            };
            if let Some(text) = not_here {
                values.push(text);
                values.resize(ASYNC_2024_COLUMNS.len(), "—".into());
                rows.push((label.clone(), values));
                continue;
            }
            let label_here = example.map_or("", |e| e.label);
            let planned = plan
                .cells
                .iter()
                .find(|c| c.runtime == label_here && c.requested_n == n);
            // The N the preflight let run (a runs-only set, without a plan: N as asked).
            let ran_at = planned.map_or(Some(n), |c| c.n);
            if let Some(at) = ran_at.filter(|&at| at != n) {
                values[0] = format!("{} → {} (clamped)", count(n), count(at));
            }
            let mine: Vec<&RunPoint> = runs
                .iter()
                .filter(|r| r.runtime.as_deref() == Some(label_here) && r.n == ran_at)
                .collect();
            let Some(at) = ran_at.filter(|_| !mine.is_empty()) else {
                let why = planned
                    .and_then(|c| c.note.clone())
                    .unwrap_or_else(|| "did not run".into());
                values.push(format!("not run: {why}"));
                values.resize(ASYNC_2024_COLUMNS.len(), "—".into());
                rows.push((label.clone(), values));
                continue;
            };
            // Medians over the repeats that measured something, as the runs table's cells.
            let measured: Vec<&RunPoint> = mine.iter().copied().filter(|r| r.measured).collect();
            let median = |f: &dyn Fn(&RunPoint) -> Option<f64>| {
                spread(&measured.iter().filter_map(|r| f(r)).collect::<Vec<_>>()).map(|s| s.median)
            };
            let per_task = |f: fn(&MemoryPerTask) -> f64| {
                median(&|r: &RunPoint| r.memory_per_task.as_ref().map(f))
            };
            let kib = |v: Option<f64>| v.map_or("—".into(), |v| bytes(v * 1024.0));
            values.push(median(&|r| Some(r.maxrss_kb as f64)).map_or("—".into(), mb));
            values.push(median(&|r| r.memory_total(|m| Some(m.total_kb))).map_or("—".into(), mb));
            values.push(kib(per_task(|m| m.rss_kb)));
            values.push(kib(per_task(|m| {
                m.kernel_stack_kb + m.page_tables_kb + m.slab_kb
            })));
            values.push(alive_when_measured(&mine, at));
            values.push(coexisted(&mine));
            values.push(outcomes(&mine));
            rows.push((label.clone(), values));
        }
    }
    for s in &plan.skipped {
        caveats.push(format!("{} skipped: {}", s.label, s.why));
    }
    for e in &EXAMPLES {
        caveats.extend(slope_over_n(runs, e.label));
        if is_jvm(e.label) && runs.iter().any(|r| r.runtime.as_deref() == Some(e.label)) {
            let flags = plan
                .commands
                .iter()
                .find(|c| c.label == e.label)
                .and_then(|c| c.version.as_deref())
                .and_then(|v| v.split("JVM memory flags: ").nth(1))
                .unwrap_or("not recorded");
            caveats.push(format!(
                "{}: a JVM's memory is mostly heap its collector sized ({flags}; what each run used is the first line of its command.stdout, -XX:+PrintCommandLineFlags). Max RSS and memory / N at one N say what the collector chose to keep, not what N tasks need: what the tasks themselves cost is the slope over N.",
                e.label
            ));
        }
    }
    Reproduce {
        title: "async-runtimes-benchmarks 2024".into(),
        source: ASYNC_2024_SOURCE.into(),
        columns: ASYNC_2024_COLUMNS.iter().map(|c| c.to_string()).collect(),
        rows,
        caveats,
    }
}

/// What one more task costs a program: the slope over N of its memory in all (RSS + kernel, at
/// the moment measured, against the tasks alive then) and of its max RSS (against N), fitted
/// over every measured run (as compare-fits.csv fits `memory_total_kb`). None with fewer than
/// two N.
fn slope_over_n(runs: &[RunPoint], label: &str) -> Option<String> {
    let mine: Vec<&RunPoint> = runs
        .iter()
        .filter(|r| r.measured && r.runtime.as_deref() == Some(label))
        .collect();
    let total: Vec<(f64, f64)> = mine
        .iter()
        .filter_map(|r| {
            Some((
                r.alive_at_peak? as f64,
                r.memory_total(|m| Some(m.total_kb))?,
            ))
        })
        .collect();
    let rss: Vec<(f64, f64)> = mine
        .iter()
        .filter_map(|r| Some((r.n? as f64, r.maxrss_kb as f64)))
        .collect();
    let line = fit(&total)?;
    let ns: Vec<f64> = total.iter().map(|p| p.0).collect();
    let (lo, hi) = ns
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let kib = |v: f64| bytes(v * 1024.0);
    Some(format!(
        "{label}: what a task itself costs, the slope over N ({} to {} tasks, {} runs): {} in all (RSS + kernel; fixed part {}, r² {:.3}){}",
        count(lo as u64),
        count(hi as u64),
        line.points,
        kib(line.slope),
        kib(line.intercept),
        line.r2,
        fit(&rss).map_or(String::new(), |l| format!(", {} of max RSS", kib(l.slope)))
    ))
}

/// "all 10,000 (at 1.2 s)", or why that is not shown; repeats that disagree are counted.
fn alive_when_measured(runs: &[&RunPoint], n: u64) -> String {
    let shown = runs
        .iter()
        .filter(|r| r.all_alive_when_measured() == Some(true))
        .count();
    let at = |r: &RunPoint| r.measured_at_s.map_or("?".into(), |t| format!("{t:.2} s"));
    match (shown, runs) {
        (1, [one]) => format!("all {} (at {})", count(n), at(one)),
        (0, [one]) => match one.all_alive_window() {
            Some((from, to)) => format!(
                "not shown: measured at {}, all alive only {from:.2}–{to:.2} s",
                at(one)
            ),
            None => format!("not shown: measured at {}", at(one)),
        },
        (k, all) => format!("all {} in {k} of {} runs", count(n), all.len()),
    }
}

/// "yes, 1.2–10.0 s", or why that is not shown; repeats that disagree are counted.
fn coexisted(runs: &[&RunPoint]) -> String {
    let windows: Vec<Option<(f64, f64)>> = runs.iter().map(|r| r.all_alive_window()).collect();
    let shown = windows.iter().filter(|w| w.is_some()).count();
    match (windows.as_slice(), runs) {
        ([Some((from, to))], _) => format!("yes, {from:.2}–{to:.2} s"),
        ([None], [one]) => match one.task_lifetime_s {
            Some(life) => format!(
                "not shown: the last may have started {:.2} s in, after the first could end ({life:.0} s)",
                one.wall_s - life
            ),
            None => "not known (no task lifetime declared)".into(),
        },
        _ => format!("yes in {shown} of {} runs", runs.len()),
    }
}

fn outcomes(runs: &[&RunPoint]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for r in runs {
        let o = r.outcome.split(':').next().unwrap_or("").to_string();
        if !seen.contains(&o) {
            seen.push(o);
        }
    }
    seen.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_figures_are_the_articles() {
        let [rust, go] = &HANSEN_2023;
        assert_eq!(
            (
                rust.user_s,
                rust.sys_s,
                rust.wall_s,
                rust.maxrss_kb,
                rust.minor_faults
            ),
            (6.17, 80.41, 38.55, 8_500_640, 2_125_114)
        );
        assert_eq!(
            (
                go.user_s,
                go.sys_s,
                go.wall_s,
                go.maxrss_kb,
                go.minor_faults
            ),
            (16.66, 0.68, 2.44, 2_122_296, 529_900)
        );
    }

    use crate::record::{PlannedCell, PlannedCommand, Skipped};

    /// A command run of the reproduction: `wall_s` from release to reap, memory measured `at_s`
    /// in, each task living 10 s.
    fn point(label: &str, n: u64, wall_s: f64, at_s: f64) -> RunPoint {
        RunPoint {
            dir: format!("{label}-{n}"),
            machine: "M1".into(),
            label: format!("{label} {n}"),
            runtime: Some(label.into()),
            workload: Some("command".into()),
            n: Some(n),
            ok: true,
            measured: true,
            outcome: "completed".into(),
            started_utc: String::new(),
            spawned: None,
            alive_at_peak: Some(n),
            alive_max: None,
            wall_s,
            user_s: 0.1,
            sys_s: 0.1,
            cpu_percent: 2.0,
            maxrss_kb: 35_840,
            minor_faults: 0,
            voluntary_switches: 0,
            involuntary_switches: 0,
            memory_per_task: Some(MemoryPerTask {
                rss_kb: 2.5,
                page_tables_kb: 0.25,
                slab_kb: 0.25,
                total_kb: 3.0,
                ..Default::default()
            }),
            sysctls_restored: true,
            contract_violations: 0,
            has_collector: false,
            probe_cost_share: None,
            has_flame: false,
            verdict: None,
            measured_at_s: Some(at_s),
            task_lifetime_s: Some(10.0),
            memory_limit_bytes: None,
            serve: None,
        }
    }

    fn planned(label: &str, n: u64, ran: Option<u64>, note: Option<&str>) -> PlannedCell {
        PlannedCell {
            runtime: label.into(),
            workload: "command".into(),
            requested_n: n,
            n: ran,
            note: note.map(str::to_string),
        }
    }

    fn row<'a>(rep: &'a Reproduce, runtime: &str, tasks: &str) -> &'a [String] {
        &rep.rows
            .iter()
            .find(|(label, values)| label.starts_with(runtime) && values[0].starts_with(tasks))
            .unwrap_or_else(|| panic!("no row {runtime} {tasks}: {:?}", rep.rows))
            .1
    }

    #[test]
    fn every_example_reproduces_a_published_row() {
        for ex in &EXAMPLES {
            let row = ASYNC_2024_TABLE.iter().find(|p| p.runtime == ex.article);
            assert!(row.is_some(), "{}", ex.label);
        }
        // …and every row of the table has a program of ours: none is left "not run here".
        for p in &ASYNC_2024_TABLE {
            assert!(
                EXAMPLES.iter().any(|e| e.article == p.runtime),
                "{}",
                p.runtime
            );
        }
    }

    #[test]
    fn the_2024_table_keeps_every_published_row_and_says_what_did_not_run_and_why() {
        let runs = vec![
            // All 10,000 started within 1.5 s (wall 11.5 s), measured at 1.2 s: before the last
            // may have started, so not shown alive then, though they coexisted from 1.5 s.
            point("go-sleepers", 10_000, 11.5, 1.2),
            // Measured at 3.0 s, inside 1.5–10 s: all alive then.
            point("go-sleepers", 100_000, 11.5, 3.0),
            // 23 s in all: the last may have started 13 s in, after the first sleeps ended.
            point("python-sleepers", 1_000_000, 23.0, 9.8),
        ];
        let plan = Plan {
            reproduce: Some("async-runtimes-2024".into()),
            cells: vec![
                planned("go-sleepers", 10_000, Some(10_000), None),
                planned("go-sleepers", 100_000, Some(100_000), None),
                planned(
                    "go-sleepers",
                    1_000_000,
                    None,
                    Some("go-sleepers command 1,000,000: left out — needs ≈3 GiB, 1 GiB available; nothing fits"),
                ),
                planned("python-sleepers", 1_000_000, Some(1_000_000), None),
            ],
            commands: vec![PlannedCommand {
                label: "go-sleepers".into(),
                command: vec!["/x/go-sleepers".into(), "{n}".into()],
                version: Some("go1.26.8".into()),
            }],
            skipped: vec![Skipped {
                label: "node-sleepers".into(),
                why: "node is not on PATH (Debian: apt-get install nodejs)".into(),
            }],
            ..Plan::default()
        };
        let rep = async_2024_table(&runs, &plan);
        assert_eq!(rep.title, "async-runtimes-benchmarks 2024");
        assert_eq!(rep.rows.len(), 9 * 4, "every runtime at every N");
        for p in &ASYNC_2024_TABLE {
            assert_eq!(
                rep.rows
                    .iter()
                    .filter(|(l, _)| l.starts_with(p.runtime))
                    .count(),
                4,
                "{}",
                p.runtime
            );
        }
        assert!(rep.rows.iter().all(|(_, v)| v.len() == rep.columns.len()));
        // The published megabytes, as the article has them.
        assert_eq!(row(&rep, "Go (go-sleepers)", "1,000,000")[1], "2585.6");
        assert_eq!(row(&rep, "Rust tokio", "1")[1], "4.7");
        // Rows the article has no figures for say so, once, in the caveats.
        assert_eq!(row(&rep, "Java platform threads", "1,000,000")[1], "—");
        assert_eq!(row(&rep, "Rust async-std", "1")[1], "—");
        assert!(rep
            .caveats
            .iter()
            .any(|c| c
                .starts_with("Java platform threads: no published figures: not in the article")));
        // Programs that neither ran nor were skipped say they did not run, never why not in a
        // sentence written in advance.
        for runtime in ["Java virtual threads", "C# NativeAOT", "Rust futures"] {
            let r = row(&rep, runtime, "100,000");
            assert_eq!(r[2], "not run: did not run", "{r:?}");
            assert_eq!(r[3], "—");
        }
        // A runtime missing here: skipped, with why, in its rows and the caveats.
        let node = row(&rep, "Node 23 (node-sleepers)", "10,000");
        assert_eq!(
            node[2],
            "skipped here: node is not on PATH (Debian: apt-get install nodejs)"
        );
        assert!(rep.caveats.contains(
            &"node-sleepers skipped: node is not on PATH (Debian: apt-get install nodejs)"
                .to_string()
        ));
        // The tokio example was in neither the runs nor the plan's commands nor skipped: its
        // rows say it did not run.
        assert!(row(&rep, "Rust tokio (tokio-sleepers)", "10,000")[2].starts_with("not run"));
        // Measured here: max RSS in the article's MB, the kernel's part per task, coexistence.
        let go = row(&rep, "Go (go-sleepers)", "100,000");
        assert_eq!(go[2], "35.0", "35,840 KiB / 1024");
        assert_eq!(go[3], format!("{:.1}", 3.0 * 100_000.0 / 1024.0));
        assert_eq!(go[4], "2.5 KiB");
        assert_eq!(go[5], "512 B");
        assert_eq!(go[6], "all 100,000 (at 3.00 s)");
        assert_eq!(go[7], "yes, 1.50–10.00 s");
        assert_eq!(go[8], "completed");
        let early = row(&rep, "Go (go-sleepers)", "10,000");
        assert_eq!(
            early[6],
            "not shown: measured at 1.20 s, all alive only 1.50–10.00 s"
        );
        assert_eq!(early[7], "yes, 1.50–10.00 s");
        let left_out = row(&rep, "Go (go-sleepers)", "1,000,000");
        assert!(
            left_out[2].starts_with("not run: go-sleepers command 1,000,000: left out"),
            "{left_out:?}"
        );
        let python = row(&rep, "Python 3.13 (python-sleepers)", "1,000,000");
        assert_eq!(python[6], "not shown: measured at 9.80 s");
        assert_eq!(
            python[7],
            "not shown: the last may have started 13.00 s in, after the first could end (10 s)"
        );
        assert!(rep
            .caveats
            .iter()
            .any(|c| c == "go-sleepers here: /x/go-sleepers {n} (go1.26.8)"));
        // What a task itself costs: the slope over N (3.0 KiB a task in all at both N here).
        assert!(
            rep.caveats.iter().any(|c| c
                == "go-sleepers: what a task itself costs, the slope over N (10,000 to 100,000 tasks, 2 runs): 3.0 KiB in all (RSS + kernel; fixed part 0 B, r² 1.000), 0 B of max RSS"),
            "{:?}",
            rep.caveats
        );
        // python ran at one N: no slope.
        assert!(!rep
            .caveats
            .iter()
            .any(|c| c.starts_with("python-sleepers: what a task")));
    }

    #[test]
    fn a_jvm_row_names_its_heap_and_collector_and_its_slope() {
        let mut small = point("java-virtual-threads", 10_000, 12.0, 5.0);
        small.memory_per_task.as_mut().unwrap().total_kb = 5.0; // 50,000 kB in all
        let mut large = point("java-virtual-threads", 100_000, 13.0, 5.0);
        large.memory_per_task.as_mut().unwrap().total_kb = 1.4; // 140,000 kB in all
        large.maxrss_kb = 35_840 + 90_000;
        let plan = Plan {
            commands: vec![PlannedCommand {
                label: "java-virtual-threads".into(),
                command: vec!["/jdk/bin/java".into(), "-XX:+PrintCommandLineFlags".into()],
                version: Some(
                    "openjdk version \"25.0.3\", /jdk (JAVA_HOME); JVM memory flags: -XX:MaxHeapSize=6g -XX:+UseG1GC"
                        .into(),
                ),
            }],
            ..Plan::default()
        };
        let rep = async_2024_table(&[small, large], &plan);
        assert!(
            rep.caveats.iter().any(|c| c
                == "java-virtual-threads: what a task itself costs, the slope over N (10,000 to 100,000 tasks, 2 runs): 1.0 KiB in all (RSS + kernel; fixed part 39.1 MiB, r² 1.000), 1.0 KiB of max RSS"),
            "{:?}",
            rep.caveats
        );
        assert!(
            rep.caveats.iter().any(|c| c.starts_with(
                "java-virtual-threads: a JVM's memory is mostly heap its collector sized (-XX:MaxHeapSize=6g -XX:+UseG1GC; "
            )),
            "{:?}",
            rep.caveats
        );
        // Not a JVM: no such caveat.
        let rep = async_2024_table(&[point("go-sleepers", 10_000, 12.0, 5.0)], &Plan::default());
        assert!(!rep.caveats.iter().any(|c| c.contains("a JVM's memory")));
    }

    /// A host without the runtime's toolchain: the reason is found at run time, and it is what
    /// the row says.
    #[test]
    fn a_missing_toolchain_is_named_in_its_row_as_found_at_run_time() {
        use crate::measure::examples::{prepare_with, Toolchains};
        let tmp = tempfile::tempdir().unwrap();
        let j17 = tmp.path().join("jvm/java-17-openjdk-amd64");
        std::fs::create_dir_all(j17.join("bin")).unwrap();
        std::fs::write(j17.join("bin/javac"), "#!/bin/sh\necho 'javac 17.0.15'\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            j17.join("bin/javac"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let (bin, jvm) = (tmp.path().join("bin"), tmp.path().join("jvm"));
        let tools = Toolchains::from_vars(|name| match name {
            "PATH" => Some(bin.clone().into_os_string()),
            "SPAWNSCOPE_JVM_DIR" => Some(jvm.clone().into_os_string()),
            _ => None,
        });
        let (commands, skipped) = prepare_with(None, None, &tools);
        assert!(commands.is_empty());
        let plan = Plan {
            skipped,
            ..Plan::default()
        };
        let rep = async_2024_table(&[], &plan);
        for runtime in ["Java virtual threads", "Java platform threads"] {
            let r = row(&rep, runtime, "10,000");
            assert_eq!(
                r[2],
                format!(
                    "skipped here: no JDK 21+ found, only {} (javac 17.0.15): {}",
                    j17.display(),
                    crate::host::jdk::install_hint(21)
                ),
                "{runtime}"
            );
        }
        let csharp = row(&rep, "C# NativeAOT", "1,000,000");
        assert!(
            csharp[2].starts_with(
                "skipped here: no dotnet SDK on PATH (dotnet is not on PATH; install one: "
            ),
            "{csharp:?}"
        );
        assert!(!rep
            .rows
            .iter()
            .any(|(_, v)| v.iter().any(|c| c.contains("not installable"))));
    }
}
