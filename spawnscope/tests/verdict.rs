//! The verdict on a run's time figures, for real: a run beside a CPU hog, and beside a memory hog
//! reclaiming at its cgroup's limit, is called suspect with that cause; summary.md, summary.json
//! and the terminal say so. Root: the hogs' cgroup, the run's cgroup and the probes. Counts, not
//! timings: the hogs make the sentinels move by far more than any noise could.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The rules the verdict found past their threshold, with the phases.
fn findings(summary: &Value) -> Vec<(String, String)> {
    summary["verdict"]["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("summary.json has a verdict: {}", summary["verdict"]))
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["phase"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The run in `sandbox` was called suspect with `rule` in `phase`: its summary.json.
fn assert_suspect(sandbox: &Sandbox, rule: &str, phase: &str, why: &str) -> Value {
    let summary = read_json(sandbox.only_results_dir().join("summary.json"));
    let found = findings(&summary);
    assert_eq!(summary["verdict"]["trustworthy"], false, "{found:?}");
    assert!(
        found.iter().any(|(r, p)| r == rule && p == phase),
        "{why}: {rule} in {phase} expected, found {found:?}"
    );
    summary
}

#[test]
fn a_run_beside_a_cpu_hog_is_suspect_and_names_the_cpu_taken() {
    if skip_unless_root("a_run_beside_a_cpu_hog_is_suspect_and_names_the_cpu_taken") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let hogs = Hogs::busy_loops();
    let hog_pids: Vec<u32> = hogs.0.iter().map(|h| h.id()).collect();
    let out = sandbox.hold_2000_threads("2s", &[]);
    drop(hogs);
    let summary = assert_suspect(
        &sandbox,
        "outside_cpu",
        "steady",
        "busy loops on every CPU during the 2 s hold",
    );
    // The hogs are programs: their CPU is other programs', not kernel threads' (PF_KTHREAD);
    // the kernel threads that ran meanwhile (RCU, kworkers, DAMON) are told apart, not zero.
    let machine = &summary["waits"]["machine"];
    let outside = machine["outside_oncpu_ns"]
        .as_u64()
        .expect("outside CPU counted");
    let kthreads = machine["outside_kthread_oncpu_ns"]
        .as_u64()
        .expect("kernel threads told apart");
    assert!(
        kthreads > 0 && kthreads * 2 < outside,
        "kernel threads {kthreads} ns of {outside} ns outside the run"
    );
    let dir = sandbox.only_results_dir();
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("## Can the time figures be trusted?"), "{md}");
    assert!(md.contains("of CPU outside the run"), "{md}");
    // Who took it is named: a busy loop, by its PID.
    assert!(
        hog_pids
            .iter()
            .any(|pid| md.contains(&format!("sh (PID {pid}) "))),
        "one of the busy loops {hog_pids:?} named: {md}"
    );
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(
        terminal.contains("time figures: suspect:"),
        "the terminal says it: {terminal}"
    );
}

/// A memory cgroup of its own with a small limit (v1 or v2): where the memory hog runs.
struct HogCgroup {
    dir: PathBuf,
}

impl HogCgroup {
    fn make(limit: u64) -> Result<Self, String> {
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let name = format!("spawnscope-test-memory-hog-{}", std::process::id());
        let (dir, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(&name), "memory.limit_in_bytes")
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let enabled =
                fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "memory") {
                return Err("the cgroup v2 root does not delegate the memory controller".into());
            }
            (root.join(&name), "memory.max")
        };
        fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cgroup = HogCgroup { dir };
        fs::write(cgroup.dir.join(limit_file), limit.to_string())
            .map_err(|e| format!("{limit_file}: {e}"))?;
        Ok(cgroup)
    }
}

impl Drop for HogCgroup {
    fn drop(&mut self) {
        // Its processes are gone by now (Hogs is dropped first); the page cache they left is
        // moved to the parent by the kernel.
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

#[test]
fn a_run_beside_a_memory_hog_reclaiming_is_suspect_and_names_the_reclaim() {
    let test = "a_run_beside_a_memory_hog_reclaiming_is_suspect_and_names_the_reclaim";
    if skip_unless_root(test) {
        return;
    }
    if !Path::new("/sys/kernel/tracing/events/vmscan/mm_vmscan_memcg_reclaim_begin").exists()
        && !Path::new("/sys/kernel/debug/tracing/events/vmscan/mm_vmscan_memcg_reclaim_begin")
            .exists()
    {
        eprintln!("SKIP {test}: no vmscan:mm_vmscan_memcg_reclaim_begin tracepoint here");
        return;
    }
    let _one = serial();
    let cgroup = match HogCgroup::make(64 << 20) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    };
    // The hog writes a 256 MiB file from inside its 64 MiB cgroup, then reads it over and over:
    // every page read back is charged to the cgroup, which must reclaim to make room.
    let file = std::env::temp_dir().join(format!("spawnscope-memory-hog-{}", std::process::id()));
    let script = format!(
        "echo $$ > {procs} && dd if=/dev/zero of={file} bs=1M count=256 2>/dev/null && \
         touch {file}.ready && while :; do cat {file} > /dev/null; done",
        procs = cgroup.dir.join("cgroup.procs").display(),
        file = file.display()
    );
    let hogs = Hogs(vec![Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the memory hog")]);
    let ready = PathBuf::from(format!("{}.ready", file.display()));
    assert!(
        wait_until(Duration::from_secs(60), || ready.exists()),
        "the hog wrote its file"
    );
    let sandbox = Sandbox::new();
    sandbox.hold_2000_threads("2s", &[]);
    drop(hogs);
    drop(cgroup);
    let _ = fs::remove_file(&file);
    let _ = fs::remove_file(&ready);

    assert_suspect(
        &sandbox,
        "reclaim",
        "steady",
        "a cgroup reclaiming at its limit all through the hold",
    );
    let dir = sandbox.only_results_dir();
    let collector = read_json(dir.join("collector.json"));
    let reclaims = collector["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "machine_cgroup_reclaims")
        .map(|m| m["total"].as_u64().unwrap())
        .expect("collector.json counts the reclaim of cgroups at their limit");
    assert!(reclaims > 0, "{reclaims}");
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("reclaiming memory"), "{md}");
}

#[test]
fn a_quiet_machine_has_every_rule_checked_or_said_not_available() {
    if skip_unless_root("a_quiet_machine_has_every_rule_checked_or_said_not_available") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    sandbox.hold_2000_threads("500ms", &[]);
    let summary = read_json(sandbox.only_results_dir().join("summary.json"));
    let verdict = &summary["verdict"];
    // Whatever the machine did meanwhile (it is shared), every rule is either judged (a finding or
    // clean) or listed as not checked, never silently absent.
    let not_checked: Vec<&str> = verdict["not_checked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for rule in ["steal", "outside_cpu", "reclaim", "futex_walk"] {
        assert!(
            !not_checked.contains(&rule),
            "{rule} is measurable on this host: {verdict}"
        );
    }
    // A VM without cpufreq says so rather than judging it clean.
    if !Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists() {
        assert!(not_checked.contains(&"cpu_frequency"), "{verdict}");
    }
    assert_eq!(
        verdict["trustworthy"].as_bool(),
        Some(verdict["findings"].as_array().unwrap().is_empty())
    );
}
