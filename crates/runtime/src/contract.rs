//! The workload contract: the events every workload binary prints on stdout, one JSON line each,
//! validated against the shared schema. The only place that parses them.

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

/// An event the conductor acts on; the rest of each line is kept raw in workload.jsonl.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Start(Value),
    Phase {
        name: String,
        t_ns: u64,
    },
    Progress {
        t_ns: u64,
        spawned: u64,
        target: u64,
        alive: u64,
    },
    Peak {
        alive: u64,
        expected: u64,
    },
    /// serve: its sockets listen on these addresses (`IP:PORT`), the moment to start the load.
    Listening {
        addrs: Vec<String>,
    },
    Result(Value),
}

/// The schema both workloads follow, compiled once per event kind so that a violation names the
/// field at fault (a failed `oneOf` over all events would only say "no event matched").
pub struct Contract {
    by_event: Vec<(String, jsonschema::Validator)>,
}

/// The workload flag that closes its start gate: after its `start` event it waits for a line (or
/// EOF) on stdin before its first phase, and the conductor reads the base meanwhile
/// (measure/follow.rs). Every workload the conductor runs gets it; a binary older than the gate
/// refuses it at validation.
pub const START_GATE_FLAG: &str = "--wait-to-start";

pub const SCHEMA: &str = include_str!("../../../schema/workload-events.schema.json");

impl Contract {
    pub fn new() -> Result<Self> {
        let schema: Value = serde_json::from_str(SCHEMA).context("the event schema is not JSON")?;
        let mut by_event = Vec::new();
        for kind in ["start", "phase", "progress", "peak", "listening", "result"] {
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
                t_ns: u("t_ns"),
                spawned: u("spawned"),
                target: u("target"),
                alive: u("alive"),
            },
            "peak" => Event::Peak {
                alive: u("alive"),
                expected: u("expected"),
            },
            "listening" => Event::Listening {
                addrs: value["addrs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect(),
            },
            _ => Event::Result(value),
        })
    }
}

/// The workload's `result` event among the events it printed, if it printed one.
pub fn result_event(events: &[Value]) -> Option<&Value> {
    events.iter().rev().find(|e| e["event"] == "result")
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
                t_ns: 5,
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
}
