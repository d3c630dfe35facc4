//! The 2023 Rust HTTP server article (8lovelife, "Rust异步编程"): `serve` in each runtime under
//! wrk at 10 … 5,000 connections (-t = -c), 2 CPUs, a 10 MB memory limit (20 MB marked at 5,000),
//! each request waiting 1.5 s; our three runtimes beside its published table, with what happened
//! where a server fell over named instead of its "N/A".

use std::time::Duration;

use crate::{Asked, Study};
use analyse::comparisons::reproduce::Reproduce;
use analyse::comparisons::run_point::RunPoint;
use measure::loadgen::LoadOptions;
use measure::sweep::CompareOptions;
use record::Plan;
use runtime::{Runtime, WorkloadKind};
use units::{bytes, count};

pub const STUDY: Study = Study {
    name: "rust-http-2023",
    about: "The 2023 Rust HTTP server article: `serve` in each runtime under wrk at 10, 100, 1,000, 3,000 and 5,000 connections (-t = -c, --timeout 15s, -d 30s unless --duration), each request sleeping 1.5 s, pinned to 2 CPUs, in a 10 MiB cgroup (and 20 MiB at 5,000), beside the article's table, with what happened at each limit named",
    source: RUST_HTTP_2023_SOURCE,
    plan: Some(plan),
    table: Some(table),
    published_csv: None,
};

/// The article's rounds: (connections, memory limit in MiB), as its table has them.
pub const ROUNDS: [(u64, u64); 6] = [
    (10, 10),
    (100, 10),
    (1_000, 10),
    (3_000, 10),
    (5_000, 10),
    (5_000, 20),
];

/// What each request does: the article's servers answered after ~1.5 s (latency floor 1.51 s).
pub const WORK: &str = "sleep=1500ms";
/// The article's wrk --timeout and -d.
pub const LOAD_TIMEOUT_S: u64 = 15;
pub const LOAD_DURATION_S: u64 = 30;
/// The article's CPU quota: 2 CPUs (here a CPU list the workload is pinned to).
pub const CPUS: &str = "0-1";

/// The article's rounds for our three runtimes, each at its own memory limit; the load flags
/// given laid over the article's wrk flags.
fn plan(asked: &Asked) -> Result<CompareOptions, String> {
    if !asked.flags.is_empty() || asked.memory_limit.is_some() || asked.cpus.is_some() {
        return Err(format!(
            "--reproduce {} runs the article's rounds (1.5 s per request, 10/20 MiB, 2 CPUs); workload flags, --memory-limit and --cpus do not apply",
            STUDY.name
        ));
    }
    let article = LoadOptions {
        duration: Duration::from_secs(LOAD_DURATION_S),
        threads: None,
        thread_per_connection: true,
        timeout: Duration::from_secs(LOAD_TIMEOUT_S),
    };
    let cells = ROUNDS
        .iter()
        .flat_map(|&(connections, mib)| {
            Runtime::DEFAULT_SWEEP
                .iter()
                .map(move |&rt| (rt, WorkloadKind::Serve, connections, Some(mib << 20)))
        })
        .collect();
    Ok(CompareOptions {
        runtimes: Runtime::DEFAULT_SWEEP.to_vec(),
        ns: ROUNDS.iter().map(|(c, _)| *c).collect(),
        workloads: vec![WorkloadKind::Serve],
        repeats: asked.repeats.unwrap_or(1),
        out: asked.out.clone(),
        memory_limit: None,
        // The article's servers had no memory guard of their own: the cgroup's limit is what
        // they meet.
        flags: vec![
            ("--work".into(), WORK.into()),
            ("--reserve".into(), "0".into()),
        ],
        reproduce: Some(STUDY.name.into()),
        cells: Some(cells),
        commands: Vec::new(),
        skipped: Vec::new(),
        load: (asked.load_over)(article),
        cpus: Some(CPUS.into()),
        cpu_counts: Vec::new(),
        perfetto: false,
        trace_max_bytes: None,
        runtime_trace: false,
    })
}

pub const RUST_HTTP_2023_SOURCE: &str = "8lovelife, \"Rust异步编程\" (2023): five Rust HTTP servers in docker (cpus 2, memory 10M) under `wrk -t C -c C -d30 --timeout=15`, each request waiting ~1.5 s; QPS and mean latency as published, N/A where the server fell over (\"宕机\")";

/// One published cell: QPS and mean latency, None where it says N/A.
type Published = Option<(f64, &'static str)>;

/// (connections, MiB, V2 thread per connection, V4 async single thread, V5 async multi thread).
const PUBLISHED: [(u64, u64, Published, Published, Published); 6] = [
    (
        10,
        10,
        Some((6.32, "1.51 s")),
        Some((6.32, "1.51 s")),
        Some((6.32, "1.51 s")),
    ),
    (
        100,
        10,
        Some((63.21, "1.51 s")),
        Some((63.22, "1.51 s")),
        Some((63.18, "1.51 s")),
    ),
    (
        1_000,
        10,
        None,
        Some((614.44, "1.54 s")),
        Some((615.77, "1.54 s")),
    ),
    (
        3_000,
        10,
        None,
        Some((673.95, "2.72 s")),
        Some((635.85, "3.49 s")),
    ),
    (5_000, 10, None, Some((593.99, "4.64 s")), None),
    (
        5_000,
        20,
        None,
        Some((911.34, "2.15 s")),
        Some((896.92, "2.42 s")),
    ),
];

const RUNTIMES: [&str; 3] = ["threads", "goroutines", "tokio"];

fn published(cell: Published) -> String {
    cell.map_or("N/A (fell over)".into(), |(qps, latency)| {
        format!("{qps:.2} req/s, {latency}")
    })
}

/// Ours in a cell: requests/s and mean latency when it served, else what happened; memory per
/// open connection when measured.
fn ours(run: &RunPoint) -> String {
    let Some(serve) = &run.serve else {
        return format!("no load recorded: {}", run.outcome);
    };
    if serve.fell_over {
        let what = serve
            .happened
            .first()
            .cloned()
            .unwrap_or_else(|| run.outcome.clone());
        return format!("fell over: {what}");
    }
    let latency = serve
        .load
        .latency_ms
        .as_ref()
        .map_or("—".into(), |l| format!("{:.2} s", l.mean / 1000.0));
    let memory = serve
        .per_connection
        .as_ref()
        .and_then(|c| c.memory_kib)
        .map_or(String::new(), |kib| {
            format!(", {}/conn", bytes(kib * 1024.0))
        });
    let timeouts = serve.load.errors.timeout;
    let timeouts = if timeouts > 0 {
        format!(", {} timeouts", count(timeouts))
    } else {
        String::new()
    };
    format!(
        "{:.2} req/s, {latency}{memory}{timeouts}",
        serve.load.requests_per_s
    )
}

pub fn table(runs: &[RunPoint], _plan: &Plan) -> Reproduce {
    let mut rows = Vec::new();
    for (connections, mib, v2, v4, v5) in PUBLISHED {
        let mut values = vec![
            format!("{} MiB", mib),
            published(v2),
            published(v4),
            published(v5),
        ];
        for runtime in RUNTIMES {
            let run = runs.iter().find(|r| {
                r.runtime.as_deref() == Some(runtime)
                    && r.workload.as_deref() == Some("serve")
                    && r.n == Some(connections)
                    && r.memory_limit_bytes == Some(mib << 20)
            });
            values.push(run.map_or("not run".into(), ours));
        }
        rows.push((count(connections), values));
    }
    Reproduce {
        title: "Rust HTTP servers 2023".into(),
        source: RUST_HTTP_2023_SOURCE.into(),
        columns: [
            "memory limit",
            "article V2: thread per connection",
            "article V4: async, 1 thread",
            "article V5: async, multi-thread",
            "threads (one per connection)",
            "goroutines (one per connection)",
            "tokio (a task per connection)",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect(),
        rows,
        caveats: vec![
            format!("In our runs each request sleeps 1.5 s (`--work {WORK}`), as the article's servers did, with no memory guard of their own (`--reserve 0`); wrk as the article ran it (-t = -c, --timeout {LOAD_TIMEOUT_S}s); the workload pinned to CPUs {CPUS} (the article's docker quota was 2 CPUs); the limit is the run's cgroup memory limit."),
            "Latency is wrk's mean, as the article's AVG. \"fell over\" names what happened: the cgroup's OOM kill, connections refused or reset, timeouts.".into(),
            "On cgroup v1 the server's socket buffers are counted apart (memory.kmem.tcp) and not held to the limit; on v2 they are inside it.".into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::serving::{LatencyMs, LoadFigures, PerConnection, ServeFigures};

    fn served(runtime: &str, n: u64, mib: u64, serve: ServeFigures) -> RunPoint {
        let mut point = analyse::test_support::run_point(runtime, "serve", n);
        point.memory_limit_bytes = Some(mib << 20);
        point.serve = Some(serve);
        point
    }

    #[test]
    fn ours_stand_beside_the_article_with_what_happened_named() {
        let ok = ServeFigures {
            load: LoadFigures {
                requests_per_s: 63.2,
                latency_ms: Some(LatencyMs {
                    mean: 1510.0,
                    ..Default::default()
                }),
                ..Default::default()
            },
            per_connection: Some(PerConnection {
                open: 100,
                memory_kib: Some(44.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let oom = ServeFigures {
            fell_over: true,
            happened: vec![
                "the server was OOM-killed in its cgroup (memory limit 10.0 MiB)".into(),
            ],
            ..Default::default()
        };
        let runs = vec![
            served("tokio", 100, 10, ok),
            served("threads", 1_000, 10, oom),
        ];
        let table = table(&runs, &Plan::default());
        let row = |c: &str| {
            &table
                .rows
                .iter()
                .find(|(k, v)| k == c && v[0] == "10 MiB")
                .unwrap()
                .1
        };
        assert_eq!(row("100")[6], "63.20 req/s, 1.51 s, 44.0 KiB/conn");
        assert_eq!(row("100")[1], "63.21 req/s, 1.51 s");
        assert_eq!(
            row("1,000")[4],
            "fell over: the server was OOM-killed in its cgroup (memory limit 10.0 MiB)"
        );
        assert_eq!(row("1,000")[1], "N/A (fell over)");
        assert_eq!(row("10")[5], "not run");
        assert_eq!(table.rows.len(), 6);
    }
}
