//! The workloads as the conductor sees them: what each is called, how many tasks an N spawns, and
//! one invocation (runtime, workload, N, flags), which the workload binary itself validates.

use std::path::Path;
use std::process::{Command, Stdio};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Runtime, START_GATE_FLAG};

#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    Sleep,
    Hold,
    Churn,
    Pingpong,
    Chain,
    /// An HTTP/1.1 server, one task per connection, under load from wrk (measure/load.rs).
    Serve,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Sleep => "sleep",
            WorkloadKind::Hold => "hold",
            WorkloadKind::Churn => "churn",
            WorkloadKind::Pingpong => "pingpong",
            WorkloadKind::Chain => "chain",
            WorkloadKind::Serve => "serve",
        }
    }

    /// Where reports put a workload among the others (unknown names last): hold first, whose
    /// tasks all coexist.
    pub fn order_of(name: &str) -> usize {
        ["hold", "sleep", "churn", "pingpong", "chain", "serve"]
            .iter()
            .position(|w| *w == name)
            .unwrap_or(9)
    }

    /// Whether the workload is stopped once for a reading of its memory (measure/stop.rs): where
    /// tasks exit while others start. pingpong and chain keep every task to the end, busy: a
    /// reading on the run is already still, and a stop would fall inside their throughput.
    pub fn stopped_for_memory(self) -> bool {
        matches!(self, WorkloadKind::Sleep | WorkloadKind::Churn)
    }

    /// Tasks spawned for --n (pingpong and chain: two per unit).
    pub fn tasks(self, n: u64) -> u64 {
        match self {
            WorkloadKind::Pingpong | WorkloadKind::Chain => 2 * n,
            _ => n,
        }
    }
}

/// One workload run: runtime, workload, N and the workload flags passed through as given.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct Invocation {
    pub runtime: Runtime,
    pub workload: WorkloadKind,
    pub n: u64,
    pub flags: Vec<(String, String)>,
}

impl Invocation {
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            self.workload.name().to_string(),
            "--n".into(),
            self.n.to_string(),
        ];
        for (flag, value) in &self.flags {
            args.push(flag.clone());
            args.push(value.clone());
        }
        args
    }

    /// `args` with the start gate closed (`START_GATE_FLAG`): how the conductor runs it.
    pub fn gated_args(&self) -> Vec<String> {
        let mut args = self.args();
        args.push(START_GATE_FLAG.into());
        args
    }

    /// The value given for a workload flag (`--addrs`), if any.
    pub fn flag(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .find(|(flag, _)| flag == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn label(&self) -> String {
        format!(
            "{} {} --n {}",
            self.runtime.name(),
            self.workload.name(),
            self.n
        )
    }

    /// Asks the workload itself to validate the arguments as they will run, start gate included
    /// (`--dry-run`): the one grammar for flags lives in the workloads. Ok(params of its `start`
    /// event); Err(its one-line refusal).
    pub fn validate(&self, binary: &Path) -> Result<Value, String> {
        let out = Command::new(binary)
            .args(self.gated_args())
            .arg("--dry-run")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", binary.display()))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let refusal = stderr
                .lines()
                .next()
                .unwrap_or("the workload refused its arguments");
            // The flag no user gave: a binary built before the start gate.
            if refusal.contains(&format!("'{START_GATE_FLAG}'")) {
                return Err(format!(
                    "{refusal} — {} predates the start gate: rebuild it ({})",
                    binary.display(),
                    self.runtime.describe().build_hint
                ));
            }
            return Err(refusal.to_string());
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let start: Value = serde_json::from_str(stdout.lines().next().unwrap_or(""))
            .map_err(|e| format!("the workload's --dry-run printed no start event: {e}"))?;
        Ok(start["params"].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_pass_through_in_order() {
        let inv = Invocation {
            runtime: Runtime::Threads,
            workload: WorkloadKind::Chain,
            n: 10,
            flags: vec![
                ("--type".into(), "str".into()),
                ("--size".into(), "64".into()),
            ],
        };
        assert_eq!(
            inv.args(),
            ["chain", "--n", "10", "--type", "str", "--size", "64"]
        );
        assert_eq!(WorkloadKind::Chain.tasks(10), 20);
        assert_eq!(inv.gated_args()[..7], inv.args()[..]);
        assert_eq!(inv.gated_args()[7], "--wait-to-start");
    }
}
