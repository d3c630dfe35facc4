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

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::results::Target;
use crate::workload::{Runtime, WorkloadKind};

pub const DATA: &str = "perf.data";
/// perf record's own messages (samples written, lost events, size limit).
pub const LOG: &str = "perf.log";
/// How the samples were recorded (the plan and what perf said).
pub const RECORD: &str = "perf.json";
/// `perf script`, folded: one line per phase and stack, `phase;comm;root;…;leaf count`.
pub const FOLDED: &str = "perf.folded";

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
/// The stack copied per dwarf sample (see the module comment).
const DWARF_STACK_BYTES: u32 = 4096;

/// perf's ring buffer per CPU. The default (512 KiB) fills in half a second of dwarf samples
/// (≈4.5 KB each at 999 Hz) and loses samples when perf is slow to drain it on a busy host; 8 MiB
/// per CPU, 64 MiB at most in all (locked memory), a power of two as perf wants.
fn buffer_per_cpu_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    let wanted = ((64u64 << 20) / cpus).clamp(512 << 10, 8 << 20);
    1u64 << (63 - wanted.leading_zeros())
}

/// How user stacks are walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallGraph {
    /// Frame pointers, walked by the kernel at sample time.
    Fp,
    /// A copy of the user stack, unwound later with the binaries' DWARF CFI.
    Dwarf { stack_bytes: u32 },
}

impl CallGraph {
    /// `fp`, `dwarf` or `dwarf,BYTES` (perf's own syntax).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(',') {
            None if text == "fp" => Ok(CallGraph::Fp),
            None if text == "dwarf" => Ok(CallGraph::Dwarf {
                stack_bytes: DWARF_STACK_BYTES,
            }),
            Some(("dwarf", size)) => match size.parse::<u32>() {
                Ok(b) if (8..=65528).contains(&b) && b % 8 == 0 => {
                    Ok(CallGraph::Dwarf { stack_bytes: b })
                }
                _ => Err(format!(
                    "'{size}' is not a dwarf stack size (a multiple of 8, 8..65528 bytes)"
                )),
            },
            _ => Err(format!("'{text}' is not fp, dwarf or dwarf,BYTES")),
        }
    }

    pub fn arg(&self) -> String {
        match self {
            CallGraph::Fp => "fp".into(),
            CallGraph::Dwarf { stack_bytes } => format!("dwarf,{stack_bytes}"),
        }
    }

    /// The call graph a target needs (see the module comment).
    pub fn for_target(target: &Target) -> Self {
        match target {
            Target::Workload(inv) if inv.runtime == Runtime::Threads => CallGraph::Dwarf {
                stack_bytes: DWARF_STACK_BYTES,
            },
            _ => CallGraph::Fp,
        }
    }
}

/// What the command line asked of perf.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub freq: Option<u32>,
    pub call_graph: Option<CallGraph>,
}

/// How a run is recorded, decided before it starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub call_graph: CallGraph,
    pub freq_hz: u32,
    /// CPU seconds the calibration predicts for the run, when it can.
    pub expected_cpu_s: Option<f64>,
    pub sample_budget: u64,
    pub max_size_bytes: u64,
    /// One line: why this rate.
    pub why: String,
}

/// The rate that spends the sample budget over the CPU time the calibration predicts: spawning N
/// at the calibrated rate, times four for the rest of the run (joining, exiting, the runtime's
/// own threads), which matched the threads and goroutines runs measured here within 20 %.
pub fn plan(target: &Target, spawn_per_second: Option<f64>, opts: &Options) -> Plan {
    let call_graph = opts
        .call_graph
        .unwrap_or_else(|| CallGraph::for_target(target));
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
                    crate::units::count(budget)
                ),
            )
        }
        (None, None) => (
            DEFAULT_HZ,
            "nothing predicts this run's CPU time: perf's usual rate, bounded by --max-size".into(),
        ),
    };
    Plan {
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

/// perf.json: how the samples were recorded.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PerfRecord {
    pub argv: Vec<String>,
    pub plan: Option<Plan>,
    pub scope: String,
    pub exit: Option<String>,
    pub data_bytes: u64,
    /// perf record's lines about samples, lost events and limits.
    pub messages: Vec<String>,
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
    pub fn start(plan: &Plan, scope: &Scope, dir: &Path) -> Result<Self> {
        // The control FIFOs live outside the results directory, which keeps data only.
        let fifo_dir = std::env::temp_dir().join(format!(
            "{FIFO_DIR_PREFIX}{}-{}",
            std::process::id(),
            crate::run::monotonic_ns()
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
            dir.join(DATA).to_string_lossy().into_owned(),
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
        let log = File::create(dir.join(LOG)).context("creating perf.log")?;
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
        let deadline = Instant::now() + Duration::from_secs(60);
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
                bail!("perf record did not start within 60 s: {}", log_tail(dir));
            }
        }
    }

    /// Stops perf (SIGINT: it finishes writing perf.data), waits for it, writes perf.json.
    pub fn stop(mut self) -> Result<PerfRecord> {
        let exit = self.stop_child();
        self.record.exit = Some(exit);
        self.record.data_bytes = fs::metadata(self.dir.join(DATA)).map_or(0, |m| m.len());
        self.record.messages = fs::read_to_string(self.dir.join(LOG))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        crate::results::write_json(&self.dir.join(RECORD), &self.record)?;
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
    let text = fs::read_to_string(dir.join(LOG)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// One distinct stack and how many samples it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    pub phase: String,
    pub comm: String,
    /// Root first, leaf last; kernel frames end in `_[k]` (inferno's convention).
    pub frames: Vec<String>,
    pub count: u64,
}

impl Stack {
    /// False for a sample perf recorded without any callchain.
    pub fn has_stack(&self) -> bool {
        !(self.frames.len() == 1 && self.frames[0] == NO_STACK)
    }

    /// Whether the sample was taken in the kernel: its leaf is a kernel frame.
    pub fn kernel_mode(&self) -> bool {
        self.frames.last().is_some_and(|f| is_kernel_frame(f))
    }
}

/// The only frame of a sample perf recorded without any callchain (rare: 1 % here, during
/// thread exit). Such samples are counted, not classified.
pub const NO_STACK: &str = "[no stack]";

pub fn is_kernel_frame(frame: &str) -> bool {
    frame.ends_with("_[k]")
}

/// A frame perf could not name: `[unknown]`, or `[libfoo.so]` when only the file is known.
pub fn is_unresolved_frame(frame: &str) -> bool {
    let name = frame.strip_suffix("_[k]").unwrap_or(frame);
    name.starts_with('[') && name.ends_with(']')
}

/// All the samples of a run, folded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub stacks: Vec<Stack>,
}

impl Profile {
    pub fn samples(&self) -> u64 {
        self.stacks.iter().map(|s| s.count).sum()
    }

    /// perf.folded: `phase;comm;frame;…;frame count`, sorted (what any flame graph tool reads,
    /// with the phase as the root).
    pub fn to_folded(&self) -> String {
        let mut lines: Vec<String> = self
            .stacks
            .iter()
            .map(|s| {
                let mut line = format!("{};{}", s.phase, s.comm);
                for f in &s.frames {
                    line.push(';');
                    line.push_str(f);
                }
                format!("{line} {}", s.count)
            })
            .collect();
        lines.sort();
        lines.join("\n") + "\n"
    }

    pub fn from_folded(text: &str) -> Result<Self> {
        let mut stacks = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (path, count) = line
                .rsplit_once(' ')
                .with_context(|| format!("line {}: no sample count", i + 1))?;
            let count: u64 = count
                .parse()
                .with_context(|| format!("line {}: bad sample count", i + 1))?;
            let mut parts = path.split(';');
            let phase = parts.next().unwrap_or_default().to_string();
            let comm = parts.next().unwrap_or_default().to_string();
            stacks.push(Stack {
                phase,
                comm,
                frames: parts.map(str::to_string).collect(),
                count,
            });
        }
        Ok(Profile { stacks })
    }
}

/// Where each phase starts (CLOCK_MONOTONIC ns), in time order. A sample belongs to the last
/// phase started at or before it; samples before the first mark belong to the first phase.
pub struct Phases(pub Vec<(String, u64)>);

impl Phases {
    fn at(&self, t_ns: u64) -> &str {
        let i = self.0.partition_point(|(_, start)| *start <= t_ns);
        self.0
            .get(i.saturating_sub(1))
            .map_or("run", |(name, _)| name.as_str())
    }
}

/// A frame as the flame graph shows it: perf's symbol, or `[file]` when only the file is known,
/// with `_[k]` on kernel frames. Kernel-ness comes from the address (the upper half on x86-64
/// and arm64), which holds even when the symbol does not resolve.
fn frame_name(addr: &str, sym: &str, dso: &str) -> String {
    let kernel = u64::from_str_radix(addr, 16).is_ok_and(|a| a >= 0xffff_0000_0000_0000);
    let name = if sym == "[unknown]" {
        match dso {
            "" | "[unknown]" => "[unknown]".to_string(),
            path => format!("[{}]", path.rsplit('/').next().unwrap_or(path)),
        }
    } else {
        sym.to_string()
    };
    // ';' separates frames in the folded format.
    let mut name = name.replace(';', ":");
    if kernel {
        name.push_str("_[k]");
    }
    name
}

/// The comm a sample is shown under. A thread sampled after it detached its PID in do_exit
/// has none (perf prints ":-1").
fn comm_name(comm: &str, tid: &str) -> String {
    if tid == "-1" || comm == ":-1" {
        "[exiting thread]".to_string()
    } else {
        comm.replace([';', ' '], "_")
    }
}

/// Folds `perf script -F comm,tid,time,ip,sym,dso --ns` output: an event line
/// (`comm tid secs.nanos:`) followed by one line per frame (`addr sym (dso)`, leaf first) and a
/// blank line.
pub fn fold(reader: impl BufRead, phases: &Phases) -> Result<Profile> {
    let mut counts: BTreeMap<(String, String, Vec<String>), u64> = BTreeMap::new();
    let mut header: Option<(String, String)> = None; // (phase, comm)
    let mut frames: Vec<String> = Vec::new();
    let mut flush = |header: &mut Option<(String, String)>, frames: &mut Vec<String>| {
        if let Some((phase, comm)) = header.take() {
            if frames.is_empty() {
                // perf recorded no callchain at all: kept, so the count is honest.
                frames.push(NO_STACK.to_string());
            }
            frames.reverse();
            *counts
                .entry((phase, comm, std::mem::take(frames)))
                .or_default() += 1;
        }
        frames.clear();
    };
    for line in reader.lines() {
        let line = line.context("reading perf script output")?;
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut header, &mut frames);
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            // A frame: "ffffffff81356af8 __do_sys_clone3 ([kernel.kallsyms])".
            let text = line.trim();
            let Some((addr, rest)) = text.split_once(' ') else {
                continue;
            };
            let (sym, dso) = match rest.rsplit_once(" (") {
                Some((sym, dso)) => (sym.trim(), dso.trim_end_matches(')')),
                None => (rest.trim(), ""),
            };
            frames.push(frame_name(addr, sym, dso));
            continue;
        }
        // An event line: "threads  4360  5113.009397432:" (comm may contain spaces).
        flush(&mut header, &mut frames);
        let text = line.trim_end().trim_end_matches(':');
        let Some((rest, time)) = text.rsplit_once(char::is_whitespace) else {
            continue;
        };
        let rest = rest.trim_end();
        let (comm, tid) = rest.rsplit_once(char::is_whitespace).unwrap_or(("", rest));
        let comm = comm.trim();
        let t_ns = parse_time_ns(time).unwrap_or(0);
        header = Some((phases.at(t_ns).to_string(), comm_name(comm, tid)));
    }
    flush(&mut header, &mut frames);
    Ok(Profile {
        stacks: counts
            .into_iter()
            .map(|((phase, comm, frames), count)| Stack {
                phase,
                comm,
                frames,
                count,
            })
            .collect(),
    })
}

/// "5113.009397432" (seconds.nanoseconds) -> ns.
fn parse_time_ns(text: &str) -> Option<u64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, "0"));
    let frac = format!("{frac:0<9}");
    Some(secs.parse::<u64>().ok()? * 1_000_000_000 + frac.get(..9)?.parse::<u64>().ok()?)
}

/// Runs `perf script` on `dir/perf.data` and folds its output by phase. Killing it loses nothing:
/// perf.data stays, and `report` does this again.
pub fn script(dir: &Path, phases: &Phases) -> Result<(Profile, Vec<String>)> {
    let mut cmd = Command::new("perf");
    cmd.arg("script")
        .arg("-i")
        .arg(dir.join(DATA))
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

/// The run's profile: perf.folded when it is there and newer than perf.data, else `perf script`
/// (whose result is then kept in perf.folded). None when the run was not recorded.
pub fn load_profile(dir: &Path, phases: &Phases) -> Result<Option<(Profile, Vec<String>)>> {
    let data = dir.join(DATA);
    let folded = dir.join(FOLDED);
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(&data), modified(&folded)) {
        (None, None) => Ok(None),
        (data_time, Some(folded_time)) if data_time.is_none_or(|d| d <= folded_time) => {
            let text = fs::read_to_string(&folded)?;
            Ok(Some((Profile::from_folded(&text)?, Vec::new())))
        }
        _ => {
            let (profile, messages) = script(dir, phases)?;
            fs::write(&folded, profile.to_folded())
                .with_context(|| format!("writing {}", folded.display()))?;
            Ok(Some((profile, messages)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Invocation;

    const SCRIPT: &str = "\
threads  4360  5113.009397432: 
\tffffffff816ca027 inode_permission ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           fd001 __open64_nocancel (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           23a70 _start (/work/target/release/threads)

:-1    -1  5113.509397432: 
\tffffffff8135dd33 do_exit.isra.0 ([kernel.kallsyms])

V8 Worker 77  5114.000000001: 
\t    7f0012345678 [unknown] ([unknown])
\t    55aa00001000 [unknown] (/usr/bin/some;thing)
\t           4b65b main (/work/target/release/threads)

threads  4360  5113.019397432: 
\tffffffff816ca027 inode_permission ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           fd001 __open64_nocancel (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           23a70 _start (/work/target/release/threads)
";

    #[test]
    fn perf_script_folds_into_phases_and_modes() {
        let phases = Phases(vec![
            ("spawn".into(), 5_113_000_000_000),
            ("join".into(), 5_113_500_000_000),
        ]);
        let p = fold(SCRIPT.as_bytes(), &phases).unwrap();
        assert_eq!(p.samples(), 4);
        let first = &p.stacks[0];
        assert_eq!(first.phase, "join");
        assert_eq!(first.comm, "V8_Worker");
        assert_eq!(
            first.frames,
            ["main", "[some:thing]", "[unknown]"],
            "root first; unknown symbols named after their file"
        );
        assert!(!first.kernel_mode());
        let exiting = p
            .stacks
            .iter()
            .find(|s| s.comm == "[exiting thread]")
            .unwrap();
        assert_eq!(exiting.frames, ["do_exit.isra.0_[k]"]);
        assert!(exiting.kernel_mode());
        let open = p.stacks.iter().find(|s| s.count == 2).unwrap();
        assert_eq!(open.phase, "spawn");
        assert_eq!(
            open.frames,
            [
                "_start",
                "__open64_nocancel",
                "entry_SYSCALL_64_after_hwframe_[k]",
                "inode_permission_[k]"
            ]
        );
        let again = Profile::from_folded(&p.to_folded()).unwrap();
        let mut sorted = p.stacks.clone();
        sorted.sort_by(|a, b| (&a.phase, &a.comm, &a.frames).cmp(&(&b.phase, &b.comm, &b.frames)));
        let mut back = again.stacks.clone();
        back.sort_by(|a, b| (&a.phase, &a.comm, &a.frames).cmp(&(&b.phase, &b.comm, &b.frames)));
        assert_eq!(back, sorted, "perf.folded reads back what was written");
        assert!(is_unresolved_frame("[unknown]") && is_unresolved_frame("[libc.so.6]_[k]"));
        assert!(!is_unresolved_frame("runtime.(*mheap).alloc"));
    }

    #[test]
    fn phases_cover_samples_before_the_first_mark() {
        let phases = Phases(vec![("startup".into(), 100), ("spawn".into(), 200)]);
        assert_eq!(phases.at(50), "startup");
        assert_eq!(phases.at(100), "startup");
        assert_eq!(phases.at(250), "spawn");
        assert_eq!(Phases(vec![]).at(5), "run");
        assert_eq!(parse_time_ns("5113.009397432"), Some(5_113_009_397_432));
        assert_eq!(parse_time_ns("12.5"), Some(12_500_000_000));
    }

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
        let cmd = Target::Command {
            argv: vec!["x".into()],
            tasks: None,
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
