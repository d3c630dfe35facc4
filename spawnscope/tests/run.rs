//! `spawnscope run` for real: sysctls, cgroups, signals, OOM, refusals. Root tests skip with a
//! printed reason when not root; each one asserts the machine is as it was afterwards.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Starts a threads hold run that raises kernel.pid_max and holds its tasks for a minute, and
/// waits until its tasks are all alive (the `peak` event is on disk).
fn start_long_hold(sandbox: &Sandbox) -> (std::process::Child, std::path::PathBuf) {
    let started = sandbox.start_hold_until_peak(40_000, Duration::from_secs(90));
    assert!(
        sysctls()["kernel/pid_max"] >= 40_000,
        "40,000 threads need kernel.pid_max raised during the run"
    );
    started
}

fn interrupted_run_restores_everything(signal: i32, name: &str) {
    let _one = serial();
    let sandbox = Sandbox::at_default_sysctls();
    let before = sysctls();
    let (mut child, dir) = start_long_hold(&sandbox);
    let conductor = child.id();
    // SAFETY: kill has no memory-safety preconditions; the PID is our own child.
    unsafe { libc::kill(conductor as i32, signal) };
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(128 + signal), "exit 128+{name}");
    assert_eq!(sysctls(), before, "sysctls restored after {name}");
    let run = read_json(dir.join("run.json"));
    assert_eq!(run["interrupted_by"], name);
    let workload = run["pid"].as_u64().unwrap() as u32;
    assert!(!process_alive(workload), "the workload was killed");
    assert!(
        run_cgroups().is_empty(),
        "the run's cgroup was removed: {:?}",
        run_cgroups()
    );
    assert!(
        !sandbox.state_dir().join("sysctl-state.json").exists(),
        "nothing left to restore"
    );
    let summary = read_json(dir.join("summary.json"));
    assert!(summary["outcome"]
        .as_str()
        .unwrap()
        .starts_with(&format!("interrupted by {name}")));
}

#[test]
fn sigint_mid_run_restores_the_machine() {
    if skip_unless_root("sigint_mid_run_restores_the_machine") {
        return;
    }
    interrupted_run_restores_everything(libc::SIGINT, "SIGINT");
}

#[test]
fn sigterm_mid_run_restores_the_machine() {
    if skip_unless_root("sigterm_mid_run_restores_the_machine") {
        return;
    }
    interrupted_run_restores_everything(libc::SIGTERM, "SIGTERM");
}

#[test]
fn a_sigkilled_conductor_is_cleaned_up_by_the_next_invocation() {
    if skip_unless_root("a_sigkilled_conductor_is_cleaned_up_by_the_next_invocation") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::at_default_sysctls();
    let before = sysctls();
    let (mut child, _dir) = start_long_hold(&sandbox);
    let workloads = children(child.id());
    assert_eq!(workloads.len(), 1, "one workload process: {workloads:?}");
    child.kill().unwrap(); // SIGKILL: no handler runs, nothing is restored by the conductor
    child.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || !process_alive(workloads[0])),
        "the workload dies with its conductor"
    );
    assert_ne!(sysctls(), before, "a SIGKILLed conductor cannot restore");
    assert!(
        sandbox.state_dir().join("sysctl-state.json").exists(),
        "the state file survives it"
    );
    assert!(!run_cgroups().is_empty(), "its cgroup is left behind");

    let next = sandbox.command(&["sysctl", "show"]).output().unwrap();
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    let said = String::from_utf8_lossy(&next.stderr);
    assert!(said.contains("left raised by an interrupted run"), "{said}");
    assert_eq!(
        sysctls(),
        before,
        "the next invocation restored the sysctls"
    );
    assert!(!sandbox.state_dir().join("sysctl-state.json").exists());
    assert!(run_cgroups().is_empty(), "and removed the stale cgroup");
}

#[test]
fn a_million_threads_in_hold_are_refused_and_nothing_changes() {
    if skip_unless_root("a_million_threads_in_hold_are_refused_and_nothing_changes") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::at_default_sysctls();
    let before = sysctls();
    let out = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "hold",
        "--n",
        "1000000",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let refusal = stderr
        .lines()
        .find(|l| l.starts_with("spawnscope: refused:"))
        .expect("a refusal line");
    assert!(
        refusal.contains("hold with 1,000,000 threads needs ≈"),
        "{refusal}"
    );
    assert!(refusal.contains("largest N that fits ≈"), "{refusal}");
    assert!(
        refusal.contains("or use sleep, where tasks do not coexist"),
        "{refusal}"
    );
    // The estimate must say a million threads do not fit in this machine's memory.
    let needed_gib: f64 = refusal
        .split("needs ≈")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        needed_gib > 25.0,
        "1M threads need far more than 25 GiB: {refusal}"
    );
    assert_eq!(sysctls(), before);
    assert!(
        sandbox.results_dirs().is_empty(),
        "a refused run writes nothing"
    );
    assert!(run_cgroups().is_empty());
}

#[test]
fn an_over_large_run_is_oom_killed_in_its_cgroup_and_the_host_survives() {
    if skip_unless_root("an_over_large_run_is_oom_killed_in_its_cgroup_and_the_host_survives") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let before = sysctls();
    // 4M goroutines need ~10 GiB; the cgroup allows 300 MiB, and the workload's own guard is off.
    let out = sandbox.run(&[
        "--runtime",
        "goroutines",
        "--workload",
        "hold",
        "--n",
        "4000000",
        "--hold-for",
        "1s",
        "--memory-limit",
        "300M",
        "--reserve",
        "0",
        "--force",
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    let run = read_json(dir.join("run.json"));
    assert_eq!(run["oom_killed"], true);
    assert_eq!(run["exit"]["signal"], libc::SIGKILL);
    let summary = read_json(dir.join("summary.json"));
    assert!(summary["outcome"]
        .as_str()
        .unwrap()
        .starts_with("OOM-killed inside its cgroup (memory limit 300 MiB)"));
    assert_eq!(sysctls(), before);
    assert!(run_cgroups().is_empty());
}

#[test]
fn thread_memory_adds_up_and_sysctls_come_back() {
    if skip_unless_root("thread_memory_adds_up_and_sysctls_come_back") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::at_default_sysctls();
    let before = sysctls();
    let out = sandbox.run(&["--runtime", "threads", "--workload", "hold", "--n", "20000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sysctls(), before);
    let dir = sandbox.only_results_dir();
    let sysctl = read_json(dir.join("sysctl.json"));
    assert_eq!(
        sysctl["changes"][0]["key"], "vm.max_map_count",
        "20,000 threads need more mappings than 65530"
    );
    assert_eq!(sysctl["after"], sysctl["before"]);
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    assert_eq!(summary["alive_at_peak"], 20_000);
    let m = &summary["memory_per_task"];
    let f = |k: &str| m[k].as_f64().unwrap();
    // What a thread costs here: its stack's touched pages, a 16 KiB kernel stack, page tables, slab.
    assert!((f("kernel_stack_kb") - 16.0).abs() < 0.5, "{m}");
    assert!((6.0..16.0).contains(&f("rss_kb")), "{m}");
    assert!(
        (f("cgroup_kb") - f("total_kb")).abs() / f("total_kb") < 0.05,
        "the cgroup was charged the parts: {m}"
    );
    assert_eq!(
        m["adds_up"], true,
        "parts within ±10 % of the MemAvailable drop: {m}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("System time (seconds):"),
        "the /usr/bin/time -v vocabulary: {stdout}"
    );
    assert!(stdout.contains("kernel stack"));
}

/// The base is read at the workload's start gate: nothing of the run started yet (a threads
/// workload's main thread alone, its runtime's own), the gate's wait left out of every time,
/// and the memory adds up where a base read on the run — a hundred threads already started in
/// its parts, none in its MemAvailable — had it 7–16 % short at 1,000 threads. Goroutines too,
/// whose base on the run had them 30 % short at 10,000.
#[test]
fn a_hold_runs_base_is_read_at_its_start_gate_and_its_memory_adds_up() {
    if skip_unless_root("a_hold_runs_base_is_read_at_its_start_gate_and_its_memory_adds_up") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    for (runtime, n) in [("threads", "2000"), ("goroutines", "10000")] {
        let out = sandbox.run(&["--runtime", runtime, "--workload", "hold", "--n", n]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut dirs = sandbox.results_dirs();
    dirs.sort();
    for dir in dirs {
        assert_matches_schemas(&dir);
        let memory = read_json(dir.join("memory.json"));
        let summary = read_json(dir.join("summary.json"));
        let run = read_json(dir.join("run.json"));
        let gate = &memory["stops"][0];
        assert_eq!(gate["at"], "start_gate", "{}", dir.display());
        let (opened, first_phase) = (
            gate["to_t_ns"].as_u64().unwrap(),
            memory["phases"][0]["t_ns"].as_u64().unwrap(),
        );
        assert!(
            opened <= first_phase,
            "the first phase after the gate opened"
        );
        let base = &memory["base"];
        assert!(base["t_ns"].as_u64().unwrap() < opened);
        if summary["runtime"] == "threads" {
            assert_eq!(base["status"]["Threads"], 1, "main alone at the gate");
        }
        assert!(summary.get("base_held_tasks").is_none(), "{summary}");
        // The wait is left out of the wall time and of startup's.
        let waited = opened - gate["from_t_ns"].as_u64().unwrap();
        let wall_ns = run["wall_ns"].as_u64().unwrap();
        let wall_s = summary["wall_s"].as_f64().unwrap();
        assert!(
            (wall_s - (wall_ns - waited) as f64 / 1e9).abs() < 1e-6,
            "wall {wall_s} s, run {wall_ns} ns, gate {waited} ns"
        );
        let startup_ms = summary["phases"][0]["wall_ms"].as_f64().unwrap();
        let released = run["released_t_ns"].as_u64().unwrap();
        assert!(
            startup_ms * 1e6 <= (first_phase - released - waited) as f64 + 1.0,
            "startup {startup_ms} ms holds the gate's wait ({waited} ns)"
        );
        let m = &summary["memory_per_task"];
        assert_eq!(
            m["adds_up"],
            true,
            "{}: parts within ±5 % of the MemAvailable drop: {m}",
            dir.display()
        );
    }
}

#[test]
fn bad_arguments_change_nothing() {
    let _one = serial();
    let sandbox = Sandbox::new();
    let before = sysctls();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--runtime", "threads", "--workload", "hold", "--n", "0"],
            "'0'",
        ),
        (
            &["--runtime", "threads", "--workload", "hold", "--n", "abc"],
            "'abc'",
        ),
        (
            &[
                "--runtime",
                "threads",
                "--workload",
                "hold",
                "--n",
                "5000000",
            ],
            "kernel.pid_max cannot exceed",
        ),
        (
            &["--runtime", "fibers", "--workload", "hold", "--n", "10"],
            "fibers",
        ),
        (
            &[
                "--runtime",
                "threads",
                "--workload",
                "hold",
                "--n",
                "10",
                "--sleep",
                "1s",
            ],
            "--sleep",
        ),
        (
            &[
                "--runtime",
                "goroutines",
                "--workload",
                "hold",
                "--n",
                "10",
                "--stack-size",
                "64K",
            ],
            "--stack-size",
        ),
        (&["--runtime", "threads", "--workload", "hold"], "--n"),
    ];
    assert_runs_refused(&sandbox, cases);
    assert_eq!(sysctls(), before);
}

#[test]
fn results_belong_to_the_user_who_ran_sudo() {
    if skip_unless_root("results_belong_to_the_user_who_ran_sudo") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox
        .command(&[
            "run",
            "--out",
            sandbox.out().to_str().unwrap(),
            "--runtime",
            "goroutines",
            "--workload",
            "hold",
            "--n",
            "1000",
        ])
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::MetadataExt;
    let dir = sandbox.only_results_dir();
    for path in [
        sandbox.out(),
        dir.clone(),
        dir.join("summary.md"),
        dir.join("workload.jsonl"),
    ] {
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (65534, 65534),
            "{} is not the sudo user's",
            path.display()
        );
    }
}

#[test]
fn without_root_a_run_completes_and_says_what_it_left_out() {
    if skip_unless_root(
        "without_root_a_run_completes_and_says_what_it_left_out (it drops to nobody)",
    ) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    fs::set_permissions(sandbox.dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(spawnscope_bin())
        .args([
            "run",
            "--runtime",
            "goroutines",
            "--workload",
            "hold",
            "--n",
            "2000",
            "--out",
        ])
        .arg(sandbox.out())
        .env("SPAWNSCOPE_STATE_DIR", sandbox.state_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_matches_schemas(&sandbox.only_results_dir());
    let summary = read_json(sandbox.only_results_dir().join("summary.json"));
    let left_out = summary["left_out"].to_string();
    assert!(left_out.contains("no cgroup (not root)"), "{left_out}");
    assert!(left_out.contains("need root"), "{left_out}");
    assert_eq!(
        summary["alive_at_peak"], 2000,
        "the figures it can read are still there"
    );
}

#[test]
fn any_command_is_measured_with_the_same_figures() {
    if skip_unless_root("any_command_is_measured_with_the_same_figures") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let threads = spawnscope_bin().parent().unwrap().join("threads");
    let threads = threads.to_str().unwrap();
    let out = sandbox.run(&[
        "--tasks",
        "3000",
        "--",
        threads,
        "hold",
        "--n",
        "3000",
        "--hold-for",
        "1500ms",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_matches_schemas(&sandbox.only_results_dir());
    let summary = read_json(sandbox.only_results_dir().join("summary.json"));
    assert_eq!(summary["tasks"], 3000);
    assert!(summary["label"]
        .as_str()
        .unwrap()
        .ends_with("hold --n 3000 --hold-for 1500ms"));
    let m = &summary["memory_per_task"];
    // Sampled every 100 ms, the peak of a program that holds its threads for 1.5 s is found.
    assert!(
        (m["kernel_stack_kb"].as_f64().unwrap() - 16.0).abs() < 1.0,
        "{m}"
    );
    assert!(m["cgroup_kb"].as_f64().unwrap() > 25.0, "{m}");
    assert!(
        summary["phases"].as_array().unwrap().is_empty(),
        "no phases for a command"
    );
    assert_eq!(
        summary["peak_moment"]["counted"]["kind"], "threads_in_snapshot",
        "3,000 threads for --tasks 3000: taken as threads, without --task-kind"
    );
}

/// `run --tasks N -- PROGRAM` without --task-kind, PROGRAM a runtime of a few OS threads: its
/// tasks are taken as the runtime's, said in one line, and no threads check is set against them
/// (before: memory divided by its few threads, and "threads created vs spawned: Fail (kernel
/// 10000, probes 4)").
#[test]
fn a_runtimes_tasks_without_task_kind_are_taken_as_tasks_and_said_so() {
    if skip_unless_root("a_runtimes_tasks_without_task_kind_are_taken_as_tasks_and_said_so") {
        return;
    }
    let _one = serial();
    common::ensure_workloads();
    let sandbox = Sandbox::new();
    let goroutines = spawnscope_bin().parent().unwrap().join("goroutines");
    let out = sandbox.run(&[
        "--tasks",
        "10000",
        "--",
        goroutines.to_str().unwrap(),
        "hold",
        "--n",
        "10000",
        "--hold-for",
        "1500ms",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let assumed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("taken as a runtime's tasks"))
        .collect();
    assert_eq!(assumed.len(), 1, "said once, in one line: {stdout}");
    assert!(
        !stdout.contains("(kernel "),
        "the columns say what they are: {stdout}"
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    let counted = &summary["peak_moment"]["counted"];
    assert_eq!(counted["kind"], "assumed_tasks", "{counted}");
    let os_threads = counted["os_threads"].as_u64().unwrap();
    assert!(
        (1..1000).contains(&os_threads),
        "Go's few threads: {counted}"
    );
    assert_eq!(summary["alive_at_peak"], 10000);
    let per_task = summary["memory_per_task"]["total_kb"].as_f64().unwrap();
    // A goroutine is ~2.7 KiB; divided by Go's few threads it would be hundreds of KiB.
    assert!(per_task > 1.0 && per_task < 16.0, "{per_task} KiB a task");
    let run = read_json(dir.join("run.json"));
    assert_eq!(run["target"]["task_kind"], "task", "recorded as tasks");
    let checks = summary["probes"]["cross_checks"].to_string();
    assert!(!checks.contains("threads created"), "{checks}");
}

/// A run whose cross-check fails for real: `sleep` creates no thread, so with `--tasks 50
/// --task-kind thread` "threads created vs --tasks" expects 50 and the probes count 0 (before:
/// "Fail" in a table, then "time figures: trustworthy" and exit 0). Its workload completed, so it
/// exits 5; its counts verdict says which check failed, expected against counted, and its
/// headline is flagged.
#[test]
fn a_run_whose_cross_check_fails_says_its_counts_are_wrong_and_exits_5() {
    let test = "a_run_whose_cross_check_fails_says_its_counts_are_wrong_and_exits_5";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["--tasks", "50", "--task-kind", "thread", "--", "sleep", "1"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let dir = sandbox.only_results_dir();
    let summary = read_json(dir.join("summary.json"));
    let verdict = &summary["counts_verdict"];
    if summary["probes"].is_null() {
        println!(
            "SKIP {test}: the eBPF probes did not run here ({})",
            verdict["why_not_checked"]
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "nothing checked, nothing wrong: {stderr}"
        );
        return;
    }
    assert_eq!(out.status.code(), Some(5), "{stdout}{stderr}");
    assert_eq!(
        summary["outcome"], "completed",
        "the workload itself completed"
    );
    assert_eq!(verdict["counts"], "wrong", "{verdict}");
    let threads = verdict["failed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "threads created vs --tasks")
        .unwrap_or_else(|| panic!("the threads check failed: {verdict}"));
    assert_eq!(threads["expected"], 50, "{threads}");
    assert_eq!(threads["counted"], 0, "{threads}");
    // The time verdict stays the time verdict: the counts are judged apart.
    assert!(summary["verdict"].get("counts").is_none());
    assert_matches_schemas(&dir);
    // The terminal: the flagged headline under the label, the counts line with what failed.
    let headline = stdout.lines().nth(2).unwrap_or("");
    assert!(
        headline.starts_with("  completed — counts WRONG ("),
        "{headline}: {stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("  counts: WRONG — ")
            && l.contains("threads created vs --tasks: expected 50, probes counted 0")),
        "{stdout}"
    );
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("\n- Outcome: completed — counts WRONG ("),
        "{md}"
    );
    assert!(md.contains("\n- Counts: WRONG — "), "{md}");
}

#[test]
fn json_prints_the_summary_and_the_terminal_ends_with_the_results_directory() {
    if skip_unless_root("json_prints_the_summary_and_the_terminal_ends_with_the_results_directory")
    {
        return;
    }
    let _one = serial();
    // --json: one JSON document on stdout, the summary with where its files are.
    let sandbox = Sandbox::new();
    let out = sandbox.hold_2000_threads("200ms", &["--json", "--no-probes"]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let dir = sandbox.only_results_dir();
    assert_eq!(summary["results_dir"], dir.display().to_string());
    assert_eq!(summary["label"], "threads hold --n 2000");
    assert_eq!(summary, {
        let mut written = read_json(dir.join("summary.json"));
        written["results_dir"] = summary["results_dir"].clone();
        written
    });
    // Without it: the terminal view, the results directory alone on its last line.
    let sandbox = Sandbox::new();
    let out = sandbox.hold_2000_threads("200ms", &["--no-probes"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().last(),
        Some(sandbox.only_results_dir().display().to_string().as_str()),
        "{stdout}"
    );
}

#[test]
fn repeats_take_an_earlier_runs_calibration_and_refuse_another_runtimes() {
    let _one = serial();
    let sandbox = Sandbox::new();
    let first = sandbox.run(&[
        "--runtime",
        "goroutines",
        "--workload",
        "hold",
        "--n",
        "2000",
        "--no-probes",
    ]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(String::from_utf8_lossy(&first.stderr).contains("calibrating"));
    let calibrated = sandbox.only_results_dir();
    let earlier = read_json(calibrated.join("run.json"))["estimate"]["calibration"].clone();
    assert!(earlier.is_object(), "the first run recorded no calibration");

    let from = calibrated.to_str().unwrap();
    let again = sandbox.run(&[
        "--runtime",
        "goroutines",
        "--workload",
        "sleep",
        "--n",
        "3000",
        "--no-probes",
        "--calibration-from",
        from,
    ]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(
        !stderr.contains("calibrating"),
        "it calibrated again: {stderr}"
    );
    let second = sandbox
        .results_dirs()
        .into_iter()
        .find(|d| d != &calibrated)
        .expect("a second results directory");
    assert_eq!(
        read_json(second.join("run.json"))["estimate"]["calibration"],
        earlier
    );

    let other = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "hold",
        "--n",
        "100",
        "--calibration-from",
        from,
    ]);
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("calibrated goroutines, not threads"));
    let none = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "hold",
        "--n",
        "100",
        "--calibration-from",
        sandbox.out().to_str().unwrap(),
    ]);
    assert_eq!(none.status.code(), Some(2));
    assert_eq!(
        sandbox.results_dirs().len(),
        2,
        "a refused run wrote a results directory"
    );
}

#[test]
fn a_warm_up_writes_the_memory_the_largest_run_needs_and_its_calibrations_serve_the_runs() {
    let _one = serial();
    let sandbox = Sandbox::new();
    let warm = sandbox.dir.path().join("warmup");
    let made = sandbox
        .command(&[
            "warm-up",
            "--out",
            warm.to_str().unwrap(),
            "threads:hold:20000",
            "goroutines:hold:2000",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&made.stdout);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(stdout.contains("nothing of it is counted"), "{stdout}");
    let record = read_json(warm.join("warmup.json"));
    let calibrated = record["calibrated"].as_array().unwrap();
    assert_eq!(calibrated.len(), 2);
    let needed = |runtime: &str| {
        calibrated
            .iter()
            .find(|c| c["runtime"] == runtime)
            .unwrap_or_else(|| panic!("no {runtime} calibration"))["needed_bytes"]
            .as_u64()
            .unwrap()
    };
    // 20,000 threads (tens of KiB each) need far more than 2,000 goroutines: the larger is
    // written, with its margin, every byte of it timed in chunks.
    let largest = needed("threads").max(needed("goroutines"));
    assert!(needed("threads") > 10 * needed("goroutines"));
    let touched = &record["touched"];
    assert_eq!(touched["wanted_bytes"].as_u64().unwrap(), largest * 5 / 4);
    assert_eq!(touched["bytes"], touched["wanted_bytes"]);
    let chunks = touched["chunks"].as_array().unwrap();
    let written: u64 = chunks.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
    assert_eq!(written, touched["bytes"].as_u64().unwrap());
    assert!(chunks.iter().all(|c| c["ns"].as_u64().unwrap() > 0));

    // A run takes its calibration from it instead of calibrating (`probes`: its --no-probes or
    // none); it ran in `sandbox`.
    let run_500_from_it = |sandbox: &Sandbox, probes: &[&str]| {
        let mut args = vec!["--runtime", "threads", "--workload", "hold", "--n", "500"];
        args.extend_from_slice(probes);
        args.extend(["--calibration-from", warm.to_str().unwrap()]);
        let run = sandbox.run(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert!(
            !stderr.contains("calibrating"),
            "it calibrated again: {stderr}"
        );
    };
    run_500_from_it(&sandbox, &["--no-probes"]);
    let threads = calibrated
        .iter()
        .find(|c| c["runtime"] == "threads")
        .unwrap();
    assert_eq!(
        read_json(sandbox.only_results_dir().join("run.json"))["estimate"]["calibration"],
        threads["calibration"]
    );
    // As root it also timed the probes' programs (lean, the default), and a traced run takes
    // those rates instead of calibrating the probes again: its programs are timed by them.
    if is_root() {
        let probes = &threads["calibration"]["probes"];
        assert_eq!(probes["detail"], "lean", "{threads:#}");
        assert!(
            stdout.contains("lean probes' ns per run calibrated"),
            "{stdout}"
        );
        let traced_box = Sandbox::new();
        run_500_from_it(&traced_box, &[]);
        let collector = read_json(traced_box.only_results_dir().join("collector.json"));
        assert_eq!(
            collector["program_rates_from"], probes["rates"]["from"],
            "{collector:#}"
        );
    }

    // One it did not calibrate is refused, with nothing written; so is a spec that is not one.
    let other = sandbox.run(&[
        "--runtime",
        "tokio",
        "--workload",
        "hold",
        "--n",
        "100",
        "--calibration-from",
        warm.to_str().unwrap(),
    ]);
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("calibrated no tokio"));
    let bad = sandbox
        .command(&["warm-up", "--out", warm.to_str().unwrap(), "threads:hold"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(sandbox.results_dirs().len(), 1);
}

/// The CPUs online here (their count: the first CPU number the host does not have).
fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| {
            list.trim()
                .split(',')
                .filter_map(|part| part.rsplit('-').next()?.parse::<usize>().ok())
                .max()
        })
        .map_or(1, |last| last + 1)
}

#[test]
fn cpus_the_conductor_cannot_use_are_bad_input_and_nothing_is_written() {
    let sandbox = Sandbox::new();
    let missing = online_cpus().to_string();
    let hold = [
        "--runtime",
        "threads",
        "--workload",
        "hold",
        "--n",
        "10",
        "--cpus",
    ];
    let mut args: Vec<&str> = hold.to_vec();
    args.push(&missing);
    let says = format!("CPU {missing} is not one this process may run on");
    assert_runs_refused(&sandbox, &[(&args, &says)]);
    // compare refuses it before its sweep starts, and writes nothing either.
    let out = sandbox.out();
    let compare = sandbox
        .command(&[
            "compare",
            "--runtimes",
            "threads",
            "--workloads",
            "hold",
            "--n",
            "10",
            "--cpus",
            &missing,
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&compare.stderr);
    assert_eq!(compare.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!out.exists(), "compare wrote {}", out.display());
    // A CPU the host has but the conductor may not use (taskset around it) is refused the same.
    if online_cpus() < 2 {
        eprintln!("SKIP the taskset half: one CPU online");
        return;
    }
    let run = Command::new("taskset")
        .args(["-c", "0"])
        .arg(spawnscope_bin())
        .args(["run", "--out", out.to_str().unwrap()])
        .args(hold)
        .arg("1")
        .env("SPAWNSCOPE_STATE_DIR", sandbox.state_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("CPU 1 is not") && stderr.contains("usable here: 0"),
        "{stderr}"
    );
    assert!(!out.exists(), "run under taskset wrote {}", out.display());
}
