//! Reading a results directory back, as it is on disk: every file parsed into its type, nothing
//! computed, nothing written.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::{
    read_json, Fingerprint, MemoryRecord, Plan, RunRecord, SentinelsRecord, SysctlRecord,
    COLLECTOR, EVENTS, FLAME, MACHINE, MEMORY, PLAN, RUN, SENTINELS, SYSCTL,
};

/// A results directory read back from disk.
pub struct LoadedRun {
    pub run: RunRecord,
    pub memory: MemoryRecord,
    pub sysctl: SysctlRecord,
    pub machine: Fingerprint,
    /// sentinels.json; None for runs recorded before the sentinels existed.
    pub sentinels: Option<SentinelsRecord>,
    pub events: Vec<Value>,
    /// collector.json, when the eBPF collector ran.
    pub collector: Option<spawnscope_collector::Report>,
    /// collector.json's time series, read tolerantly (older files included).
    pub series: Option<CollectorSeries>,
    /// flame.svg, when the run was recorded with --perf and drawn.
    pub has_flame: bool,
    /// load.json: the load on a serve run.
    pub load: Option<crate::loadgen::LoadRecord>,
    /// A command's last `{"event":"result",…}` line in command.stdout, where it printed one.
    pub command_result: Option<Value>,
}

pub fn load(dir: &Path) -> Result<LoadedRun> {
    let events = match fs::read_to_string(dir.join(EVENTS)) {
        Ok(text) => text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    Ok(LoadedRun {
        run: read_json(dir, RUN)?,
        memory: read_json(dir, MEMORY)?,
        sysctl: read_json(dir, SYSCTL).unwrap_or_default(),
        machine: read_json(dir, MACHINE).unwrap_or_default(),
        sentinels: read_json(dir, SENTINELS).ok(),
        events,
        collector: read_json(dir, COLLECTOR).ok(),
        series: read_collector_series(dir),
        has_flame: dir.join(FLAME).is_file(),
        load: read_json(dir, crate::LOAD).ok(),
        command_result: last_result_line(dir),
    })
}

/// The last line of command.stdout that is a JSON result event.
fn last_result_line(dir: &Path) -> Option<Value> {
    let text = fs::read_to_string(dir.join(crate::COMMAND_STDOUT)).ok()?;
    text.lines()
        .rev()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "result")
}

/// A results directory, or a directory holding results directories (a compare directory).
pub fn expand(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut runs = Vec::new();
    for dir in dirs {
        if dir.join(RUN).is_file() {
            runs.push(dir.clone());
            continue;
        }
        let mut inside: Vec<PathBuf> = fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join(RUN).is_file())
            .collect();
        if inside.is_empty() {
            anyhow::bail!(
                "{} is neither a results directory (no run.json) nor a directory of them",
                dir.display()
            );
        }
        inside.sort();
        runs.extend(inside);
    }
    Ok(runs)
}

/// The plan of a compare directory, when one of the given directories is one.
pub fn find_plan(dirs: &[PathBuf]) -> Option<Plan> {
    dirs.iter().find_map(|d| read_json::<Plan>(d, PLAN).ok())
}

/// collector.json read tolerantly: any 100 ms-ish series it has, by name. None when the file is
/// absent or has no series.
pub struct CollectorSeries {
    pub t0_ns: u64,
    pub bucket_ns: u64,
    pub series: Vec<(String, Vec<f64>)>,
}

fn read_collector_series(dir: &Path) -> Option<CollectorSeries> {
    let text = fs::read_to_string(dir.join(COLLECTOR)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let bucket_ns = v["bucket_ns"].as_u64().filter(|&b| b > 0)?;
    let t0_ns = v["t0_ns"].as_u64()?;
    let series: Vec<(String, Vec<f64>)> = v["series"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            let name = s["name"].as_str()?.to_string();
            let values = s["values"]
                .as_array()?
                .iter()
                .map(|x| x.as_f64().unwrap_or(0.0))
                .collect();
            Some((name, values))
        })
        .collect();
    (!series.is_empty()).then_some(CollectorSeries {
        t0_ns,
        bucket_ns,
        series,
    })
}

/// A run's flame.svg, when it has one.
pub fn read_flame(dir: &Path) -> Option<Vec<u8>> {
    fs::read(dir.join(FLAME)).ok()
}
