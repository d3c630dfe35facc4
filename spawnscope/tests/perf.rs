//! `spawnscope run --perf` for real: perf records the run's cgroup, the samples are classified and
//! drawn, and nothing is left running. Root tests skip with a printed reason when not root or
//! when perf is missing. Kept small (2,000 threads, 50,000 goroutines): a few seconds each.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

/// Runs one workload with --perf and returns its results directory, checking what every
/// recorded run must satisfy.
fn perf_run(sandbox: &Sandbox, args: &[&str]) -> std::path::PathBuf {
    let mut full = vec!["--perf"];
    full.extend_from_slice(args);
    let child = sandbox.spawn_run(&full);
    let conductor = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("spawnscope: perf: cpu-clock at"),
        "{stderr}"
    );
    // Other runs may share the host (and raise sysctls meanwhile): only this conductor's
    // cgroups must be gone. Sysctl restoration is tests/run.rs's business.
    let ours = format!("run-{conductor}-");
    let left: Vec<_> = run_cgroups()
        .into_iter()
        .chain(perf_event_run_cgroups())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&ours))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        perf_processes_mentioning(&sandbox.out()).is_empty(),
        "no perf left running"
    );
    let dir = sandbox.only_results_dir();
    for file in [
        "perf.data",
        "perf.json",
        "perf.log",
        "perf.folded",
        "flame.svg",
    ] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("where the CPU time went"), "{stdout}");
    assert!(stdout.contains("flame graph:"), "{stdout}");
    dir
}

/// The attribution in summary.json, checked for what holds for any run.
fn attribution(dir: &Path) -> Value {
    let summary = read_json(dir.join("summary.json"));
    let a = summary["attribution"].clone();
    assert!(a.is_object(), "summary.json has an attribution: {summary}");
    let rows = a["rows"].as_array().unwrap();
    for (mode, rusage) in [("kernel", "rusage_sys_s"), ("user", "rusage_user_s")] {
        let of_mode = rows.iter().filter(|r| r["mode"] == mode);
        let share: f64 = of_mode.clone().map(|r| r["share"].as_f64().unwrap()).sum();
        let seconds: f64 = of_mode.map(|r| r["seconds"].as_f64().unwrap()).sum();
        assert!(
            (share - 1.0).abs() < 1e-6,
            "{mode} shares sum to 100 %: {share}"
        );
        let used = a[rusage].as_f64().unwrap();
        assert!(
            (seconds - used).abs() < 1e-6,
            "{mode} seconds add up to rusage: {seconds} vs {used}"
        );
    }
    assert!(a["samples"].as_u64().unwrap() > 50, "{a}");
    let named = a["named_kernel_share"].as_f64().unwrap();
    assert!(named >= 0.9, "named share of kernel samples {named}");
    // Whatever glibc the host has, with or without its debug symbols (tests/fixtures/perf/).
    let named = a["named_user_share"].as_f64().unwrap();
    assert!(named >= 0.9, "named share of user samples {named}");
    assert!(a["unresolved_share"].as_f64().unwrap() < 0.05, "{a}");
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("## Where the CPU time went (perf samples)"),
        "{md}"
    );
    a
}

fn row<'a>(a: &'a Value, category: &str) -> &'a Value {
    a["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["category"] == category)
        .unwrap()
}

fn svg_with(dir: &Path, file: &str, frames: &[&str]) {
    let svg = fs::read_to_string(dir.join(file)).unwrap();
    assert!(svg.starts_with("<?xml"), "{file} is XML");
    assert!(svg.trim_end().ends_with("</svg>"), "{file} is a whole SVG");
    for frame in frames {
        assert!(
            svg.contains(&format!("<title>{frame} (")),
            "{file} shows {frame}"
        );
    }
}

#[test]
fn threads_are_recorded_classified_and_drawn() {
    if skip_unless_root_and_perf("threads_are_recorded_classified_and_drawn") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let dir = perf_run(
        &sandbox,
        &["--runtime", "threads", "--workload", "sleep", "--n", "2000"],
    );
    let a = attribution(&dir);
    assert_eq!(a["call_graph"], "dwarf,4096");
    assert!(a["scope"]
        .as_str()
        .unwrap()
        .starts_with("cgroup spawnscope/run-"));
    for category in ["thread_creation", "memory_syscalls"] {
        assert!(
            row(&a, category)["samples"].as_u64().unwrap() > 0,
            "{category}: {a}"
        );
    }
    assert!(
        row(&a, "thread_creation")["phase_seconds"][1]
            .as_f64()
            .unwrap()
            > 0.0,
        "threads are created in the spawn phase: {a}"
    );
    // dwarf unwinding reaches Rust std and glibc; the kernel's own frames are there too.
    svg_with(
        &dir,
        "flame.svg",
        &[
            "copy_process",
            "clone3",
            "start_thread",
            "std::rt::lang_start_internal",
        ],
    );

    // `report` recomputes everything from disk, from the perf.folded cache.
    fs::remove_file(dir.join("summary.json")).unwrap();
    fs::remove_file(dir.join("flame.svg")).unwrap();
    let report = sandbox
        .command(&["report", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert_eq!(attribution(&dir)["rows"], a["rows"]);
    svg_with(&dir, "flame.svg", &["copy_process"]);
}

#[test]
fn goroutines_show_the_runtime_and_pair_with_threads() {
    if skip_unless_root_and_perf("goroutines_show_the_runtime_and_pair_with_threads") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let dir = perf_run(
        &sandbox,
        &[
            "--runtime",
            "goroutines",
            "--workload",
            "hold",
            "--n",
            "50000",
        ],
    );
    let a = attribution(&dir);
    assert_eq!(a["call_graph"], "fp");
    assert!(
        row(&a, "page_faults")["samples"].as_u64().unwrap() > 0,
        "{a}"
    );
    assert!(
        row(&a, "allocation")["samples"].as_u64().unwrap() > 0,
        "{a}"
    );
    svg_with(&dir, "flame.svg", &["runtime.newproc1", "runtime.malg"]);
    // perf's user call-chain walks take a kernel-mode fault with page faults disabled on nearly
    // every sample of a Go process (the frame chain ends in an unmapped word): counted apart,
    // at most one a sample, and the faults still agree with rusage.
    let collector = read_json(dir.join("collector.json"));
    let unhandled = collector["rusage_basis"]["total"]["faults_unhandled"]
        .as_u64()
        .unwrap();
    let samples = a["samples"].as_u64().unwrap();
    assert!(
        unhandled > 0 && unhandled <= samples,
        "{unhandled} unhandled faults, {samples} samples"
    );
    let summary = read_json(dir.join("summary.json"));
    let faults = summary["probes"]["cross_checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "page faults vs rusage minflt+majflt")
        .unwrap()
        .clone();
    assert_eq!(faults["verdict"], "pass", "{faults}");

    // A threads run beside it: one graph on one CPU-time scale, and a differential.
    let threads = Sandbox::new();
    let threads_dir = perf_run(
        &threads,
        &["--runtime", "threads", "--workload", "sleep", "--n", "1000"],
    );
    for extra in [&[][..], &["--diff"][..]] {
        let out = sandbox.dir.path().join("pair.svg");
        let mut args = vec![
            "flame",
            threads_dir.to_str().unwrap(),
            dir.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let drawn = sandbox.command(&args).output().unwrap();
        assert!(
            drawn.status.success(),
            "{}",
            String::from_utf8_lossy(&drawn.stderr)
        );
        svg_with(sandbox.dir.path(), "pair.svg", &["runtime.newproc1"]);
    }
}

#[test]
fn perf_flags_are_checked_before_anything_runs() {
    let _one = serial();
    let sandbox = Sandbox::new();
    let cases: &[(&[&str], &str)] = &[
        (&["--perf", "--perf-freq", "0"], "'0'"),
        (&["--perf", "--perf-call-graph", "lbr"], "'lbr'"),
        (&["--perf-freq", "99"], "--perf"),
    ];
    for (extra, expect) in cases {
        let mut args = vec!["--runtime", "threads", "--workload", "sleep", "--n", "10"];
        args.extend_from_slice(extra);
        let out = sandbox.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
    let flame = sandbox
        .command(&[
            "flame",
            sandbox.dir.path().to_str().unwrap(),
            "-o",
            "/dev/null",
            "--diff",
        ])
        .output()
        .unwrap();
    assert_eq!(flame.status.code(), Some(2), "--diff needs two directories");
    assert!(
        sandbox.results_dirs().is_empty(),
        "bad arguments write nothing"
    );
}
