//! load.json: what the load generator (wrk) was asked, what it printed and how it ended, for a
//! `serve` run. One entry per wrk process (one per address the server listens on).

use serde::{Deserialize, Serialize};

/// The load put on a `serve` run.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadRecord {
    /// The generator and its version (`wrk --version`'s first words).
    pub tool: String,
    pub version: Option<String>,
    /// Connections held open in all (wrk -c, summed over the processes).
    pub connections: u64,
    /// wrk threads in all (wrk -t, summed).
    pub threads: u64,
    /// How long each process runs (wrk -d), ns.
    pub duration_ns: u64,
    /// A response later than this counts as a timeout (wrk --timeout), ns.
    pub timeout_ns: u64,
    /// The open-file limit each process ran with (RLIMIT_NOFILE).
    pub nofile: u64,
    pub processes: Vec<LoadProcess>,
    /// Why no load ran, or ran short (no `listening` event, wrk could not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// One wrk process against one address.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LoadProcess {
    pub argv: Vec<String>,
    /// IP:PORT it loaded.
    pub addr: String,
    pub connections: u64,
    pub threads: u64,
    /// CLOCK_MONOTONIC when it was started and reaped.
    pub started_t_ns: u64,
    pub ended_t_ns: u64,
    /// Exit code (None: killed by a signal, or never started).
    pub exit_code: Option<i32>,
    /// Its CPU time (user + system, from wait4): the load generator's share of the machine,
    /// which the verdict does not count against the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
    /// The figures its `done` hook printed (None when it printed none).
    pub report: Option<WrkReport>,
    /// Its output as printed (stdout then stderr), for what the report does not hold.
    pub output: String,
}

/// wrk's own figures for one process, as its `done(summary, latency, requests)` hook gives them.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WrkReport {
    /// How long it measured, µs.
    pub duration_us: u64,
    /// Complete responses.
    pub requests: u64,
    /// Bytes read (headers and bodies).
    pub bytes: u64,
    pub errors: WrkErrors,
    /// Latency of the complete responses, µs (None with no response).
    pub latency_us: Option<WrkLatency>,
}

/// wrk's error counts (its "Socket errors" line and non-2xx/3xx responses).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WrkErrors {
    /// Connections that could not be opened (refused, reset while connecting, out of ports).
    pub connect: u64,
    /// Reads that failed (a connection reset or closed by the server mid-response).
    pub read: u64,
    pub write: u64,
    /// Responses with a status outside 2xx/3xx.
    pub status: u64,
    /// Requests with no response within --timeout.
    pub timeout: u64,
}

/// Latency distribution, µs.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WrkLatency {
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p75: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
}
