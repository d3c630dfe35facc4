//! End-to-end tests of the `tokio-tasks` binary beyond the contract test (threads-rs/tests/
//! contract.rs runs every workload on all three binaries): the runtime's own count of tasks
//! alive, tasks that are not threads, --workers in force, the memory guard, serve answering its
//! clients, bad input.

#[path = "../../threads-rs/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use common::serve::*;
use common::*;

fn tokio_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tokio-tasks"))
}

#[test]
fn hold_proves_coexistence_counted_by_the_runtime_on_its_own_threads() {
    let out = run(&tokio_bin(), &["hold", "--n", "20000", "--workers", "3"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let start = only(&events, "start");
    assert_eq!(start["runtime"], "tokio");
    assert!(start["runtime_version"]
        .as_str()
        .unwrap()
        .starts_with("tokio 1."));
    let peak = only(&events, "peak");
    assert_eq!(peak["alive"], 20000, "the runtime's count of tasks alive");
    // Tasks are not threads: main and the three workers, whatever N is.
    assert_eq!(peak["status"]["threads"], 4, "main + 3 workers");
    let result = only(&events, "result");
    assert_eq!(result["alive_at_peak"], 20000);
    assert_eq!(result["params"]["workers"], 3);
    let stats = &result["runtime_stats"];
    assert_eq!(stats["workers"], 3);
    assert_eq!(
        stats["os_threads_created"], 4,
        "the runtime's threads + main"
    );
    let phases: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "phase")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["spawn", "steady", "join", "end"]);
}

/// At its start gate the runtime is built (main and its two workers) and no task is spawned.
#[test]
fn hold_waits_at_its_start_gate() {
    check_start_gate(&tokio_bin(), &["--workers", "2"], 3);
}

#[test]
fn sleep_reports_tasks_alive_while_they_finish() {
    let out = run(&tokio_bin(), &["sleep", "--n", "5000", "--sleep", "300ms"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["throughput"]["count"], 5000);
    // Spawning 5,000 tasks takes far less than their 300 ms nap: all were alive at the snapshot.
    assert_eq!(result["alive_at_peak"], 5000);
    let join_start = events
        .iter()
        .find(|e| e["event"] == "phase" && e["name"] == "join")
        .unwrap()["t_ns"]
        .as_u64()
        .unwrap();
    let during_join: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "progress" && e["t_ns"].as_u64().unwrap() > join_start)
        .map(|e| e["alive"].as_u64().unwrap())
        .collect();
    assert!(
        !during_join.is_empty() && during_join.iter().all(|&alive| alive <= 5000),
        "progress while the tasks sleep: {during_join:?}"
    );
}

#[test]
fn the_default_workers_are_one_per_cpu() {
    let out = run(&tokio_bin(), &["churn", "--n", "1000", "--batch", "50"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(result["runtime_stats"]["workers"].as_u64(), Some(cpus));
    assert_eq!(result["params"]["workers"], serde_json::Value::Null);
    assert_eq!(result["throughput"]["count"], 1000);
}

#[test]
fn guard_stops_spawning_as_data() {
    let out = run(
        &tokio_bin(),
        &["hold", "--n", "5000", "--reserve", "1048576G"],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["failure"]["limit"], "memory");
    let spawned = result["spawned"].as_u64().unwrap();
    assert!(spawned < 5000, "spawned {spawned}");
    assert_eq!(result["alive_at_peak"].as_u64(), Some(spawned));
}

#[test]
fn serve_answers_every_request_and_drains() {
    check_serve_run(&tokio_bin());
}

#[test]
fn serve_sleeps_as_work_says() {
    check_serve_sleep(&tokio_bin());
}

#[test]
fn serve_listens_on_every_address() {
    check_serve_addrs(&tokio_bin());
}

#[test]
fn serve_speaks_http() {
    check_serve_protocol(&tokio_bin());
}

#[test]
fn serve_guard_stops_accepting_as_data() {
    check_serve_guard(&tokio_bin());
}

#[test]
fn serve_connections_are_tasks_on_the_workers() {
    let out = serve_with_clients(
        &tokio_bin(),
        &["serve", "--n", "40", "--workers", "2"],
        40,
        1,
        128,
    );
    let events = events(&validator(), &out.stdout);
    let peak = only(&events, "peak");
    // Main, the two workers and the thread waiting on stdin, whatever the connections.
    assert_eq!(peak["status"]["threads"], 4);
    assert_eq!(only(&events, "result")["runtime_stats"]["workers"], 2);
}

#[test]
fn bad_input_is_refused() {
    let busy = busy_port();
    let failures: Vec<String> = bad_input_rows("tokio-tasks", &busy)
        .iter()
        .filter_map(|(expect, args)| {
            assert_refused(&tokio_bin(), "tokio-tasks", expect, args).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
