//! `run --perf`: CPU samples of the workload with kernel and user stacks, recorded by `perf record`
//! while it runs, and read back (`perf script`) as folded stacks per phase.
//!
//! How it is recorded, and why:
//! - `cpu-clock`, a software event: hardware counters are often missing in VMs (they are here).
//! - `-a -G <the run's cgroup>`: per-CPU events filtered to the run's cgroup. Per-task events
//!   (`-p PID`, inherited by each new thread) restart their sampling period in every new thread,
//!   so a thread that runs for less than one period is never sampled: at 10,000 threads they saw
//!   a fifth of the samples and almost none of the new threads' own work (thread start, exit).
//!   They also cost a perf_event per thread. `-p` is only the fallback when there is no cgroup.
//! - Call graph per target: Go keeps frame pointers (`fp`); Rust std on Debian's glibc does not
//!   (fp stacks break in clone3, _int_malloc), so the threads workload uses `dwarf` with a 4 KiB
//!   stack copy: measured here, 100 % of its user stacks reach `_start` or `clone3` at 4 KiB, 90 %
//!   at 2 KiB, and 8 KiB only doubles the data.
//! - A sample budget instead of a fixed rate: the rate is the budget divided by the CPU time the
//!   calibration predicts, so a 1M run writes about as much as a 10k run. `--max-size` bounds it.
//! - `-k CLOCK_MONOTONIC`: sample times compare with the workload's `phase` marks.
//! - `-D -1 --control fifo`: perf starts disabled and acknowledges "enable" once its events are
//!   on; the workload is released only then, so its first instruction is sampled.
//! - `--synth=no`: the workload is still at its gate (before exec) when perf starts, so there is
//!   nothing to synthesize, and walking every process of a busy host can take seconds.
//! - `--no-buildid`: no post-processing pass over a large perf.data at the end; `perf script` runs
//!   right after the run, and its output is kept (perf.folded).
//!
//! What it costs, measured here (threads sleep 20,000, median of 3): system time 2.5 s without
//! perf, 3.2 s with it, fp or dwarf alike. The part cpu-clock can see — perf's side-band records
//! of every new mapping, fork and exit (dwarf unwinding needs the mappings: without them 48 % of
//! user stacks were complete) — is its own row, "tracing itself"; the rest happens in context
//! switches, where the sampling timer is off; at 100,000 threads the whole cost was ≈7 %.
//! perf.data grows by ≈4.3 KB per dwarf sample and ≈0.5 KB of side-band per thread: 136 MB for
//! threads sleep 100,000 (19,612 samples), 1 MB for goroutines sleep 1,000,000 (4,938, fp).

use std::fs::{self, File};
use std::io::{BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use host::clock::monotonic_ns;
use record::perf::{
    fold, CallGraph, PerfPlan, PerfRecord, Phases, Profile, PERF_DATA, PERF_LOG, PERF_RECORD,
};
use record::{self, Target};
use runtime::WorkloadKind;

/// Samples to aim at per run. dwarf samples carry a copy of the user stack (≈4.3 KB each), fp
/// samples only addresses (≈0.5 KB): 20,000 dwarf samples ≈ 90 MB, 60,000 fp samples ≈ 30 MB.
/// Either budget puts a 1 % category within ±0.1 % (binomial standard error).
const BUDGET_DWARF: u64 = 20_000;
const BUDGET_FP: u64 = 60_000;
/// Rates stay between these: below 19 Hz a short phase gets no samples; 999 Hz is perf's default.
const MIN_HZ: u32 = 19;
const MAX_HZ: u32 = 999;
/// The rate for a command, whose CPU time nothing predicts.
const DEFAULT_HZ: u32 = 499;
/// perf stops recording past this (the rest of the run is then unsampled, and said so).
const MAX_SIZE_BYTES: u64 = 512 << 20;
/// perf's ring buffer per CPU. The default (512 KiB) fills in half a second of dwarf samples
/// (≈4.5 KB each at 999 Hz) and loses samples when perf is slow to drain it on a busy host; 8 MiB
/// per CPU, 64 MiB at most in all (locked memory), a power of two as perf wants.
fn buffer_per_cpu_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    let wanted = ((64u64 << 20) / cpus).clamp(512 << 10, 8 << 20);
    1u64 << (63 - wanted.leading_zeros())
}

/// The call graph a target needs: its runtime's (see runtime::Descriptor), fp for a command.
pub fn call_graph_for(target: &Target) -> CallGraph {
    let arg = match target {
        Target::Workload(inv) => inv.runtime.describe().perf_call_graph,
        Target::Command { .. } => "fp",
    };
    CallGraph::parse(arg).expect("every runtime's perf_call_graph parses")
}

/// What the command line asked of perf.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub freq: Option<u32>,
    pub call_graph: Option<CallGraph>,
}

/// The rate that spends the sample budget over the CPU time the calibration predicts: spawning N
/// at the calibrated rate, times four for the rest of the run (joining, exiting, the runtime's
/// own threads), which matched the threads and goroutines runs measured here within 20 %.
pub fn plan(target: &Target, spawn_per_second: Option<f64>, opts: &Options) -> PerfPlan {
    let call_graph = opts.call_graph.unwrap_or_else(|| call_graph_for(target));
    let budget = match call_graph {
        CallGraph::Fp => BUDGET_FP,
        CallGraph::Dwarf { .. } => BUDGET_DWARF,
    };
    let expected_cpu_s = match (target, spawn_per_second) {
        (Target::Workload(inv), Some(rate))
            if rate > 0.0 && matches!(inv.workload, WorkloadKind::Sleep | WorkloadKind::Hold) =>
        {
            Some((4.0 * inv.workload.tasks(inv.n) as f64 / rate).max(1.0))
        }
        _ => None,
    };
    let (freq_hz, why) = match (opts.freq, expected_cpu_s) {
        (Some(hz), _) => (hz, "--perf-freq".to_string()),
        (None, Some(cpu)) => {
            let hz = ((budget as f64 / cpu) as u32).clamp(MIN_HZ, MAX_HZ);
            (
                hz,
                format!(
                    "{} samples over the ≈{cpu:.0} s of CPU the calibration predicts",
                    units::count(budget)
                ),
            )
        }
        (None, None) => (
            DEFAULT_HZ,
            "nothing predicts this run's CPU time: perf's usual rate, bounded by --max-size".into(),
        ),
    };
    PerfPlan {
        call_graph,
        freq_hz,
        expected_cpu_s,
        sample_budget: budget,
        max_size_bytes: MAX_SIZE_BYTES,
        why,
    }
}

/// What perf samples: the run's cgroup (the right way), or one process and the threads it creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Path below the perf_event hierarchy's mount.
    Cgroup(String),
    Pid(u32),
}

pub fn available() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd` so that it gets `signal` when the conductor dies (even SIGKILLed): a system-wide
/// perf must never outlive its run.
fn die_with_parent(cmd: &mut Command, signal: i32) {
    // SAFETY: the closure only calls prctl, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, signal);
            Ok(())
        });
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions; the PID is our own unreaped child.
    unsafe { libc::kill(pid as i32, sig) };
}

fn mkfifo(path: &Path) -> Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mkfifo {}", path.display()));
    }
    Ok(())
}

/// Opens a FIFO for reading and writing: on Linux that never blocks, whoever is at the other end.
fn open_fifo(path: &Path) -> Result<File> {
    File::options()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// Waits until `file` has something to read, at most `timeout`.
fn readable(file: &File, timeout: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) > 0 }
}

const FIFO_DIR_PREFIX: &str = "spawnscope-perf-";

/// Removes the control-FIFO directories of conductors that were SIGKILLed (their perf died with
/// them: PR_SET_PDEATHSIG). Returns how many.
pub fn remove_stale_fifo_dirs() -> usize {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let owner = name
            .strip_prefix(FIFO_DIR_PREFIX)
            .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok());
        if let Some(pid) = owner {
            if !Path::new(&format!("/proc/{pid}")).exists()
                && fs::remove_dir_all(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// A `perf record` running beside the workload. Dropping it stops perf.
pub struct Recorder {
    child: Option<Child>,
    fifo_dir: PathBuf,
    dir: PathBuf,
    record: PerfRecord,
}

impl Recorder {
    /// Starts `perf record` on `scope`, writing into `dir`, and returns once its events are on.
    pub fn start(plan: &PerfPlan, scope: &Scope, dir: &Path) -> Result<Self> {
        // The control FIFOs live outside the results directory, which keeps data only.
        let fifo_dir = std::env::temp_dir().join(format!(
            "{FIFO_DIR_PREFIX}{}-{}",
            std::process::id(),
            monotonic_ns()
        ));
        fs::create_dir(&fifo_dir).with_context(|| format!("creating {}", fifo_dir.display()))?;
        let mut recorder = Recorder {
            child: None,
            fifo_dir: fifo_dir.clone(),
            dir: dir.to_path_buf(),
            record: PerfRecord {
                plan: Some(plan.clone()),
                ..Default::default()
            },
        };
        let (ctl_path, ack_path) = (fifo_dir.join("ctl"), fifo_dir.join("ack"));
        mkfifo(&ctl_path)?;
        mkfifo(&ack_path)?;
        let mut ctl = open_fifo(&ctl_path)?;
        let mut ack = open_fifo(&ack_path)?;

        let mut args: Vec<String> = vec!["record".into(), "-e".into(), "cpu-clock".into()];
        match scope {
            // -G names the cgroup of the event before it, so it comes after -e.
            Scope::Cgroup(name) => args.extend(["-a".into(), "-G".into(), name.clone()]),
            Scope::Pid(pid) => args.extend(["-p".into(), pid.to_string()]),
        }
        args.extend([
            "-F".into(),
            plan.freq_hz.to_string(),
            "--call-graph".into(),
            plan.call_graph.arg(),
            "-k".into(),
            "CLOCK_MONOTONIC".into(),
            "--synth=no".into(),
            "--no-buildid".into(),
            format!("--max-size={}K", plan.max_size_bytes / 1024),
            "-D".into(),
            "-1".into(),
            "--control".into(),
            format!("fifo:{},{}", ctl_path.display(), ack_path.display()),
            "-o".into(),
            dir.join(PERF_DATA).to_string_lossy().into_owned(),
        ]);
        args.extend(["-m".into(), format!("{}K", buffer_per_cpu_bytes() / 1024)]);
        recorder.record.argv = std::iter::once("perf".to_string())
            .chain(args.iter().cloned())
            .collect();
        recorder.record.scope = match scope {
            Scope::Cgroup(name) => format!("cgroup {name} (all CPUs)"),
            Scope::Pid(pid) => {
                format!("process {pid} and the threads it creates (no cgroup: short-lived threads are undersampled)")
            }
        };
        let log = File::create(dir.join(PERF_LOG)).context("creating perf.log")?;
        let mut cmd = Command::new("perf");
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        die_with_parent(&mut cmd, libc::SIGINT);
        let child = cmd
            .spawn()
            .context("starting perf record (is linux-perf installed?)")?;
        recorder.child = Some(child);

        // perf starts disabled; "enable" is acknowledged once the events are on.
        ctl.write_all(b"enable\n")
            .context("writing to perf's control FIFO")?;
        // perf synthesizes every task's maps before it samples: seconds on a real CPU, minutes
        // under QEMU's emulation (the kernel matrix's VMs).
        let wait_s = if host::machine::cpu_emulated() {
            600
        } else {
            60
        };
        let deadline = Instant::now() + Duration::from_secs(wait_s);
        loop {
            if readable(&ack, Duration::from_millis(200)) {
                let mut buf = [0u8; 16];
                let n = ack.read(&mut buf).context("reading perf's ack")?;
                if buf[..n].starts_with(b"ack") {
                    return Ok(recorder);
                }
            }
            if let Some(status) = recorder.child.as_mut().and_then(|c| c.try_wait().ok()?) {
                recorder.child = None;
                bail!(
                    "perf record exited before sampling ({status}): {}",
                    log_tail(dir)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "perf record did not start within {wait_s} s: {}",
                    log_tail(dir)
                );
            }
        }
    }

    /// Stops perf (SIGINT: it finishes writing perf.data), waits for it, writes perf.json.
    pub fn stop(mut self) -> Result<PerfRecord> {
        let exit = self.stop_child();
        self.record.exit = Some(exit);
        self.record.data_bytes = fs::metadata(self.dir.join(PERF_DATA)).map_or(0, |m| m.len());
        self.record.messages = fs::read_to_string(self.dir.join(PERF_LOG))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        record::write_json(&self.dir.join(PERF_RECORD), &self.record)?;
        Ok(self.record.clone())
    }

    fn stop_child(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "exited before it was stopped".into();
        };
        signal(child.id(), libc::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let _ = fs::remove_dir_all(&self.fifo_dir);
        match status {
            Some(s) if s.success() => "stopped".into(),
            Some(s) => format!("stopped: {s}"),
            None => {
                "killed: it did not stop within 120 s of SIGINT (perf.data may be truncated)".into()
            }
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop_child();
        }
        let _ = fs::remove_dir_all(&self.fifo_dir);
    }
}

fn log_tail(dir: &Path) -> String {
    let text = fs::read_to_string(dir.join(PERF_LOG)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// Runs `perf script` on `dir/perf.data` and folds its output by phase. Killing it loses nothing:
/// perf.data stays, and `report` does this again.
pub fn script(dir: &Path, phases: &Phases) -> Result<(Profile, Vec<String>)> {
    let mut cmd = Command::new("perf");
    cmd.arg("script")
        .arg("-i")
        .arg(dir.join(PERF_DATA))
        // Kernel vs user comes from each frame's address; no srcline/inline lookups (they
        // run addr2line per frame and take minutes on a large profile).
        .args(["-F", "comm,tid,time,ip,sym,dso", "--ns", "--no-inline"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_parent(&mut cmd, libc::SIGKILL);
    let mut child = cmd.spawn().context("starting perf script")?;
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = e.read_to_string(&mut text);
            text
        })
    });
    let folded = child
        .stdout
        .take()
        .context("perf script stdout")
        .and_then(|out| fold(BufReader::with_capacity(1 << 20, out), phases));
    let status = child.wait();
    let messages: Vec<String> = stderr
        .and_then(|h| h.join().ok())
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let status = status.context("waiting for perf script")?;
    if !status.success() {
        bail!("perf script failed ({status}): {}", messages.join(" / "));
    }
    Ok((folded?, messages))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::{Invocation, Runtime, WorkloadKind};

    #[test]
    fn call_graph_and_rate_per_target() {
        let inv = |runtime, n| {
            Target::Workload(Invocation {
                runtime,
                workload: WorkloadKind::Sleep,
                n,
                flags: vec![],
            })
        };
        let threads = plan(
            &inv(Runtime::Threads, 100_000),
            Some(25_000.0),
            &Options::default(),
        );
        assert_eq!(threads.call_graph, CallGraph::Dwarf { stack_bytes: 4096 });
        assert_eq!(threads.expected_cpu_s, Some(16.0));
        assert_eq!(threads.freq_hz, 999, "20,000 / 16 s = 1250 Hz, capped");
        let million = plan(
            &inv(Runtime::Threads, 1_000_000),
            Some(25_000.0),
            &Options::default(),
        );
        assert_eq!(
            million.freq_hz, 125,
            "the same budget over ten times the CPU"
        );
        let go = plan(
            &inv(Runtime::Goroutines, 1_000_000),
            Some(400_000.0),
            &Options::default(),
        );
        assert_eq!(go.call_graph, CallGraph::Fp);
        assert_eq!(go.freq_hz, 999);
        // Every runtime's call graph parses; Rust's, tokio's included, need dwarf.
        for runtime in Runtime::ALL {
            let graph = call_graph_for(&inv(runtime, 1));
            assert_eq!(
                matches!(graph, CallGraph::Dwarf { .. }),
                runtime != Runtime::Goroutines,
                "{}",
                runtime.name()
            );
        }
        let cmd = Target::Command {
            argv: vec!["x".into()],
            tasks: None,
            task_kind: Default::default(),
            peak_when: None,
            label: None,
            task_lifetime_ns: None,
        };
        let asked = Options {
            freq: Some(77),
            call_graph: Some(CallGraph::parse("dwarf,8192").unwrap()),
        };
        let p = plan(&cmd, None, &asked);
        assert_eq!(
            (p.freq_hz, p.call_graph.arg()),
            (77, "dwarf,8192".to_string())
        );
        assert_eq!(plan(&cmd, None, &Options::default()).freq_hz, DEFAULT_HZ);
        assert!(CallGraph::parse("lbr").is_err());
        assert!(CallGraph::parse("dwarf,100").is_err());
        assert_eq!(CallGraph::parse("dwarf").unwrap().arg(), "dwarf,4096");
    }
}
