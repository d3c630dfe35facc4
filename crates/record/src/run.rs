//! run.json: what was run, how it ended, its rusage, and the preflight's estimate.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::process::{Exit, Rusage};
use runtime::{Invocation, TaskKind};

/// What was run: one of our workloads, or any command.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Workload(Invocation),
    Command {
        argv: Vec<String>,
        tasks: Option<u64>,
        /// What `tasks` counts (runs recorded before `--task-kind`: threads).
        #[serde(default)]
        task_kind: TaskKind,
        /// `--peak-when`: the regular expression whose first match on the command's stdout marks
        /// the moment memory is measured (None: the moment of most memory in use).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peak_when: Option<String>,
        /// Its name when `compare` swept it over N (`--label`): its runtime in reports, and
        /// `tasks` its N (None: a single `run -- CMD`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// How long each of its tasks lives, as its author says (a sleeping task's sleep): memory
        /// is measured at the most memory in use before that much time has passed since the
        /// release, while no task can have ended (None: the most memory in use at any time).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_lifetime_ns: Option<u64>,
    },
}

impl Target {
    pub fn label(&self) -> String {
        match self {
            Target::Workload(inv) => inv.label(),
            Target::Command { argv, .. } => argv.join(" "),
        }
    }

    /// `<runtime>-<workload>-<n>` or `cmd-<label or program>-<tasks>` for the directory name.
    pub fn slug(&self) -> String {
        let raw = match self {
            Target::Workload(inv) => {
                format!("{}-{}-{}", inv.runtime.name(), inv.workload.name(), inv.n)
            }
            Target::Command {
                argv, tasks, label, ..
            } => {
                let program = label.clone().or_else(|| {
                    argv.first().map(|p| {
                        Path::new(p)
                            .file_name()
                            .map_or(p.clone(), |f| f.to_string_lossy().into())
                    })
                });
                format!("cmd-{}-{}", program.unwrap_or_default(), tasks.unwrap_or(0))
            }
        };
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// run.json.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: u32,
    pub target: Target,
    /// The conductor's own command line.
    pub argv: Vec<String>,
    pub started_utc: String,
    pub root: bool,
    pub pid: Option<u32>,
    pub wall_ns: u64,
    /// CLOCK_MONOTONIC when the workload was released to exec, and when it was reaped: the
    /// edges of the `startup` and `exit` pseudo-phases around the workload's own.
    pub released_t_ns: Option<u64>,
    pub reaped_t_ns: Option<u64>,
    pub exit: Option<Exit>,
    pub rusage: Option<Rusage>,
    pub interrupted_by: Option<String>,
    pub oom_killed: bool,
    pub memory_limit_bytes: Option<u64>,
    pub estimate: Option<Estimate>,
    /// Lines of the workload's stdout that broke the event schema.
    pub contract_violations: Vec<String>,
    /// `--timeout`, in nanoseconds from the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ns: Option<u64>,
    /// The pids.max the run's cgroup had (None: no limit was set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<PidsLimit>,
    /// What the leash stopped the run for (None: it ended on its own, or by a signal or OOM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StoppedBy>,
    /// The CPUs the workload was pinned to (`--cpus`, a CPU list as taskset takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// `--cpu-count K`: the K CPUs the run was held to, how, and what the workload saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<CpuConfinement>,
    /// serve: the workload's RLIMIT_NOFILE, raised for its connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files_limit: Option<u64>,
    /// What this run could not measure, and why.
    pub left_out: Vec<String>,
    /// Where the conductor's wall time went, in order, up to run.json being written (the
    /// analysis after it is not in it). Empty in records from before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// `--runtime-trace`: the runtime's own tracer ran through this run (Go's execution tracer, or
    /// tokio's task hooks in its hooks build),
    /// adding its memory, faults and time: a run of its own kind, kept out of a comparison's
    /// memory, fault and time figures (it gives the runtime's latencies and trace).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runtime_traced: bool,
}

/// One stage of a run as the conductor lived it: `preflight` (calibration), `setup` (sysctls,
/// cgroup, launch, probes, perf), `settle_before` (waiting for free memory to hold still),
/// `workload` (release to reap, and the machine's fingerprint), `settle_after` (with the last
/// snapshot), `restore` (cgroup removed, sysctls put back).
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stage {
    pub name: String,
    pub ns: u64,
}

/// A run held to K CPUs (`run --cpu-count K`, each cell of `compare --cpu-counts`). K is the run's,
/// not the machine's: the fingerprint (machine.json) does not carry it.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CpuConfinement {
    /// K.
    pub count: u32,
    /// The CPUs chosen, as taskset writes them ("0", "0-3").
    pub cpus: String,
    /// How they were chosen (host/cpu_order.rs, `POLICY`).
    pub policy: String,
    /// How the run was held to them: "cpuset v1", "cpuset v2" (the run's cgroup; every process
    /// it starts stays in it), or "affinity" (the workload's mask, inherited by its threads and
    /// children, which may widen it).
    pub how: String,
    /// The workload's CPUs as the kernel gave them, read back from /proc/PID/status
    /// (Cpus_allowed_list) just after its exec (it joined the cgroup and was pinned before):
    /// held to K when this lists `cpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
}

/// The run cgroup's pids.max and where it came from.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PidsLimit {
    pub max: u64,
    /// "--pids-limit", or how the default was derived.
    pub basis: String,
}

/// Why the leash (measure/leash.rs) ended a run.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoppedBy {
    /// `--timeout` ran out: the run's cgroup was killed (`whole_cgroup`), or, without a cgroup,
    /// the started process alone.
    Timeout { timeout_ns: u64, whole_cgroup: bool },
    /// pids.max refused a fork or clone (`refused` times when it was killed).
    PidsMax { limit: u64, refused: u64 },
}

/// Memory per coexisting task, from two sizes: the slope, the intercept, and the spawn rate; and,
/// for runs to be traced, what each probe program costs a run.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    pub sizes: [u64; 2],
    pub drops_bytes: [u64; 2],
    pub per_task_bytes: f64,
    pub fixed_bytes: f64,
    pub spawn_per_second: f64,
    /// The probes' calibration run (absent: none made, untraced runs or no root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbeCalibration>,
}

/// A calibration from two sizes: the slope (memory per task), the intercept, the spawn rate.
impl Calibration {
    pub fn from_points(sizes: [u64; 2], drops: [u64; 2], spawn_per_second: f64) -> Self {
        let per_task = (drops[1] as f64 - drops[0] as f64) / (sizes[1] - sizes[0]) as f64;
        let per_task = per_task.max(0.0);
        let fixed = (drops[0] as f64 - per_task * sizes[0] as f64).max(0.0);
        Calibration {
            sizes,
            drops_bytes: drops,
            per_task_bytes: per_task,
            fixed_bytes: fixed,
            spawn_per_second,
            probes: None,
        }
    }
}

/// Each probe program's ns per run, measured on a short traced `hold` with the kernel's run-time
/// statistics on throughout, so that a traced run of the same probes can leave them off: while
/// on, they cost two clock reads per program run, which no program's time shows.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProbeCalibration {
    /// The probes' detail it was measured with (`lean`, `full`): a run with other probes runs
    /// other programs and keeps the statistics on instead.
    pub detail: String,
    pub rates: spawnscope_collector::ProgramRates,
    /// The trace's records in this calibration run, when it streamed them (`--perfetto`): its
    /// programs' rates then include the records' emission, and its records per task size a
    /// traced run's ring buffer. Absent: measured without the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceCalibration>,
    /// The floor of the raw_syscalls pair's hooks, timed in the same run (probes/floor.bpf.c
    /// attached beside the probes: one per-CPU array increment a syscall): what a syscall the
    /// pair filters out costs at least, the host's share of a traced run's cost. Empty: not
    /// measured (recorded before it was, or the floor could not be attached).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub floors: Vec<FloorRate>,
}

/// The floor program on one hook in the probes' calibration: its runs and their nanoseconds as
/// the kernel's run-time statistics counted them.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FloorRate {
    /// `category:name`.
    pub hook: String,
    pub runs: u64,
    pub ns: u64,
}

/// What the trace produced in the probes' calibration run.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceCalibration {
    /// Records its programs emitted, those the ring kept and those it had no room for.
    pub records: u64,
    /// Its tasks (the calibration's N).
    pub tasks: u64,
}

impl ProbeCalibration {
    /// Whether it measured the programs a run with `detail` probes, traced or not, will load.
    pub fn serves(&self, detail: &str, traced: bool) -> bool {
        self.detail == detail && self.trace.is_some() == traced
    }
}

/// The verdict: what N needs against what the run may use.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Estimate {
    pub calibration: Calibration,
    pub alive: u64,
    pub needed_bytes: u64,
    pub budget_bytes: u64,
    pub fits: bool,
    /// The largest N whose tasks fit when all coexist.
    pub largest_n: u64,
}
