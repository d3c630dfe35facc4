//! sysctl.json, and the sysctl state file's entries: what a run raised, and what was put back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Who raised an entry: a run (its PID and start time) or a person (`sysctl apply`).
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Owner {
    Run { pid: u32, start_time: u64 },
    Manual,
}

/// One raised key: its value before, the value written, and who wrote it.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub key: String,
    pub original: u64,
    pub applied: u64,
    pub owner: Owner,
}

/// A planned raise.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub key: String,
    pub from: u64,
    pub to: u64,
    pub why: String,
}

/// sysctl.json: the managed keys before the run, what it raised, what was restored, and after.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct SysctlRecord {
    pub before: BTreeMap<String, u64>,
    pub changes: Vec<Change>,
    pub restored: Vec<Entry>,
    pub after: BTreeMap<String, u64>,
    pub restore_error: Option<String>,
}
