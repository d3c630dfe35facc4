//! End-to-end tests of the `processes` binary beyond the contract test (threads-rs/tests/
//! contract.rs runs every workload on all four binaries): tasks that are processes (forked,
//! counted and reaped, none of them a thread), the children's rusage in the result, the memory
//! guard, the prefork server answering its clients, bad input.

#[path = "../../threads-rs/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use common::serve::*;
use common::*;

fn processes_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_processes"))
}

/// At its start gate the processes workload is one process, its main thread alone: no child
/// forked yet.
#[test]
fn hold_waits_at_its_start_gate() {
    check_start_gate(&processes_bin(), &[], 1);
}

#[test]
fn hold_proves_coexistence_of_processes_each_with_one_thread() {
    let out = run(&processes_bin(), &["hold", "--n", "300"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    assert_eq!(only(&events, "start")["runtime"], "processes");
    let peak = only(&events, "peak");
    assert_eq!(peak["alive"], 300, "children forked and not ended");
    // The tasks are processes: the parent has its main thread only.
    assert_eq!(peak["status"]["threads"], 1);
    let result = only(&events, "result");
    assert_eq!(result["alive_at_peak"], 300);
    let stats = &result["runtime_stats"];
    assert_eq!(
        (&stats["processes_forked"], &stats["processes_reaped"]),
        (&300.into(), &300.into())
    );
    // Every child wrote a page of its stack: a fault each at least, counted in RUSAGE_CHILDREN.
    assert!(
        result["rusage"]["minflt"].as_u64().unwrap() >= 300,
        "{}",
        result["rusage"]
    );
}

#[test]
fn sleep_counts_only_the_children_not_ended() {
    let out = run(&processes_bin(), &["sleep", "--n", "200", "--sleep", "2s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    // Forking 200 processes takes far less than their 2 s nap: all were alive at the snapshot.
    assert_eq!(result["alive_at_peak"], 200);
    assert_eq!(result["runtime_stats"]["processes_reaped"], 200);
}

#[test]
fn churn_never_has_more_than_a_batch_alive() {
    let out = run(&processes_bin(), &["churn", "--n", "300", "--batch", "20"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["spawned"], 300);
    assert!(result["alive_max"].as_u64().unwrap() <= 20, "{result}");
    assert_eq!(result["runtime_stats"]["processes_reaped"], 300);
}

#[test]
fn pingpong_and_chain_do_all_their_work_over_pipes() {
    let out = run(
        &processes_bin(),
        &["pingpong", "--n", "3", "--rounds", "500"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = only(&events(&validator(), &out.stdout), "result").clone();
    assert_eq!(result["throughput"]["count"], 3 * 500 * 2);
    for kind in ["int", "str", "str_ptr", "str_clone"] {
        let args = [
            "chain", "--n", "5", "--events", "300", "--type", kind, "--size", "100",
        ];
        let out = run(&processes_bin(), &args);
        assert_eq!(out.code, 0, "{kind}: {}", out.stderr);
        let result = only(&events(&validator(), &out.stdout), "result").clone();
        // Counted by the receivers: every event arrived whole.
        assert_eq!(result["throughput"]["count"], 5 * 300, "{kind}");
    }
}

#[test]
fn guard_stops_spawning_as_data() {
    let out = run(
        &processes_bin(),
        &["hold", "--n", "2000", "--reserve", "1048576G"],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["failure"]["limit"], "memory");
    let spawned = result["spawned"].as_u64().unwrap();
    assert!(spawned < 2000, "spawned {spawned}");
    assert_eq!(result["alive_at_peak"].as_u64(), Some(spawned));
    assert_eq!(result["runtime_stats"]["processes_reaped"], spawned);
}

#[test]
fn serve_answers_every_request_and_drains() {
    check_serve_run(&processes_bin());
}

#[test]
fn serve_sleeps_as_work_says() {
    check_serve_sleep(&processes_bin());
}

#[test]
fn serve_listens_on_every_address() {
    check_serve_addrs(&processes_bin());
}

#[test]
fn serve_speaks_http() {
    check_serve_protocol(&processes_bin());
}

#[test]
fn serve_guard_stops_accepting_as_data() {
    check_serve_guard(&processes_bin());
}

#[test]
fn serve_is_a_prefork_server_of_n_processes() {
    let out = serve_with_clients(&processes_bin(), &["serve", "--n", "30"], 30, 2, 128);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["serve"]["connections_accepted"], 30);
    assert_eq!(
        (
            &result["runtime_stats"]["processes_forked"],
            &result["runtime_stats"]["processes_reaped"]
        ),
        (&30.into(), &30.into())
    );
}

#[test]
fn bad_input_is_refused() {
    let busy = busy_port();
    let failures: Vec<String> = bad_input_rows("processes", &busy)
        .iter()
        .filter_map(|(expect, args)| {
            assert_refused(&processes_bin(), "processes", expect, args).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
