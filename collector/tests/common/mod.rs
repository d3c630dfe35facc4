//! Running a workload under the collector the way the conductor does: fork, hold at the gate
//! before exec, start the collector on the PID, release, feed it the phase events, wait, finish.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;
use spawnscope_collector::launch::{self, ChildSetup, Stdio};
use spawnscope_collector::{Collector, Config, Error, Report, Rusage};

/// The workloads measure: one at a time in this test binary.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Printed past the test harness's capture, so a skip is seen in `cargo test` output.
pub fn skip(test: &str, reason: &str) {
    // A line of its own: the harness may be half-way through printing "test NAME ... ".
    let _ = write!(std::io::stderr(), "\nSKIP {test}: {reason}\n");
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `SPAWNSCOPE_THREADS_BIN`, else target/release/threads, built when absent.
pub fn threads_bin() -> Result<PathBuf, String> {
    workload_bin("SPAWNSCOPE_THREADS_BIN", "threads", || {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "threads"])
            .current_dir(workspace())
            .status()
            .map_err(|e| format!("running cargo: {e}"))?;
        status
            .success()
            .then_some(())
            .ok_or("cargo build -p threads failed".into())
    })
}

/// `SPAWNSCOPE_GOROUTINES_BIN`, else target/release/goroutines, built with go when absent.
pub fn goroutines_bin() -> Result<PathBuf, String> {
    workload_bin("SPAWNSCOPE_GOROUTINES_BIN", "goroutines", || {
        let out = workspace().join("target/release/goroutines");
        // The one way it is built (pure Go); exit 3: no Go toolchain.
        let status = Command::new(workspace().join("scripts/build-goroutines.sh"))
            .arg(&out)
            .status()
            .map_err(|e| format!("scripts/build-goroutines.sh did not start ({e})"))?;
        match status.code() {
            Some(0) => Ok(()),
            Some(3) => Err("no Go toolchain to build goroutines".into()),
            _ => Err(format!("building goroutines failed: {status}")),
        }
    })
}

fn workload_bin(
    var: &str,
    name: &str,
    build: impl FnOnce() -> Result<(), String>,
) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(var) {
        return Ok(PathBuf::from(path));
    }
    let path = workspace().join("target/release").join(name);
    if !path.exists() {
        build()?;
    }
    Ok(path)
}

/// A workload run under the collector.
pub struct Run {
    pub report: Report,
    pub result: Value,
    pub phase_names: Vec<String>,
    /// What wait4 returned for the launched process: it and every descendant it reaped.
    pub wait4: Rusage,
}

impl Run {
    /// The workload's own getrusage, from its `result` event (the schema's `rusage` object).
    pub fn rusage(&self) -> Rusage {
        serde_json::from_value(self.result["rusage"].clone())
            .unwrap_or_else(|e| panic!("result.rusage: {e}"))
    }

    /// A metric's count up to the end of phase `phase` (before_first_phase included).
    pub fn up_to_phase(&self, metric: &str, phase: usize) -> u64 {
        let m = self.report.metric(metric).unwrap();
        m.before_first_phase + m.per_phase.iter().take(phase + 1).sum::<u64>()
    }
}

/// The run, or None after a printed SKIP when BPF cannot be used here.
pub fn run(test: &str, bin: &Path, args: &[&str], config: impl FnOnce(&mut Config)) -> Option<Run> {
    run_in(test, bin, args, Vec::new(), config)
}

/// The same, the child joining the cgroups whose cgroup.procs files `cgroup_procs` names before
/// it execs (as the conductor puts it in the run's cgroup).
pub fn run_in(
    test: &str,
    bin: &Path,
    args: &[&str],
    cgroup_procs: Vec<std::ffi::CString>,
    config: impl FnOnce(&mut Config),
) -> Option<Run> {
    if !is_root() {
        skip(test, "needs root to load BPF programs");
        return None;
    }
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let setup = ChildSetup {
        gated: true,
        stdin: Stdio::Null,
        stdout: Stdio::Pipe,
        cgroup_procs,
        ..ChildSetup::default()
    };
    let mut child = launch::spawn(bin, &args, setup)
        .unwrap_or_else(|e| panic!("starting {}: {e:#}", bin.display()));
    let mut cfg = Config::new(child.pid, 0);
    // These tests check every figure, per-thread ones included (the conductor's `--probes full`);
    // a test that wants the lean collector says so in `config`.
    cfg.per_thread = true;
    config(&mut cfg);
    let collector = match Collector::start(&cfg) {
        Ok(c) => c,
        Err(err @ (Error::NoBpf(_) | Error::Unusable(_))) => {
            skip(test, &format!("BPF cannot load here: {err}"));
            launch::kill(child.pid);
            let _ = launch::wait(child.pid);
            return None;
        }
    };
    for m in collector.missing() {
        let _ = writeln!(
            std::io::stderr(),
            "{test}: missing probe {}: {}",
            m.probe,
            m.reason
        );
    }
    child.release().expect("the workload execs");
    let stdout = child.stdout.take().unwrap();
    let (mut phases, mut phase_names, mut result) = (0, Vec::new(), None);
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("reading the workload's stdout");
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        match event["event"].as_str() {
            Some("phase") => {
                collector.set_phase(phases, event["t_ns"].as_u64().unwrap());
                phase_names.push(event["name"].as_str().unwrap().to_string());
                phases += 1;
            }
            Some("result") => result = Some(event),
            _ => {}
        }
    }
    let (exit, wait4) = launch::wait(child.pid).unwrap();
    assert!(
        exit.success(),
        "{} {args:?} exited with {}",
        bin.display(),
        exit.describe()
    );
    Some(Run {
        report: collector.finish(),
        result: result.expect("a result event"),
        phase_names,
        wait4,
    })
}

/// A child of the calling test binary (one of its `#[ignore]`d `child_*` functions) run under
/// the collector.
pub struct ChildRun {
    pub report: Report,
    pub result: Value,
    pub phases: Vec<String>,
}

impl ChildRun {
    /// Metric `metric` in the phase called `name`.
    pub fn in_phase(&self, metric: &str, name: &str) -> u64 {
        let i = self.phases.iter().position(|p| p == name).unwrap();
        let m = self
            .report
            .metric(metric)
            .unwrap_or_else(|| panic!("{metric} not available: {:?}", self.report.waits));
        m.per_phase[i]
    }
}

/// This test binary re-exec'd to run its ignored test `child` under the collector (lean probes,
/// as the conductor's default, sized for `expected_tasks`; `config` changes the rest), or None
/// after a printed SKIP. The child prints one JSON event per line (the harness's own lines
/// around them are skipped).
pub fn run_child(
    test: &str,
    child: &str,
    expected_tasks: u64,
    config: impl FnOnce(&mut Config),
) -> Option<ChildRun> {
    if !is_root() {
        skip(test, "needs root to load BPF programs");
        return None;
    }
    let exe = std::env::current_exe().unwrap();
    let args: Vec<String> = [
        "--ignored",
        "--exact",
        child,
        "--nocapture",
        "--test-threads=1",
        "-q",
    ]
    .map(String::from)
    .to_vec();
    let setup = ChildSetup {
        gated: true,
        stdin: Stdio::Null,
        stdout: Stdio::Pipe,
        ..ChildSetup::default()
    };
    let mut spawned = launch::spawn(&exe, &args, setup).expect("re-exec'ing the test binary");
    let mut cfg = Config::new(spawned.pid, expected_tasks);
    config(&mut cfg);
    let collector = match Collector::start(&cfg) {
        Ok(c) => c,
        Err(err @ (Error::NoBpf(_) | Error::Unusable(_))) => {
            skip(test, &format!("BPF cannot load here: {err}"));
            launch::kill(spawned.pid);
            let _ = launch::wait(spawned.pid);
            return None;
        }
    };
    spawned.release().expect("the child execs");
    let (mut phases, mut result) = (Vec::new(), None);
    for line in BufReader::new(spawned.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let Some(at) = line.find('{') else { continue };
        let Ok(event) = serde_json::from_str::<Value>(&line[at..]) else {
            continue;
        };
        match event["event"].as_str() {
            Some("phase") => {
                collector.set_phase(phases.len() as u32, event["t_ns"].as_u64().unwrap());
                phases.push(event["name"].as_str().unwrap().to_string());
            }
            Some("result") => result = Some(event),
            _ => {}
        }
    }
    let (exit, _) = launch::wait(spawned.pid).unwrap();
    assert!(exit.success(), "{child} exited with {}", exit.describe());
    Some(ChildRun {
        report: collector.finish(),
        result: result.expect("a result event"),
        phases,
    })
}

/// Prints the cross-checks (seen with --nocapture) and asserts they all pass.
pub fn assert_checks_pass(test: &str, run: &Run, spawned: u64) {
    let checks = run
        .report
        .cross_checks(&run.rusage(), Some((spawned, "threads spawned")));
    for c in &checks {
        println!(
            "{test}: {:?} {}: expected {} observed {}..={} tolerance {} ({})",
            c.verdict, c.name, c.expected, c.observed, c.observed_max, c.tolerance, c.basis
        );
    }
    for c in &checks {
        assert!(c.pass(), "{test}: cross-check failed: {c:#?}");
    }
}

/// Figures kept by separate maps must agree: each metric's phases sum to its total, the time
/// series to the same totals, the fault kinds to the faults.
pub fn assert_consistent(run: &Run) {
    let r = &run.report;
    for m in &r.metrics {
        assert_eq!(
            m.total,
            m.before_first_phase + m.per_phase.iter().sum::<u64>(),
            "{}",
            m.name
        );
    }
    let series_sum = |name: &str| r.series(name).unwrap().values.iter().sum::<u64>();
    let faults = r.total("faults_user") + r.total("faults_kernel");
    assert_eq!(series_sum("faults"), faults, "faults series");
    for name in [
        "new_threads",
        "thread_exits",
        "switches_voluntary",
        "switches_involuntary",
        "oncpu_ns",
        "runq_ns",
    ] {
        assert_eq!(series_sum(name), r.total(name), "{name} series");
    }
    let kinds: u64 = [
        "fault_stack",
        "fault_heap",
        "fault_anon",
        "fault_file",
        "fault_novma",
        "fault_other",
        "fault_unclassified",
    ]
    .iter()
    .map(|k| r.total(k))
    .sum();
    assert_eq!(kinds, faults, "fault kinds");
    assert_eq!(r.diagnostics.tasks_map_full, 0, "per-thread map full");
    assert!(
        r.diagnostics.read_errors.is_empty(),
        "{:?}",
        r.diagnostics.read_errors
    );
    assert_eq!(r.phases.len(), run.phase_names.len(), "phases seen");
    assert!(r.exec_seen);
}
