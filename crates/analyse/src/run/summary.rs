//! What one task costs, computed from a run's raw records only (so `report` can recompute it):
//! time from the kernel's rusage, memory as RSS plus the kernel memory RSS leaves out — kernel
//! stacks, page tables, slab — checked against how much MemAvailable fell.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use spawnscope_collector::Report as CollectorReport;

use crate::memory::per_task::{memory_per_task_over, memory_per_task_still, MemoryPerTask};
use crate::memory::processes::{processes, Processes};
use crate::probes::counts::{probe_summary, ProbeSummary};
use crate::probes::counts_verdict::{self, CountsVerdict};
use crate::probes::waits::{waits, Waits};
use crate::run::phases::{phase_costs, phase_names, stopped_ns_between, PhaseCost};
use crate::time::attribution::Attribution;
use crate::time::sentinels::SentinelFigures;
use crate::time::verdict::Verdict;
use record::{
    MemoryRecord, PeakChoice, PeakMoment, RunRecord, Snapshot, Stage, StopAt, StoppedBy,
    SysctlRecord, Target, WorkloadStop,
};
use runtime::command::COMMAND_WORKLOAD;
use runtime::result_event;

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimePerTask {
    pub spawn_us: Option<f64>,
    pub user_us: f64,
    pub sys_us: f64,
    pub minor_faults: f64,
    pub voluntary_switches: f64,
    pub involuntary_switches: f64,
}

/// Everything a person reads about one run, derived from its raw records.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub label: String,
    pub runtime: Option<String>,
    pub workload: Option<String>,
    pub n: Option<u64>,
    pub outcome: String,
    pub ok: bool,
    pub spawned: Option<u64>,
    /// Tasks alive when the peak snapshot was taken: memory is divided by this.
    pub alive_at_peak: Option<u64>,
    /// Why the peak snapshot is that moment and how its tasks alive were counted (runs recorded
    /// since it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_moment: Option<PeakMoment>,
    /// Where the workload was stopped for a reading of its memory: wall times, the spawn time
    /// per task and throughput leave those spans out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stops: Vec<WorkloadStop>,
    /// Where the base, read at the workload's start gate, held tasks of the run already, why in
    /// words: the workload marked its first phase before the gate opened, or had more threads
    /// than its runtime's own (`Descriptor::threads_at_gate`). The parts (RSS, kernel memory, the
    /// cgroup's charge) then miss what those tasks held at the base while the MemAvailable drop
    /// counts it. Absent where the base held none, and for runs recorded before the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_held_tasks: Option<String>,
    /// Tasks time and counts are divided by (spawned, or --tasks for a command).
    pub tasks: Option<u64>,
    /// Wall time from release to reap, less the stops for memory readings.
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_percent: f64,
    pub maxrss_kb: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub exit: String,
    pub memory_per_task: Option<MemoryPerTask>,
    pub time_per_task: Option<TimePerTask>,
    pub phases: Vec<PhaseCost>,
    pub throughput: Option<Value>,
    pub probes: Option<ProbeSummary>,
    pub sysctls_changed: Vec<String>,
    pub sysctls_restored: bool,
    pub cgroup: Option<String>,
    /// A run held to K CPUs (`--cpu-count`): which, how, whether the workload was held to them,
    /// and the parallelism its runtime took. Absent for a run not confined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<CpusHeld>,
    pub left_out: Vec<String>,
    /// Where the CPU time went, from perf samples (runs recorded with --perf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
    /// Whether the time figures can be trusted (runs recorded with the noise sentinels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Whether the probes' counts agree with the kernel's own accounting (their cross-checks):
    /// checked, wrong (a cross-check failed) or not checked and why. Beside the time verdict,
    /// never part of it. Absent in summaries written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts_verdict: Option<CountsVerdict>,
    /// What else the machine did per phase (runs recorded with sentinels.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinels: Option<SentinelFigures>,
    /// OS threads only: how many gave their stack back themselves as they returned (glibc's
    /// madvise in the thread's own exit path, counted by the collector after release) before
    /// the process exited and took the rest: a race, and the system time after release follows
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks_freed_by_threads: Option<u64>,
    /// Where the conductor's own wall time went (run.json's stages), for runs that kept them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// Where the system time goes, exactly: the kernel's waits (runs whose collector counted
    /// them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<Waits>,
    /// serve: the load, what one connection and one request cost, what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<crate::serving::ServeFigures>,
    /// The run's processes at the moment memory was measured (runs that read them): PID,
    /// command, threads, CPU, RSS, PSS, USS and kernel parts each, launchers marked, the tree
    /// summed by PSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Processes>,
    /// What the kernel matrix found to differ on the run's kernel (analyse::kernel_gaps), one
    /// line each, as `check` says them; none on a kernel where it found none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_gaps: Vec<String>,
    /// `--perfetto`: what the scheduler trace's raw records say — wake-to-run and
    /// preempted-to-run per phase, the run's threads, switches and waits (analyse::sched_trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_trace: Option<crate::traces::sched_figures::SchedFigures>,
    /// `--perfetto`: the swimlane drawn in swimlane.svg and report.html — which threads have a
    /// lane and why, each lane's time running, runnable and blocked, who held each CPU
    /// (analyse::swimlane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swimlane: Option<crate::traces::swimlane::SwimlaneFigures>,
    /// goroutines: the Go GC's cycles and CPU as the runtime estimates them, at the workload's
    /// getrusage call and per phase (analyse::go_gc). Absent for other runtimes and for runs
    /// recorded before the workload reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_gc: Option<crate::runtimes::go_gc::GoGc>,
    /// `--runtime-trace` (goroutines): the Go runtime's own scheduler from its execution trace —
    /// its counts, readied→running per phase, goroutines created against the workload's count
    /// (analyse::go_sched). Such a run is runtime-traced: its memory and time figures carry the
    /// tracer's cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_trace: Option<crate::runtimes::go_sched::GoSchedFigures>,
    /// `--runtime-trace` (goroutines): the Go runtime's Ps and Ms — which M held which P, Ps
    /// idle, handed off and stolen (analyse::go_procs); absent for runs reduced before the Ps
    /// were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_procs: Option<crate::runtimes::go_procs::GoProcsFigures>,
    /// `--runtime-trace` (tokio): tokio's own scheduler from its task hooks (the workload's
    /// hooks build) — spawns, polls, scheduled→polled per phase, spawns against the workload's
    /// count, workers' parks and steals (analyse::tokio_sched). Such a run is runtime-traced: its
    /// memory and time figures carry the hooks' cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokio_trace: Option<crate::runtimes::tokio_sched::TokioSchedFigures>,
}

/// Which way a threads run's threads ended, from the madvise calls after release: each thread
/// that returns before the process exits frees its own stack (glibc's madvise, with a TLB
/// shootdown on every other CPU the process ran on); the rest end with the process. Which way is
/// a race with the process's exit: the workload's own behaviour, and the system time after
/// release follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitPath {
    /// 90 % or more of the threads freed their own stacks.
    ThreadsFreedStacks,
    /// 10 % or fewer did: the process's exit took the rest.
    EndedWithProcess,
    Raced,
}

impl ExitPath {
    /// The path of a run whose collector counted the madvise calls, with (calls, threads).
    pub fn of(s: &Summary) -> Option<(ExitPath, u64, u64)> {
        let freed = s.stacks_freed_by_threads?;
        let tasks = s.spawned.or(s.tasks).filter(|&t| t > 0)?;
        let share = freed as f64 / tasks as f64;
        let path = if share >= 0.9 {
            ExitPath::ThreadsFreedStacks
        } else if share <= 0.1 {
            ExitPath::EndedWithProcess
        } else {
            ExitPath::Raced
        };
        Some((path, freed, tasks))
    }

    pub fn words(self) -> &'static str {
        match self {
            ExitPath::ThreadsFreedStacks => {
                "nearly every thread returned before the process exited and freed its own stack"
            }
            ExitPath::EndedWithProcess => {
                "most threads ended with the process, their stacks unmapped with it"
            }
            ExitPath::Raced => "threads and the process's exit raced",
        }
    }
}

/// The workload's phases in its result event: (name, start, end), CLOCK_MONOTONIC.
fn result_phases(result: &Value) -> Vec<(&str, u64, u64)> {
    result["phases"]
        .as_array()
        .map(|phases| {
            phases
                .iter()
                .filter_map(|p| {
                    Some((
                        p["name"].as_str()?,
                        p["start_ns"].as_u64()?,
                        p["end_ns"].as_u64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The workload's spawn time per task (its spawn or churn phase over the tasks spawned), less a
/// stop for a memory reading inside that phase.
fn spawn_ns_per_task(result: &Value, stops: &[WorkloadStop]) -> Option<f64> {
    let per_task = result["spawn_ns_per_task"].as_f64()?;
    let spawned = result["spawned"].as_u64().filter(|&n| n > 0)?;
    let stopped: u64 = result_phases(result)
        .iter()
        .filter(|(name, ..)| matches!(*name, "spawn" | "churn"))
        .map(|&(_, from, to)| stopped_ns_between(stops, from, to))
        .sum();
    Some(per_task - stopped as f64 / spawned as f64)
}

/// The workload's throughput (count per second over one of its phases), less a stop inside that
/// phase: the phase is the one whose span the figure was computed over.
fn throughput(result: &Value, stops: &[WorkloadStop]) -> Option<Value> {
    let mut figure = result["throughput"].clone();
    if figure.is_null() {
        return None;
    }
    let (Some(count), Some(value)) = (figure["count"].as_f64(), figure["value"].as_f64()) else {
        return Some(figure);
    };
    if value > 0.0 {
        let span = count * 1e9 / value;
        let phase = result_phases(result)
            .into_iter()
            .find(|&(_, from, to)| (to.saturating_sub(from) as f64 - span).abs() < 1_000.0);
        if let Some((_, from, to)) = phase {
            let stopped = stopped_ns_between(stops, from, to);
            if stopped > 0 {
                figure["value"] =
                    (count * 1e9 / to.saturating_sub(from + stopped).max(1) as f64).into();
            }
        }
    }
    Some(figure)
}

/// The leash a run had, for the cgroup line: ", pids.max 164 (…), highest 12, --timeout 2s".
fn leash_terms(run: &RunRecord, pids_peak: Option<u64>) -> String {
    let mut terms = String::new();
    if let Some(limit) = &run.pids_limit {
        terms += &format!(", pids.max {} ({})", units::count(limit.max), limit.basis);
        if let Some(peak) = pids_peak {
            terms += &format!(", most PIDs in use {}", units::count(peak));
        }
    }
    if let Some(timeout) = run.timeout_ns {
        terms += &format!(", --timeout {}", duration(timeout));
    }
    terms
}

/// A `--timeout` as it was given: "2s", "1h 30m".
fn duration(ns: u64) -> String {
    humantime::format_duration(std::time::Duration::from_nanos(ns)).to_string()
}

/// The outcome of a run the leash (measure/leash.rs) ended.
fn leash_outcome(stopped_by: &StoppedBy) -> String {
    match stopped_by {
        StoppedBy::Timeout {
            timeout_ns,
            whole_cgroup: true,
        } => format!(
            "stopped by --timeout {}: the run's cgroup (the command and all it started) was killed, the machine restored",
            duration(*timeout_ns)
        ),
        StoppedBy::Timeout { timeout_ns, .. } => format!(
            "stopped by --timeout {}: the command was killed (without a cgroup, what it started was not tracked), the machine restored",
            duration(*timeout_ns)
        ),
        StoppedBy::PidsMax { limit, refused } => format!(
            "stopped at pids.max ({} tasks): the command tried to start more ({} refused), so its cgroup was killed; the host was not affected",
            units::count(*limit),
            units::count(*refused)
        ),
    }
}

/// A collector metric summed over the phases after release (`join` and `exit`): `names` are the
/// run's phases as `phase_names` gives them, `startup` first (the collector's
/// `before_first_phase`), then one per entry of its `per_phase`.
fn calls_after_release(c: &CollectorReport, names: &[String], metric: &str) -> Option<u64> {
    let m = c.metrics.iter().find(|m| m.name == metric)?;
    let after: Vec<u64> = names
        .iter()
        .skip(1)
        .zip(&m.per_phase)
        .filter(|(name, _)| matches!(name.as_str(), "join" | "exit"))
        .map(|(_, v)| *v)
        .collect();
    (!after.is_empty()).then(|| after.iter().sum())
}

/// Whether the base read at the start gate held tasks of the run already (see
/// `Summary::base_held_tasks`), in words; None where it held none or the run has no such base.
fn base_held_tasks(run: &RunRecord, memory: &MemoryRecord) -> Option<String> {
    let base = memory.base.as_ref()?;
    let opened = memory
        .stops
        .iter()
        .find(|st| st.at == StopAt::StartGate)
        .map(|st| st.to_t_ns);
    if let (Some(opened), Some(first)) = (opened, memory.phases.first()) {
        if first.t_ns < opened {
            return Some(format!(
                "the workload marked its first phase ({}) {:.1} ms before its start gate opened: it did not wait at it",
                first.name,
                (opened - first.t_ns) as f64 / 1e6
            ));
        }
    }
    let Target::Workload(inv) = &run.target else {
        return None;
    };
    let own = inv.runtime.describe().threads_at_gate?;
    let threads = if base.tree.is_empty() {
        *base.status.get("Threads")?
    } else {
        base.tree.iter().map(|p| p.threads).sum()
    };
    (threads > own).then(|| {
        format!(
            "{threads} threads at the base, where the {} workload has {own} before its first task: {} had started",
            inv.runtime.name(),
            threads - own
        )
    })
}

/// A run held to K CPUs, as its summary says it.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpusHeld {
    /// K.
    pub count: u32,
    /// The CPUs, as taskset writes them.
    pub cpus: String,
    /// "cpuset v1", "cpuset v2" or "affinity" (run.json's `cpu_count.how`).
    pub how: String,
    /// The workload's CPUs read back just after its exec (None: not read).
    pub seen: Option<String>,
    /// Whether what was read back is exactly the K CPUs.
    pub held: bool,
    /// What the runtime took from them, from its result event: "GOMAXPROCS 2", "2 tokio
    /// workers" (None: a runtime with no such setting, e.g. OS threads).
    pub runtime_parallelism: Option<String>,
}

impl CpusHeld {
    fn of(c: &record::CpuConfinement, result: Option<&Value>) -> Self {
        let same = |a: &str, b: &str| {
            let parse = |t: &str| units::cpu_list::parse(t).ok();
            parse(a).is_some() && parse(a) == parse(b)
        };
        let stats = result.map(|r| &r["runtime_stats"]);
        let runtime_parallelism = stats.and_then(|st| {
            if let Some(g) = st["gomaxprocs"].as_u64() {
                Some(format!("GOMAXPROCS {g}"))
            } else {
                st["workers"]
                    .as_u64()
                    .map(|w| format!("{w} tokio worker{}", if w == 1 { "" } else { "s" }))
            }
        });
        CpusHeld {
            count: c.count,
            cpus: c.cpus.clone(),
            how: c.how.clone(),
            seen: c.seen.clone(),
            held: c.seen.as_deref().is_some_and(|seen| same(seen, &c.cpus)),
            runtime_parallelism,
        }
    }

    /// "held to 1 CPU (0, cpuset v1; GOMAXPROCS 1)", or what went wrong.
    pub fn line(&self) -> String {
        let plural = if self.count == 1 { "" } else { "s" };
        let runtime = self
            .runtime_parallelism
            .as_ref()
            .map(|p| format!("; {p}"))
            .unwrap_or_default();
        if self.held {
            format!(
                "held to {} CPU{plural} ({}, {}{runtime})",
                self.count, self.cpus, self.how
            )
        } else {
            format!(
                "NOT held to its {} CPU{plural} ({}, {}): the workload was given {}{runtime}",
                self.count,
                self.cpus,
                self.how,
                self.seen.as_deref().unwrap_or("CPUs not read back")
            )
        }
    }
}

/// " on 2 CPUs": a run held to K CPUs is its own experiment (labels group repeats).
pub fn cpus_suffix(count: u32) -> String {
    format!(" on {count} CPU{}", if count == 1 { "" } else { "s" })
}

pub fn summarize(
    run: &RunRecord,
    memory: &MemoryRecord,
    sysctl: &SysctlRecord,
    events: &[Value],
    collector: Option<&CollectorReport>,
) -> Summary {
    let result = result_event(events);
    let mut s = Summary {
        label: run.target.label(),
        left_out: run.left_out.clone(),
        stages: run.stages.clone(),
        ..Summary::default()
    };
    match &run.target {
        Target::Workload(inv) => {
            s.runtime = Some(inv.runtime.name().into());
            s.workload = Some(inv.workload.name().into());
            s.n = Some(inv.n);
        }
        // A command swept by compare: its label stands for its runtime, its --tasks for N.
        Target::Command {
            label: Some(label),
            tasks,
            ..
        } => {
            s.runtime = Some(label.clone());
            s.workload = Some(COMMAND_WORKLOAD.into());
            s.n = *tasks;
        }
        Target::Command { .. } => {}
    }
    if let Some(c) = &run.cpu_count {
        s.label.push_str(&cpus_suffix(c.count));
        s.cpu_count = Some(CpusHeld::of(c, result));
    }
    s.spawned = result.and_then(|r| r["spawned"].as_u64());
    s.alive_at_peak = match (&memory.peak_moment, &run.target) {
        (Some(moment), _) => moment.alive,
        // Runs recorded before the peak moment: the workload's count, or --tasks.
        (None, Target::Workload(_)) => result.and_then(|r| r["alive_at_peak"].as_u64()),
        (None, Target::Command { tasks, .. }) => *tasks,
    };
    s.peak_moment = memory.peak_moment.clone();
    s.tasks = match &run.target {
        Target::Workload(_) => s.spawned,
        Target::Command { tasks, .. } => *tasks,
    };
    s.stops = memory.stops.clone();
    let stopped = match (run.released_t_ns, run.reaped_t_ns) {
        (Some(from), Some(to)) => stopped_ns_between(&memory.stops, from, to),
        _ => memory.stops.iter().map(WorkloadStop::span_ns).sum(),
    };
    s.wall_s = run.wall_ns.saturating_sub(stopped) as f64 / 1e9;
    if let Some(ru) = &run.rusage {
        s.user_s = ru.user_us as f64 / 1e6;
        s.sys_s = ru.sys_us as f64 / 1e6;
        s.cpu_percent = if s.wall_s > 0.0 {
            (s.user_s + s.sys_s) / s.wall_s * 100.0
        } else {
            0.0
        };
        s.maxrss_kb = ru.maxrss_kb;
        s.minor_faults = ru.minflt;
        s.major_faults = ru.majflt;
        s.voluntary_switches = ru.nvcsw;
        s.involuntary_switches = ru.nivcsw;
        if let Some(tasks) = s.tasks.filter(|&t| t > 0) {
            let per = |v: u64| v as f64 / tasks as f64;
            s.time_per_task = Some(TimePerTask {
                spawn_us: result
                    .and_then(|r| spawn_ns_per_task(r, &memory.stops))
                    .map(|ns| ns / 1000.0),
                user_us: per(ru.user_us),
                sys_us: per(ru.sys_us),
                minor_faults: per(ru.minflt),
                voluntary_switches: per(ru.nvcsw),
                involuntary_switches: per(ru.nivcsw),
            });
        }
    }
    s.exit = run.exit.map_or("not started".into(), |e| e.describe());
    let failure = result.map(|r| &r["failure"]).filter(|f| !f.is_null());
    let ended = (
        &run.stopped_by,
        &run.interrupted_by,
        run.oom_killed,
        failure,
        run.exit,
    );
    (s.outcome, s.ok) = match ended {
        (Some(stopped), ..) => (leash_outcome(stopped), false),
        (_, Some(sig), _, _, _) => (
            format!("interrupted by {sig}: the run was stopped, the machine restored"),
            false,
        ),
        (_, _, true, _, _) => (
            format!(
                "OOM-killed inside its cgroup (memory limit {}); the host was not affected",
                run.memory_limit_bytes
                    .map_or("?".into(), |b| units::bytes(b as f64))
            ),
            false,
        ),
        (_, _, _, Some(f), _) => (
            format!(
                "spawning stopped at {}: {} ({})",
                f["limit"].as_str().unwrap_or("?"),
                f["message"].as_str().unwrap_or(""),
                f["detail"].as_str().unwrap_or("")
            ),
            false,
        ),
        (_, _, _, _, Some(exit)) if exit.success() => ("completed".into(), true),
        (_, _, _, _, Some(exit)) => (format!("the workload failed: {}", exit.describe()), false),
        _ => ("the workload did not start".into(), false),
    };
    // The base: at the start gate; in runs recorded before it, the first phase's snapshot.
    let base = memory
        .base
        .as_ref()
        .or(memory.phases.first().map(|p| &p.snapshot))
        .unwrap_or(&memory.before);
    s.base_held_tasks = base_held_tasks(run, memory);
    // Both readings still: the base read at the start gate (or stopped at the first phase), the
    // peak the stopped one.
    let still = matches!(
        memory.peak_moment.as_ref().map(|m| &m.chosen),
        Some(PeakChoice::Stopped { .. })
    ) && memory
        .stops
        .iter()
        .any(|st| matches!(st.at, StopAt::StartGate | StopAt::FirstPhase));
    s.memory_per_task = memory.peak.as_ref().and_then(|peak| {
        if still {
            return memory_per_task_still(base, peak, s.alive_at_peak.unwrap_or(0));
        }
        let moments: Vec<(&Snapshot, u64)> = std::iter::once((peak, s.alive_at_peak.unwrap_or(0)))
            .chain(
                memory
                    .peak_neighbours
                    .iter()
                    .map(|n| (&n.snapshot, n.alive)),
            )
            .collect();
        memory_per_task_over(base, &moments)
    });
    s.processes = memory.peak.as_ref().and_then(processes);
    s.phases = phase_costs(run, memory);
    s.probes = collector.map(|c| probe_summary(c, memory, run, result, s.tasks));
    s.counts_verdict = Some(counts_verdict::judge(s.probes.as_ref(), &run.left_out));
    let names = phase_names(memory);
    s.waits = collector.and_then(|c| waits(c, &names, s.sys_s, s.tasks));
    if s.runtime.as_deref() == Some("threads") {
        s.stacks_freed_by_threads =
            collector.and_then(|c| calls_after_release(c, &names, "madvise_calls"));
    }
    if let Some(why) = collector.and_then(|c| c.program_costs_note.as_ref()) {
        s.left_out.push(why.clone());
    }
    s.throughput = result.and_then(|r| throughput(r, &memory.stops));
    s.go_gc = result.and_then(crate::runtimes::go_gc::GoGc::of);
    s.sysctls_changed = sysctl
        .changes
        .iter()
        .map(|c| format!("{} {} → {}", c.key, c.from, c.to))
        .collect();
    s.sysctls_restored = sysctl.restore_error.is_none() && sysctl.after == sysctl.before;
    let at_peak = memory.peak.as_ref().and_then(|p| p.cgroup.as_ref());
    let size = |b: Option<u64>| b.map_or("?".into(), |b| units::bytes(b as f64));
    s.cgroup = memory.cgroup_final.as_ref().map(|c| {
        format!(
            "{}: limit {}, peak usage {}, kernel memory at the peak snapshot {}, OOM kills {}",
            c.version
                .map_or("?".into(), |v| format!("{v:?}").to_lowercase()),
            c.memory_limit_bytes
                .map_or("none".into(), |b| units::bytes(b as f64)),
            size(c.memory_peak_bytes),
            size(at_peak.and_then(|p| p.kernel_bytes)),
            c.oom_kills
        ) + &leash_terms(run, c.pids_peak)
    });
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::per_task::tests::{command_snapshots, snap};

    #[test]
    fn stacks_freed_after_release_are_the_join_and_exit_phases_calls() {
        use crate::test_support::{collector_report, metric};
        let names: Vec<String> = ["startup", "spawn", "steady", "join", "exit"]
            .map(String::from)
            .to_vec();
        // 2 before the first phase, 5 while steady, 1,900 in join and 21 in exit.
        let c = collector_report(vec![metric("madvise_calls", 2, &[0, 5, 1_900, 21])]);
        assert_eq!(
            calls_after_release(&c, &names, "madvise_calls"),
            Some(1_921)
        );
        assert_eq!(calls_after_release(&c, &names, "munmap_calls"), None);
        // A run without those phases (a command) has no figure.
        let c = collector_report(vec![metric("madvise_calls", 2, &[7])]);
        let run_only = ["startup", "run"].map(String::from).to_vec();
        assert_eq!(calls_after_release(&c, &run_only, "madvise_calls"), None);
    }

    /// A run of `target` that recorded nothing else.
    fn run_record(target: Target) -> RunRecord {
        RunRecord {
            target,
            ..crate::test_support::run_record()
        }
    }

    #[test]
    fn tasks_alive_come_from_the_moment_measured_when_it_was_recorded() {
        let (base, peak) = command_snapshots();
        let run = run_record(Target::Command {
            argv: vec!["prog".into()],
            tasks: Some(1_000),
            task_kind: runtime::TaskKind::Task,
            peak_when: None,
            label: None,
            task_lifetime_ns: None,
        });
        let mut memory = MemoryRecord {
            before: base,
            peak: Some(peak),
            ..Default::default()
        };
        let sysctl = SysctlRecord::default();
        // Recorded before the moment was kept: --tasks.
        assert_eq!(
            summarize(&run, &memory, &sysctl, &[], None).alive_at_peak,
            Some(1_000)
        );
        memory.peak_moment = Some(PeakMoment {
            chosen: record::PeakChoice::MostMemory,
            alive: Some(800),
            counted: record::AliveCount::Declared,
        });
        let s = summarize(&run, &memory, &sysctl, &[], None);
        assert_eq!(s.alive_at_peak, Some(800));
        assert!(
            (s.memory_per_task.unwrap().rss_kb - 12.5).abs() < 1e-9,
            "10,000 kB / 800"
        );
        assert_eq!(s.peak_moment, memory.peak_moment);
    }

    #[test]
    fn the_stops_for_memory_readings_are_left_out_of_every_time() {
        use record::{PhaseSample, StopAt};
        let ns = |s: f64| (s * 1e9) as u64;
        let phase = |name: &str, t: f64| PhaseSample {
            name: name.into(),
            t_ns: ns(t),
            snapshot: Snapshot::default(),
        };
        let run = RunRecord {
            wall_ns: ns(4.0),
            released_t_ns: Some(ns(0.5)),
            reaped_t_ns: Some(ns(4.5)),
            rusage: Some(record::Rusage::default()),
            ..run_record(Target::Workload(runtime::Invocation {
                runtime: runtime::Runtime::Threads,
                workload: runtime::WorkloadKind::Sleep,
                n: 1_000,
                flags: vec![],
            }))
        };
        // Spawning 1..3 s, stopped 0.1 s for the base and 0.4 s for the reading.
        let stop = |from: f64, to: f64, at| WorkloadStop {
            from_t_ns: ns(from),
            to_t_ns: ns(to),
            at,
            rcu_barrier: true,
            at_once: false,
        };
        let memory = MemoryRecord {
            phases: vec![phase("spawn", 1.0), phase("join", 3.0), phase("end", 4.0)],
            stops: vec![
                stop(1.0, 1.1, StopAt::FirstPhase),
                stop(2.0, 2.4, StopAt::Levelled),
            ],
            ..Default::default()
        };
        let result = serde_json::json!({
            "event": "result",
            "spawned": 1_000,
            "spawn_ns_per_task": 2_000_000.0,
            "phases": [
                {"name": "spawn", "start_ns": ns(1.0), "end_ns": ns(3.0), "dur_ns": ns(2.0)},
                {"name": "join", "start_ns": ns(3.0), "end_ns": ns(4.0), "dur_ns": ns(1.0)},
            ],
            "throughput": {"unit": "tasks/s", "count": 1_000, "value": 500.0},
        });
        let s = summarize(&run, &memory, &SysctlRecord::default(), &[result], None);
        assert!((s.wall_s - 3.5).abs() < 1e-9, "{}", s.wall_s);
        let spawn_us = s.time_per_task.unwrap().spawn_us.unwrap();
        assert!((spawn_us - 1_500.0).abs() < 1e-6, "{spawn_us}");
        let per_s = s.throughput.unwrap()["value"].as_f64().unwrap();
        assert!((per_s - 1_000.0 / 1.5).abs() < 1e-6, "{per_s}");
        let walls: Vec<(String, f64)> = s
            .phases
            .iter()
            .map(|p| (p.name.clone(), p.wall_ms))
            .collect();
        assert_eq!(
            walls,
            [
                ("startup".into(), 500.0),
                ("spawn".into(), 1_500.0),
                ("join".into(), 1_000.0),
                ("exit".into(), 500.0)
            ]
        );
        assert_eq!(s.stops, memory.stops);
    }

    fn gated_hold(runtime: runtime::Runtime) -> RunRecord {
        let ns = |s: f64| (s * 1e9) as u64;
        RunRecord {
            wall_ns: ns(1.0),
            released_t_ns: Some(ns(0.5)),
            reaped_t_ns: Some(ns(1.5)),
            rusage: Some(record::Rusage::default()),
            ..run_record(Target::Workload(runtime::Invocation {
                runtime,
                workload: runtime::WorkloadKind::Hold,
                n: 1_000,
                flags: vec![],
            }))
        }
    }

    /// A hold run since the start gate: base read at the gate (0.51 s), waited 0.4 s, spawn
    /// from 0.92 s; its first phase's snapshot is one on the run, 150 threads in already.
    fn gated_memory(base_threads: u64, first_phase_s: f64) -> MemoryRecord {
        use record::PhaseSample;
        let ns = |s: f64| (s * 1e9) as u64;
        let kb = |available: u64, threads: u64, rss: u64| {
            snap(
                &[
                    ("MemAvailable", available),
                    ("KernelStack", 16 * threads),
                    ("Slab", 100_000 + 8 * threads),
                ],
                &[("VmRSS", rss), ("VmPTE", 4 * threads), ("Threads", threads)],
            )
        };
        let phase = |name: &str, t: f64, snapshot: Snapshot| PhaseSample {
            name: name.into(),
            t_ns: ns(t),
            snapshot,
        };
        MemoryRecord {
            base: Some(kb(1_000_000, base_threads, 2_000)),
            phases: vec![
                // Read on the run: MemAvailable first (nothing yet), the rest 150 threads later.
                phase("spawn", first_phase_s, kb(1_000_000, 151, 2_000 + 150 * 8)),
                phase("steady", 1.0, kb(964_000, 1_001, 10_000)),
                phase("join", 1.2, kb(964_000, 1_001, 10_000)),
                phase("end", 1.3, kb(964_000, 1, 10_000)),
            ],
            peak: Some(kb(964_000, 1_001, 10_000)),
            peak_moment: Some(PeakMoment {
                chosen: PeakChoice::PeakEvent,
                alive: Some(1_000),
                counted: record::AliveCount::PeakEvent,
            }),
            stops: vec![WorkloadStop {
                from_t_ns: ns(0.51),
                to_t_ns: ns(0.91),
                at: StopAt::StartGate,
                rcu_barrier: false,
                at_once: true,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn memory_is_counted_from_the_base_at_the_start_gate_and_its_wait_left_out() {
        use runtime::Runtime;
        let memory = gated_memory(1, 0.92);
        let s = summarize(
            &gated_hold(Runtime::Threads),
            &memory,
            &SysctlRecord::default(),
            &[],
            None,
        );
        let from_gate = memory_per_task_over(
            memory.base.as_ref().unwrap(),
            &[(memory.peak.as_ref().unwrap(), 1_000)],
        )
        .unwrap();
        let m = s.memory_per_task.as_ref().unwrap();
        assert_eq!(m.total_kb, from_gate.total_kb);
        assert!(m.adds_up, "{m:?}");
        // From the first phase's snapshot, read on the run, 150 threads short in the parts.
        let on_the_run = memory_per_task_over(
            &memory.phases[0].snapshot,
            &[(memory.peak.as_ref().unwrap(), 1_000)],
        )
        .unwrap();
        assert!(!on_the_run.adds_up, "{on_the_run:?}");
        assert_eq!(s.base_held_tasks, None);
        // Wall 1 s less the gate's 0.4 s; startup 0.42 s less it.
        assert!((s.wall_s - 0.6).abs() < 1e-9, "{}", s.wall_s);
        assert_eq!(s.phases[0].name, "startup");
        assert!(
            (s.phases[0].wall_ms - 20.0).abs() < 1e-6,
            "{:?}",
            s.phases[0]
        );
        // A record from before the gate: the first phase's snapshot, as it always was.
        let before_gate = MemoryRecord {
            base: None,
            stops: vec![],
            ..memory
        };
        let s = summarize(
            &gated_hold(Runtime::Threads),
            &before_gate,
            &SysctlRecord::default(),
            &[],
            None,
        );
        let m = s.memory_per_task.unwrap();
        assert_eq!(m.total_kb, on_the_run.total_kb);
        assert_eq!(s.base_held_tasks, None, "not judged before the gate");
    }

    #[test]
    fn a_base_at_the_gate_that_held_tasks_is_said() {
        use runtime::Runtime;
        let held = |runtime, base_threads, first_phase_s| {
            summarize(
                &gated_hold(runtime),
                &gated_memory(base_threads, first_phase_s),
                &SysctlRecord::default(),
                &[],
                None,
            )
            .base_held_tasks
        };
        assert_eq!(
            held(Runtime::Threads, 40, 0.92).as_deref(),
            Some("40 threads at the base, where the threads workload has 1 before its first task: 39 had started")
        );
        assert_eq!(
            held(Runtime::Processes, 2, 0.92).as_deref(),
            Some("2 threads at the base, where the processes workload has 1 before its first task: 1 had started")
        );
        // Go's scheduler starts threads of its own as it likes: not judged by threads.
        assert_eq!(held(Runtime::Goroutines, 5, 0.92), None);
        // A first phase marked before the gate opened (0.91 s): it did not wait.
        let why = held(Runtime::Goroutines, 5, 0.9).unwrap();
        assert!(
            why.starts_with(
                "the workload marked its first phase (spawn) 10.0 ms before its start gate opened"
            ),
            "{why}"
        );
    }
}
