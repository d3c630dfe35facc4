//! plan.json: what `compare` planned, written before its first run.

use serde::{Deserialize, Serialize};

/// What `compare` planned, written before the first run: the matrix, and why an N was clamped.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Plan {
    pub schema: u32,
    pub created_utc: String,
    pub argv: Vec<String>,
    pub reproduce: Option<String>,
    pub repeats: u32,
    /// Runs of each cell made with the eBPF collector, for its counts and waits, beside `repeats`
    /// runs without it that time the cell (trace.sh's main job: 1); the report takes every time
    /// figure from the untraced runs. Absent: the `repeats` runs were all made alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_runs: Option<u32>,
    pub cells: Vec<PlannedCell>,
    /// Set when the matrix stopped early (a signal), with why.
    pub stopped: Option<String>,
    /// The commands swept beside the runtimes (`--command`), by label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<PlannedCommand>,
    /// What a reproduction could not run on this host, and why (a runtime not installed…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// The set's wall time in seconds, from before its first run (warm-up included) to the end of
    /// its last, where its maker timed it (trace.sh's main job; nothing built in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Runs made before the counted ones and left out of the set (trace.sh's `warmup/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_runs: Option<u32>,
    /// Memory written a page at a time before the counted runs (`spawnscope warm-up`, in
    /// `warmup/warmup.json`), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_touched_bytes: Option<u64>,
}

/// A command of the sweep: its words with `{n}` where N goes, and what it runs on.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PlannedCommand {
    pub label: String,
    pub command: Vec<String>,
    /// What the program's runtime says of its version (`node --version`…), where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A runtime a reproduction left out, by the label its program would have had.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Skipped {
    pub label: String,
    pub why: String,
}

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlannedCell {
    pub runtime: String,
    pub workload: String,
    pub requested_n: u64,
    /// The N run; None when the cell was left out.
    pub n: Option<u64>,
    /// Why N differs from what was asked, or why the cell was left out.
    pub note: Option<String>,
}
