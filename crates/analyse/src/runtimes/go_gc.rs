//! The Go GC's own account of its work, from the goroutines workload's result event
//! (`runtime_stats.gc_at_getrusage`, `gc_per_phase`: runtime/metrics read at the workload's
//! getrusage call and at every phase mark). Go's GC marks every live goroutine's stack each
//! cycle, so how many cycles a run had, and when they fell, moves its user time: this is what
//! names a goroutines run's user-time outlier (analyse::untraced_causes).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The GC's cycles and CPU over one span.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GcSpan {
    /// The workload's phase (its mark's name: spawn, steady, join…).
    pub name: String,
    /// GC cycles that ended within it.
    pub cycles: u64,
    /// Their CPU seconds (/cpu/classes/gc/total).
    pub cpu_s: f64,
}

/// The Go GC's work over a run, as the runtime estimates it. The runtime adds a cycle's CPU in
/// when the cycle ends, and estimates each class from time spent holding a P (a pause counts
/// GOMAXPROCS times its latency): an upper bound of the CPU the GC used, set beside the
/// process's user time, not a part of it measured by the kernel.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GoGc {
    /// GC cycles completed by the workload's getrusage call.
    pub cycles: u64,
    /// Their CPU seconds, all kinds (/cpu/classes/gc/total).
    pub cpu_s: f64,
    /// Marking done by goroutines that allocated while the GC was behind (/cpu/classes/gc/mark/assist).
    pub assist_cpu_s: f64,
    /// Marking on the Ps the GC takes for itself (its 25 % of GOMAXPROCS; mark/dedicated).
    pub dedicated_cpu_s: f64,
    /// Marking on Ps that had nothing else to run (mark/idle): CPU the program would not have used.
    pub idle_cpu_s: f64,
    /// Stop-the-world pauses, GOMAXPROCS times their latency (/cpu/classes/gc/pause).
    pub pause_cpu_s: f64,
    /// Per phase span of the workload (its own phases, not startup or exit).
    pub per_phase: Vec<GcSpan>,
}

impl GoGc {
    /// From a result event; None where it has no such figures (other runtimes, runs recorded
    /// before they were reported).
    pub fn of(result: &Value) -> Option<GoGc> {
        let stats = &result["runtime_stats"];
        let at = &stats["gc_at_getrusage"];
        let secs = |key: &str| at[key].as_f64();
        Some(GoGc {
            cycles: at["cycles"].as_u64()?,
            cpu_s: secs("cpu_s")?,
            assist_cpu_s: secs("assist_cpu_s")?,
            dedicated_cpu_s: secs("dedicated_cpu_s")?,
            idle_cpu_s: secs("idle_cpu_s")?,
            pause_cpu_s: secs("pause_cpu_s")?,
            per_phase: stats["gc_per_phase"]
                .as_array()
                .map(|spans| {
                    spans
                        .iter()
                        .filter_map(|p| {
                            Some(GcSpan {
                                name: p["name"].as_str()?.to_string(),
                                cycles: p["cycles"].as_u64()?,
                                cpu_s: p["cpu_s"].as_f64()?,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Where its cycles fell: "spawn 3 cycles 0.90 s, join 2 cycles 0.60 s" (empty: none in
    /// the workload's phases).
    pub fn where_cycles_fell(&self) -> String {
        self.per_phase
            .iter()
            .filter(|p| p.cycles > 0)
            .map(|p| format!("{} {} {:.2} s", p.name, cycles(p.cycles), p.cpu_s))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// "1 cycle", "5 cycles".
pub fn cycles(n: u64) -> String {
    format!("{n} cycle{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn read_from_the_result_event_or_absent() {
        let result = json!({"runtime_stats": {
            "gc_cycles": 3,
            "gc_at_getrusage": {"cycles": 5, "cpu_s": 1.5, "assist_cpu_s": 0.25,
                "dedicated_cpu_s": 0.5, "idle_cpu_s": 0.70, "pause_cpu_s": 0.05},
            "gc_per_phase": [{"name": "spawn", "cycles": 3, "cpu_s": 0.9},
                {"name": "steady", "cycles": 0, "cpu_s": 0.0},
                {"name": "join", "cycles": 2, "cpu_s": 0.6}]}});
        let gc = GoGc::of(&result).unwrap();
        assert_eq!((gc.cycles, gc.cpu_s, gc.idle_cpu_s), (5, 1.5, 0.70));
        assert_eq!(gc.per_phase.len(), 3);
        assert_eq!(gc.per_phase[2].name, "join");
        assert_eq!(
            gc.where_cycles_fell(),
            "spawn 3 cycles 0.90 s, join 2 cycles 0.60 s"
        );
        // A run recorded before the figures, and another runtime's stats.
        assert_eq!(GoGc::of(&json!({"runtime_stats": {"gc_cycles": 3}})), None);
        assert_eq!(
            GoGc::of(&json!({"runtime_stats": {"stack_size_bytes": 8388608}})),
            None
        );
    }
}
