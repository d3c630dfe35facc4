//! The middle of a run (run.rs holds its refusals, tuning and restoring around it): starts the
//! workload gated in its cgroup with perf, the probes and the runtime's tracer, follows its
//! processes, samples the machine, stops it for still readings, reaps it, and says what it saw.

use crate::follow::ServeLoad;
use crate::follow::{follow_events, progress_bar, tee_stderr, watch_command_stdout, Followed};
use crate::launch::{self, ChildSetup, Stdio};
use crate::leash::{self};
use crate::options::RunOptions;
use crate::probes::{self};
use crate::sampler::{settle, snapshot, Sampled, Sampler};
use crate::sentinels::SentinelWatch;
use crate::serve_setup::serve_connections;
use crate::{go_trace, perf, trace_cap};
use anyhow::{Context, Result};
use host::cgroup::RunCgroup;
use host::clock::monotonic_ns;
use host::limits::can_raise_hard_limits;
use host::signals::Interrupts;
use host::{limits, machine, procfs};
use record::tree;
use record::{
    self, AliveCount, Exit, MemoryRecord, PeakChoice, PeakMoment, ResultsDir, Rusage, Snapshot,
    Stage, StoppedBy, Target,
};
use runtime::Runtime;
use runtime::{TaskKind, WorkloadKind, RUNTIME_THREADS};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A command's base: the machine just before its release. The command does not exist yet: its
/// RSS, page tables and threads are zero (the gated child is still a copy of the conductor), and
/// what that copy holds alone is freed at its exec: counted free already (`freed_at_exec_kb`).
fn command_base(cgroup: Option<&RunCgroup>, gated: u32) -> Snapshot {
    let rollup = procfs::read_key_values(format!("/proc/{gated}/smaps_rollup")).unwrap_or_default();
    let status = procfs::read_key_values(format!("/proc/{gated}/status")).unwrap_or_default();
    let mut base = snapshot(None, cgroup, false);
    base.freed_at_exec_kb = (!rollup.is_empty()).then(|| Snapshot::freed_at_exec(&rollup, &status));
    base.status = [
        ("VmRSS".to_string(), 0),
        ("RssAnon".to_string(), 0),
        ("RssShmem".to_string(), 0),
        ("VmPTE".to_string(), 0),
        ("Threads".to_string(), 0),
    ]
    .into();
    base
}

/// A command's tasks alive at its peak snapshot: OS threads are counted there (all but the main
/// thread; of a tree of processes, all but each one's main thread and the launchers'); a
/// user-space runtime's tasks only the command knows (`--tasks`).
/// A command whose OS threads at the moment measured are fewer than `--tasks` over this runs
/// a user-space runtime's tasks (a tokio or Go program of a million tasks runs a handful), not a
/// thread per task: dividing its memory by its few threads would make each "task" megabytes.
const THREADS_PER_TASK_FLOOR: u64 = 10;

fn command_moment(
    at: &Snapshot,
    chosen: PeakChoice,
    kind: TaskKind,
    declared: Option<u64>,
    guess_kind: bool,
) -> PeakMoment {
    // The run's processes where it has several (a shell, `go run` above the program), their
    // launchers left out; else the process started, as always.
    let (threads, in_snapshot) = if at.counts_by_tree() {
        (
            Some(tree::task_threads(&at.tree)),
            AliveCount::ThreadsInTree {
                processes: at.tree.len() as u64,
                launchers: tree::launchers(&at.tree).len() as u64,
            },
        )
    } else {
        (
            at.status.get("Threads").map(|t| t.saturating_sub(1)),
            AliveCount::ThreadsInSnapshot { before: 1 },
        )
    };
    let (alive, counted) = match (kind, threads, declared) {
        (TaskKind::Thread, Some(t), Some(n))
            if guess_kind && t.saturating_mul(THREADS_PER_TASK_FLOOR) < n =>
        {
            (Some(n), AliveCount::AssumedTasks { os_threads: t })
        }
        (TaskKind::Thread, _, _) => (threads, in_snapshot),
        (TaskKind::Task, _, _) => (declared, AliveCount::Declared),
    };
    PeakMoment {
        chosen,
        alive,
        counted,
    }
}

/// The stages of a run, timed one after the other (`RunRecord::stages`).
pub(crate) struct StageClock {
    since: Instant,
    pub(crate) stages: Vec<Stage>,
}

impl StageClock {
    pub(crate) fn start() -> Self {
        StageClock {
            since: Instant::now(),
            stages: Vec::new(),
        }
    }

    /// Ends the stage that ran since the last one ended.
    pub(crate) fn end(&mut self, name: &str) {
        let now = Instant::now();
        self.stages.push(Stage {
            name: name.into(),
            ns: now.duration_since(self.since).as_nanos() as u64,
        });
        self.since = now;
    }
}

/// What `measure` brings back.
pub(crate) struct Measured {
    pub(crate) pid: Option<u32>,
    pub(crate) wall_ns: u64,
    pub(crate) released_t_ns: Option<u64>,
    pub(crate) reaped_t_ns: Option<u64>,
    pub(crate) exit: Option<Exit>,
    pub(crate) rusage: Option<Rusage>,
    pub(crate) memory: MemoryRecord,
    pub(crate) violations: Vec<String>,
    pub(crate) stopped_by: Option<StoppedBy>,
    pub(crate) open_files_limit: Option<u64>,
    /// The workload's Cpus_allowed_list just after its exec (read back for --cpu-count).
    pub(crate) cpus_seen: Option<String>,
    pub(crate) left_out: Vec<String>,
}

/// Starts the workload, follows it, reaps it. The caller restores the machine whatever happens.
/// `perf`: how to record samples, and the cgroup perf filters on (None: the workload's PID).
/// `pids_limit`: the cgroup's pids.max, which stops a command that reaches it (measure/leash.rs).
/// `probe_calibration`: each probe program's ns per run, measured before the run.
/// `cpus`: the CPUs to pin the workload to; `held_to`: the CPUs the run is held to however
/// (pinned, or its cpuset), over which the sentinels read CPU outside the run and steal.
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure(
    opts: &RunOptions,
    dir: &ResultsDir,
    binary: &Path,
    args: &[String],
    cgroup: Option<&RunCgroup>,
    interrupts: &Interrupts,
    root: bool,
    perf: Option<(&record::perf::PerfPlan, Option<String>)>,
    pids_limit: Option<u64>,
    cpus: Option<&[usize]>,
    held_to: Option<&[usize]>,
    probe_calibration: Option<&record::ProbeCalibration>,
    trace_cap: Option<&trace_cap::TraceCap>,
    clock: &mut StageClock,
) -> Result<Measured> {
    let workload = match &opts.target {
        Target::Workload(inv) => Some(inv.workload),
        Target::Command { .. } => None,
    };
    // A workload's memory is measured from its base, read at its start gate
    // (`MemoryRecord::base`); this is the machine before it. A
    // command's base is taken just before its release (`command_base`), once the probes' maps
    // and perf's buffers exist: they are the conductor's, not the command's.
    let mut memory = MemoryRecord {
        before: match workload {
            Some(_) => snapshot(None, cgroup, false),
            None => Snapshot::default(),
        },
        ..Default::default()
    };
    let (peak_when, task_kind, declared_tasks, task_lifetime_ns) = match &opts.target {
        Target::Command {
            peak_when,
            task_kind,
            tasks,
            task_lifetime_ns,
            ..
        } => (
            peak_when
                .as_deref()
                .map(regex::Regex::new)
                .transpose()
                .context("--peak-when")?,
            *task_kind,
            *tasks,
            *task_lifetime_ns,
        ),
        Target::Workload(_) => (None, TaskKind::Thread, None, None),
    };
    // A workload talks to the conductor; a command keeps the terminal, unless a sweep keeps its
    // output.
    let piped = workload.is_some() || opts.keep_command_output;
    let setup = ChildSetup {
        cgroup_procs: cgroup.map(RunCgroup::procs_files).unwrap_or_default(),
        unlimited_nproc: root,
        gated: true,
        stdin: match (workload, piped) {
            (Some(_), _) => Stdio::Pipe,
            (None, true) => Stdio::Null,
            (None, false) => Stdio::Inherit,
        },
        stdout: if piped || peak_when.is_some() {
            Stdio::Pipe
        } else {
            Stdio::Inherit
        },
        stderr: if piped { Stdio::Pipe } else { Stdio::Inherit },
        // --runtime-trace: a command's Go program is told where to write its trace (its whole
        // tree inherits it).
        env: match (&opts.target, opts.runtime_trace) {
            (Target::Command { .. }, true) => vec![go_trace::command_env(&dir.path)],
            _ => Vec::new(),
        },
    };
    let mut child = launch::spawn(binary, args, setup)?;
    let pid = child.pid;
    interrupts.watch(pid);
    // Set on the gated child before its exec: every thread it starts inherits them.
    let mut left_out = Vec::new();
    let mut open_files_limit = None;
    if let Some((connections, _)) = serve_connections(&opts.target) {
        let wanted = limits::nofile_for(connections);
        match limits::raise_open_files(pid, wanted, can_raise_hard_limits()) {
            Ok(got) => open_files_limit = Some(got),
            Err(err) => left_out.push(format!("RLIMIT_NOFILE of the server not raised: {err:#}")),
        }
    }
    if let Some(cpus) = cpus {
        if let Err(err) = limits::pin_to_cpus(pid, cpus) {
            // Dropped while gated, the child is killed; reaped only after, so that no later kill
            // can reach its PID once it is free.
            drop(child);
            let _ = launch::wait(pid);
            interrupts.unwatch(pid);
            return Err(err);
        }
    }
    let target_tasks = match &opts.target {
        Target::Workload(inv) => inv.workload.tasks(inv.n),
        Target::Command { tasks, .. } => tasks.unwrap_or(0),
    };
    // The probes attach while the child waits at its gate: they count from its exec on.
    // The collector sizes its per-thread tables by the OS threads it will see: one per task, or
    // a runtime's few (its maps are allocated after the "before" snapshot, so they would show
    // in the MemAvailable drop if sized by a million goroutines).
    let expected_threads = match &opts.target {
        Target::Workload(inv) if !inv.runtime.describe().kernel_task_each() => RUNTIME_THREADS,
        Target::Command {
            task_kind: TaskKind::Task,
            ..
        } => RUNTIME_THREADS,
        _ => target_tasks,
    };
    let collector = if let (true, Some(detail)) = (root, opts.probes) {
        // Each program's ns per run from the probes' calibration, when it ran these probes: the
        // kernel's run-time statistics then stay off in this run.
        let calibrated = probe_calibration.filter(|p| p.serves(detail.name(), opts.perfetto));
        let rates = calibrated.map(|p| p.rates.clone());
        // The ring holds the whole run's records (probes::trace_ring): made here, before the
        // base snapshot of a workload (its first phase) or of a command (just before release).
        let trace = opts.perfetto.then(|| {
            probes::trace_config(
                &dir.file(record::TRACE_EVENTS),
                calibrated.and_then(|p| p.trace.as_ref()),
                (target_tasks > 0).then_some(target_tasks),
                trace_cap,
            )
        });
        probes::start(
            pid,
            cgroup.and_then(RunCgroup::v2_id),
            expected_threads,
            detail,
            workload == Some(WorkloadKind::Serve),
            rates,
            trace,
            &mut left_out,
        )
    } else {
        if root {
            left_out.push("eBPF probes: left out (--no-probes)".into());
        }
        None
    };
    if opts.perfetto && collector.is_none() {
        left_out.push("--perfetto: no trace without the eBPF probes".into());
    }
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
    // What ran just before (the calibration runs, a previous run of a sweep) is still being
    // freed for a while (RCU callbacks, lazy teardown): MemAvailable would rise under the run and
    // hide megabytes of it, which matters where few tasks are alive at the moment measured.
    clock.end("setup");
    settle();
    clock.end("settle_before");
    let bar = progress_bar(target_tasks);
    bar.set_prefix("start");
    // The sentinels' first mark: just before the release, with the workload held at its gate.
    let mut sentinels = SentinelWatch::new(cgroup, pid, held_to.map(<[usize]>::to_vec));
    sentinels.mark("start");
    if workload.is_none() {
        memory.before = command_base(cgroup, pid);
    }
    let start = Instant::now();
    let released_t_ns = monotonic_ns();
    if let Err(err) = child.release() {
        let _ = launch::wait(pid);
        interrupts.unwatch(pid);
        return Err(err);
    }
    // What the kernel holds the workload to, read once it has exec'd (it joined its cgroup and
    // was pinned before): the CPUs every thread and child it starts inherits.
    let cpus_seen = procfs::cpus_allowed(pid);
    let watcher = leash::watch(
        pid,
        cgroup.cloned(),
        opts.timeout,
        pids_limit.filter(|_| workload.is_none()),
    );
    let sampler = Sampler::start(
        pid,
        cgroup.cloned(),
        workload.is_none(),
        task_lifetime_ns.map(|life| released_t_ns + life),
        bar.clone(),
        Some(sentinels.reader()),
    );
    let peak_when_given = peak_when.is_some();
    let command_stdout = peak_when.and_then(|pattern| {
        let from = child.stdout.take()?;
        Some(watch_command_stdout(
            from,
            dir.file(record::COMMAND_STDOUT),
            pattern,
            pid,
            cgroup.cloned(),
        ))
    });
    // A command's stdout kept by a sweep goes to command.stdout (and our stderr).
    let kept_stdout = match (workload, child.stdout.take()) {
        (None, Some(out)) => Some(tee_stderr(
            out,
            dir.file(record::COMMAND_STDOUT),
            bar.clone(),
        )),
        (_, out) => {
            child.stdout = out;
            None
        }
    };
    let stderr = child
        .stderr
        .take()
        .map(|e| tee_stderr(e, dir.file(record::STDERR), bar.clone()));
    let followed = match (child.stdout.take(), workload) {
        (Some(stdout), Some(kind)) => follow_events(
            stdout,
            child.stdin.take(),
            serve_load(opts, dir),
            &dir.file(record::EVENTS),
            pid,
            cgroup,
            collector.as_ref(),
            kind,
            matches!(&opts.target, Target::Workload(inv) if inv.runtime.describe().tasks_are_threads),
            &bar,
            Some(&mut sentinels),
        ),
        _ => Ok(Followed::default()),
    };
    let waited = launch::wait(pid);
    let reaped_t_ns = monotonic_ns();
    interrupts.unwatch(pid);
    if let (None, Some(cg)) = (workload, cgroup) {
        leash::wait_for_leftovers(cg, interrupts);
    }
    sentinels.mark_reaped(
        waited
            .as_ref()
            .ok()
            .map(|(_, ru)| (ru.user_us + ru.sys_us) * 1000),
    );
    let wall_ns = start.elapsed().as_nanos() as u64;
    let stopped_by = watcher.and_then(leash::Watcher::finish);
    if let Some(c) = collector {
        let report = c.finish();
        left_out.extend(
            report
                .trace
                .iter()
                .flat_map(|t| probes::trace_left_out(t, report.t0_ns)),
        );
        dir.write_json(record::COLLECTOR, &report)?;
    }
    if let Some(recorder) = recorder {
        if let Err(err) = recorder.stop() {
            left_out.push(format!("perf: {err:#}"));
        }
    }
    let Sampled {
        timeline,
        peak: sampled_peak,
        sentinel_ticks,
    } = sampler.finish();
    // Raw, before anything is analysed.
    dir.write_json(record::SENTINELS, &sentinels.finish(sentinel_ticks))?;
    for handle in stderr.into_iter().chain(kept_stdout) {
        let _ = handle.join();
    }
    let matched = command_stdout.and_then(|h| h.join().ok().flatten());
    bar.finish_and_clear();
    let followed = followed?;
    if let Some(load) = &followed.load {
        dir.write_json(record::LOAD, load)?;
        if let Some(why) = &load.failed {
            left_out.push(format!("load: {why}"));
        }
    }
    let (exit, rusage) = waited?;
    let machine = machine::fingerprint(&workload_toolchains(
        &opts.target,
        followed.runtime_version.as_deref(),
    ));
    dir.write_json(record::MACHINE, &machine)?;
    clock.end("workload");
    settle();
    memory.after = Some(snapshot(None, cgroup, false));
    clock.end("settle_after");
    memory.timeline = timeline;
    memory.base = followed.base;
    memory.phases = followed.phases;
    memory.stops = followed.stops;
    if let Some(why) = followed.stop_failed {
        left_out.push(format!(
            "stopping the workload for a still memory reading: {why}; memory is read on the run"
        ));
    }
    let peak = match workload {
        Some(_) => followed.peak,
        None => {
            if peak_when_given && matched.is_none() {
                left_out.push(
                    "--peak-when: no line of the command's stdout matched; memory is measured at the moment of most memory in use".into(),
                );
            }
            matched
                .map(|(snapshot, line)| (snapshot, PeakChoice::Matched { line }))
                .or(sampled_peak.map(|snapshot| (snapshot, PeakChoice::MostMemory)))
                .map(|(snapshot, chosen)| {
                    let moment = command_moment(
                        &snapshot,
                        chosen,
                        task_kind,
                        declared_tasks,
                        opts.guess_task_kind,
                    );
                    (snapshot, moment, Vec::new())
                })
        }
    };
    if let Some((snapshot, moment, neighbours)) = peak {
        memory.peak = Some(snapshot);
        memory.peak_moment = Some(moment);
        memory.peak_neighbours = neighbours;
    }
    Ok(Measured {
        pid: Some(pid),
        wall_ns,
        released_t_ns: Some(released_t_ns),
        reaped_t_ns: Some(reaped_t_ns),
        exit: Some(exit),
        rusage: Some(rusage),
        memory,
        violations: followed.violations,
        stopped_by,
        open_files_limit,
        cpus_seen,
        left_out,
    })
}

/// What records a runtime-traced run's runtime (`--runtime-trace`).
pub(crate) enum RuntimeTracer {
    /// goroutines: the workload's `flag` writes the Go execution trace (a command, no flag: told
    /// the file through its environment); `reducer` reduces it after.
    GoReduced {
        flag: Option<&'static str>,
        reducer: PathBuf,
    },
    /// tokio: the hooks build runs in the default binary's place, its `flag` writing the records.
    TokioHooks { flag: &'static str, hooks: PathBuf },
}

/// serve: the load to put on it once it listens (measure/loadgen.rs).
fn serve_load(opts: &RunOptions, dir: &ResultsDir) -> Option<ServeLoad> {
    let (connections, _) = serve_connections(&opts.target)?;
    Some(ServeLoad {
        plan: opts.load.plan(connections),
        script: dir.file(record::WRK_SCRIPT),
    })
}

/// Where the fingerprint reads the Go and Rust versions: the workload's own `start` event, and
/// the binaries a run of each runtime would start (read, not run).
pub(crate) fn workload_toolchains(
    target: &Target,
    runtime_version: Option<&str>,
) -> machine::Toolchains {
    let from_event = |prefix: &str| runtime_version.and_then(|v| toolchain_in(v, prefix));
    let binary = |r: Runtime| r.binary().ok().filter(|p| p.is_file());
    machine::Toolchains {
        go_from_event: from_event("go"),
        rust_from_event: from_event("rustc"),
        event_runtime: match target {
            Target::Workload(inv) if runtime_version.is_some() => Some(inv.runtime.name().into()),
            _ => None,
        },
        goroutines_bin: binary(Runtime::Goroutines),
        threads_bin: binary(Runtime::Threads),
    }
}

/// The toolchain a start event's `runtime_version` names: all of it ("go1.22.2", "rustc 1.87.0
/// (…)"), or, after a runtime's own version, in parentheses ("tokio 1.47.1 (rustc 1.87.0 (…))").
fn toolchain_in(runtime_version: &str, prefix: &str) -> Option<String> {
    if runtime_version.starts_with(prefix) {
        return Some(runtime_version.to_string());
    }
    let at = runtime_version.find(&format!("({prefix}"))?;
    let inner = &runtime_version[at + 1..];
    Some(inner.strip_suffix(')').unwrap_or(inner).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{PeakChoice, Snapshot};

    #[test]
    fn the_toolchain_is_read_from_every_runtime_version() {
        let rustc = "rustc 1.87.0 (17067e9ac 2025-05-09)";
        assert_eq!(toolchain_in(rustc, "rustc").as_deref(), Some(rustc));
        assert_eq!(
            toolchain_in(&format!("tokio 1.47.1 ({rustc})"), "rustc").as_deref(),
            Some(rustc)
        );
        assert_eq!(toolchain_in("go1.22.2", "go").as_deref(), Some("go1.22.2"));
        assert_eq!(toolchain_in("go1.22.2", "rustc"), None);
        assert_eq!(toolchain_in(&format!("tokio 1.47.1 ({rustc})"), "go"), None);
    }

    #[test]
    fn a_command_s_threads_are_counted_over_its_processes_less_the_launchers() {
        let process = |pid, ppid, threads| record::ProcessReading {
            pid,
            ppid,
            threads,
            ..Default::default()
        };
        let status = |threads| [("Threads".to_string(), threads)].into();
        // PROG alone: its threads less its main thread, from its status, as always.
        let alone = Snapshot {
            status: status(2_001),
            tree: vec![process(11, 1, 2_001)],
            ..Default::default()
        };
        let moment = |at: &Snapshot| {
            command_moment(
                at,
                PeakChoice::MostMemory,
                TaskKind::Thread,
                Some(2_000),
                true,
            )
        };
        let m = moment(&alone);
        assert_eq!(m.alive, Some(2_000));
        assert_eq!(m.counted, AliveCount::ThreadsInSnapshot { before: 1 });
        // sh -c 'PROG; true': the shell's one thread was all its status said.
        let wrapped = Snapshot {
            status: status(1),
            tree: vec![process(10, 1, 1), process(11, 10, 2_001)],
            ..Default::default()
        };
        let m = moment(&wrapped);
        assert_eq!(m.alive, Some(2_000), "{m:?}");
        assert_eq!(
            m.counted,
            AliveCount::ThreadsInTree {
                processes: 2,
                launchers: 1
            }
        );
    }
}
