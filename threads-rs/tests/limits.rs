//! Spawn failure is data: real limits, hit for real (root only), each diagnosed by name.
//! These tests change a cgroup and a sysctl for a second, so they run one at a time and restore
//! what they changed even when they fail.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use common::*;
use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1).map(|euid| euid == "0"))
        .unwrap_or(false)
}

/// Runs `threads args` inside `cgroup_dir` (it joins the cgroup before exec) and returns the result.
fn run_in_cgroup(cgroup_dir: &Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#)
        .arg("sh")
        .arg(cgroup_dir)
        .arg(threads_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events = events(&validator(), &stdout);
    (
        out.status.code().unwrap_or(-1),
        only(&events, "result").clone(),
    )
}

/// A fresh pids cgroup (v1 `pids` hierarchy, or v2 with the pids controller), removed on drop.
struct PidsCgroup(PathBuf);

impl PidsCgroup {
    fn create() -> Option<Self> {
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let parent = if v1.join("cgroup.procs").exists() {
            v1.to_path_buf()
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let controllers = fs::read_to_string(root.join("cgroup.controllers")).ok()?;
            if !controllers.split_whitespace().any(|c| c == "pids") {
                return None;
            }
            fs::write(root.join("cgroup.subtree_control"), "+pids").ok()?;
            root.to_path_buf()
        };
        let dir = parent.join(format!("threads-test-{}", std::process::id()));
        fs::create_dir(&dir).ok()?;
        Some(PidsCgroup(dir))
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

#[test]
fn cgroup_pids_max_is_diagnosed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        eprintln!("SKIP cgroup_pids_max_is_diagnosed: needs root to make a cgroup");
        return;
    }
    let Some(cgroup) = PidsCgroup::create() else {
        eprintln!("SKIP cgroup_pids_max_is_diagnosed: no pids cgroup controller on this host");
        return;
    };
    fs::write(cgroup.0.join("pids.max"), "100").unwrap();
    let (code, result) = run_in_cgroup(&cgroup.0, &["hold", "--n", "500"]);
    assert_eq!(code, 3, "exit code for a limit reached");
    assert_eq!(result["spawned"], 99, "100 tasks: main and 99 threads");
    assert_eq!(
        result["alive_at_peak"], 99,
        "the spawned threads were joined after the peak"
    );
    let failure = &result["failure"];
    assert_eq!(failure["errno_name"], "EAGAIN");
    assert_eq!(failure["limit"], "cgroup pids.max", "{failure}");
    assert_eq!(failure["readings"]["cgroup_pids_max"], 100);
}

/// Sets a sysctl and puts the old value back on drop (test failure included).
struct SysctlFor(&'static str, String);

impl SysctlFor {
    fn set(key: &'static str, value: &str) -> Self {
        let path = Path::new("/proc/sys").join(key);
        let old = fs::read_to_string(&path).unwrap().trim().to_string();
        fs::write(&path, value).unwrap();
        SysctlFor(key, old)
    }
}

impl Drop for SysctlFor {
    fn drop(&mut self) {
        fs::write(Path::new("/proc/sys").join(self.0), &self.1).expect("restoring the sysctl");
    }
}

#[test]
fn max_map_count_is_diagnosed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        eprintln!("SKIP max_map_count_is_diagnosed: needs root to lower vm.max_map_count");
        return;
    }
    // A thread is four mappings (stack, guard page, signal stack and its guard): 3000 allows a few
    // hundred threads, not 2000. Past the limit Rust std aborts inside the new thread, so the
    // workload must stop on its own, before mmap fails, and say why.
    let (code, result) = {
        let _lowered = SysctlFor::set("vm/max_map_count", "3000");
        let out = run(&threads_bin(), &["hold", "--n", "2000"]);
        let events = events(&validator(), &out.stdout);
        (out.code, only(&events, "result").clone())
    };
    assert_eq!(code, 3);
    let spawned = result["spawned"].as_u64().unwrap();
    assert!(
        (200..750).contains(&spawned),
        "spawned {spawned} threads under 3000 mappings"
    );
    assert_eq!(result["alive_at_peak"].as_u64(), Some(spawned));
    let failure = &result["failure"];
    assert_eq!(failure["limit"], "vm.max_map_count", "{failure}");
    assert_eq!(failure["readings"]["max_map_count"], 3000);
}
