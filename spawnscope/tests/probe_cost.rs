//! The collector measures its own cost in every run: its programs' runs, at each program's ns per
//! run from a short traced calibration run with the kernel's BPF run-time statistics on (off in
//! the measured run), or with them on for the whole run (`--probe-times in-run`). Root tests: they
//! load the probes for real; without root they print SKIP.

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use serde_json::Value;

fn stats_switch() -> String {
    fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .unwrap()
        .trim()
        .to_string()
}

/// The processes holding a `BPF_ENABLE_STATS` descriptor: while any does, the kernel times every
/// BPF program. (`kernel.bpf_stats_enabled` shows only what was written to it, not these.)
fn stats_holders() -> Vec<u32> {
    let mut holders = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .any(|target| target.to_string_lossy() == "anon_inode:bpf-stats")
        {
            holders.push(pid);
        }
    }
    holders
}

/// The program serving `tracepoint` in collector.json's program_costs.
fn program<'a>(collector: &'a Value, tracepoint: &str) -> &'a Value {
    collector["program_costs"]
        .as_array()
        .expect("collector.json has program_costs")
        .iter()
        .find(|p| p["tracepoint"] == tracepoint)
        .unwrap_or_else(|| panic!("no program for {tracepoint}: {collector:#}"))
}

#[test]
fn every_run_says_what_its_probes_cost_and_leaves_the_statistics_as_they_were() {
    if skip_unless_root(
        "every_run_says_what_its_probes_cost_and_leaves_the_statistics_as_they_were",
    ) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let before = stats_switch();
    let holders_before = stats_holders();
    let out = sandbox.run(&["--runtime", "threads", "--workload", "hold", "--n", "2000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stats_switch(), before, "kernel.bpf_stats_enabled as before");
    assert_eq!(
        stats_holders(),
        holders_before,
        "the statistics are off again"
    );
    let dir = sandbox.only_results_dir();
    let collector = read_json(dir.join("collector.json"));
    for tracepoint in ["exceptions:page_fault_user", "sched:sched_switch"] {
        let p = program(&collector, tracepoint);
        let (runs, ns) = (
            p["run_cnt"].as_u64().unwrap(),
            p["run_time_ns"].as_u64().unwrap(),
        );
        assert!(runs > 0 && ns > 0, "{tracepoint}: {runs} runs, {ns} ns");
    }
    // 2,000 threads fault in their stacks: the fault program ran at least once a thread.
    assert!(
        program(&collector, "exceptions:page_fault_user")["run_cnt"]
            .as_u64()
            .unwrap()
            >= 2000
    );
    let summary = read_json(dir.join("summary.json"));
    let cost = &summary["probes"]["cost"];
    let share = cost["share_of_cpu"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "probes' share of CPU {share}");
    let total: u64 = cost["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["total_ns"].as_u64().unwrap())
        .sum();
    assert_eq!(total, cost["total_ns"].as_u64().unwrap());
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("### What the probes cost:")
            && (md.contains("| btf_sched_switch |") || md.contains("| tp_sched_switch |")),
        "{md}"
    );
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(terminal.contains("the probes' own cost:"), "{terminal}");
    // Timed at the probes' calibration's rates, which the run records: the kernel timed no run
    // of this one (its statistics were off), every program that ran took the calibration's.
    let run = read_json(dir.join("run.json"));
    let calibrated = &run["estimate"]["calibration"]["probes"];
    assert_eq!(calibrated["detail"], "lean", "{run:#}");
    let rates = calibrated["rates"]["programs"].as_array().unwrap();
    assert!(!rates.is_empty(), "{calibrated}");
    for p in collector["program_costs"].as_array().unwrap() {
        if p["run_cnt"].as_u64().unwrap() == 0 {
            continue;
        }
        assert_eq!(p["from_calibration"], true, "{p}");
        let rate = rates
            .iter()
            .find(|r| r["program"] == p["program"])
            .unwrap_or_else(|| panic!("{} calibrated", p["program"]));
        assert_eq!(
            (&p["sampled_runs"], &p["sampled_ns"]),
            (&rate["runs"], &rate["ns"])
        );
    }
    assert_eq!(
        collector["program_rates_from"], calibrated["rates"]["from"],
        "{collector:#}"
    );
    assert!(
        terminal.contains("the kernel's run-time statistics off in this run"),
        "{terminal}"
    );
}

fn metrics(summary: &Value) -> Vec<String> {
    summary["probes"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn full_probes_add_the_per_thread_figures_at_a_higher_cost() {
    if skip_unless_root("full_probes_add_the_per_thread_figures_at_a_higher_cost") {
        return;
    }
    let _one = serial();
    let args = ["--runtime", "threads", "--workload", "hold", "--n", "2000"];
    let lean_box = Sandbox::new();
    assert!(lean_box.run(&args).status.success());
    let lean = read_json(lean_box.only_results_dir().join("summary.json"));
    let full_box = Sandbox::new();
    let mut full_args = args.to_vec();
    full_args.extend(["--probes", "full"]);
    assert!(full_box.run(&full_args).status.success());
    let full = read_json(full_box.only_results_dir().join("summary.json"));
    for per_thread in ["oncpu_ns", "runq_ns", "fault_stack"] {
        assert!(
            metrics(&full).iter().any(|m| m == per_thread),
            "{per_thread} with --probes full"
        );
        assert!(
            !metrics(&lean).iter().any(|m| m == per_thread),
            "{per_thread} not measured lean"
        );
    }
    assert!(full["probes"]["latencies"].as_array().unwrap().len() > 1);
    for s in [&lean, &full] {
        assert_eq!(s["probes"]["cross_checks_pass"], true, "{:#}", s["probes"]);
    }
    let left_out = lean["left_out"].to_string();
    assert!(left_out.contains("--probes full"), "{left_out}");
}

#[test]
fn an_interrupted_run_leaves_the_statistics_as_they_were() {
    if skip_unless_root("an_interrupted_run_leaves_the_statistics_as_they_were") {
        return;
    }
    let _one = serial();
    let before = stats_switch();
    let holders_before = stats_holders();
    // By default the measured run leaves the statistics off (the calibration run had them on).
    let calibrated = Sandbox::new();
    let (mut child, _) = calibrated.start_hold_until_peak(2000, Duration::from_secs(60));
    let during = stats_holders();
    // SAFETY: kill has no memory-safety preconditions; the PID is our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(128 + libc::SIGINT));
    assert!(
        !during.contains(&child.id()),
        "the statistics stay off while a calibrated run's probes run: {during:?}"
    );
    // With --probe-times in-run they are on for the whole run: interrupted, it turns them off.
    let sandbox = Sandbox::new();
    let (mut child, _) = sandbox.start_hold_until_peak_with(
        2000,
        &["--probe-times", "in-run"],
        Duration::from_secs(60),
    );
    let during = stats_holders();
    assert!(
        during.contains(&child.id()),
        "the conductor turns the statistics on while its probes run: {during:?}"
    );
    // SAFETY: kill has no memory-safety preconditions; the PID is our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(128 + libc::SIGINT));
    assert_eq!(
        stats_switch(),
        before,
        "kernel.bpf_stats_enabled as before the run"
    );
    let after = stats_holders();
    assert!(
        after.iter().all(|pid| holders_before.contains(pid)),
        "nothing this run started keeps the statistics on: {after:?} (before {holders_before:?})"
    );
}

/// Bad arguments to `spawnscope syscall-cost`: exit 2 and one line, root or not.
#[test]
fn syscall_cost_refuses_bad_arguments_in_one_line() {
    let sandbox = Sandbox::new();
    for args in [
        &["--cycles", "0"][..],
        &["--calls", "999"],
        &["--cycles", "x"],
    ] {
        let mut full = vec!["syscall-cost"];
        full.extend_from_slice(args);
        let bad = sandbox.command(&full).output().unwrap();
        assert_eq!(bad.status.code(), Some(2), "{args:?} is refused");
        assert_eq!(
            String::from_utf8_lossy(&bad.stderr).trim().lines().count(),
            1,
            "{args:?}: one line"
        );
    }
}

/// `spawnscope syscall-cost` (the floor under a traced run's syscalls) times its loop with the
/// pair really attached and the statistics really on only in their rounds: the rounds run in
/// their cycles' order, the pair's programs count a run for each traced call, the kernel timed
/// the statistics' rounds and not the traced ones, and nothing is left on. The figures
/// themselves are the benchmark's, not asserted here.
#[test]
fn syscall_cost_times_its_loop_with_the_pair_attached_and_the_statistics_on_in_their_rounds() {
    if skip_unless_root(
        "syscall_cost_times_its_loop_with_the_pair_attached_and_the_statistics_on_in_their_rounds",
    ) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let (before, holders_before) = (stats_switch(), stats_holders());
    let calls = 20_000u64;
    let out = sandbox
        .command(&[
            "syscall-cost",
            "--json",
            "--cycles",
            "3",
            "--calls",
            "20000",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rounds = v["measured"]["rounds"].as_array().unwrap();
    let states: Vec<&str> = rounds
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    let cycle = ["untraced", "traced", "statistics_on", "traced"];
    let expected: Vec<&str> = cycle
        .iter()
        .cycle()
        .take(3 * cycle.len())
        .chain(["untraced"].iter())
        .copied()
        .collect();
    assert_eq!(states, expected, "three cycles, then one untraced round");
    assert!(rounds
        .iter()
        .all(|r| r["calls"] == calls && r["ns"].as_u64().unwrap() > 0));
    let programs = v["measured"]["programs"].as_array().unwrap();
    for tracepoint in ["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"] {
        let p = programs
            .iter()
            .find(|p| p["tracepoint"] == tracepoint)
            .unwrap_or_else(|| panic!("the pair's {tracepoint} program: {v:#}"));
        let (runs, timed) = (
            p["runs"].as_u64().unwrap(),
            p["timed_runs"].as_u64().unwrap(),
        );
        assert!(
            runs >= 9 * calls,
            "{tracepoint} ran for every traced call (6 traced and 3 statistics rounds of {calls}): {runs}"
        );
        assert!(
            timed >= 3 * calls && timed < runs,
            "the kernel timed the statistics rounds' calls, not every run: {timed} of {runs}"
        );
        assert!(
            runs - timed >= 6 * calls,
            "the traced rounds' calls ran untimed (the statistics off): {runs} runs, {timed} timed"
        );
    }
    for figure in [
        "untraced_ns",
        "traced_ns",
        "statistics_on_ns",
        "pair_ns_per_syscall",
        "statistics_ns_per_run",
    ] {
        assert!(
            v["figures"][figure].as_f64().is_some_and(f64::is_finite),
            "{figure}: {v:#}"
        );
    }
    assert_eq!(
        v["figures"]["timed"].as_array().map(Vec::len),
        Some(2),
        "both programs of the pair timed: {v:#}"
    );
    assert_eq!(stats_switch(), before, "kernel.bpf_stats_enabled as before");
    let after = stats_holders();
    assert!(
        after.iter().all(|pid| holders_before.contains(pid)),
        "nothing it started keeps the statistics on: {after:?}"
    );

    // With the statistics already on (as another tool may leave them), the traced state cannot be
    // measured: refused, exit 3, nothing run.
    let on = fs::write("/proc/sys/kernel/bpf_stats_enabled", "1");
    let refused = sandbox
        .command(&["syscall-cost", "--cycles", "1", "--calls", "1000"])
        .output()
        .unwrap();
    fs::write("/proc/sys/kernel/bpf_stats_enabled", before.as_bytes()).unwrap();
    match on {
        Ok(()) => {
            assert_eq!(
                refused.status.code(),
                Some(3),
                "refused while the statistics are on"
            );
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("kernel.bpf_stats_enabled is 1")
            );
        }
        Err(err) => {
            eprintln!("SKIP (part): kernel.bpf_stats_enabled cannot be written here: {err}")
        }
    }
}
