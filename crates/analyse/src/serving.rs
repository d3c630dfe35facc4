//! A `serve` run's figures: what wrk measured (requests/s, latency, errors), what the server
//! counted, what one open connection costs in memory (the task's and the kernel's socket
//! buffers), what one request costs in CPU time and system calls (the collector's counts in the
//! `load` phase), and what happened where the server fell over, named.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::probes::counts::ProbeSummary;
use record::loadgen::{LoadRecord, WrkErrors};
use record::{MemoryRecord, RunRecord, Snapshot};

/// A serve run, as summary.json holds it.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ServeFigures {
    /// Connections asked for (--n): wrk holds them open for its duration.
    pub connections: u64,
    pub load: LoadFigures,
    /// The server's own counts (its result's `serve`); None when it printed no result.
    pub server: Option<ServerCounts>,
    pub per_connection: Option<PerConnection>,
    pub per_request: Option<PerRequest>,
    /// What happened, named: an OOM kill, connections refused or reset, timeouts.
    pub happened: Vec<String>,
    /// The server did not serve its connections through the load (killed, refused, no response).
    pub fell_over: bool,
}

/// wrk's figures, summed over its processes.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadFigures {
    pub tool: String,
    pub version: Option<String>,
    pub processes: u64,
    pub threads: u64,
    pub duration_s: f64,
    pub requests: u64,
    pub requests_per_s: f64,
    /// Bytes read by wrk per second (headers and bodies).
    pub bytes_per_s: f64,
    /// Latency, ms. With more than one wrk process: each quantile the requests-weighted mean of
    /// theirs (`latency_exact` false), max the largest.
    pub latency_ms: Option<LatencyMs>,
    pub latency_exact: bool,
    pub errors: WrkErrors,
}

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencyMs {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// The server's result `serve` object.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerCounts {
    pub connections_accepted: u64,
    pub connections_max_open: u64,
    /// Good requests answered, the drain's too.
    pub requests: u64,
    /// Good requests answered by the release (the end of `load`); None from workloads before it
    /// was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_in_load: Option<u64>,
    pub response_bytes: u64,
    pub bad_requests: u64,
    pub accept_errors: u64,
    pub open_at_end: u64,
}

/// One open connection, at the moment most were open.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PerConnection {
    /// Connections open at that moment (the divisor).
    pub open: u64,
    /// The server's memory in all per connection (RSS, kernel stacks, page tables, slab), KiB:
    /// summary.json `memory_per_task.total_kb`.
    pub memory_kib: Option<f64>,
    /// What the run's cgroup was charged per connection, KiB (the server alone: wrk runs
    /// outside it).
    pub charged_kib: Option<f64>,
    /// The kernel's TCP buffers of the server's sockets per connection, KiB (cgroup v2 `sock`,
    /// v1 kmem.tcp): outside RSS, and on v1 outside the charge too.
    pub socket_kib: Option<f64>,
}

/// One request, in the `load` phase (first connection to release).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PerRequest {
    /// Good requests the server answered in the phase (the divisor).
    pub requests: u64,
    pub user_us: Option<f64>,
    pub sys_us: Option<f64>,
    /// The collector's counts in the phase per request, by metric (system calls, switches,
    /// futex waits), in the order the collector lists them.
    pub kernel: Vec<PerRequestCount>,
}

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PerRequestCount {
    pub metric: String,
    pub per_request: f64,
}

/// The collector's metrics shown per request: each system call that serves one, and the
/// switches and futex waits around them.
const PER_REQUEST_METRICS: &[&str] = &[
    "accepts",
    "net_reads",
    "read_calls",
    "recvfrom_calls",
    "readv_calls",
    "recvmsg_calls",
    "net_reads_eagain",
    "net_writes",
    "write_calls",
    "sendto_calls",
    "writev_calls",
    "sendmsg_calls",
    "net_writes_eagain",
    "epoll_waits",
    "epoll_waits_empty",
    "epoll_ctl_calls",
    "poll_calls",
    "ppoll_calls",
    "close_calls",
    "switches_voluntary",
    "switches_involuntary",
    "futex_waits",
];

fn u(value: &Value, key: &str) -> u64 {
    value[key].as_u64().unwrap_or(0)
}

/// The phase sample named `name`.
fn phase<'a>(memory: &'a MemoryRecord, name: &str) -> Option<&'a Snapshot> {
    memory
        .phases
        .iter()
        .find(|p| p.name == name)
        .map(|p| &p.snapshot)
}

pub fn load_figures(load: &LoadRecord) -> LoadFigures {
    let reports: Vec<_> = load
        .processes
        .iter()
        .filter_map(|p| p.report.as_ref())
        .collect();
    let requests: u64 = reports.iter().map(|r| r.requests).sum();
    // The processes run side by side: the load lasted as long as the longest.
    let duration_s = reports
        .iter()
        .map(|r| r.duration_us as f64 / 1e6)
        .fold(0.0, f64::max);
    let per_s = |x: u64| {
        if duration_s > 0.0 {
            x as f64 / duration_s
        } else {
            0.0
        }
    };
    let mut errors = WrkErrors::default();
    for r in &reports {
        errors.connect += r.errors.connect;
        errors.read += r.errors.read;
        errors.write += r.errors.write;
        errors.status += r.errors.status;
        errors.timeout += r.errors.timeout;
    }
    let with_latency: Vec<_> = reports
        .iter()
        .filter_map(|r| Some((r.requests as f64, r.latency_us.as_ref()?)))
        .collect();
    let weight: f64 = with_latency.iter().map(|(w, _)| w).sum();
    let latency_ms = (weight > 0.0).then(|| {
        let mean_of = |pick: fn(&record::loadgen::WrkLatency) -> f64| {
            with_latency.iter().map(|(w, l)| w * pick(l)).sum::<f64>() / weight / 1000.0
        };
        LatencyMs {
            mean: mean_of(|l| l.mean),
            p50: mean_of(|l| l.p50 as f64),
            p90: mean_of(|l| l.p90 as f64),
            p99: mean_of(|l| l.p99 as f64),
            max: with_latency
                .iter()
                .map(|(_, l)| l.max as f64 / 1000.0)
                .fold(0.0, f64::max),
        }
    });
    LoadFigures {
        tool: load.tool.clone(),
        version: load.version.clone(),
        processes: load.processes.len() as u64,
        threads: load.threads,
        duration_s,
        requests,
        requests_per_s: per_s(requests),
        bytes_per_s: per_s(reports.iter().map(|r| r.bytes).sum()),
        latency_ms,
        latency_exact: with_latency.len() <= 1,
        errors,
    }
}

/// The figures of a serve run; `memory_total_kb` and `charged_kb` are the summary's per-task
/// memory (the task being a connection).
pub fn figures(
    run: &RunRecord,
    memory: &MemoryRecord,
    result: Option<&Value>,
    load: &LoadRecord,
    probes: Option<&ProbeSummary>,
    per_task_memory: Option<(f64, Option<f64>)>,
) -> ServeFigures {
    let connections = load.connections;
    let load_figures = load_figures(load);
    let server = result
        .map(|r| &r["serve"])
        .filter(|s| s.is_object())
        .map(|s| ServerCounts {
            connections_accepted: u(s, "connections_accepted"),
            connections_max_open: u(s, "connections_max_open"),
            requests: u(s, "requests"),
            requests_in_load: s["requests_in_load"].as_u64(),
            response_bytes: u(s, "response_bytes"),
            bad_requests: u(s, "bad_requests"),
            accept_errors: u(s, "accept_errors"),
            open_at_end: u(s, "open_at_end"),
        });
    let open = memory
        .peak_moment
        .as_ref()
        .and_then(|m| m.alive)
        .unwrap_or(0);
    let per_connection = (open > 0).then(|| {
        let socket = memory
            .peak
            .as_ref()
            .and_then(|p| p.cgroup.as_ref()?.socket_bytes)
            .map(|peak| {
                let base = memory
                    .before
                    .cgroup
                    .as_ref()
                    .and_then(|c| c.socket_bytes)
                    .unwrap_or(0);
                peak.saturating_sub(base) as f64 / 1024.0 / open as f64
            });
        PerConnection {
            open,
            memory_kib: per_task_memory.map(|(total, _)| total),
            charged_kib: per_task_memory.and_then(|(_, charged)| charged),
            socket_kib: socket,
        }
    });
    let per_request = per_request(memory, server.as_ref(), probes);
    let mut happened = Vec::new();
    let limit = run
        .memory_limit_bytes
        .map(|b| format!(" (memory limit {})", units::bytes(b as f64)))
        .unwrap_or_default();
    if run.oom_killed {
        happened.push(format!("the server was OOM-killed in its cgroup{limit}"));
    } else if let Some(exit) = run.exit.as_ref().filter(|e| !e.success()) {
        happened.push(format!("the server ended: {}", exit.describe()));
    }
    let e = &load_figures.errors;
    if e.connect > 0 {
        happened.push(format!(
            "{} connections could not be opened (refused or reset while connecting)",
            e.connect
        ));
    }
    if e.read > 0 {
        happened.push(format!(
            "{} reads failed (connections reset or closed mid-response)",
            e.read
        ));
    }
    if e.write > 0 {
        happened.push(format!("{} writes failed", e.write));
    }
    if e.timeout > 0 {
        happened.push(format!(
            "{} requests timed out (no response within {} ms)",
            e.timeout,
            load.timeout_ns / 1_000_000
        ));
    }
    if e.status > 0 {
        happened.push(format!("{} responses were not 2xx/3xx", e.status));
    }
    if let Some(why) = &load.failed {
        happened.push(format!("the load: {why}"));
    }
    if let Some(failure) = result.map(|r| &r["failure"]).filter(|f| f.is_object()) {
        happened.push(format!(
            "the server stopped accepting: {}",
            failure["message"].as_str().unwrap_or("a limit")
        ));
    }
    let fell_over = run.oom_killed
        || run.exit.as_ref().is_some_and(|e| !e.success())
        || load_figures.requests == 0
        || e.connect > 0;
    ServeFigures {
        connections,
        load: load_figures,
        server,
        per_connection,
        per_request,
        happened,
        fell_over,
    }
}

/// The load generator's CPU time is not "something else on the machine": it is the experiment.
/// Taken out of the CPU outside the run in the `load` phase before the verdict judges it.
pub fn discount_load_generator(evidence: &mut crate::time::verdict::Evidence, load: &LoadRecord) {
    let wrk_ns: u64 = load.processes.iter().filter_map(|p| p.cpu_ns).sum();
    for phase in evidence.phases.iter_mut().filter(|p| p.phase == "load") {
        phase.outside_cpu_ns = phase.outside_cpu_ns.map(|ns| ns.saturating_sub(wrk_ns));
    }
}

fn per_request(
    memory: &MemoryRecord,
    server: Option<&ServerCounts>,
    probes: Option<&ProbeSummary>,
) -> Option<PerRequest> {
    // The CPU time and the kernel's counts are of the load phase: so is the divisor, where the
    // workload counted it (the drain answers a few more).
    let server = server?;
    let requests = server.requests_in_load.unwrap_or(server.requests);
    if requests == 0 {
        return None;
    }
    let per = |x: f64| x / requests as f64;
    let cpu = |pick: fn(&record::CpuTime) -> u64| {
        let start = phase(memory, "load")?.cpu?;
        let end = phase(memory, "drain")?.cpu?;
        Some(per(pick(&end).saturating_sub(pick(&start)) as f64))
    };
    let kernel = probes
        .and_then(|p| {
            let at = p.phases.iter().position(|name| name == "load")?;
            Some(
                PER_REQUEST_METRICS
                    .iter()
                    .filter_map(|metric| {
                        // Calls the server never made (readv where it reads with recvfrom) are
                        // left out rather than shown as zeros.
                        let row = p.rows.iter().find(|r| r.metric == *metric && r.total > 0)?;
                        Some(PerRequestCount {
                            metric: metric.to_string(),
                            per_request: per(*row.per_phase.get(at)? as f64),
                        })
                    })
                    .collect(),
            )
        })
        .unwrap_or_default();
    Some(PerRequest {
        requests,
        user_us: cpu(|c| c.user_us),
        sys_us: cpu(|c| c.sys_us),
        kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::loadgen::{LoadProcess, WrkLatency, WrkReport};

    fn process(requests: u64, p99_us: u64, connect_errors: u64) -> LoadProcess {
        LoadProcess {
            report: Some(WrkReport {
                duration_us: 2_000_000,
                requests,
                bytes: requests * 100,
                errors: WrkErrors {
                    connect: connect_errors,
                    ..Default::default()
                },
                latency_us: (requests > 0).then_some(WrkLatency {
                    mean: 1000.0,
                    p50: 800,
                    p99: p99_us,
                    max: p99_us * 2,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn two_processes_sum_their_requests_and_weigh_their_latency() {
        let load = LoadRecord {
            tool: "wrk".into(),
            connections: 100,
            processes: vec![process(300, 2000, 0), process(100, 6000, 4)],
            ..Default::default()
        };
        let f = load_figures(&load);
        assert_eq!((f.requests, f.requests_per_s), (400, 200.0));
        assert!(!f.latency_exact);
        let lat = f.latency_ms.unwrap();
        assert!((lat.p99 - 3.0).abs() < 1e-9, "(300×2 + 100×6) / 400 ms");
        assert!((lat.max - 12.0).abs() < 1e-9);
        assert_eq!(f.errors.connect, 4);
        let one = load_figures(&LoadRecord {
            processes: vec![process(0, 0, 10)],
            ..Default::default()
        });
        assert_eq!(one.latency_ms, None);
    }

    #[test]
    fn an_oom_kill_and_refused_connections_are_named() {
        let run = RunRecord {
            oom_killed: true,
            memory_limit_bytes: Some(10 << 20),
            ..crate::test_support::run_record()
        };
        let load = LoadRecord {
            connections: 1000,
            timeout_ns: 2_000_000_000,
            processes: vec![process(0, 0, 950)],
            ..Default::default()
        };
        let f = figures(&run, &MemoryRecord::default(), None, &load, None, None);
        assert!(f.fell_over);
        assert!(
            f.happened[0].contains("OOM-killed in its cgroup (memory limit 10.0 MiB)"),
            "{:?}",
            f.happened
        );
        assert!(f.happened[1].starts_with("950 connections could not be opened"));
    }
}
