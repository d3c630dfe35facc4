//! `run --cpu-count K` and `compare --cpu-counts` for real: a K past the CPUs the conductor may
//! use is bad input with nothing written, and each run is held to its K CPUs — every thread of a
//! live workload read from /proc, the CPUs the conductor read back, and the parallelism each
//! runtime took (GOMAXPROCS, tokio's workers). Root tests skip with a printed reason.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The CPUs this test process may use (its affinity, Cpus_allowed_list: what the conductor it
/// starts may use too; available_parallelism would also honour a CPU quota, which the conductor
/// does not count).
fn usable_cpus() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status");
    cpu_numbers(list).len()
}

/// A CPU list as the kernel writes it ("0-1,3"), as numbers.
fn cpu_numbers(list: &str) -> Vec<usize> {
    list.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()
        })
        .collect()
}

fn cpus_allowed(status: &Path) -> Option<String> {
    fs::read_to_string(status)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// The v1 cpuset directories of runs still present (the v2 ones are the run's own directory,
/// which `run_cgroups` lists). Only runs held to K CPUs make one.
fn cpuset_run_cgroups() -> Vec<PathBuf> {
    fs::read_dir("/sys/fs/cgroup/cpuset/spawnscope").map_or(Vec::new(), |d| {
        d.flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
            })
            .collect()
    })
}

#[test]
fn a_cpu_count_past_the_usable_cpus_is_bad_input_and_nothing_is_written() {
    let sandbox = Sandbox::new();
    let past = (usable_cpus() + 1).to_string();
    let hold = ["--runtime", "threads", "--workload", "hold", "--n", "10"];
    let mut too_many: Vec<&str> = hold.to_vec();
    too_many.extend(["--cpu-count", &past]);
    let mut with_cpus: Vec<&str> = hold.to_vec();
    with_cpus.extend(["--cpu-count", "1", "--cpus", "0"]);
    let mut zero: Vec<&str> = hold.to_vec();
    zero.extend(["--cpu-count", "0"]);
    assert_runs_refused(
        &sandbox,
        &[
            (
                &too_many,
                &format!("CPUs asked, this process may run on {}", usable_cpus()),
            ),
            (&with_cpus, "cannot be used with"),
            (&zero, "--cpu-count"),
        ],
    );
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
            "--cpu-counts",
            &format!("1,{past}"),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&compare.stderr);
    assert_eq!(compare.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("--cpu-counts {past}")), "{stderr}");
    assert!(!out.exists(), "compare wrote {}", out.display());
}

/// A live threads hold at K = 1: every one of the workload's threads may run on one CPU only,
/// the first of the policy's order; then the run's record says the same.
#[test]
fn every_thread_of_a_live_run_is_held_to_its_one_cpu() {
    if skip_unless_root("every_thread_of_a_live_run_is_held_to_its_one_cpu") {
        return;
    }
    let _one = serial();
    ensure_workloads();
    let sandbox = Sandbox::new();
    let (mut child, dir) = sandbox.start_hold_until_peak_with(
        200,
        &["--cpu-count", "1", "--no-probes"],
        Duration::from_secs(120),
    );
    let workload = children(child.id());
    assert_eq!(
        workload.len(),
        1,
        "the conductor's one workload: {workload:?}"
    );
    let tasks: Vec<PathBuf> = fs::read_dir(format!("/proc/{}/task", workload[0]))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("status"))
        .collect();
    assert!(tasks.len() > 200, "{} threads alive", tasks.len());
    let lists: Vec<String> = tasks.iter().filter_map(|t| cpus_allowed(t)).collect();
    assert_eq!(lists.len(), tasks.len());
    let one = &lists[0];
    assert_eq!(cpu_numbers(one).len(), 1, "held to one CPU, not {one}");
    assert!(
        lists.iter().all(|l| l == one),
        "every thread on {one}: {lists:?}"
    );
    // While it lives, its cpuset (v1 here) says the same CPU.
    let cpuset = cpuset_run_cgroups();
    if let Some(dir) = cpuset.first() {
        let cpus = fs::read_to_string(dir.join("cpuset.cpus")).unwrap();
        assert_eq!(cpus.trim(), one, "the run's cpuset");
    }
    // SAFETY: kill has no memory-safety preconditions; the PID is our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    wait_with_limit(&mut child, Duration::from_secs(60));
    let run = read_json(dir.join("run.json"));
    let held = &run["cpu_count"];
    assert_eq!(held["count"], 1);
    assert_eq!(held["cpus"].as_str(), Some(one.as_str()));
    assert_eq!(held["seen"].as_str(), Some(one.as_str()));
    assert!(
        cpuset_run_cgroups().is_empty(),
        "the run's cpuset was removed"
    );
    // Of this run's (others may be running theirs on this machine).
    let ours = format!("run-{}-", child.id());
    let left: Vec<PathBuf> = run_cgroups()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&ours))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The three runtimes at K = 1: each run's record and summary say it was held to one CPU, and
/// the runtimes that size themselves by the CPUs took one (GOMAXPROCS 1, one tokio worker).
#[test]
fn each_runtime_is_held_to_k_cpus_and_sizes_itself_by_them() {
    if skip_unless_root("each_runtime_is_held_to_k_cpus_and_sizes_itself_by_them") {
        return;
    }
    let _one = serial();
    ensure_workloads();
    let bin_dir = spawnscope_bin().parent().unwrap().to_path_buf();
    if !bin_dir.join("tokio-tasks").is_file() {
        let ok = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "tokio-tasks"])
            .current_dir(repo_root())
            .status()
            .unwrap()
            .success();
        assert!(ok, "building tokio-tasks");
    }
    let sandbox = Sandbox::new();
    for (runtime, parallelism) in [
        ("threads", None),
        ("goroutines", Some("gomaxprocs")),
        ("tokio", Some("workers")),
    ] {
        let out = sandbox.run(&[
            "--runtime",
            runtime,
            "--workload",
            "hold",
            "--n",
            "1000",
            "--cpu-count",
            "1",
            "--no-probes",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{runtime}: {stderr}");
        let dir = sandbox
            .results_dirs()
            .into_iter()
            .find(|d| {
                d.to_string_lossy()
                    .contains(&format!("-{runtime}-hold-1000-cpu1"))
            })
            .unwrap_or_else(|| {
                panic!(
                    "{runtime}'s directory ends -cpu1: {:?}",
                    sandbox.results_dirs()
                )
            });
        let run = read_json(dir.join("run.json"));
        let held = &run["cpu_count"];
        assert_eq!(held["count"], 1, "{runtime}");
        let how = held["how"].as_str().unwrap();
        assert!(how.starts_with("cpuset v") || how == "affinity", "{how}");
        assert_eq!(held["seen"], held["cpus"], "{runtime}: read back as chosen");
        assert_eq!(cpu_numbers(held["cpus"].as_str().unwrap()).len(), 1);
        let summary = read_json(dir.join("summary.json"));
        assert_eq!(summary["cpu_count"]["held"], true, "{runtime}");
        assert!(summary["label"].as_str().unwrap().ends_with(" on 1 CPU"));
        let events = fs::read_to_string(dir.join("workload.jsonl")).unwrap();
        let result: Value = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "result")
            .unwrap();
        if let Some(key) = parallelism {
            assert_eq!(
                result["runtime_stats"][key], 1,
                "{runtime} sized by the one CPU it sees: {}",
                result["runtime_stats"]
            );
        }
        // The sentinels read the one CPU alone.
        let sentinels = read_json(dir.join("sentinels.json"));
        assert_eq!(sentinels["cpus"], held["cpus"], "{runtime}");
        assert_matches_schemas(&dir);
    }
    assert!(
        cpuset_run_cgroups().is_empty(),
        "{:?}",
        cpuset_run_cgroups()
    );
}

/// The committed set at 1 and 2 CPUs, reported again without root: K is a cell dimension
/// (cells and series per K), the sweep's section, headline and chart are there, and its
/// machine is one machine.
#[test]
fn the_committed_cpu_sweep_reports_per_k_tables_chart_and_headline() {
    let set = repo_root().join("docs/cpu-sweep-2cpu");
    let out = tempfile::tempdir().unwrap();
    report_ok(&[&set, Path::new("--out"), out.path()]);
    let c = read_json(out.path().join("compare.json"));
    assert_eq!(
        c["machines"].as_array().unwrap().len(),
        1,
        "K is not the machine's"
    );
    let cells = c["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 24, "3 runtimes × 2 workloads × 2 N × 2 K");
    assert!(cells
        .iter()
        .all(|cell| cell["cpu_count"] == 1 || cell["cpu_count"] == 2));
    let sweep = &c["cpu_sweep"];
    let series = sweep["series"].as_array().unwrap();
    assert_eq!(series.len(), 12);
    for s in series {
        let ks: Vec<u64> = s["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["cpu_count"].as_u64().unwrap())
            .collect();
        assert_eq!(ks, [1, 2], "{}", s["runtime"]);
    }
    let headlines = sweep["headlines"].as_array().unwrap();
    assert_eq!(headlines.len(), 2, "one per workload at its largest N");
    assert!(headlines
        .iter()
        .all(|h| h.as_str().unwrap().contains(" 10,000: ")));
    let md = fs::read_to_string(out.path().join("compare.md")).unwrap();
    assert!(md.contains("## Per task against CPUs"));
    assert!(
        md.contains("| threads on 1 CPU | hold | 1,000 |"),
        "runs table by K"
    );
    assert!(out
        .path()
        .join("charts/per-task-against-cpus-hold-10000.svg")
        .is_file());
    let html = fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(html.contains("id=\"cpus\""));
}
