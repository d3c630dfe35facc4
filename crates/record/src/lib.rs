//! The results directory: the name and type of every file in it, and the pure reads and writes of
//! them. Raw records are written as they are obtained, before anything is computed from them, so
//! a crash in analysis loses nothing and `spawnscope report` can redo the analysis from disk
//! alone. Nothing here measures, computes a figure or formats one.

pub mod go_procs;
pub mod go_sched;
pub mod load;
pub mod loadgen;
pub mod machine;
pub mod memory;
pub mod perf;
pub mod plan;
pub mod probe_cost;
pub mod process;
pub mod run;
pub mod sentinels;
pub mod sysctl;
pub mod tokio_sched;
pub mod trace;
pub mod tree;
pub mod warmup;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use load::{expand, find_plan, load, read_flame, LoadedRun};
pub use machine::Fingerprint;
pub use memory::{
    AliveCount, AliveSnapshot, CgroupStats, CgroupVersion, CpuTime, MemoryRecord, PeakChoice,
    PeakMoment, PhaseSample, SlabObjects, Snapshot, StopAt, TimelineSample, WorkloadStop,
};
pub use plan::{Plan, PlannedCell, PlannedCommand, Skipped};
pub use process::{Exit, Rusage};
pub use run::{
    Calibration, CpuConfinement, Estimate, FloorRate, PidsLimit, ProbeCalibration, RunRecord,
    Stage, StoppedBy, Target, TraceCalibration,
};
pub use sentinels::{
    CpuRead, KernelThreadTime, KernelThreads, MachineCpu, ProcessCpu, RunCpuSource, SentinelMark,
    SentinelTick, SentinelsRecord,
};
pub use sysctl::{Change, Entry, Owner, SysctlRecord};
pub use tree::ProcessReading;
pub use warmup::{Touched, TouchedChunk, WarmUpCalibration, WarmUpRecord};

// A run directory's files, written by `run`.
pub const RUN: &str = "run.json";
/// What `spawnscope warm-up` did, in its own directory (trace.sh's `warmup/`).
pub const WARMUP: &str = "warmup.json";
pub const MEMORY: &str = "memory.json";
pub const SYSCTL: &str = "sysctl.json";
pub const MACHINE: &str = "machine.json";
/// What else the machine did during the run (noise sentinels), per phase.
pub const SENTINELS: &str = "sentinels.json";
pub const EVENTS: &str = "workload.jsonl";
pub const STDERR: &str = "workload.stderr";
/// A command's stdout, kept when the conductor reads it (`--peak-when`) or a sweep runs it.
pub const COMMAND_STDOUT: &str = "command.stdout";
pub const COLLECTOR: &str = "collector.json";
/// serve: the load generator's record (record/loadgen.rs) and the wrk hook it ran with.
pub const LOAD: &str = "load.json";
pub const WRK_SCRIPT: &str = "wrk.lua";
pub const SUMMARY_JSON: &str = "summary.json";
pub const SUMMARY_MD: &str = "summary.md";
pub const FLAME: &str = "flame.svg";
/// `--perfetto`: the run's scheduler events as the probes streamed them, raw
/// (`spawnscope_collector::trace_events`, one fixed-size record each), written as they come.
pub const TRACE_EVENTS: &str = "trace-events.bin";
/// `--perfetto`: the trace derived from TRACE_EVENTS and the other records, for ui.perfetto.dev.
pub const PERFETTO_TRACE: &str = "trace.perfetto-trace";
/// `--perfetto`: the swimlane of a sample of the run's threads and its CPUs, derived from
/// TRACE_EVENTS (report.html draws the same for each traced run of a set).
pub const SWIMLANE: &str = "swimlane.svg";
/// `report --perfetto` with a window or a sample: a cut of PERFETTO_TRACE, named by what it
/// kept (`window`: "1.5s-3s" or a phase's name; `threads`: "32threads", "tids-101-102"…), never
/// the full trace's name.
pub fn perfetto_cut(window: &str, threads: &str) -> String {
    format!("trace.cut-{window}-{threads}.perfetto-trace")
}
/// `--runtime-trace` (goroutines): the Go execution trace the workload wrote (`--go-trace`), raw.
pub const GO_TRACE: &str = "go-execution.trace";
/// `--runtime-trace`: gotrace-reduce's records of GO_TRACE, one goroutine state change each
/// (record/go_sched.rs; layout: schema/go-sched-record.tsv), and its tables and counts.
pub const GO_SCHED: &str = "go-sched.bin";
pub const GO_SCHED_SUMMARY: &str = "go-sched.json";
/// `--runtime-trace`: gotrace-reduce's records of the Go runtime's Ps, one P state change each
/// (record/go_procs.rs; layout: schema/go-proc-record.tsv); counted in GO_SCHED_SUMMARY's `procs`.
/// Runs reduced before it have none.
pub const GO_PROCS: &str = "go-procs.bin";
/// `--runtime-trace` (tokio): what the workload's hooks build wrote (`tokio-tasks-hooks
/// --tokio-trace`), raw: one task hook's event each (record/tokio_sched.rs; layout:
/// schema/tokio-sched-record.tsv), and beside it its threads, counts and tokio's metrics.
pub const TOKIO_SCHED: &str = "tokio-sched.bin";
pub const TOKIO_SCHED_SUMMARY: &str = "tokio-sched.json";
pub use perf::{PERF_FOLDED, PERF_RECORD};

// A compare directory's files (beside its run directories), written by `compare` and `report`.
pub const PLAN: &str = "plan.json";
pub const COMPARE_JSON: &str = "compare.json";
pub const COMPARE_CSV: &str = "compare.csv";
pub const FITS_CSV: &str = "compare-fits.csv";
pub const COMPARE_MD: &str = "compare.md";
pub const REPORT_HTML: &str = "report.html";
pub const CHARTS: &str = "charts";

/// The results files whose fields are documented by a JSON Schema (`spawnscope schema FILE`,
/// committed under the repository's `schema/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Documented {
    /// run.json: what was run, how, and how it ended.
    Run,
    /// memory.json: the memory snapshots (before, phases, peak, neighbours, after, timeline).
    Memory,
    /// summary.json: one run's figures per task, as `run --json` prints them.
    Summary,
    /// compare.json: a sweep's cells, fitted lines and verdict, as `compare --json` prints them.
    Compare,
}

impl Documented {
    pub const ALL: [Documented; 4] = [
        Documented::Run,
        Documented::Memory,
        Documented::Summary,
        Documented::Compare,
    ];

    /// The results file the schema describes.
    pub fn file_name(self) -> &'static str {
        match self {
            Documented::Run => RUN,
            Documented::Memory => MEMORY,
            Documented::Summary => SUMMARY_JSON,
            Documented::Compare => COMPARE_JSON,
        }
    }

    /// Its schema's file name: `run.schema.json` for run.json.
    pub fn schema_file_name(self) -> String {
        format!("{}.schema.json", self.file_name().trim_end_matches(".json"))
    }
}

/// A results directory being written.
pub struct ResultsDir {
    pub path: PathBuf,
}

impl ResultsDir {
    /// Creates `<root>/<UTC time>-<slug>/`.
    pub fn create(
        root: &Path,
        target: &Target,
        cpu_count: Option<u32>,
        started: &chrono::DateTime<chrono::Utc>,
    ) -> Result<Self> {
        // A run held to K CPUs says so in its name: a CPU sweep's cells differ by K alone.
        let cpus = cpu_count.map(|k| format!("-cpu{k}")).unwrap_or_default();
        let name = format!(
            "{}-{}{cpus}",
            started.format("%Y%m%dT%H%M%SZ"),
            target.slug()
        );
        let mut path = root.join(&name);
        let mut k = 1;
        while path.exists() {
            k += 1;
            path = root.join(format!("{name}.{k}"));
        }
        fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ResultsDir { path })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write_json(&self, name: &str, value: &impl Serialize) -> Result<()> {
        write_json(&self.file(name), value)
    }
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

pub fn read_json<T: DeserializeOwned>(dir: &Path, name: &str) -> Result<T> {
    let path = dir.join(name);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not what spawnscope writes", path.display()))
}

/// Hands the results to the user who ran `sudo`: files a person reads should be theirs.
pub fn give_to_invoking_user(path: &Path) {
    let id = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<u32>().ok());
    let (Some(uid), Some(gid)) = (id("SUDO_UID"), id("SUDO_GID")) else {
        return;
    };
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let _ = std::os::unix::fs::chown(&p, Some(uid), Some(gid));
        if p.is_dir() {
            if let Ok(entries) = fs::read_dir(&p) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
}

/// The next fixed-size record of a raw records file (go-sched.bin, go-procs.bin,
/// tokio-sched.bin): None at the end, and then `trailing` holds the bytes too few for a record
/// (a file cut short while written); a read interrupted by a signal is retried.
pub fn next_fixed_record<const N: usize>(
    inner: &mut impl std::io::Read,
    trailing: &mut usize,
) -> Option<std::io::Result<[u8; N]>> {
    let mut b = [0u8; N];
    let mut filled = 0;
    while filled < N {
        match inner.read(&mut b[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Some(Err(e)),
        }
    }
    if filled < N {
        *trailing = filled;
        return None;
    }
    Some(Ok(b))
}
