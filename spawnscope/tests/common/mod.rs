//! Helpers for the conductor's integration tests: the binaries, root checks, sysctl snapshots,
//! and running spawnscope with a private state directory (never the machine's real one).
#![allow(dead_code)]

pub mod browser;
pub mod synthetic;
pub mod trace;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Root tests change sysctls and cgroups: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Prints why a test is skipped; the caller returns.
pub fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    eprintln!("SKIP {test}: needs root (sysctls, cgroups)");
    true
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn spawnscope_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_spawnscope"))
}

/// `spawnscope report ARGS…`, which must succeed (its stderr said where it did not).
pub fn report_ok(args: &[&Path]) -> Output {
    let out = Command::new(spawnscope_bin())
        .arg("report")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The workload binaries next to spawnscope (where it looks first), built when missing.
pub fn ensure_workloads() {
    let dir = spawnscope_bin().parent().unwrap().to_path_buf();
    if !dir.join("threads").is_file() {
        let ok = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "threads"])
            .current_dir(repo_root())
            .status()
            .unwrap()
            .success();
        assert!(ok, "building threads");
    }
    if !dir.join("goroutines").is_file() {
        // The one way it is built (pure Go): scripts/build-goroutines.sh.
        let status = Command::new(repo_root().join("scripts/build-goroutines.sh"))
            .arg(dir.join("goroutines"))
            .status()
            .unwrap();
        assert!(status.success(), "building goroutines: {status}");
    }
}

/// tests/programs/sleepers (Go), built into the temporary directory: `sleepers N SLEEP`, N
/// goroutines sleeping, a line when all have started. None when go cannot build it.
pub fn build_sleepers() -> Option<PathBuf> {
    let out = std::env::temp_dir().join(format!("spawnscope-sleepers-{}", std::process::id()));
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(repo_root().join("spawnscope/tests/programs/sleepers"))
        .status()
        .is_ok_and(|s| s.success());
    built.then_some(out)
}

pub const KEYS: [&str; 3] = ["vm/max_map_count", "kernel/pid_max", "kernel/threads-max"];

pub fn sysctls() -> BTreeMap<&'static str, u64> {
    KEYS.iter()
        .map(|k| {
            (
                *k,
                fs::read_to_string(Path::new("/proc/sys").join(k))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap(),
            )
        })
        .collect()
}

/// A private results root and state directory for one test.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    /// Dropped after the sandbox's own restore (fields drop after `Drop::drop`).
    _defaults: Option<DefaultSysctls>,
}

/// The kernel's default vm.max_map_count and kernel.pid_max for the length of a test, whatever
/// the machine had before (an admin or a `sysctl apply` may have raised them): a test that proves
/// a raise and its restore needs something to raise from. The machine's values come back on drop.
struct DefaultSysctls {
    originals: Vec<(&'static str, u64)>,
}

impl DefaultSysctls {
    const DEFAULTS: [(&'static str, u64); 2] =
        [("vm/max_map_count", 65530), ("kernel/pid_max", 32768)];

    fn set() -> Self {
        let now = sysctls();
        let mut originals = Vec::new();
        for (key, default) in Self::DEFAULTS {
            if now[key] > default {
                write_sysctl(key, default);
                originals.push((key, now[key]));
            }
        }
        DefaultSysctls { originals }
    }
}

impl Drop for DefaultSysctls {
    fn drop(&mut self) {
        for (key, value) in &self.originals {
            write_sysctl(key, *value);
        }
    }
}

fn write_sysctl(key: &str, value: u64) {
    let path = Path::new("/proc/sys").join(key);
    fs::write(&path, format!("{value}\n"))
        .unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
}

/// A test that fails half-way (say, after SIGKILLing a conductor) must not leave sysctls raised
/// behind a state file that is about to be deleted with the sandbox: restore from it first.
impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.state_dir().join("sysctl-state.json").exists() {
            let _ = self.command(&["sysctl", "restore"]).output();
        }
    }
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox::with(None)
    }

    /// A sandbox on a machine whose managed sysctls are at the kernel's defaults (root only).
    pub fn at_default_sysctls() -> Self {
        Sandbox::with(Some(DefaultSysctls::set()))
    }

    fn with(defaults: Option<DefaultSysctls>) -> Self {
        ensure_workloads();
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
            _defaults: defaults,
        }
    }

    pub fn out(&self) -> PathBuf {
        self.dir.path().join("results")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(spawnscope_bin());
        cmd.args(args)
            .env("SPAWNSCOPE_STATE_DIR", self.state_dir())
            .stdin(Stdio::null());
        cmd
    }

    /// `spawnscope run <args> --out <sandbox>` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.out();
        let mut full: Vec<&str> = vec!["run", "--out", out.to_str().unwrap()];
        full.extend_from_slice(args);
        self.command(&full).output().unwrap()
    }

    /// A `threads hold` of 2,000 tasks released after `hold_for`, `extra` flags first; it must
    /// succeed.
    pub fn hold_2000_threads(&self, hold_for: &str, extra: &[&str]) -> Output {
        let mut args = extra.to_vec();
        args.extend([
            "--runtime",
            "threads",
            "--workload",
            "hold",
            "--n",
            "2000",
            "--hold-for",
            hold_for,
        ]);
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn spawn_run(&self, args: &[&str]) -> Child {
        let out = self.out();
        let mut full: Vec<&str> = vec!["run", "--out", out.to_str().unwrap()];
        full.extend_from_slice(args);
        self.command(&full)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Starts `run --runtime threads --workload hold --n N --hold-for 60s` and waits until its
    /// tasks are all alive (the `peak` event is on disk): the child and its results directory.
    pub fn start_hold_until_peak(&self, n: u64, limit: Duration) -> (Child, PathBuf) {
        self.start_hold_until_peak_with(n, &[], limit)
    }

    /// As `start_hold_until_peak`, with more arguments for `run`.
    pub fn start_hold_until_peak_with(
        &self,
        n: u64,
        extra: &[&str],
        limit: Duration,
    ) -> (Child, PathBuf) {
        let n = n.to_string();
        let mut args = vec![
            "--runtime",
            "threads",
            "--workload",
            "hold",
            "--n",
            &n,
            "--hold-for",
            "60s",
        ];
        args.extend_from_slice(extra);
        let child = self.spawn_run(&args);
        let mut dir = None;
        let peaked = wait_until(limit, || {
            dir = self.results_dirs().into_iter().next();
            dir.as_ref()
                .is_some_and(|d| events_so_far(d).contains(r#""event":"peak""#))
        });
        assert!(peaked, "the run did not reach its peak");
        (child, dir.unwrap())
    }

    /// The one results directory this sandbox's runs wrote, if any.
    pub fn results_dirs(&self) -> Vec<PathBuf> {
        fs::read_dir(self.out()).map_or(Vec::new(), |d| d.flatten().map(|e| e.path()).collect())
    }

    pub fn only_results_dir(&self) -> PathBuf {
        let dirs = self.results_dirs();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.into_iter().next().unwrap()
    }
}

/// Each `run` call is refused as bad input: exit 2, one stderr line containing its text, nothing
/// on stdout, no results written.
pub fn assert_runs_refused(sandbox: &Sandbox, cases: &[(&[&str], &str)]) {
    for (args, says) in cases {
        let out = sandbox.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: one line: {stderr}"
        );
        assert!(sandbox.results_dirs().is_empty(), "{args:?} wrote results");
    }
}

pub fn read_json(path: impl AsRef<Path>) -> Value {
    let path = path.as_ref();
    serde_json::from_str(
        &fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// The documented JSON files a results directory holds (run, memory, summary; compare for a
/// compare directory, and then each run directory in it) validate against the committed
/// schemas in schema/: what the binary really writes is what the schemas document.
pub fn assert_matches_schemas(dir: &Path) {
    let mut checked = 0;
    for name in ["run", "memory", "summary", "compare"] {
        let file = dir.join(format!("{name}.json"));
        if !file.is_file() {
            continue;
        }
        let schema = read_json(repo_root().join(format!("schema/{name}.schema.json")));
        let validator = jsonschema::validator_for(&schema).expect("a valid schema");
        let errors: Vec<String> = validator
            .iter_errors(&read_json(&file))
            .take(5)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
        checked += 1;
    }
    assert!(checked > 0, "{} holds no documented file", dir.display());
    if dir.join("compare.json").is_file() {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            if entry.path().join("run.json").is_file() {
                assert_matches_schemas(&entry.path());
            }
        }
    }
}

/// Polls `condition` every 50 ms for up to `limit`.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Waits for a child with a time limit, killing it (by its PID: it is ours) past the limit.
pub fn wait_with_limit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("spawnscope did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The workload's events so far in a results directory.
pub fn events_so_far(results_dir: &Path) -> String {
    fs::read_to_string(results_dir.join("workload.jsonl")).unwrap_or_default()
}

pub fn process_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                != Some("Z")
        })
        .unwrap_or(false)
}

/// The direct children of a process (all its threads' children).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let text = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Run cgroups still present under the spawnscope parent (v1 memory/pids or v2).
pub fn run_cgroups() -> Vec<PathBuf> {
    [
        "/sys/fs/cgroup/memory/spawnscope",
        "/sys/fs/cgroup/pids/spawnscope",
        "/sys/fs/cgroup/cpuacct/spawnscope",
        "/sys/fs/cgroup/freezer/spawnscope",
        "/sys/fs/cgroup/spawnscope",
    ]
    .iter()
    .filter_map(|d| fs::read_dir(d).ok())
    .flat_map(|d| d.flatten().map(|e| e.path()))
    .filter(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
    })
    .collect()
}

/// Prints why a perf test is skipped (not root, or no perf); the caller returns.
pub fn skip_unless_root_and_perf(test: &str) -> bool {
    if skip_unless_root(test) {
        return true;
    }
    let perf = Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !perf.is_ok_and(|s| s.success()) {
        eprintln!("SKIP {test}: perf is not installed (apt-get install linux-perf)");
        return true;
    }
    false
}

/// `perf` processes whose command line mentions `path` (a sandbox's results directory): what a
/// run recorded with --perf may have left running.
pub fn perf_processes_mentioning(path: &Path) -> Vec<u32> {
    let needle = path.to_string_lossy().into_owned();
    fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                    cmdline.starts_with("perf ") && cmdline.contains(&needle)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Run cgroups under the spawnscope parent of the v2 hierarchy mounted beside v1 (hybrid hosts),
/// where `run --perf` puts a run for perf's cgroup filter.
pub fn perf_event_run_cgroups() -> Vec<PathBuf> {
    fs::read_dir("/sys/fs/cgroup/unified/spawnscope")
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        })
        .collect()
}

/// Processes a test started to load the machine, ended by their own PIDs when dropped (even when
/// an assertion fails first).
pub struct Hogs(pub Vec<Child>);

impl Hogs {
    /// One busy-looping shell per CPU, outside any run's cgroup.
    pub fn busy_loops() -> Hogs {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Hogs(
            (0..cpus)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .expect("starting a busy loop")
                })
                .collect(),
        )
    }
}

impl Hogs {
    /// One busy loop run by a copy of /bin/sh named `name` (at most 15 characters: the kernel's
    /// comm), so that a finding can be checked to name it.
    pub fn named_busy_loop(name: &str) -> Hogs {
        let dir = std::env::temp_dir().join(format!("spawnscope-hog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shell = dir.join(name);
        std::fs::copy("/bin/sh", &shell).expect("a copy of /bin/sh");
        Hogs(vec![Command::new(&shell)
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("starting the named busy loop")])
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// A C program of tests/programs (`source`: its path there, e.g. `threads-c/threads.c`),
/// compiled with the host's C compiler ($CC, else cc; `-O2 -Wall -pthread`) into the temporary
/// directory; Err, with the reason, when there is no compiler or the build fails.
pub fn build_c_program(source: &str) -> Result<PathBuf, String> {
    let source = repo_root().join("spawnscope/tests/programs").join(source);
    let stem = source.file_stem().unwrap_or_default().to_string_lossy();
    let out = std::env::temp_dir().join(format!("spawnscope-{stem}-{}", std::process::id()));
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&compiler)
        .args(["-O2", "-Wall", "-pthread", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .map_err(|e| format!("no C compiler ({compiler}: {e})"))?;
    status
        .success()
        .then_some(out)
        .ok_or_else(|| format!("{compiler} {} failed: {status}", source.display()))
}
