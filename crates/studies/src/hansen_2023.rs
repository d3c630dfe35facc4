//! Hansen 2023, "Threads and Goroutines": 1,000,000 Rust threads and 1,000,000 goroutines each
//! sleeping 1 s under `/usr/bin/time`. Its published figures, the same rows from our runs (sleep
//! at 1,000,000, and hold: every task alive at once, threads at the largest N that fits), and what
//! max RSS never saw (kernel memory, tasks alive at once).

use crate::{no_flags, Asked, Study};
use analyse::comparisons::reproduce::{hansen_title, Reproduce};
use analyse::comparisons::run_point::RunPoint;
use measure::loadgen::LoadOptions;
use measure::sweep::CompareOptions;
use record::Plan;
use runtime::{Runtime, WorkloadKind};
use units::{bytes, count};

pub const STUDY: Study = Study {
    name: "hansen2023",
    about: "Hansen 2023: 1M threads and 1M goroutines each sleeping 1 s, beside the article's figures, plus hold (threads at the largest N that fits, goroutines 1M)",
    source: HANSEN_2023_SOURCE,
    plan: Some(plan),
    table: Some(table),
    published_csv: None,
};

/// The article's experiment (1M threads and 1M goroutines, each sleeping 1 s) and our hold
/// figures beside it (threads at the largest N that fits).
fn plan(asked: &Asked) -> Result<CompareOptions, String> {
    no_flags(
        asked,
        STUDY.name,
        "runs the article's flags (sleep 1 s, default stacks)",
    )?;
    Ok(CompareOptions {
        runtimes: vec![Runtime::Threads, Runtime::Goroutines],
        ns: vec![1_000_000],
        workloads: vec![WorkloadKind::Sleep, WorkloadKind::Hold],
        repeats: asked.repeats.unwrap_or(1),
        out: asked.out.clone(),
        memory_limit: asked.memory_limit,
        flags: vec![("--sleep".into(), "1s".into())],
        reproduce: Some(STUDY.name.into()),
        cells: Some(vec![
            (Runtime::Threads, WorkloadKind::Sleep, 1_000_000, None),
            (Runtime::Goroutines, WorkloadKind::Sleep, 1_000_000, None),
            (Runtime::Threads, WorkloadKind::Hold, 1_000_000, None),
            (Runtime::Goroutines, WorkloadKind::Hold, 1_000_000, None),
        ]),
        commands: Vec::new(),
        skipped: Vec::new(),
        load: LoadOptions::default(),
        cpus: None,
        cpu_counts: Vec::new(),
        perfetto: false,
        trace_max_bytes: None,
        runtime_trace: false,
    })
}

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

fn pick<'a>(runs: &'a [RunPoint], runtime: &str, workload: &str) -> Option<&'a RunPoint> {
    // The largest N that completed (the reproduction runs one of each).
    runs.iter()
        .filter(|r| {
            r.runtime.as_deref() == Some(runtime) && r.workload.as_deref() == Some(workload)
        })
        .max_by_key(|r| (r.measured, r.n.unwrap_or(0)))
}

pub fn table(runs: &[RunPoint], _plan: &Plan) -> Reproduce {
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
}
