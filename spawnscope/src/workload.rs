//! The two workload binaries as the conductor sees them: where they are, how they are invoked,
//! and the events they print (validated against the shared schema, the contract both follow).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, Context, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Threads,
    Goroutines,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Threads => "threads",
            Runtime::Goroutines => "goroutines",
        }
    }

    /// The workload binary: $SPAWNSCOPE_THREADS_BIN / $SPAWNSCOPE_GOROUTINES_BIN, else beside this
    /// executable (target/release/, result/bin/), else on PATH.
    pub fn binary(self) -> Result<PathBuf> {
        let var = format!("SPAWNSCOPE_{}_BIN", self.name().to_uppercase());
        if let Some(path) = std::env::var_os(&var) {
            return Ok(PathBuf::from(path));
        }
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.join(self.name())));
        let on_path = || {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(self.name()))
                    .find(|p| p.is_file())
            })
        };
        beside.filter(|p| p.is_file()).or_else(on_path).ok_or_else(|| {
            let build = match self {
                Runtime::Threads => "cargo build --release -p threads",
                Runtime::Goroutines => "cd goroutines-go && go build -o ../target/release/goroutines .",
            };
            anyhow!("the {} workload binary was not found beside spawnscope, on PATH or in ${var}: build it with `{build}`", self.name())
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    Sleep,
    Hold,
    Churn,
    Pingpong,
    Chain,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Sleep => "sleep",
            WorkloadKind::Hold => "hold",
            WorkloadKind::Churn => "churn",
            WorkloadKind::Pingpong => "pingpong",
            WorkloadKind::Chain => "chain",
        }
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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

    pub fn label(&self) -> String {
        format!(
            "{} {} --n {}",
            self.runtime.name(),
            self.workload.name(),
            self.n
        )
    }

    /// Asks the workload itself to validate the arguments (`--dry-run`): the one grammar for
    /// flags lives in the workloads. Ok(params of its `start` event); Err(its one-line refusal).
    pub fn validate(&self, binary: &Path) -> Result<Value, String> {
        let out = Command::new(binary)
            .args(self.args())
            .arg("--dry-run")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", binary.display()))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return Err(stderr
                .lines()
                .next()
                .unwrap_or("the workload refused its arguments")
                .to_string());
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let start: Value = serde_json::from_str(stdout.lines().next().unwrap_or(""))
            .map_err(|e| format!("the workload's --dry-run printed no start event: {e}"))?;
        Ok(start["params"].clone())
    }
}

/// An event the conductor acts on; the rest of each line is kept raw in workload.jsonl.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Start(Value),
    Phase {
        name: String,
        t_ns: u64,
    },
    Progress {
        spawned: u64,
        target: u64,
        alive: u64,
    },
    Peak {
        alive: u64,
        expected: u64,
    },
    Result(Value),
}

/// The schema both workloads follow, compiled once per event kind so that a violation names the
/// field at fault (a failed `oneOf` over all events would only say "no event matched").
pub struct Contract {
    by_event: Vec<(String, jsonschema::Validator)>,
}

pub const SCHEMA: &str = include_str!("../../schema/workload-events.schema.json");

impl Contract {
    pub fn new() -> Result<Self> {
        let schema: Value = serde_json::from_str(SCHEMA).context("the event schema is not JSON")?;
        let mut by_event = Vec::new();
        for kind in ["start", "phase", "progress", "peak", "result"] {
            let one =
                serde_json::json!({ "$ref": format!("#/$defs/{kind}"), "$defs": schema["$defs"] });
            let validator = jsonschema::validator_for(&one)
                .map_err(|e| anyhow!("the event schema does not compile: {e}"))?;
            by_event.push((kind.to_string(), validator));
        }
        Ok(Contract { by_event })
    }

    /// Parses and validates one line; Err describes the contract violation.
    pub fn parse(&self, line: &str) -> Result<Event, String> {
        let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
        let kind = value["event"].as_str().unwrap_or("");
        let (_, validator) = self
            .by_event
            .iter()
            .find(|(k, _)| k == kind)
            .ok_or_else(|| format!("unknown event {:?}", value["event"]))?;
        if let Err(err) = validator.validate(&value) {
            return Err(format!("{err} at {}", err.instance_path()));
        }
        let u = |key: &str| value[key].as_u64().unwrap_or(0);
        Ok(match value["event"].as_str().unwrap_or("") {
            "start" => Event::Start(value),
            "phase" => Event::Phase {
                name: value["name"].as_str().unwrap_or("").to_string(),
                t_ns: u("t_ns"),
            },
            "progress" => Event::Progress {
                spawned: u("spawned"),
                target: u("target"),
                alive: u("alive"),
            },
            "peak" => Event::Peak {
                alive: u("alive"),
                expected: u("expected"),
            },
            _ => Event::Result(value),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_valid_events_and_names_violations() {
        let contract = Contract::new().unwrap();
        assert_eq!(
            contract.parse(r#"{"event":"phase","name":"spawn","t_ns":5}"#),
            Ok(Event::Phase {
                name: "spawn".into(),
                t_ns: 5
            })
        );
        assert_eq!(
            contract.parse(r#"{"event":"progress","t_ns":5,"spawned":3,"target":9,"alive":2}"#),
            Ok(Event::Progress {
                spawned: 3,
                target: 9,
                alive: 2
            })
        );
        assert!(contract
            .parse(r#"{"event":"phase","name":"spawn"}"#)
            .unwrap_err()
            .contains("t_ns"));
        assert!(contract.parse("not json").is_err());
        assert!(contract
            .parse(r#"{"event":"nap"}"#)
            .unwrap_err()
            .contains("unknown event"));
    }

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
    }
}
