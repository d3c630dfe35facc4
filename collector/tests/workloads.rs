//! The collector on the real workloads, as root: what it counts must agree with the kernel's own
//! accounting (the workload's getrusage) and with what the workload says it did; and on a child
//! of this test binary (re-exec'd) whose signals are known.
//! Without root or BPF each test prints `SKIP <test>: <reason>` and returns.

mod common;

use std::os::unix::process::CommandExt;
use std::process::Command;

use common::{assert_checks_pass, assert_consistent, run, serial, skip, Run};
use spawnscope_collector::{Attach, Collector, Config, Error, FaultKinds, Rusage};

const THREADS: u64 = 2_000;
const GOROUTINES: u64 = 100_000;

/// 2,000 threads in `hold`, released after 300 ms, traced as `config` says (expected tasks set).
fn threads_hold(test: &str, config: impl FnOnce(&mut Config)) -> Option<Run> {
    let bin = common::threads_bin().expect("the threads workload");
    let n = THREADS.to_string();
    run(
        test,
        &bin,
        &["hold", "--n", &n, "--hold-for", "300ms"],
        |c| {
            c.expected_tasks = THREADS;
            config(c);
        },
    )
}

#[test]
fn threads_hold_2000_clone3_each_and_agree_with_rusage() {
    let _one = serial();
    let test = "threads_hold_2000";
    let Some(run) = threads_hold(test, |_| {}) else {
        return;
    };
    let r = &run.report;
    assert_eq!(run.phase_names, ["spawn", "steady", "join", "end"]);
    assert!(
        r.total("clone3_calls") >= THREADS,
        "clone3 {}",
        r.total("clone3_calls")
    );
    assert!(r.total("clone3_ok") >= THREADS);
    assert!(
        r.total("new_threads") >= THREADS,
        "task_newtask {}",
        r.total("new_threads")
    );
    assert_eq!(
        r.total("clone_calls"),
        0,
        "glibc's pthread_create uses clone3"
    );
    assert_eq!(
        r.total("thread_exits"),
        THREADS + 1,
        "every thread and main exit"
    );
    // The spawn phase holds the clones (the kernel switches phase as the event is written).
    let clone3 = r.metric("clone3_calls").unwrap();
    assert!(clone3.per_phase[0] * 2 > clone3.total, "{clone3:?}");
    // Each new thread's first touch of its own stack is told apart.
    assert!(
        r.total("fault_stack") >= THREADS,
        "stack faults {}",
        r.total("fault_stack")
    );
    assert!(r.histogram("clone3_ns").unwrap().count >= THREADS);
    assert_consistent(&run);
    assert_checks_pass(test, &run, run.result["spawned"].as_u64().unwrap());
}

#[test]
fn goroutines_hold_100000_clone_only_for_the_runtimes_threads() {
    let _one = serial();
    let test = "goroutines_hold_100000";
    let bin = match common::goroutines_bin() {
        Ok(bin) => bin,
        Err(why) => return skip(test, &why),
    };
    let n = GOROUTINES.to_string();
    let Some(run) = run(
        test,
        &bin,
        &["hold", "--n", &n, "--hold-for", "300ms"],
        |c| c.expected_tasks = GOROUTINES,
    ) else {
        return;
    };
    let r = &run.report;
    assert_eq!(run.result["spawned"].as_u64(), Some(GOROUTINES));
    // runtime_stats are read at the peak; os_threads_created is the runtime's threads, its Ms
    // less the extra M a cgo binary keeps without a thread (this build is pure Go): m0 (the main
    // thread, which exec made, no clone) and one per clone.
    let created = run.result["runtime_stats"]["os_threads_created"]
        .as_u64()
        .unwrap();
    let clones_to_peak = run.up_to_phase("clone_calls", 0);
    assert_eq!(
        clones_to_peak,
        created - 1,
        "clones up to the peak vs threads created"
    );
    assert_eq!(r.total("clone_calls"), r.total("new_threads"));
    assert_eq!(r.total("clone3_calls"), 0, "the Go runtime uses clone");
    assert!(r.total("clone_calls") * 1_000 < GOROUTINES, "far below N");
    assert_consistent(&run);
    // The checks cut at the result's getrusage: the threads the runtime had made by then (it may
    // start one after the peak: a P woken, a blocked syscall's M).
    let at_getrusage = run.result["runtime_stats"]["os_threads_at_getrusage"]
        .as_u64()
        .unwrap();
    assert!(at_getrusage >= created);
    assert_checks_pass(test, &run, at_getrusage - 1);
}

#[test]
fn the_lean_collector_keeps_counters_and_cross_checks_and_says_what_it_cost() {
    let _one = serial();
    let test = "lean_threads_hold_2000";
    let Some(run) = threads_hold(test, |c| c.per_thread = false) else {
        return;
    };
    let r = &run.report;
    assert!(!r.diagnostics.per_thread);
    assert!(r.total("new_threads") >= THREADS && r.total("switches_voluntary") > 0);
    // Per-thread figures are not measured: not shown as zeros, and their probes are not attached.
    let rows: Vec<String> = r.summary_rows().into_iter().map(|row| row.metric).collect();
    for per_thread in ["oncpu_ns", "runq_ns"] {
        assert!(
            !rows.iter().any(|m| m == per_thread),
            "{per_thread} in {rows:?}"
        );
    }
    // Futex wait times come from task storage where the kernel has BTF, else are not shown.
    assert_eq!(
        rows.iter().any(|m| m == "futex_wait_ns"),
        r.diagnostics.task_storage,
        "{rows:?}"
    );
    assert_eq!(
        r.metric("futex_wait_ns").is_some(),
        r.diagnostics.task_storage
    );
    let status = r
        .probes
        .iter()
        .find(|p| p.probe == "kmem:rss_stat")
        .unwrap();
    assert_eq!(status.attach, None, "{status:?}");
    assert_eq!(
        status.note.as_deref(),
        Some(spawnscope_collector::PER_THREAD_ONLY)
    );
    assert_eq!(r.histogram("clone3_ns").map_or(0, |h| h.count), 0);
    // The kernel timed every program that ran.
    let switch = r
        .program_costs
        .iter()
        .find(|p| p.tracepoint == "sched:sched_switch")
        .expect("sched_switch's cost");
    assert!(switch.run_cnt > 0 && switch.run_time_ns > 0, "{switch:?}");
    assert!(r
        .program_costs
        .iter()
        .all(|p| p.tracepoint != "kmem:rss_stat"));
    assert_consistent(&run);
    assert_checks_pass(test, &run, THREADS);
}

#[test]
fn classic_tracepoints_alone_still_agree_with_rusage() {
    let _one = serial();
    let test = "classic_only_threads_hold_2000";
    let Some(run) = threads_hold(test, |c| c.classic_only = true) else {
        return;
    };
    let r = &run.report;
    for p in &r.probes {
        assert_ne!(p.attach, Some(Attach::TpBtf), "{p:?}");
    }
    let switch = r
        .probes
        .iter()
        .find(|p| p.probe == "sched:sched_switch")
        .unwrap();
    assert_eq!(switch.attach, Some(Attach::Tracepoint));
    assert!(
        switch.note.as_deref().unwrap().starts_with("tp_btf:"),
        "{switch:?}"
    );
    assert!(r.total("clone3_calls") >= THREADS && r.total("new_threads") >= THREADS);
    assert_eq!(
        r.total("fault_unclassified"),
        r.total("faults_user") + r.total("faults_kernel")
    );
    let pre = r.rusage_basis.pre_exec.as_ref().expect("/proc at the hold");
    assert!(
        pre.source.starts_with("/proc"),
        "no task_struct without BTF: {pre:?}"
    );
    assert_consistent(&run);
    assert_checks_pass(test, &run, THREADS);
}

#[test]
fn a_tp_btf_program_the_kernel_refuses_falls_back_alone() {
    let _one = serial();
    let test = "refused_tp_btf_falls_back";
    let bin = common::threads_bin().expect("the threads workload");
    let Some(run) = run(
        test,
        &bin,
        &["hold", "--n", "200", "--hold-for", "100ms"],
        |c| {
            c.expected_tasks = 200;
            c.refuse_btf_for = Some("sched_switch".into());
            c.fault_kinds = FaultKinds::Vma;
        },
    ) else {
        return;
    };
    let r = &run.report;
    let attach = |probe: &str| r.probes.iter().find(|p| p.probe == probe).unwrap().clone();
    let switch = attach("sched:sched_switch");
    assert_eq!(switch.attach, Some(Attach::Tracepoint), "{switch:?}");
    let note = switch.note.unwrap();
    assert!(
        note.starts_with("tp_btf:") && note.contains("verifier"),
        "{note}"
    );
    println!("{test}: sched:sched_switch fell back: {note}");
    // The VMA lookups tell file pages (the program and its libraries) from anonymous memory.
    assert!(
        r.total("fault_file") > 0 && r.total("fault_anon") > 0,
        "{:?}",
        r.metric("fault_file")
    );
    // Only that probe fell back.
    assert_eq!(attach("sched:sched_wakeup").attach, Some(Attach::TpBtf));
    assert_eq!(
        attach("exceptions:page_fault_user").attach,
        Some(Attach::TpBtf)
    );
    assert_consistent(&run);
    assert_checks_pass(test, &run, 200);
}

/// SIGUSR1s the child raises before its getrusage call, and after.
const SIGNALS_BEFORE: u64 = 40;
const SIGNALS_AFTER: u64 = 7;

extern "C" fn on_usr1(_: libc::c_int) {}

fn raise_usr1(times: u64) {
    for _ in 0..times {
        // SAFETY: SIGUSR1 has a handler that does nothing; raise delivers it before returning.
        assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
    }
}

#[test]
#[ignore = "a child of signals_delivered_to_the_target_are_counted_up_to_its_getrusage"]
fn child_signals() {
    // SAFETY: installs a handler that touches nothing.
    let old = unsafe { libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t) };
    assert_ne!(old, libc::SIG_ERR);
    raise_usr1(SIGNALS_BEFORE);
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) }, 0);
    raise_usr1(SIGNALS_AFTER);
    println!(
        "{}",
        serde_json::json!({"event": "result", "rusage": Rusage::from(&ru)})
    );
}

/// Each signal delivered to the target's threads is counted (signal:signal_deliver, tp_btf and
/// its classic twin), cut at its getrusage like the faults they bound, and the faults'
/// cross-check carries them.
#[test]
fn signals_delivered_to_the_target_are_counted_up_to_its_getrusage() {
    let _one = serial();
    for classic in [false, true] {
        let test = if classic {
            "signals_delivered_classic"
        } else {
            "signals_delivered"
        };
        let Some(run) = common::run_child(test, "child_signals", 1, |c| c.classic_only = classic)
        else {
            return;
        };
        let r = &run.report;
        let probe = r
            .probes
            .iter()
            .find(|p| p.probe == "signal:signal_deliver")
            .unwrap();
        let Some(attach) = probe.attach else {
            return skip(test, &format!("signal:signal_deliver: {:?}", probe.note));
        };
        assert_eq!(classic, attach == Attach::Tracepoint, "{probe:?}");
        let window = r
            .rusage_basis
            .at_last_getrusage
            .as_ref()
            .expect("a cut at the child's getrusage");
        assert_eq!(
            (
                window.entered.signals_delivered,
                window.returned.signals_delivered
            ),
            (SIGNALS_BEFORE, SIGNALS_BEFORE)
        );
        // The rest after it (and, at the exit, a SIGKILL for any thread still running).
        assert!(
            r.rusage_basis.total.signals_delivered >= SIGNALS_BEFORE + SIGNALS_AFTER,
            "{:?}",
            r.rusage_basis.total
        );
        let rusage: Rusage = serde_json::from_value(run.result["rusage"].clone()).unwrap();
        let faults = &r.cross_checks(&rusage, None)[0];
        println!("{test}: {faults:?}");
        assert!(faults.pass(), "{faults:#?}");
        assert!(
            faults.basis.contains(&format!(
                "+ {SIGNALS_BEFORE} signals delivered to the target"
            )),
            "{}",
            faults.basis
        );
    }
}

#[test]
fn without_privileges_start_says_why_and_the_workload_still_runs() {
    let _one = serial();
    let test = "unprivileged";
    if !common::is_root() {
        // Already unprivileged: the library itself must refuse with a reason.
        match Collector::start(&Config::new(std::process::id(), 1)) {
            Err(Error::NoBpf(msg)) => assert!(!msg.is_empty()),
            Err(other) => panic!("expected NoBpf, got {other}"),
            Ok(_) => skip(
                test,
                "BPF loads without root here (unprivileged BPF enabled)",
            ),
        }
        return;
    }
    // As root: run the example as nobody (uid 65534) over a command that says it ran.
    let exe = std::env::current_exe().unwrap();
    let collect = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/collect");
    if !collect.exists() {
        return skip(test, &format!("{} not built", collect.display()));
    }
    let mut cmd = Command::new(&collect);
    cmd.args(["--", "sh", "-c", "echo workload-ran"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("running collect as nobody");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Permission denied") && !stderr.contains("collector") {
        return skip(
            test,
            &format!("nobody cannot run {}: {stderr}", collect.display()),
        );
    }
    assert!(
        stderr.contains("running without the collector: BPF not available"),
        "{stderr}"
    );
    assert!(
        stderr.contains("workload-ran"),
        "the command must still run: {stderr}"
    );
}
