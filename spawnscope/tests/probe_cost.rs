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

/// A traced run's cost line is the formula with its parts: each program's own events × its ns,
/// the host's share (the syscalls of other processes the raw_syscalls pair filtered out × the
/// pair's floor, timed in the calibration), and the total they add up to. A bystander thread of
/// this test makes getpid() syscalls throughout the run: the pair must count them as filtered
/// out, not as the run's.
#[test]
fn a_traced_runs_cost_line_has_nonzero_parts_that_add_up_to_its_total() {
    if skip_unless_root("a_traced_runs_cost_line_has_nonzero_parts_that_add_up_to_its_total") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&stop);
    let bystander = std::thread::spawn(move || {
        let mut calls = 0u64;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            // getpid() is a syscall every time (glibc caches it no more).
            std::hint::black_box(std::process::id());
            calls += 1;
        }
        calls
    });
    let out = sandbox.hold_2000_threads("1s", &[]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let calls = bystander.join().unwrap();
    let dir = sandbox.only_results_dir();
    let summary = read_json(dir.join("summary.json"));
    let f = &summary["probes"]["cost"]["formula"];
    assert!(f.is_object(), "no formula: {:#}", summary["probes"]["cost"]);
    let terms = f["terms"].as_array().unwrap();
    let term = |program: &str| {
        terms
            .iter()
            .find(|t| t["program"] == program)
            .unwrap_or_else(|| panic!("no term of {program}: {f:#}"))
    };
    for t in terms {
        let (events, ns_per, ns) = (
            t["events"].as_u64().unwrap(),
            t["ns_per_event"].as_f64().unwrap(),
            t["ns"].as_f64().unwrap(),
        );
        assert!(events > 0, "{t}");
        assert!(
            (ns - events as f64 * ns_per).abs() < 1e-6 * ns.max(1.0),
            "{t}"
        );
    }
    // The run's own syscalls: at least a clone a thread, and nonzero ns.
    for program in ["btf_sys_enter", "btf_sched_switch", "btf_page_fault_user"] {
        assert!(term(program)["ns"].as_f64().unwrap() > 0.0, "{f:#}");
    }
    assert!(
        term("btf_sys_enter")["events"].as_u64().unwrap() >= 2000,
        "{f:#}"
    );
    let programs_ns: f64 = terms.iter().map(|t| t["ns"].as_f64().unwrap()).sum();
    let host = &f["host"];
    let host_ns = host["ns"]
        .as_f64()
        .expect("the calibration timed the pair's floor");
    assert!(host_ns > 0.0, "{host}");
    // The bystander's syscalls are filtered out, each by both programs of the pair.
    for h in host["hooks"].as_array().unwrap() {
        assert!(h["floor_ns"].as_f64().unwrap() > 0.0, "{h}");
        assert!(
            h["filtered_out"].as_u64().unwrap() >= 100_000,
            "{} filtered out while the bystander made {calls} calls: {h}",
            h["hook"]
        );
    }
    let total = f["total_ns"].as_f64().unwrap();
    assert!(
        (f["programs_ns"].as_f64().unwrap() - programs_ns).abs() < 1e-3,
        "{f:#}"
    );
    assert!((programs_ns + host_ns - total).abs() < 1e-3, "{f:#}");
    assert!(f["share_of_cpu"].as_f64().unwrap() > 0.0, "{f:#}");
    // The floor came from the run's calibration, as run.json records it.
    let run = read_json(dir.join("run.json"));
    let floors = run["estimate"]["calibration"]["probes"]["floors"]
        .as_array()
        .unwrap();
    assert_eq!(floors.len(), 2, "{floors:?}");
    // The line says it: the total, equal to the parts.
    let terminal = String::from_utf8_lossy(&out.stdout);
    let line = terminal
        .lines()
        .find(|l| l.contains("the probes' own cost:"))
        .unwrap_or_else(|| panic!("{terminal}"));
    assert!(
        line.contains(" = Σ the run's own events × each program's ns: "),
        "{line}"
    );
    assert!(line.contains("+ the host's share, the syscalls of other processes the raw_syscalls pair filtered out × the pair's floor: "), "{line}");
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("### What the probes cost: ") && md.contains("the host's share"),
        "{md}"
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

/// Bad arguments to `spawnscope probe-cost` (and its old name, `syscall-cost`): exit 2 and one
/// line, root or not.
#[test]
fn probe_cost_refuses_bad_arguments_in_one_line() {
    let sandbox = Sandbox::new();
    for args in [
        &["probe-cost", "--rounds", "0"][..],
        &["probe-cost", "--rounds", "x"],
        &["probe-cost", "--seconds", "0"],
        &["probe-cost", "--seconds", "soon"],
        &["probe-cost", "--hooks", "sched:sched_nothing"],
        &["probe-cost", "--hooks", "raw_syscalls:sys_enter,"],
        &["syscall-cost", "--cycles", "0"],
        &["syscall-cost", "--calls", "1000"],
    ] {
        let bad = sandbox.command(args).output().unwrap();
        assert_eq!(bad.status.code(), Some(2), "{args:?} is refused");
        assert_eq!(
            String::from_utf8_lossy(&bad.stderr).trim().lines().count(),
            1,
            "{args:?}: one line: {}",
            String::from_utf8_lossy(&bad.stderr)
        );
    }
}

/// The rounds of `state` on `hook` with the statistics on: the runs each counted of the hook's
/// program, an iteration.
fn events_per_iteration(v: &Value, hook: &str, state: &str) -> Vec<f64> {
    v["measured"]["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["hook"] == hook && r["state"] == state && r["statistics"] == true)
        .map(|r| {
            let runs: u64 = r["programs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["runs"].as_u64().unwrap())
                .sum();
            runs as f64 / r["iterations"].as_f64().unwrap()
        })
        .collect()
}

/// `spawnscope probe-cost` fires every hook it times with its loop, in every state: the floor's
/// program and the collector's each count runs on it, and the same loop fires the hook as often
/// for the one as for the other (machine-wide events meanwhile aside; the contended read, the
/// cross-CPU calls and the TLB flushes are no clockwork: they only have to fire); the rounds come in their cycle's
/// order, with the statistics on only where said (the rounds with them off count nothing), the
/// cold rounds last, and nothing is left on. The figures themselves are the benchmark's, not
/// asserted here.
#[test]
fn probe_cost_fires_every_hook_for_the_floor_and_for_ours_alike() {
    if skip_unless_root("probe_cost_fires_every_hook_for_the_floor_and_for_ours_alike") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let (before, holders_before) = (stats_switch(), stats_holders());
    let out = sandbox
        .command(&["probe-cost", "--json", "--rounds", "2", "--seconds", "4"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.find("\"measured\"") < text.find("\"figures\""),
        "the raw rounds come first"
    );
    assert_eq!(
        v["measured"]["left_out"].as_array().map(Vec::len),
        Some(0),
        "every state timed on every hook here: {:#}",
        v["measured"]["left_out"]
    );
    let hooks = [
        "raw_syscalls:sys_enter",
        "raw_syscalls:sys_exit",
        "sched:sched_switch",
        "sched:sched_wakeup",
        "lock:contention_begin",
        "lock:contention_end",
        "exceptions:page_fault_user",
        "task:task_newtask",
        "sched:sched_wakeup_new",
        "sched:sched_process_exit",
        "signal:signal_deliver",
        "sched:sched_migrate_task",
        "ipi:ipi_send_cpu",
        "csd:csd_queue_cpu",
        "tlb:tlb_flush",
        "exceptions:page_fault_kernel",
    ];
    let rounds = v["measured"]["rounds"].as_array().unwrap();
    for hook in hooks {
        let states: Vec<(&str, bool)> = rounds
            .iter()
            .filter(|r| r["hook"] == hook && r["cycle"] == 0)
            .map(|r| (r["state"].as_str().unwrap(), r["statistics"] == true))
            .collect();
        let traced = hook.starts_with("task:")
            || [
                "sched_switch",
                "sched_wakeup",
                "sched_wakeup_new",
                "sched_process_exit",
            ]
            .iter()
            .any(|h| hook == format!("sched:{h}"));
        let mut expected = vec![("untraced", false)];
        for state in ["floor", "filtered", "lean", "full", "trace"] {
            if state != "trace" || traced {
                expected.extend([(state, false), (state, true)]);
            }
        }
        expected.extend([
            ("floor_cold", true),
            ("lean_cold", true),
            ("lean_coldest", true),
        ]);
        assert_eq!(states, expected, "{hook}: the cycle's rounds in order");
        for r in rounds.iter().filter(|r| r["hook"] == hook) {
            assert_eq!(
                r["programs"].as_array().unwrap().is_empty(),
                r["statistics"] == false,
                "{hook}: programs counted in the rounds with the statistics on only: {r:#}"
            );
            for p in r["programs"].as_array().unwrap() {
                let name = p["program"].as_str().unwrap();
                assert!(
                    name.ends_with(hook.split_once(':').unwrap().1),
                    "{hook}: only the hook's own program is attached, not {name}"
                );
            }
        }
        // The contended read and the cross-CPU calls are no clockwork; nor is an unmap's flush,
        // which reaches every CPU the process ran on lately (one event each).
        let clockwork = !["lock:", "ipi:", "csd:", "tlb:"]
            .iter()
            .any(|p| hook.starts_with(p));
        for (floor_state, states) in [
            ("floor", &["filtered", "lean", "full"][..]),
            ("floor_cold", &["lean_cold"][..]),
        ] {
            let floor = events_per_iteration(&v, hook, floor_state);
            assert_eq!(floor.len(), 2, "{hook}: a {floor_state} round a cycle");
            for state in states {
                let ours = events_per_iteration(&v, hook, state);
                assert_eq!(ours.len(), 2, "{hook} {state}");
                for (o, f) in ours.iter().zip(&floor) {
                    assert!(
                        *o > 0.0 && *f > 0.0,
                        "{hook} {state}: the loop fired the hook: ours {o}, floor {f}"
                    );
                    if clockwork {
                        assert!(
                        (o / f - 1.0).abs() < 0.15,
                        "{hook} {state}: the same loop fires the hook as often for ours ({o:.3} an iteration) as for the floor ({f:.3})"
                    );
                    }
                }
            }
        }
        let figures = v["figures"]["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["hook"] == hook)
            .unwrap_or_else(|| panic!("{hook} has figures"));
        let judged = &figures["judged"];
        for f in ["ours_ns", "floor_ns", "times_floor"] {
            assert!(
                judged[f].as_f64().is_some_and(|x| x.is_finite() && x > 0.0),
                "{hook}: {f}: {judged:#}"
            );
        }
        let cold = &figures["cold"];
        // Coldest: iterations of milliseconds, other tasks' events meanwhile among the runs, so
        // only that it fired (and its figure) is asserted.
        let coldest = events_per_iteration(&v, hook, "lean_coldest");
        assert!(
            coldest.len() == 2 && coldest.iter().all(|e| *e > 0.0),
            "{hook}: coldest rounds fired the hook: {coldest:?}"
        );
        for f in ["ours_ns", "floor_ns", "times_warm", "coldest_ns"] {
            assert!(
                cold[f].as_f64().is_some_and(|x| x.is_finite() && x > 0.0),
                "{hook}: cold {f}: {cold:#}"
            );
        }
    }
    // Loops that fire their hooks once an iteration, whatever else the machine does.
    for (hook, least) in [
        ("raw_syscalls:sys_enter", 1.0),
        ("raw_syscalls:sys_exit", 1.0),
        ("sched:sched_switch", 2.0),
        ("exceptions:page_fault_user", 1.0),
        ("task:task_newtask", 1.0),
        ("sched:sched_process_exit", 1.0),
        ("signal:signal_deliver", 1.0),
        ("sched:sched_migrate_task", 1.0),
        ("tlb:tlb_flush", 1.0),
        ("exceptions:page_fault_kernel", 1.0),
    ] {
        for e in events_per_iteration(&v, hook, "lean")
            .into_iter()
            .chain(events_per_iteration(&v, hook, "lean_cold"))
        {
            assert!(
                e >= least * 0.99,
                "{hook}: {e} events an iteration, at least {least}"
            );
        }
    }
    assert_eq!(stats_switch(), before, "kernel.bpf_stats_enabled as before");
    let after = stats_holders();
    assert!(
        after.iter().all(|pid| holders_before.contains(pid)),
        "nothing it started keeps the statistics on: {after:?}"
    );

    // With the statistics already on (as another tool may leave them), the rounds with them off
    // cannot be timed: refused, exit 3, nothing run.
    let on = fs::write("/proc/sys/kernel/bpf_stats_enabled", "1");
    let refused = sandbox
        .command(&["probe-cost", "--rounds", "1", "--seconds", "1"])
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
