//! A command is its process tree (root): a program behind a shell, a program whose children make
//! the threads, stress-ng (whose stressor runs in a child) and the threads workload run as a
//! command are counted whole — every cross-check against the kernel's own accounting passes, and
//! a child's CPU time is the run's, not "other programs'".

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// `spawnscope run --tasks TASKS --task-kind thread -- ARGS` to completion (exit 0), and its
/// summary.json.
fn command_run(test: &str, sandbox: &Sandbox, tasks: u64, command: &[&str]) -> Value {
    let tasks = tasks.to_string();
    let mut args = vec!["--tasks", &tasks, "--task-kind", "thread", "--"];
    args.extend_from_slice(command);
    let out = sandbox.run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{test}: {stdout}\n{stderr}");
    read_json(sandbox.only_results_dir().join("summary.json"))
}

/// Every cross-check measured and passed, each named in the failure.
fn assert_every_check_passes(test: &str, summary: &Value) {
    let checks = summary["probes"]["cross_checks"].as_array().unwrap();
    assert!(checks.len() >= 4, "{test}: {checks:?}");
    for c in checks {
        assert_eq!(c["verdict"], "pass", "{test}: {c}");
    }
    assert_eq!(summary["probes"]["cross_checks_pass"], true, "{test}");
}

/// A probe row's total (absent: 0).
fn probe_total(summary: &Value, metric: &str) -> u64 {
    summary["probes"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .map_or(0, |r| r["total"].as_u64().unwrap())
}

fn forked_threads(test: &str) -> Option<std::path::PathBuf> {
    match build_c_program("forked-threads/forked-threads.c") {
        Ok(program) => Some(program),
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            None
        }
    }
}

#[test]
fn a_program_behind_a_shell_is_measured_whole() {
    let test = "a_program_behind_a_shell_is_measured_whole";
    if skip_unless_root(test) {
        return;
    }
    let Some(program) = forked_threads(test) else {
        return;
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    // `; true`: the shell forks the program instead of exec'ing it in place.
    let script = format!("{} 1 2000 4 1500; true", program.display());
    let summary = command_run(test, &sandbox, 2000, &["sh", "-c", &script]);
    assert_every_check_passes(test, &summary);
    assert_eq!(probe_total(&summary, "new_threads"), 2000, "{test}");
    // sh forks the program, which forks the child holding the threads.
    assert!(probe_total(&summary, "new_processes") >= 2, "{test}");
}

#[test]
fn threads_made_by_the_commands_children_are_the_runs() {
    let test = "threads_made_by_the_commands_children_are_the_runs";
    if skip_unless_root(test) {
        return;
    }
    let Some(program) = forked_threads(test) else {
        return;
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    let summary = command_run(
        test,
        &sandbox,
        2000,
        &[program.to_str().unwrap(), "4", "500", "4", "1500"],
    );
    assert_every_check_passes(test, &summary);
    assert_eq!(probe_total(&summary, "new_threads"), 2000, "{test}");
    assert_eq!(probe_total(&summary, "new_processes"), 4, "{test}");
}

#[test]
fn stress_ng_is_measured_with_its_child_and_its_childs_cpu_is_the_runs() {
    let test = "stress_ng_is_measured_with_its_child_and_its_childs_cpu_is_the_runs";
    if skip_unless_root(test) {
        return;
    }
    if !Path::new("/usr/bin/stress-ng").exists() {
        eprintln!("SKIP {test}: stress-ng is not installed (Debian: apt-get install stress-ng)");
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    // The pthread stressor runs in a child of stress-ng and keeps up to 4,000 threads alive,
    // replacing those that end.
    let summary = command_run(
        test,
        &sandbox,
        4000,
        &[
            "stress-ng",
            "--pthread",
            "1",
            "--pthread-max",
            "4000",
            "-t",
            "4s",
        ],
    );
    assert_every_check_passes(test, &summary);
    assert!(probe_total(&summary, "new_threads") >= 4000, "{test}");
    // The run's CPU (its cgroup's) holds the child's: at least what wait4 said the tree used.
    let used_ns = (summary["user_s"].as_f64().unwrap() + summary["sys_s"].as_f64().unwrap()) * 1e9;
    let run_cpu_ns: f64 = summary["sentinels"]["per_phase"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["run_cpu_ns"].as_f64())
        .sum();
    assert!(
        run_cpu_ns >= 0.9 * used_ns,
        "{test}: the run's CPU {run_cpu_ns} ns, the tree used {used_ns} ns"
    );
}

#[test]
fn the_threads_workload_as_a_command_passes_its_switch_checks_exactly() {
    let test = "the_threads_workload_as_a_command_passes_its_switch_checks_exactly";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let threads = spawnscope_bin().parent().unwrap().join("threads");
    // The workload calls getrusage for its result event; the command's rusage is wait4's, over
    // the whole run (its threads' exits come after that call).
    let summary = command_run(
        test,
        &sandbox,
        5000,
        &[
            threads.to_str().unwrap(),
            "sleep",
            "--n",
            "5000",
            "--sleep",
            "1s",
        ],
    );
    assert_every_check_passes(test, &summary);
    for c in summary["probes"]["cross_checks"].as_array().unwrap() {
        if c["name"].as_str().unwrap().contains("switches") {
            assert_eq!(c["tolerance"], 0, "{test}: {c}");
        }
    }
}

#[test]
fn the_processes_runtime_is_counted_whole_every_fork_seen() {
    let test = "the_processes_runtime_is_counted_whole_every_fork_seen";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["--runtime", "processes", "--workload", "hold", "--n", "500"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{test}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = read_json(sandbox.only_results_dir().join("summary.json"));
    assert_every_check_passes(test, &summary);
    let checks = summary["probes"]["cross_checks"].as_array().unwrap();
    let forks = checks
        .iter()
        .find(|c| c["name"] == "processes created vs forked")
        .unwrap_or_else(|| panic!("{test}: no processes check in {checks:?}"));
    assert_eq!(forks["expected"], 500, "{test}: {forks}");
    assert_eq!(probe_total(&summary, "new_processes"), 500, "{test}");
}
