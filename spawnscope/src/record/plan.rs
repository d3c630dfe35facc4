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
    pub cells: Vec<PlannedCell>,
    /// Set when the matrix stopped early (a signal), with why.
    pub stopped: Option<String>,
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
