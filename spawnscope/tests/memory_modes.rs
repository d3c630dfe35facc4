//! Memory that adds up in every mode (root): `sleep`, where few tasks may be alive at any moment,
//! measured at the moment the most are; and any command, whose tasks may not be threads.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::Value;

/// The parts (RSS, kernel stacks, page tables, slab) within ±5 % of what MemAvailable fell by,
/// and the moment measured said with the tasks alive then.
fn assert_adds_up(summary: &Value) {
    let m = &summary["memory_per_task"];
    let difference = m["difference_percent"].as_f64().unwrap_or(f64::NAN);
    assert!(
        difference.abs() <= 5.0 && m["adds_up"] == true,
        "parts within ±5 % of the MemAvailable drop: {m}"
    );
    assert!(summary["peak_moment"].is_object(), "{summary}");
    assert_eq!(summary["alive_at_peak"], summary["peak_moment"]["alive"]);
}

fn run_ok(sandbox: &Sandbox, args: &[&str]) -> (Value, Vec<Value>, String) {
    let out = sandbox.run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let events = std::fs::read_to_string(dir.join("workload.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        read_json(dir.join("summary.json")),
        events,
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

fn result_event(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["event"] == "result")
        .expect("a result event")
}

/// `sleep` measured at its real peak: not when spawning ends (when, with short sleeps, few tasks
/// are left), but at the snapshots with the most tasks alive. Returns how far the parts were
/// from the MemAvailable drop, percent.
fn sleep_at_its_peak(runtime: &str, n: &str, sleep: Option<&str>) -> f64 {
    let sandbox = Sandbox::new();
    let mut args = vec!["--runtime", runtime, "--workload", "sleep", "--n", n];
    if let Some(sleep) = sleep {
        args.extend(["--sleep", sleep]);
    }
    let (summary, events, stdout) = run_ok(&sandbox, &args);
    assert!(summary["peak_moment"].is_object(), "{summary}");
    assert_eq!(summary["alive_at_peak"], summary["peak_moment"]["alive"]);
    assert_eq!(summary["peak_moment"]["chosen"]["kind"], "most_alive");
    let alive = summary["alive_at_peak"].as_u64().unwrap();
    let most = result_event(&events)["alive_max"].as_u64().unwrap();
    // Snapshots follow the live count ten times a second: the one kept holds most of the most
    // the workload ever saw alive at once (at the end of spawning, with 10 ms sleeps, a tenth).
    // The kernel's count may be a little higher: it still lists threads whose work is done and
    // which the workload has counted gone, but which have not finished exiting (and still hold
    // their memory).
    assert!(
        alive * 2 >= most && alive <= most + most / 5 + 1,
        "{alive} alive at the moment measured, {most} at most"
    );
    assert!(
        stdout.contains("Memory measured at the moment the most tasks were alive"),
        "{stdout}"
    );
    let m = &summary["memory_per_task"];
    println!("{runtime} sleep {n}: {alive} alive, {m}");
    m["difference_percent"].as_f64().unwrap_or(f64::NAN)
}

fn sleep_adds_up_at_its_peak(runtime: &str, n: &str, sleep: Option<&str>) {
    let _one = serial();
    let difference = sleep_at_its_peak(runtime, n, sleep);
    assert!(
        difference.abs() <= 5.0,
        "parts {difference:+.1} % from the MemAvailable drop"
    );
}

#[test]
fn threads_sleeping_10ms_add_up_at_the_moment_most_are_alive() {
    if skip_unless_root("threads_sleeping_10ms_add_up_at_the_moment_most_are_alive") {
        return;
    }
    let _one = serial();
    // A few hundred threads alive at any moment here, 12 MiB in all, while 10,000 a second
    // start and exit. What the kernel frees only after a thread has gone, beyond the stacks the
    // conductor measures, moves one run by several percent, more right after a big run
    // (README, "Where few tasks are alive"). Like the time figures, the figure is the median of
    // three runs: within ±10 %, each within ±20 % — far from the −55 % of measuring when
    // spawning ends.
    let mut differences: Vec<f64> = (0..3)
        .map(|_| sleep_at_its_peak("threads", "100000", Some("10ms")))
        .collect();
    differences.sort_by(f64::total_cmp);
    assert!(
        differences.iter().all(|d| d.abs() <= 20.0),
        "every run within ±20 %: {differences:?}"
    );
    assert!(
        differences[1].abs() <= 10.0,
        "the median within ±10 %: {differences:?}"
    );
}

#[test]
fn twenty_thousand_sleeping_threads_add_up() {
    if skip_unless_root("twenty_thousand_sleeping_threads_add_up") {
        return;
    }
    sleep_adds_up_at_its_peak("threads", "20000", None);
}

#[test]
fn a_million_sleeping_goroutines_add_up() {
    if skip_unless_root("a_million_sleeping_goroutines_add_up") {
        return;
    }
    sleep_adds_up_at_its_peak("goroutines", "1000000", None);
}

/// tests/programs/sleepers (Go): N goroutines sleeping, a line when all have started.
fn sleepers() -> Option<PathBuf> {
    let out = std::env::temp_dir().join(format!("spawnscope-sleepers-{}", std::process::id()));
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(repo_root().join("spawnscope/tests/programs/sleepers"))
        .status()
        .is_ok_and(|s| s.success());
    built.then_some(out)
}

#[test]
fn an_async_command_adds_up_and_is_not_failed_for_its_threads() {
    if skip_unless_root("an_async_command_adds_up_and_is_not_failed_for_its_threads") {
        return;
    }
    let Some(program) = sleepers() else {
        eprintln!("SKIP an_async_command_adds_up_and_is_not_failed_for_its_threads: go cannot build tests/programs/sleepers");
        return;
    };
    let _one = serial();
    let program_arg = program.to_str().unwrap();
    for peak_when in [Some("^all [0-9]+ sleeping$"), None] {
        let sandbox = Sandbox::new();
        let mut args = vec!["--tasks", "300000", "--task-kind", "task"];
        if let Some(pattern) = peak_when {
            args.extend(["--peak-when", pattern]);
        }
        args.extend(["--", program_arg, "300000", "4s"]);
        let (summary, _, stdout) = run_ok(&sandbox, &args);
        assert_adds_up(&summary);
        assert_eq!(summary["alive_at_peak"], 300_000);
        assert_eq!(summary["peak_moment"]["counted"]["kind"], "declared");
        let chosen = &summary["peak_moment"]["chosen"];
        match peak_when {
            Some(_) => {
                assert_eq!(chosen["kind"], "matched");
                assert_eq!(chosen["line"], "all 300000 sleeping");
                let kept = sandbox.only_results_dir().join("command.stdout");
                assert_eq!(
                    std::fs::read_to_string(kept).unwrap(),
                    "all 300000 sleeping\n"
                );
            }
            None => assert_eq!(chosen["kind"], "most_memory"),
        }
        // A runtime's tasks are not threads: no "threads created" check to fail, and the
        // others pass.
        let checks = summary["probes"]["cross_checks"].as_array().unwrap();
        assert_eq!(checks.len(), 3, "{checks:?}");
        assert!(checks.iter().all(|c| c["verdict"] == "pass"), "{checks:?}");
        assert!(!stdout.contains("threads created vs spawned"), "{stdout}");
    }
    let _ = std::fs::remove_file(program);
}

#[test]
fn bad_command_mode_flags_are_refused_before_anything_changes() {
    let _one = serial();
    let sandbox = Sandbox::new();
    assert_runs_refused(
        &sandbox,
        &[
            (
                &["--tasks", "5", "--peak-when", "(", "--", "true"][..],
                "--peak-when is not a regular expression",
            ),
            (
                &[
                    "-r",
                    "threads",
                    "-w",
                    "sleep",
                    "-n",
                    "5",
                    "--peak-when",
                    "x",
                ][..],
                "--peak-when and --task-kind are for a command",
            ),
            (
                &["--task-kind", "fibre", "--", "true"][..],
                "invalid value 'fibre' for '--task-kind",
            ),
        ],
    );
}
