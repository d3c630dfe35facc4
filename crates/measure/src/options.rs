//! What a run is asked to do (RunOptions): the runtime and workload or command, N, the probes,
//! traces and perf, the leash and the limits. Read by the run (run.rs) and its middle
//! (execute.rs), and filled by the commands and the sweep.

use crate::leash::PidsLimitArg;
use crate::loadgen::LoadOptions;
use crate::perf;
use crate::probes::{ProbeDetail, ProbeTimes};
use record::{self, Calibration, Target};
use std::path::PathBuf;
use std::time::Duration;

pub struct RunOptions {
    pub target: Target,
    pub out_root: PathBuf,
    pub force: bool,
    pub memory_limit: Option<u64>,
    /// The eBPF collector and what it keeps (root only); None: left out (`--no-probes`).
    pub probes: Option<ProbeDetail>,
    /// Where the probe programs' times come from (a calibration, or this run's statistics).
    pub probe_times: ProbeTimes,
    /// Record perf samples (`--perf`).
    pub perf: Option<perf::Options>,
    /// A calibration already made under the same flags (compare calibrates once per runtime);
    /// None: this run calibrates.
    pub calibration: Option<Calibration>,
    /// `--timeout`: the leash's time (measure/leash.rs).
    pub timeout: Option<Duration>,
    /// `--pids-limit` (None: the default for the target).
    pub pids_limit: Option<PidsLimitArg>,
    /// serve: the load wrk puts on the server.
    pub load: LoadOptions,
    /// `--cpus`: the CPU list the workload is pinned to (as taskset takes it).
    pub cpus: Option<String>,
    /// `--cpu-count K`: the run held to K CPUs (host/cpu_order.rs's policy) through its cgroup's
    /// cpuset, else the workload's affinity. Refused beside `cpus`.
    pub cpu_count: Option<u32>,
    /// A command in compare's sweep: it gets no terminal (stdin /dev/null; its stdout kept in
    /// command.stdout, its stderr in workload.stderr, both shown on our stderr), so that what
    /// compare prints on stdout stays its own.
    pub keep_command_output: bool,
    /// A command's `--task-kind` was not given: its `--tasks` are taken as a runtime's tasks when
    /// it runs far fewer OS threads than that (`command_moment`).
    pub guess_task_kind: bool,
    /// `--perfetto`: the collector streams the run's scheduler events to TRACE_EVENTS.
    pub perfetto: bool,
    /// `--trace-max-size`: the most TRACE_EVENTS may hold [default: trace_cap::default_cap].
    pub trace_max_bytes: Option<u64>,
    /// `--runtime-trace`: the workload records its runtime's scheduler (goroutines: GO_TRACE,
    /// reduced after the run by measure/go_trace.rs); a runtime without one is refused. A command
    /// is given `$SPAWNSCOPE_GO_TRACE` (go_trace::ENV), the same file, to start runtime/trace on.
    pub runtime_trace: bool,
}
