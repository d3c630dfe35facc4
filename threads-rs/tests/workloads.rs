//! End-to-end tests of the `threads` binary: every workload's output validates against the shared
//! schema, hold proves coexistence, the memory guard stops as data, serve answers its clients,
//! bad input is refused.

mod common;

use common::serve::*;
use common::*;
use serde_json::Value;

#[test]
fn every_workload_validates_and_does_all_its_work() {
    let validator = validator();
    let runs: &[(&[&str], &str, f64)] = &[
        (
            &["sleep", "--n", "300", "--sleep", "20ms"],
            "tasks/s",
            300.0,
        ),
        (
            &["hold", "--n", "300", "--hold-for", "10ms"],
            "tasks/s",
            300.0,
        ),
        (&["churn", "--n", "300", "--batch", "16"], "tasks/s", 300.0),
        (
            &["pingpong", "--n", "2", "--rounds", "500"],
            "hops/s",
            2000.0,
        ),
        (
            &["chain", "--n", "20", "--events", "50", "--type", "int"],
            "events/s",
            1000.0,
        ),
        (
            &[
                "chain", "--n", "20", "--events", "50", "--type", "str", "--size", "64",
            ],
            "events/s",
            1000.0,
        ),
        (
            &["chain", "--n", "20", "--events", "50", "--type", "str_ptr"],
            "events/s",
            1000.0,
        ),
        (
            &[
                "chain",
                "--n",
                "20",
                "--events",
                "50",
                "--type",
                "str_clone",
            ],
            "events/s",
            1000.0,
        ),
        (
            &[
                "hold",
                "--n",
                "50",
                "--hold-for",
                "1ms",
                "--stack-size",
                "64K",
            ],
            "tasks/s",
            50.0,
        ),
    ];
    for (args, unit, work) in runs {
        let out = run(&threads_bin(), args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        let events = events(&validator, &out.stdout);
        assert_eq!(events.first().unwrap()["event"], "start", "{args:?}");
        assert_eq!(events.last().unwrap()["event"], "result", "{args:?}");
        let result = only(&events, "result");
        assert_eq!(result["ok"], true, "{args:?}");
        assert_eq!(result["spawned"], result["target"], "{args:?}");
        let throughput = &result["throughput"];
        assert_eq!(throughput["unit"], *unit, "{args:?}");
        assert_eq!(
            throughput["count"].as_f64(),
            Some(*work),
            "{args:?}: not all work was done"
        );
        let mut last = 0;
        for span in result["phases"].as_array().unwrap() {
            assert!(
                span["start_ns"].as_u64().unwrap() >= last,
                "{args:?}: phases out of order"
            );
            last = span["end_ns"].as_u64().unwrap();
        }
    }
}

#[test]
fn hold_proves_coexistence() {
    let out = run(&threads_bin(), &["hold", "--n", "2000"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let peak = only(&events, "peak");
    assert_eq!(peak["alive"], 2000, "alive at peak");
    assert_eq!(peak["expected"], 2000);
    assert_eq!(peak["status"]["threads"], 2001, "2000 tasks and main");
    let result = only(&events, "result");
    assert_eq!(result["alive_at_peak"], 2000);
    let phases: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "phase")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["spawn", "steady", "join", "end"]);
    assert_eq!(result["runtime_stats"]["stack_size_source"], "default");
}

/// At its start gate the threads workload is its main thread alone: the conductor's base holds
/// no task (spawnscope's threads descriptor, `threads_at_gate`).
#[test]
fn hold_waits_at_its_start_gate() {
    check_start_gate(&threads_bin(), &[], 1);
}

#[test]
fn stack_size_is_in_force() {
    let out = run(
        &threads_bin(),
        &["hold", "--n", "200", "--stack-size", "64K"],
    );
    let flagged = events(&validator(), &out.stdout);
    let result = only(&flagged, "result");
    assert_eq!(result["runtime_stats"]["stack_size_bytes"], 65536);
    assert_eq!(result["runtime_stats"]["stack_size_source"], "flag");
    // 200 stacks of 64 KiB reserve ~12.5 MiB of address space; 200 of the default 2 MiB, ~400 MiB.
    let vm_kb = result["status_at_peak"]["vm_size_kb"].as_u64().unwrap();
    let default_out = run(&threads_bin(), &["hold", "--n", "200"]);
    let default_events = events(&validator(), &default_out.stdout);
    let default_vm_kb = only(&default_events, "result")["status_at_peak"]["vm_size_kb"]
        .as_u64()
        .unwrap();
    assert!(
        default_vm_kb > vm_kb + 200 * (2048 - 64) * 9 / 10,
        "VmSize {vm_kb} kB with 64K stacks vs {default_vm_kb} kB with the default"
    );
}

#[test]
fn guard_stops_spawning_as_data() {
    // A reserve larger than any machine's memory: spawning stops at the first check, exit 3.
    let out = run(
        &threads_bin(),
        &["hold", "--n", "5000", "--reserve", "1048576G"],
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    let failure = &result["failure"];
    assert_eq!(result["ok"], false);
    assert_eq!(failure["limit"], "memory");
    assert_eq!(failure["errno_name"], "ENOMEM");
    let spawned = result["spawned"].as_u64().unwrap();
    assert!(spawned < 5000, "spawned {spawned}");
    assert_eq!(
        result["alive_at_peak"].as_u64(),
        Some(spawned),
        "every spawned task was alive at the peak"
    );
    assert!(failure["readings"]["mem_available_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn serve_answers_every_request_and_drains() {
    check_serve_run(&threads_bin());
}

#[test]
fn serve_sleeps_as_work_says() {
    check_serve_sleep(&threads_bin());
}

#[test]
fn serve_listens_on_every_address() {
    check_serve_addrs(&threads_bin());
}

#[test]
fn serve_speaks_http() {
    check_serve_protocol(&threads_bin());
}

#[test]
fn serve_guard_stops_accepting_as_data() {
    check_serve_guard(&threads_bin());
}

#[test]
fn serve_gives_each_connection_a_thread() {
    let out = serve_with_clients(
        &threads_bin(),
        &["serve", "--n", "40", "--stack-size", "64K"],
        40,
        1,
        128,
    );
    let events = events(&validator(), &out.stdout);
    let peak = only(&events, "peak");
    // 40 connection threads, main, the accept loop and the thread waiting on stdin.
    assert_eq!(peak["status"]["threads"], 43);
    let result = only(&events, "result");
    assert_eq!(result["runtime_stats"]["stack_size_bytes"], 65536);
}

#[test]
fn bad_input_is_refused() {
    let busy = busy_port();
    let failures: Vec<String> = bad_input_rows("threads", &busy)
        .iter()
        .filter_map(|(expect, args)| assert_refused(&threads_bin(), "threads", expect, args).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_rejects_what_it_must() {
    // The validator is only as good as the schema: it must refuse broken events.
    let validator = validator();
    for bad in [
        r#"{"event":"nap","t_ns":5}"#,
        r#"{"event":"phase","name":"spawn"}"#,
        r#"{"event":"phase","name":"spawn","t_ns":5.5}"#,
        r#"{"event":"phase","name":"warmup","t_ns":5}"#,
        r#"{"event":"phase","name":"spawn","t_ns":5,"extra":1}"#,
    ] {
        let value: Value = serde_json::from_str(bad).unwrap();
        assert!(!validator.is_valid(&value), "accepted {bad}");
    }
}
