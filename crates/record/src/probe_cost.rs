//! The raw records of `spawnscope probe-cost`: every timed round of every hook's loop, and what the
//! kernel's run-time statistics counted of each attached program in it (measure/probe_cost.rs
//! takes them, analyse/probes/probe_cost.rs derives the figures from them: raw records live here, so that
//! analyse/ reads nothing from measure/).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The lean probes' programs no loop times, and why: part of what a probe-cost record means, so
/// the loops (measure) and the page that lists the untimed programs (render) read it here.
pub const NOT_LOOPED: &[(&str, &str)] = &[(
    "sched:sched_process_exec",
    "runs for the run once, at the exec that arms the counting (a loop of execs would re-arm it); other processes' execs return at its first test",
)];

/// What is attached to the hook while its loop runs. A cycle times each hook's loop in every
/// state, in this order; the cycles repeat, so that the machine's drift falls on every state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Nothing.
    Untraced,
    /// The floor: a program that does the least a counting program does, one per-CPU array
    /// increment (probes/floor.bpf.c).
    Floor,
    /// The collector's lean program, attached for a run the loop is not part of: what every
    /// other process on the machine pays while a run is traced.
    Filtered,
    /// The collector's lean program, the loop's process being the run: what a workload pays.
    Lean,
    /// The full probes' program (`--probes full`: per-thread state), the loop's process the run.
    /// Listed, not judged.
    Full,
    /// The lean program with the trace's records (`run --perfetto`). Listed, not judged; only on
    /// the hooks that emit records.
    Trace,
    /// The floor, the loop cold (measure/probe_loops.rs: the caches emptied before each event).
    /// Timed with the statistics on only: an iteration's time is mostly the emptying.
    FloorCold,
    /// The lean program, the loop cold, its maps sized for a run of 100,000 threads: what an
    /// event costs where what it touches is out of the CPU's own caches, as in a big run.
    LeanCold,
    /// The lean program, the loop coldest (every cache emptied before each event, the shared one
    /// too), its maps sized as in LeanCold: the most an event can cost it, the overhead
    /// benchmark's high end.
    LeanColdest,
}

/// One round: `iterations` of the hook's loop in `state`, their wall time, and with the
/// statistics on, what the kernel counted of each attached program meanwhile.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Round {
    /// The hook (`category:name`) whose loop ran.
    pub hook: String,
    /// The cycle it belongs to, from 0.
    pub cycle: u32,
    pub state: State,
    /// The kernel's run-time statistics were on: each program's runs and time were counted, and
    /// cost the round two clock reads a run.
    pub statistics: bool,
    pub iterations: u64,
    pub ns: u64,
    /// Every attached program on the hook (the arming exec program left out), its runs and
    /// nanoseconds in this round as the statistics counted them (empty with them off).
    pub programs: Vec<ProgramRound>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProgramRound {
    pub program: String,
    pub runs: u64,
    pub ns: u64,
    /// Runs the kernel skipped, the program being busy on that CPU already.
    pub recursion_misses: u64,
}

/// A hook's loop: what it does, and how many iterations a round.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct HookLoop {
    pub hook: String,
    /// The loop in words.
    pub loop_does: String,
    pub iterations: u64,
    /// Iterations a cold round, and a coldest one (0 in sets from before them: none was timed).
    #[serde(default)]
    pub cold_iterations: u64,
    #[serde(default)]
    pub coldest_iterations: u64,
    /// What a cold iteration does beyond a warm one.
    #[serde(default)]
    pub cold_does: String,
}

/// What `spawnscope probe-cost` measured, raw: every round of every hook.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Measured {
    pub kernel: String,
    pub cpus: usize,
    /// /proc/loadavg's 1-minute figure before the first round and after the last: the rounds'
    /// spread reads against it.
    pub load_before: f64,
    pub load_after: f64,
    pub cycles: u32,
    pub loops: Vec<HookLoop>,
    pub rounds: Vec<Round>,
    /// States that could not be measured on a hook here, and why.
    pub left_out: Vec<String>,
}
