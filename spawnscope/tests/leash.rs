//! The leash on a foreign command (root): `--timeout` kills the whole cgroup of a command that
//! never exits, and the pids.max derived from `--tasks` stops a fork bomb at its own limit while
//! the host keeps starting processes; nothing of either is left running.

mod common;

use std::fs;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// An environment variable every process of the command inherits: how the test finds what it
/// left behind, whatever those processes are called.
fn marker(test: &str) -> (String, String) {
    (
        "SPAWNSCOPE_LEASH_TEST".into(),
        format!("{test}-{}", std::process::id()),
    )
}

/// The PIDs of live processes whose environment carries `marker`.
fn marked_processes((key, value): &(String, String)) -> Vec<u32> {
    let wanted = format!("{key}={value}");
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|&b| b == 0)
                    .any(|entry| entry == wanted.as_bytes())
            })
        })
        .collect()
}

/// `spawnscope run --out <sandbox> ARGS` with the marker in its environment (and so in the
/// command's and everything it starts).
fn marked_run(sandbox: &Sandbox, marker: &(String, String), args: &[&str]) -> Command {
    let out = sandbox.out();
    let mut full = vec!["run", "--out", out.to_str().unwrap()];
    full.extend_from_slice(args);
    let mut command = sandbox.command(&full);
    command.env(&marker.0, &marker.1);
    command
}

fn run_marked(sandbox: &Sandbox, marker: &(String, String), args: &[&str]) -> Output {
    marked_run(sandbox, marker, args).output().unwrap()
}

/// What a stopped run must leave: exit 4 (the run did not complete), its outcome said, nothing
/// of the command alive, no cgroup.
fn assert_stopped(
    test: &str,
    sandbox: &Sandbox,
    marker: &(String, String),
    out: &Output,
    says: &str,
) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{test}: {stdout}\n{stderr}");
    assert!(stdout.contains(says), "{test}: {stdout}");
    let left = marked_processes(marker);
    assert!(left.is_empty(), "{test}: still running: {left:?}");
    let cgroups = run_cgroups();
    assert!(cgroups.is_empty(), "{test}: cgroups left: {cgroups:?}");
    let dir = sandbox.only_results_dir();
    let outcome = read_json(dir.join("summary.json"))["outcome"].clone();
    assert!(
        outcome.as_str().is_some_and(|o| o.contains(says)),
        "{outcome}"
    );
    read_json(dir.join("run.json"))
}

/// A fork bomb run as `command` (it starts by `bash -c BOMB` somewhere), `probes` loaded or not:
/// it stops at the pids.max `--tasks 100` gives while this process keeps forking, and leaves
/// nothing behind. Returns the run's summary.json.
fn fork_bomb(test: &str, probes: bool, command: &[&str]) -> Value {
    let _one = serial();
    let sandbox = Sandbox::new();
    let marker = marker(test);
    let mut args = vec!["--tasks", "100", "--timeout", "2m"];
    if !probes {
        args.push("--no-probes");
    }
    args.push("--");
    args.extend_from_slice(command);
    let run = marked_run(&sandbox, &marker, &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Meanwhile this process starts processes of its own, and every one of them starts.
    let started = Instant::now();
    let mut forks = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let status = Command::new("true")
            .status()
            .expect("the host can still fork");
        assert!(status.success());
        forks += 1;
    }
    let out = run.wait_with_output().unwrap();
    assert!(forks > 10, "{forks} forks in 3 s");
    let record = assert_stopped(
        test,
        &sandbox,
        &marker,
        &out,
        "stopped at pids.max (164 tasks)",
    );
    // --tasks 100 threads + 64 spare.
    assert_eq!(record["pids_limit"]["max"], 164, "{record}");
    assert_eq!(record["stopped_by"]["kind"], "pids_max", "{record}");
    assert!(record["stopped_by"]["refused"].as_u64().unwrap() >= 1);
    read_json(sandbox.only_results_dir().join("summary.json"))
}

/// The classic bomb: every copy starts two more in the background and returns, so the first
/// shell exits at once and the run follows the rest of its cgroup.
const BOMB: &str = "bomb() { bomb | bomb & }; bomb";

#[test]
fn a_fork_bomb_stops_at_its_pids_limit_while_the_host_keeps_forking() {
    let test = "a_fork_bomb_stops_at_its_pids_limit_while_the_host_keeps_forking";
    if skip_unless_root(test) {
        return;
    }
    fork_bomb(test, false, &["bash", "-c", BOMB]);
}

#[test]
fn a_fork_bomb_below_a_shell_stops_at_its_pids_limit_with_the_probes_following_it() {
    let test = "a_fork_bomb_below_a_shell_stops_at_its_pids_limit_with_the_probes_following_it";
    if skip_unless_root(test) {
        return;
    }
    let wrapped = format!("bash -c '{BOMB}'; sleep 1");
    let summary = fork_bomb(test, true, &["sh", "-c", &wrapped]);
    // The probes followed the bomb below the shell: every process it forked up to the limit.
    let forked = summary["probes"]["rows"]
        .as_array()
        .expect("probe rows: the probes were loaded")
        .iter()
        .find(|r| r["metric"] == "new_processes")
        .and_then(|r| r["total"].as_u64())
        .unwrap_or(0);
    assert!(forked >= 100, "{test}: {forked} processes created counted");
}

#[test]
fn timeout_kills_a_command_that_never_exits_and_what_it_started() {
    let test = "timeout_kills_a_command_that_never_exits_and_what_it_started";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let marker = marker("timeout");
    let started = Instant::now();
    let out = run_marked(
        &sandbox,
        &marker,
        &[
            "--no-probes",
            "--timeout",
            "2s",
            "--",
            "sh",
            "-c",
            "sleep 1000 & sleep 1000",
        ],
    );
    let took = started.elapsed();
    let record = assert_stopped(test, &sandbox, &marker, &out, "stopped by --timeout 2s");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "{took:?}"
    );
    assert_eq!(record["timeout_ns"], 2_000_000_000u64);
    assert_eq!(record["stopped_by"]["kind"], "timeout");
    assert_eq!(record["stopped_by"]["whole_cgroup"], true);
    assert_eq!(record["exit"]["signal"], 9, "{record}");
}

#[test]
fn a_command_lasts_until_the_last_process_it_started_ends() {
    let test = "a_command_lasts_until_the_last_process_it_started_ends";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let marker = marker("leftover");
    let out = run_marked(
        &sandbox,
        &marker,
        &["--no-probes", "--", "sh", "-c", "sleep 2 &"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("waiting for the 1 process(es) it left in its cgroup"),
        "{stderr}"
    );
    let record = read_json(sandbox.only_results_dir().join("run.json"));
    assert!(
        record["wall_ns"].as_u64().unwrap() >= 2_000_000_000,
        "{record}"
    );
    assert!(record["stopped_by"].is_null(), "{record}");
    assert!(marked_processes(&marker).is_empty());
}

#[test]
fn bad_leash_flags_are_refused_before_anything_changes() {
    let _one = serial();
    let sandbox = Sandbox::new();
    assert_runs_refused(
        &sandbox,
        &[
            (
                &["--timeout", "5", "--", "true"][..],
                "'5' is not a duration above zero",
            ),
            (
                &["--timeout", "0s", "--", "true"][..],
                "'0s' is not a duration above zero",
            ),
            (
                &["--pids-limit", "0", "--", "true"][..],
                "'0' is not a number of tasks",
            ),
            (
                &["--pids-limit", "lots", "--", "true"][..],
                "'lots' is not a number of tasks",
            ),
        ],
    );
}
