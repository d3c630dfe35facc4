//! The results directory of a run and the raw records in it. Raw inputs are written as they are
//! obtained, before anything is computed from them, so a crash in analysis loses nothing and
//! `spawnscope report` can redo the analysis from disk alone.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cgroup;
use crate::launch::{Exit, Rusage};
use crate::preflight::Estimate;
use crate::procfs::CpuTime;
use crate::sysctl::{Change, Entry};
use crate::workload::Invocation;

pub const RUN: &str = "run.json";
pub const MEMORY: &str = "memory.json";
pub const SYSCTL: &str = "sysctl.json";
pub const MACHINE: &str = "machine.json";
pub const EVENTS: &str = "workload.jsonl";
pub const STDERR: &str = "workload.stderr";
pub const COLLECTOR: &str = "collector.json";
pub const SUMMARY_JSON: &str = "summary.json";
pub const SUMMARY_MD: &str = "summary.md";

/// What was run: one of our workloads, or any command.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Workload(Invocation),
    Command {
        argv: Vec<String>,
        tasks: Option<u64>,
    },
}

impl Target {
    pub fn label(&self) -> String {
        match self {
            Target::Workload(inv) => inv.label(),
            Target::Command { argv, .. } => argv.join(" "),
        }
    }

    /// `<runtime>-<workload>-<n>` or `cmd-<program>-<tasks>` for the directory name.
    fn slug(&self) -> String {
        let raw = match self {
            Target::Workload(inv) => {
                format!("{}-{}-{}", inv.runtime.name(), inv.workload.name(), inv.n)
            }
            Target::Command { argv, tasks } => {
                let program = argv.first().map(|p| {
                    Path::new(p)
                        .file_name()
                        .map_or(p.clone(), |f| f.to_string_lossy().into())
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

/// One moment's readings of the machine, the process and its cgroup.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC, comparable with the workload's `t_ns`.
    pub t_ns: u64,
    /// /proc/meminfo, kB.
    pub meminfo: BTreeMap<String, u64>,
    /// Free pages in the per-CPU lists, kB (free, yet outside MemFree): see procfs::pcp_free_kb.
    #[serde(default)]
    pub pcp_free_kb: Option<u64>,
    /// Tasks on the whole host (/proc/loadavg): with KernelStack, the size of one kernel stack.
    #[serde(default)]
    pub tasks_on_host: Option<u64>,
    /// /proc/PID/status (kB for sizes).
    pub status: BTreeMap<String, u64>,
    /// /proc/PID/smaps_rollup (kB), at the peak only: it walks every mapping.
    pub smaps_rollup: BTreeMap<String, u64>,
    pub cpu: Option<CpuTime>,
    pub cgroup: Option<cgroup::Stats>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseSample {
    pub name: String,
    pub t_ns: u64,
    pub snapshot: Snapshot,
}

/// Every 100 ms during the run: what the progress bar and timeline charts show.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TimelineSample {
    pub t_ns: u64,
    pub mem_available_kb: u64,
    pub rss_kb: u64,
    pub threads: u64,
    pub cgroup_bytes: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Before the workload started.
    pub before: Snapshot,
    /// At each `phase` event.
    pub phases: Vec<PhaseSample>,
    /// When most tasks were alive: the `peak` event (hold), the end of spawning (other
    /// workloads), or the lowest MemAvailable seen (any command).
    pub peak: Option<Snapshot>,
    /// After the workload exited and the kernel freed what it held.
    pub after: Option<Snapshot>,
    pub timeline: Vec<TimelineSample>,
    /// The cgroup's counters at the end (peaks, OOM kills).
    pub cgroup_final: Option<cgroup::Stats>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SysctlRecord {
    pub before: BTreeMap<String, u64>,
    pub changes: Vec<Change>,
    pub restored: Vec<Entry>,
    pub after: BTreeMap<String, u64>,
    pub restore_error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// What this run could not measure, and why.
    pub left_out: Vec<String>,
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
        started: &chrono::DateTime<chrono::Utc>,
    ) -> Result<Self> {
        let name = format!("{}-{}", started.format("%Y%m%dT%H%M%SZ"), target.slug());
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
