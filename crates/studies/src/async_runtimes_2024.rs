//! async-runtimes-benchmarks 2024 ("Take 2", hez2010): N tasks each sleeping 10 s at 1, 10,000,
//! 100,000 and 1,000,000, in each runtime's program as the article published it (examples/), beside
//! its megabytes; with what it never had: kernel memory per task and whether the tasks coexisted.
//! A runtime this host cannot run is skipped, saying what was missing (found at run time).

use std::time::Duration;

use crate::{no_flags, Asked, Study};
use analyse::comparisons::regression::spread;
use analyse::comparisons::reproduce::{
    alive_when_measured, coexisted, mb, outcomes, slope_over_n, Reproduce,
};
use analyse::comparisons::run_point::RunPoint;
use analyse::memory::per_task::MemoryPerTask;
use measure::examples::{self, Example, How};
use measure::loadgen::LoadOptions;
use measure::sweep::CompareOptions;
use record::Plan;
use runtime::TaskKind;
use units::{bytes, count};

pub const STUDY: Study = Study {
    name: "async-runtimes-2024",
    about: "async-runtimes-benchmarks 2024 (\"Take 2\"): N tasks each sleeping 10 s at 1, 10,000, 100,000 and 1,000,000, in the sleeping-task programs of examples/ this host can run (Rust tokio, async-std and join_all, Go, Java virtual and platform threads, Node, Python, C#), beside the article's published megabytes",
    source: ASYNC_2024_SOURCE,
    plan: Some(plan),
    table: Some(table),
    published_csv: None,
};

/// The article's N.
pub const ASYNC_2024_NS: [u64; 4] = [1, 10_000, 100_000, 1_000_000];

/// Each task's sleep, in the article's programs and ours (none of them has a knob for it).
pub const TASK_SLEEP: Duration = Duration::from_secs(10);

/// The programs that this host can run, at the article's four N; the others are skipped, saying
/// why.
fn plan(asked: &Asked) -> Result<CompareOptions, String> {
    no_flags(
        asked,
        STUDY.name,
        "runs the article's programs as published (tasks sleeping 10 s)",
    )?;
    let (commands, skipped) = examples::prepare(&EXAMPLES);
    for s in &skipped {
        eprintln!("spawnscope compare: skipping {}: {}", s.label, s.why);
    }
    Ok(CompareOptions {
        runtimes: Vec::new(),
        ns: ASYNC_2024_NS.to_vec(),
        workloads: Vec::new(),
        repeats: asked.repeats.unwrap_or(1),
        out: asked.out.clone(),
        memory_limit: asked.memory_limit,
        flags: Vec::new(),
        reproduce: Some(STUDY.name.into()),
        cells: None,
        commands,
        skipped,
        load: LoadOptions::default(),
        cpus: None,
        cpu_counts: Vec::new(),
        perfetto: false,
        trace_max_bytes: None,
        runtime_trace: false,
    })
}

/// The most Java platform threads a reproduction runs (about 6 min here, by the 2026-11-26 run's
/// 2 s per 1,000 threads); 1,000,000 is clamped to it, the row saying so.
pub const PLATFORM_THREADS_MOST: u64 = 200_000;

/// A program of the article's that sleeps `TASK_SLEEP` per task, reproducing its row `article`.
const fn sleeper(
    label: &'static str,
    article: &'static str,
    task_kind: TaskKind,
    how: How,
) -> Example {
    Example {
        label,
        article,
        task_kind,
        task_lifetime: Some(TASK_SLEEP),
        peak_when: None,
        most_tasks: None,
        how,
    }
}

/// The programs, in the order the article's table lists their runtimes.
pub const EXAMPLES: [Example; 9] = [
    sleeper(
        "tokio-sleepers",
        "Rust tokio",
        TaskKind::Task,
        How::Cargo {
            binary: "tokio-sleepers",
            build: "cargo build --release -p tokio-tasks --example tokio-sleepers",
        },
    ),
    sleeper(
        "async-std-sleepers",
        "Rust async-std",
        TaskKind::Task,
        How::Cargo {
            binary: "async-std-sleepers",
            build: "cargo build --release -p rust-sleepers --examples",
        },
    ),
    sleeper(
        "join-all-sleepers",
        "Rust futures (join_all)",
        TaskKind::Task,
        How::Cargo {
            binary: "join-all-sleepers",
            build: "cargo build --release -p rust-sleepers --examples",
        },
    ),
    sleeper(
        "csharp-sleepers",
        "C# NativeAOT",
        TaskKind::Task,
        How::Dotnet {
            dir: "csharp",
            binary: "csharp-sleepers",
        },
    ),
    sleeper(
        "go-sleepers",
        "Go",
        TaskKind::Task,
        How::Go {
            dir: "go",
            binary: "go-sleepers",
        },
    ),
    sleeper(
        "java-virtual-threads",
        "Java virtual threads (OpenJDK 23)",
        TaskKind::Task,
        How::Java {
            source: "java/VirtualThreads.java",
            class: "VirtualThreads",
        },
    ),
    Example {
        most_tasks: Some((
            PLATFORM_THREADS_MOST,
            "a million JVM platform threads (one OS thread each, created and torn down by the JVM) took 26 min on the 2-CPU dev VM on 2026-11-26, 100,000 took 3.3 min",
        )),
        ..sleeper(
            "java-platform-threads",
            "Java platform threads",
            TaskKind::Thread,
            How::Java {
                source: "java/PlatformThreads.java",
                class: "PlatformThreads",
            },
        )
    },
    sleeper(
        "node-sleepers",
        "Node 23",
        TaskKind::Task,
        How::Script {
            interpreter: "node",
            script: "node/sleepers.js",
            package: "nodejs",
        },
    ),
    sleeper(
        "python-sleepers",
        "Python 3.13",
        TaskKind::Task,
        How::Script {
            interpreter: "python3",
            script: "python/sleepers.py",
            package: "python3",
        },
    ),
];

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
    /// (`EXAMPLES`, `Example::article`).
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
            "the article ran async-std too; its figures are not carried in this project (the anchors it keeps have none)",
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

/// The article's figures beside ours: a row per runtime and N. A runtime this host has no program
/// for keeps its published figures, "not run here"; one whose program could not run here says why.
pub fn table(runs: &[RunPoint], plan: &Plan) -> Reproduce {
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
        if e.is_jvm() && runs.iter().any(|r| r.runtime.as_deref() == Some(e.label)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use record::{PlannedCell, PlannedCommand, Skipped};

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
            cpu_count: None,
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
            counts_verdict: None,
            measured_at_s: Some(at_s),
            task_lifetime_s: Some(10.0),
            memory_limit_bytes: None,
            program: Default::default(),
            serve: None,
            wake_to_run: None,
            preempted_to_run: None,
            runtime_traced: false,
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
        let rep = table(&runs, &plan);
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
        let rep = table(&[small, large], &plan);
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
        let rep = table(&[point("go-sleepers", 10_000, 12.0, 5.0)], &Plan::default());
        assert!(!rep.caveats.iter().any(|c| c.contains("a JVM's memory")));
    }

    /// A host without the runtime's toolchain: the reason is found at run time, and it is what
    /// the row says.
    #[test]
    fn a_missing_toolchain_is_named_in_its_row_as_found_at_run_time() {
        use measure::examples::{prepare_with, Toolchains};
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
        let (commands, skipped) = prepare_with(&EXAMPLES, None, None, &tools);
        assert!(commands.is_empty());
        let plan = Plan {
            skipped,
            ..Plan::default()
        };
        let rep = table(&[], &plan);
        for runtime in ["Java virtual threads", "Java platform threads"] {
            let r = row(&rep, runtime, "10,000");
            // What follows is host::jdk's install hint (its own test holds its words).
            let found = format!(
                "skipped here: no JDK 21+ found, only {} (javac 17.0.15): install a JDK 21 or later: ",
                j17.display()
            );
            assert!(r[2].starts_with(&found), "{runtime}: {}", r[2]);
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
