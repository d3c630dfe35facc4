//! One run, start to finish: validate, calibrate and refuse what cannot fit (changing nothing),
//! raise sysctls, make the cgroup, start the workload gated, follow its events and snapshot the
//! machine at each phase and at the peak, reap it, put everything back, write the raw records,
//! then compute and print what one task cost.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, LineWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use spawnscope_collector::{Collector, Config as CollectorConfig};

use crate::cgroup::RunCgroup;
use crate::costs::Summary;
use crate::launch::{self, ChildSetup, Exit, Rusage, Stdio};
use crate::machine;
use crate::perf;
use crate::preflight::{self, Estimate};
use crate::procfs;
use crate::report;
use crate::results::{
    MemoryRecord, PhaseSample, ResultsDir, RunRecord, Snapshot, SysctlRecord, Target,
    TimelineSample,
};
use crate::signals::{self, Interrupts};
use crate::sysctl::{self, Owner, RaisedGuard, SysctlStore};
use crate::workload::{Contract, Event, Runtime, WorkloadKind};

pub struct RunOptions {
    pub target: Target,
    pub out_root: PathBuf,
    pub force: bool,
    pub memory_limit: Option<u64>,
    /// Run the eBPF collector (root only).
    pub probes: bool,
    /// Record perf samples (`--perf`).
    pub perf: Option<perf::Options>,
    /// A calibration already made under the same flags (compare calibrates once per runtime);
    /// None: this run calibrates.
    pub calibration: Option<preflight::Calibration>,
}

/// Why a run did not happen or did not finish, by exit code.
#[derive(Debug)]
pub enum RunError {
    /// Bad arguments: exit 2, nothing changed.
    Usage(String),
    /// Refused by the preflight: exit 3, nothing changed.
    Refused(String),
    /// Something failed: exit 1 (whatever was changed has been put back).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for RunError {
    fn from(err: anyhow::Error) -> Self {
        RunError::Failed(err)
    }
}

pub struct Outcome {
    pub dir: PathBuf,
    pub summary: Summary,
    pub interrupted_by: Option<i32>,
}

/// Puts back what a conductor that was SIGKILLed left behind: raised sysctls and its cgroup (and
/// the workload in it). Every invocation does this first.
pub fn recover_interrupted_runs() -> Result<()> {
    if !is_root() {
        return Ok(());
    }
    for entry in SysctlStore::system().recover_stale()? {
        eprintln!(
            "spawnscope: restored {}={} left raised by an interrupted run",
            entry.key, entry.original
        );
    }
    crate::perf::remove_stale_fifo_dirs();
    for dir in crate::cgroup::remove_stale() {
        eprintln!(
            "spawnscope: removed the cgroup of an interrupted run: {}",
            dir.display()
        );
    }
    Ok(())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Readings of the machine (and the process, when there is one) at one moment.
fn snapshot(pid: Option<u32>, cgroup: Option<&RunCgroup>, with_smaps: bool) -> Snapshot {
    let status = pid
        .and_then(|p| procfs::read_key_values(format!("/proc/{p}/status")).ok())
        .unwrap_or_default();
    let smaps_rollup = match (pid, with_smaps) {
        (Some(p), true) => {
            procfs::read_key_values(format!("/proc/{p}/smaps_rollup")).unwrap_or_default()
        }
        _ => Default::default(),
    };
    Snapshot {
        t_ns: monotonic_ns(),
        meminfo: procfs::meminfo().unwrap_or_default(),
        pcp_free_kb: procfs::pcp_free_kb(),
        tasks_on_host: procfs::tasks_on_host(),
        status,
        smaps_rollup,
        cpu: pid.and_then(procfs::process_cpu),
        cgroup: cgroup.map(RunCgroup::stats),
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn read_managed(store: &SysctlStore) -> BTreeMap<String, u64> {
    sysctl::MANAGED
        .iter()
        .filter_map(|k| Some((k.to_string(), store.read(k).ok()?)))
        .collect()
}

/// Resolves a command name the way a shell would.
fn resolve_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Samples memory every 100 ms while the workload runs; for a command (no events) it also keeps
/// the snapshot with the least MemAvailable as the peak.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(Vec<TimelineSample>, Option<Snapshot>)>,
}

impl Sampler {
    fn start(pid: u32, cgroup: Option<RunCgroup>, track_peak: bool, bar: ProgressBar) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut timeline = Vec::new();
            let mut peak: Option<Snapshot> = None;
            while !flag.load(Ordering::Relaxed) {
                let meminfo = procfs::meminfo().unwrap_or_default();
                let status =
                    procfs::read_key_values(format!("/proc/{pid}/status")).unwrap_or_default();
                let sample = TimelineSample {
                    t_ns: monotonic_ns(),
                    mem_available_kb: meminfo.get("MemAvailable").copied().unwrap_or(0),
                    rss_kb: status.get("VmRSS").copied().unwrap_or(0),
                    threads: status.get("Threads").copied().unwrap_or(0),
                    cgroup_bytes: cgroup.as_ref().and_then(RunCgroup::memory_current),
                };
                bar.set_message(format!(
                    "RSS {}",
                    crate::units::bytes(sample.rss_kb as f64 * 1024.0)
                ));
                if track_peak && !status.is_empty() {
                    let now = snapshot(Some(pid), cgroup.as_ref(), false);
                    if peak
                        .as_ref()
                        .is_none_or(|p| memory_in_use(&now) > memory_in_use(p))
                    {
                        peak = Some(now);
                    }
                }
                timeline.push(sample);
                std::thread::sleep(Duration::from_millis(100));
            }
            (timeline, peak)
        });
        Sampler { stop, handle }
    }

    fn finish(self) -> (Vec<TimelineSample>, Option<Snapshot>) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// How much memory the run holds, to find its peak: its cgroup's charge when it has one, else
/// how far free memory (MemAvailable and the per-CPU free lists, which MemAvailable leaves out)
/// is below MemTotal.
fn memory_in_use(s: &Snapshot) -> u64 {
    if let Some(charged) = s.cgroup.as_ref().and_then(|c| c.memory_current_bytes) {
        return charged;
    }
    let kb = |k: &str| s.meminfo.get(k).copied().unwrap_or(0);
    kb("MemTotal").saturating_sub(kb("MemAvailable") + s.pcp_free_kb.unwrap_or(0)) * 1024
}

/// Copies the workload's stderr to ours and to workload.stderr as it comes.
fn tee_stderr(mut from: File, path: PathBuf, bar: ProgressBar) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut file = File::create(path).ok();
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            bar.suspend(|| {
                let _ = std::io::stderr().write_all(&buf[..n]);
            });
            if let Some(f) = file.as_mut() {
                let _ = f.write_all(&buf[..n]);
            }
        }
    })
}

/// Waits until MemAvailable holds still: after a process exits, the kernel returns part of its
/// memory later (kernel stacks and page tables through RCU callbacks, which a lazy-RCU kernel
/// may hold for seconds). Still = three readings 200 ms apart within 1 MiB; at most ten seconds.
fn settle() {
    let available = || {
        procfs::meminfo()
            .ok()
            .and_then(|m| m.get("MemAvailable").copied())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = available();
    let mut still = 0;
    while still < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let now = available();
        still = if now.abs_diff(last) <= 1024 {
            still + 1
        } else {
            0
        };
        last = now;
    }
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // Quiet when stdout is not a terminal (CI, pipes): the summary is all that is printed there.
    if !std::io::stdout().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {human_pos}/{human_len} tasks ({per_sec}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// What the workload's stdout told us.
#[derive(Default)]
struct Followed {
    phases: Vec<PhaseSample>,
    peak: Option<Snapshot>,
    runtime_version: Option<String>,
    violations: Vec<String>,
}

/// Reads the workload's events as they come: raw line to workload.jsonl first, then acts.
#[allow(clippy::too_many_arguments)]
fn follow_events(
    stdout: File,
    stdin: Option<File>,
    raw: &Path,
    pid: u32,
    cgroup: Option<&RunCgroup>,
    collector: Option<&Collector>,
    workload: WorkloadKind,
    bar: &ProgressBar,
) -> Result<Followed> {
    let contract = Contract::new()?;
    let mut raw =
        LineWriter::new(File::create(raw).with_context(|| format!("creating {}", raw.display()))?);
    let mut stdin = stdin;
    let mut followed = Followed::default();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the workload's output")?;
        raw.write_all(line.as_bytes())?;
        raw.write_all(b"\n")?;
        match contract.parse(&line) {
            Ok(Event::Start(start)) => {
                followed.runtime_version = start["runtime_version"].as_str().map(str::to_string);
            }
            Ok(Event::Phase { name, t_ns }) => {
                if let Some(c) = collector {
                    c.set_phase(followed.phases.len() as u32, t_ns);
                }
                let at_peak = followed.peak.is_none()
                    && !matches!(workload, WorkloadKind::Hold | WorkloadKind::Churn)
                    && (name == "steady" || name == "join");
                let snap = snapshot(Some(pid), cgroup, at_peak);
                if at_peak {
                    followed.peak = Some(snap.clone());
                }
                bar.set_prefix(name.clone());
                followed.phases.push(PhaseSample {
                    name,
                    t_ns,
                    snapshot: snap,
                });
            }
            Ok(Event::Progress {
                spawned, target, ..
            }) => {
                bar.set_length(target);
                bar.set_position(spawned);
            }
            Ok(Event::Peak { alive, .. }) => {
                followed.peak = Some(snapshot(Some(pid), cgroup, true));
                bar.set_position(alive);
                // The snapshot is taken: release the tasks.
                if let Some(mut input) = stdin.take() {
                    let _ = input.write_all(b"\n");
                }
            }
            Ok(Event::Result(_)) => {}
            Err(violation) => {
                if followed.violations.len() < 20 {
                    followed.violations.push(format!("{violation}: {line}"));
                }
            }
        }
    }
    Ok(followed)
}

pub fn run(opts: RunOptions, interrupts: &Interrupts) -> Result<Outcome, RunError> {
    let root = is_root();
    let store = SysctlStore::system();
    let mut left_out: Vec<String> = Vec::new();

    // What to start, validated before anything changes.
    let (binary, args, params) = match &opts.target {
        Target::Workload(inv) => {
            let binary = inv
                .runtime
                .binary()
                .map_err(|e| RunError::Usage(e.to_string()))?;
            let params = inv.validate(&binary).map_err(RunError::Usage)?;
            (binary, inv.args(), Some(params))
        }
        Target::Command { argv, .. } => {
            let program = argv
                .first()
                .ok_or_else(|| RunError::Usage("no command after --".into()))?;
            let binary = resolve_program(program)
                .ok_or_else(|| RunError::Usage(format!("command not found: {program}")))?;
            (binary, argv[1..].to_vec(), None)
        }
    };
    let threads_needed = match &opts.target {
        Target::Workload(inv) if inv.runtime == Runtime::Threads => Some(inv.workload.tasks(inv.n)),
        Target::Command { tasks, .. } => *tasks,
        _ => None,
    };
    let tasks_on_host = procfs::tasks_on_host().unwrap_or(0);
    let needs = match threads_needed {
        Some(threads) => sysctl::needs_for_threads(threads, tasks_on_host)
            .map_err(|e| RunError::Usage(e.to_string()))?,
        None => Vec::new(),
    };
    let changes = store.plan(&needs).map_err(RunError::Failed)?;
    if opts.perf.is_some() {
        if !root {
            return Err(RunError::Usage(
                "--perf needs root (it samples the run's cgroup on every CPU, kernel stacks included)".into(),
            ));
        }
        if !perf::available() {
            return Err(RunError::Usage(
                "--perf needs perf: sudo apt-get install linux-perf (Debian) or linux-tools-$(uname -r) (Ubuntu)".into(),
            ));
        }
    }

    // Preflight: calibrate, estimate, refuse what cannot fit.
    let budget = match opts.memory_limit {
        Some(limit) => limit,
        None => preflight::default_budget()?,
    };
    let mut estimate: Option<Estimate> = None;
    if let (Target::Workload(inv), Some(params)) = (&opts.target, &params) {
        let calibration = match opts.calibration.clone() {
            Some(cal) => Ok(cal),
            None => {
                eprintln!(
                    "spawnscope: calibrating: two short hold runs of {} to estimate the memory of N",
                    inv.runtime.name()
                );
                preflight::calibrate(&binary, inv, interrupts)
            }
        };
        match calibration {
            Ok(cal) => {
                let est = preflight::estimate(inv, cal, params, budget);
                if !est.fits && !opts.force {
                    return Err(RunError::Refused(preflight::refusal(inv, &est)));
                }
                estimate = Some(est);
            }
            Err(err) if root || opts.force => {
                left_out.push(format!("memory preflight: calibration failed ({err:#}); the cgroup limit alone protects the host"));
            }
            Err(err) => return Err(RunError::Refused(format!("calibration failed and, without root, no cgroup limit would protect the host: {err:#} (--force runs anyway)"))),
        }
    } else {
        left_out.push("memory preflight: an arbitrary command cannot be calibrated; the cgroup limit protects the host".into());
    }
    if let Some(sig) = interrupts.received() {
        return Err(RunError::Refused(format!(
            "{} received before the run started; nothing was changed",
            signals::name(sig)
        )));
    }

    let perf_plan = opts.perf.as_ref().map(|o| {
        let rate = estimate.as_ref().map(|e| e.calibration.spawn_per_second);
        perf::plan(&opts.target, rate, o)
    });

    // From here on the machine changes: every path below puts it back.
    let started = chrono::Utc::now();
    let root_existed = opts.out_root.exists();
    let dir = ResultsDir::create(&opts.out_root, &opts.target, &started)?;
    let mut sysctl_record = SysctlRecord {
        before: read_managed(&store),
        changes: changes.clone(),
        ..Default::default()
    };
    let owner = Owner::this_run();
    let raised = if root {
        store.apply(&changes, &owner)?;
        Some(RaisedGuard::new(&store, owner))
    } else {
        if !changes.is_empty() {
            let list: Vec<String> = changes
                .iter()
                .map(|c| format!("{} {} (needs {})", c.key, c.from, c.to))
                .collect();
            left_out.push(format!(
                "sysctls not raised (not root): {}; spawning may stop early",
                list.join(", ")
            ));
        }
        None
    };
    dir.write_json(crate::results::SYSCTL, &sysctl_record)?;
    let mut cgroup = if root {
        match RunCgroup::create(Some(budget)) {
            Ok(c) => Some(c),
            Err(err) => {
                left_out.push(format!(
                    "no cgroup ({err:#}): no memory limit, no per-cgroup accounting"
                ));
                None
            }
        }
    } else {
        left_out.push("no cgroup (not root): no memory limit, no per-cgroup accounting".into());
        None
    };
    if !root {
        left_out.push("eBPF probes and perf need root".into());
    }
    // perf samples the run's cgroup (see perf.rs), else the workload's process.
    let perf_scope = perf_plan.as_ref().map(|_| match cgroup.as_mut() {
        Some(cg) => match cg.add_perf_event() {
            Ok(name) => Some(name),
            Err(err) => {
                left_out.push(format!(
                    "perf: no perf_event cgroup ({err:#}): recorded per process"
                ));
                None
            }
        },
        None => None,
    });
    let perf = perf_plan.as_ref().zip(perf_scope);

    let result = measure(
        &opts,
        &dir,
        &binary,
        &args,
        cgroup.as_ref(),
        interrupts,
        root,
        perf,
    );

    // Put the machine back before looking at any figure.
    let cgroup_final = cgroup.as_ref().map(RunCgroup::stats);
    if let Some(cg) = cgroup {
        if let Err(err) = cg.remove() {
            eprintln!("spawnscope: {err:#}");
        }
    }
    if let Some(guard) = raised {
        match guard.restore() {
            Ok(restored) => sysctl_record.restored = restored,
            Err(err) => sysctl_record.restore_error = Some(format!("{err:#}")),
        }
    }
    sysctl_record.after = read_managed(&store);
    dir.write_json(crate::results::SYSCTL, &sysctl_record)?;

    let mut measured = result?;
    measured.memory.cgroup_final = cgroup_final.clone();
    let oom_killed = cgroup_final.as_ref().is_some_and(|c| c.oom_kills > 0);
    let interrupted_by = interrupts.received();
    left_out.extend(measured.left_out);
    let record = RunRecord {
        schema: 1,
        target: opts.target.clone(),
        argv: std::env::args().collect(),
        started_utc: started.to_rfc3339(),
        root,
        pid: measured.pid,
        wall_ns: measured.wall_ns,
        released_t_ns: measured.released_t_ns,
        reaped_t_ns: measured.reaped_t_ns,
        exit: measured.exit,
        rusage: measured.rusage,
        interrupted_by: interrupted_by.map(|s| signals::name(s).to_string()),
        oom_killed,
        memory_limit_bytes: cgroup_final.as_ref().and_then(|c| c.memory_limit_bytes),
        estimate,
        contract_violations: measured.violations,
        left_out,
    };
    dir.write_json(crate::results::MEMORY, &measured.memory)?;
    dir.write_json(crate::results::RUN, &record)?;
    if !dir.file(crate::results::MACHINE).exists() {
        dir.write_json(crate::results::MACHINE, &machine::fingerprint(None, None))?;
    }
    if let Some(err) = sysctl_record.restore_error {
        return Err(RunError::Failed(anyhow!(
            "sysctls could not be restored: {err} — run `spawnscope sysctl restore`"
        )));
    }

    // Figures, from the raw records just written.
    let (summary, _) = report::render(&dir.path)?;
    crate::results::give_to_invoking_user(&dir.path);
    if !root_existed {
        crate::results::give_to_invoking_user(&opts.out_root);
    }
    Ok(Outcome {
        dir: dir.path,
        summary,
        interrupted_by,
    })
}

/// What `measure` brings back.
struct Measured {
    pid: Option<u32>,
    wall_ns: u64,
    released_t_ns: Option<u64>,
    reaped_t_ns: Option<u64>,
    exit: Option<Exit>,
    rusage: Option<Rusage>,
    memory: MemoryRecord,
    violations: Vec<String>,
    left_out: Vec<String>,
}

/// Starts the workload, follows it, reaps it. The caller restores the machine whatever happens.
/// `perf`: how to record samples, and the cgroup perf filters on (None: the workload's PID).
#[allow(clippy::too_many_arguments)]
fn measure(
    opts: &RunOptions,
    dir: &ResultsDir,
    binary: &Path,
    args: &[String],
    cgroup: Option<&RunCgroup>,
    interrupts: &Interrupts,
    root: bool,
    perf: Option<(&perf::Plan, Option<String>)>,
) -> Result<Measured> {
    let workload = match &opts.target {
        Target::Workload(inv) => Some(inv.workload),
        Target::Command { .. } => None,
    };
    let mut memory = MemoryRecord {
        before: snapshot(None, cgroup, false),
        ..Default::default()
    };
    if workload.is_none() {
        // The command did not exist yet: its RSS and page tables were zero.
        memory.before.status = [
            ("VmRSS".to_string(), 0),
            ("VmPTE".to_string(), 0),
            ("Threads".to_string(), 0),
        ]
        .into();
    }
    let setup = ChildSetup {
        cgroup_procs: cgroup.map(RunCgroup::procs_files).unwrap_or_default(),
        unlimited_nproc: root,
        gated: true,
        // A workload talks to the conductor; a command keeps the terminal.
        stdin: if workload.is_some() {
            Stdio::Pipe
        } else {
            Stdio::Inherit
        },
        stdout: if workload.is_some() {
            Stdio::Pipe
        } else {
            Stdio::Inherit
        },
        stderr: if workload.is_some() {
            Stdio::Pipe
        } else {
            Stdio::Inherit
        },
    };
    let mut child = launch::spawn(binary, args, setup)?;
    let pid = child.pid;
    interrupts.watch(pid);
    let target_tasks = match &opts.target {
        Target::Workload(inv) => inv.workload.tasks(inv.n),
        Target::Command { tasks, .. } => tasks.unwrap_or(0),
    };
    // The probes attach while the child waits at its gate: they count from its exec on.
    let mut left_out = Vec::new();
    let collector = if root && opts.probes {
        start_collector(pid, target_tasks, &mut left_out)
    } else {
        if root {
            left_out.push("eBPF probes: left out (--no-probes)".into());
        }
        None
    };
    // perf starts while the workload waits at its gate, so its first instruction is sampled.
    // Dropping the recorder on any path below stops perf.
    let recorder = perf.and_then(|(plan, cgroup_name)| {
        let scope = cgroup_name.map_or(perf::Scope::Pid(pid), perf::Scope::Cgroup);
        eprintln!(
            "spawnscope: perf: cpu-clock at {} Hz ({}), call graph {}, {}",
            plan.freq_hz,
            plan.why,
            plan.call_graph.arg(),
            match &scope {
                perf::Scope::Cgroup(c) => format!("cgroup {c}"),
                perf::Scope::Pid(p) => format!("process {p}"),
            }
        );
        match perf::Recorder::start(plan, &scope, &dir.path) {
            Ok(r) => Some(r),
            Err(err) => {
                left_out.push(format!("perf: {err:#}"));
                None
            }
        }
    });
    let bar = progress_bar(target_tasks);
    bar.set_prefix("start");
    let start = Instant::now();
    let released_t_ns = monotonic_ns();
    if let Err(err) = child.release() {
        let _ = launch::wait(pid);
        interrupts.unwatch(pid);
        return Err(err);
    }
    let sampler = Sampler::start(pid, cgroup.cloned(), workload.is_none(), bar.clone());
    let stderr = child
        .stderr
        .take()
        .map(|e| tee_stderr(e, dir.file(crate::results::STDERR), bar.clone()));
    let followed = match (child.stdout.take(), workload) {
        (Some(stdout), Some(kind)) => follow_events(
            stdout,
            child.stdin.take(),
            &dir.file(crate::results::EVENTS),
            pid,
            cgroup,
            collector.as_ref(),
            kind,
            &bar,
        ),
        _ => Ok(Followed::default()),
    };
    let waited = launch::wait(pid);
    let wall_ns = start.elapsed().as_nanos() as u64;
    let reaped_t_ns = monotonic_ns();
    interrupts.unwatch(pid);
    if let Some(c) = collector {
        dir.write_json(crate::results::COLLECTOR, &c.finish())?;
    }
    if let Some(recorder) = recorder {
        if let Err(err) = recorder.stop() {
            left_out.push(format!("perf: {err:#}"));
        }
    }
    let (timeline, sampled_peak) = sampler.finish();
    if let Some(handle) = stderr {
        let _ = handle.join();
    }
    bar.finish_and_clear();
    let followed = followed?;
    let (exit, rusage) = waited?;
    let machine = machine::fingerprint(
        followed
            .runtime_version
            .clone()
            .filter(|v| v.starts_with("go")),
        followed
            .runtime_version
            .clone()
            .filter(|v| v.starts_with("rustc")),
    );
    dir.write_json(crate::results::MACHINE, &machine)?;
    settle();
    memory.after = Some(snapshot(None, cgroup, false));
    memory.timeline = timeline;
    memory.phases = followed.phases;
    memory.peak = followed.peak.or(sampled_peak);
    Ok(Measured {
        pid: Some(pid),
        wall_ns,
        released_t_ns: Some(released_t_ns),
        reaped_t_ns: Some(reaped_t_ns),
        exit: Some(exit),
        rusage: Some(rusage),
        memory,
        violations: followed.violations,
        left_out,
    })
}

/// Loads the eBPF collector for the workload's PID. What cannot be loaded is said, not fatal.
fn start_collector(pid: u32, tasks: u64, left_out: &mut Vec<String>) -> Option<Collector> {
    if crate::check::tracefs_events().is_none() {
        // libbpf finds tracepoints through tracefs.
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    match Collector::start(&CollectorConfig::new(pid, tasks.max(1))) {
        Ok(collector) => {
            for missing in collector.missing() {
                left_out.push(format!(
                    "probe {} not loaded: {}",
                    missing.probe, missing.reason
                ));
            }
            Some(collector)
        }
        Err(err) => {
            left_out.push(format!("eBPF probes: {err}"));
            None
        }
    }
}
