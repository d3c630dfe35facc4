//! The run is a process tree: a workload started behind a shell is counted whole — by the run's
//! v2 cgroup where the host has a v2 hierarchy, else by following the launched process's forks —
//! and a process outside the run, making threads at the same time, is not counted at all.
//! Root only (real BPF, a real cgroup); skipped with the reason elsewhere.

mod common;

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{run_in, serial, skip, threads_bin, Run};
use spawnscope_collector::Verdict;

/// Threads the wrapped workload makes; threads the bystander outside the run makes meanwhile.
const INSIDE: u64 = 600;
const OUTSIDE: u64 = 400;

/// A process outside the run, making OUTSIDE threads while the run goes on.
struct Bystander(Child);

impl Bystander {
    fn start(threads: &Path) -> Bystander {
        let child = Command::new(threads)
            .args(["hold", "--n", &OUTSIDE.to_string(), "--hold-for", "1500ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the bystander starts");
        Bystander(child)
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        // Ours, by PID: it ends by itself after its hold; a failed test must not leave it.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sh -c 'threads hold --n INSIDE …; true'` under the collector: the shell forks the workload
/// (the `; true` keeps sh from exec'ing it in place).
fn shell_wrapped(
    test: &str,
    cgroup_procs: Vec<CString>,
    config: impl FnOnce(&mut spawnscope_collector::Config),
) -> Option<Run> {
    let threads = match threads_bin() {
        Ok(bin) => bin,
        Err(why) => {
            skip(test, &why);
            return None;
        }
    };
    let script = format!(
        "{} hold --n {INSIDE} --hold-for 600ms; true",
        threads.display()
    );
    let bystander = Bystander::start(&threads);
    let run = run_in(
        test,
        Path::new("/bin/sh"),
        &["-c", &script],
        cgroup_procs,
        |c| {
            c.expected_tasks = INSIDE;
            config(c);
        },
    );
    drop(bystander);
    run
}

/// Every count of the wrapped workload is the run's, the bystander's are not, and the counts
/// agree with wait4's rusage of the shell (which reaped the workload).
fn assert_whole_tree(test: &str, run: &Run) {
    let r = &run.report;
    assert_eq!(
        r.total("new_threads"),
        INSIDE,
        "{test}: threads created by the run's tasks (the bystander's {OUTSIDE} are not)"
    );
    assert!(
        r.total("new_processes") >= 1,
        "{test}: the shell forked the workload"
    );
    let checks = r.cross_checks_of_wait4(&run.wait4, Some((INSIDE, "the wrapped workload")));
    for c in &checks {
        assert_eq!(c.verdict, Verdict::Pass, "{test}: {c:?}");
    }
    // The workload's own result event counts only its own process: the shell's faults are more.
    assert!(
        run.wait4.minflt > run.rusage().minflt,
        "{test}: wait4 covers the shell too"
    );
}

#[test]
fn a_shell_wrapped_workload_is_followed_by_its_forks_without_a_cgroup() {
    let _one = serial();
    let test = "tree_by_fork";
    let Some(run) = shell_wrapped(test, Vec::new(), |c| c.run_cgroup_id = None) else {
        return;
    };
    assert_eq!(
        run.report.diagnostics.run_selected_by.as_deref(),
        Some("process tree")
    );
    assert!(run.report.diagnostics.processes_followed >= 1);
    assert_eq!(run.report.diagnostics.processes_not_followed, 0);
    assert_whole_tree(test, &run);
}

/// A v2 cgroup of the test's own, removed on drop (its tasks have exited by then).
struct V2Cgroup(PathBuf);

impl V2Cgroup {
    fn create(test: &str) -> Option<V2Cgroup> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let Some(mount) = mountinfo.lines().find_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| pre.split(' ').nth(4).map(PathBuf::from))?
        }) else {
            skip(test, "no cgroup v2 hierarchy mounted");
            return None;
        };
        let dir = mount.join(format!("spawnscope-test-tree-{}", std::process::id()));
        if let Err(err) = fs::create_dir(&dir) {
            skip(test, &format!("cannot create {}: {err}", dir.display()));
            return None;
        }
        Some(V2Cgroup(dir))
    }

    fn id(&self) -> u64 {
        fs::metadata(&self.0).unwrap().ino()
    }

    fn procs(&self) -> CString {
        CString::new(self.0.join("cgroup.procs").to_string_lossy().as_bytes()).unwrap()
    }
}

impl Drop for V2Cgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

#[test]
fn a_shell_wrapped_workload_is_selected_by_the_runs_v2_cgroup() {
    let _one = serial();
    let test = "tree_by_cgroup";
    if !common::is_root() {
        return skip(test, "needs root to load BPF programs and make a cgroup");
    }
    let Some(cgroup) = V2Cgroup::create(test) else {
        return;
    };
    let id = cgroup.id();
    let Some(run) = shell_wrapped(test, vec![cgroup.procs()], |c| c.run_cgroup_id = Some(id))
    else {
        return;
    };
    assert_eq!(
        run.report.diagnostics.run_selected_by.as_deref(),
        Some("cgroup")
    );
    // Selected by the cgroup, nothing is followed by fork.
    assert_eq!(run.report.diagnostics.processes_followed, 0);
    assert_whole_tree(test, &run);
}

#[test]
fn a_cgroup_the_workload_is_not_in_counts_nothing_of_it() {
    let _one = serial();
    let test = "tree_other_cgroup";
    if !common::is_root() {
        return skip(test, "needs root to load BPF programs and make a cgroup");
    }
    let Some(cgroup) = V2Cgroup::create(test) else {
        return;
    };
    let id = cgroup.id();
    // The child does not join the cgroup the probes select: its exec arms the counting (the
    // launched process is always known by its PID), and nothing after it is the run's.
    let Some(run) = shell_wrapped(test, Vec::new(), |c| c.run_cgroup_id = Some(id)) else {
        return;
    };
    assert_eq!(run.report.total("new_threads"), 0);
    assert_eq!(run.report.total("switches_voluntary"), 0);
}
