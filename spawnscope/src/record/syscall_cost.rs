//! The raw records of `spawnscope syscall-cost`: every timed round of the getppid() loop and the
//! syscall programs' runs as the kernel's statistics timed them (measure/syscall_cost.rs takes
//! them, analyse/syscall_cost.rs derives the figures from them: raw records live here, so that
//! analyse/ reads nothing from measure/).

use serde::Serialize;

/// The states the loop is timed in. Each cycle runs untraced, attaches the probes, runs traced,
/// with the statistics on, traced again, and detaches them; one more untraced round ends it all,
/// so that the machine's drift falls on every state alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// No probe attached.
    Untraced,
    /// The lean probes attached, the kernel's run-time statistics off.
    Traced,
    /// The same, the statistics on.
    StatisticsOn,
}

/// One round: `calls` getppid() calls in `state`, and their wall time.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    pub state: State,
    pub calls: u64,
    pub ns: u64,
}

/// A syscall-tracing program as the statistics timed it while the loop ran.
#[derive(Clone, Debug, Serialize)]
pub struct ProgramTimed {
    pub program: String,
    pub tracepoint: String,
    /// Its runs while the probes were attached, summed over the cycles (the program counts them
    /// itself): every syscall of the machine's tasks meanwhile.
    pub runs: u64,
    /// Its runs while the statistics were on, and their nanoseconds as the statistics report
    /// them (each run's from their first clock read to their second).
    pub timed_runs: u64,
    pub timed_ns: u64,
}

/// What `spawnscope syscall-cost` measured, raw: every round, and the syscall programs' runs.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub kernel: String,
    pub cpus: usize,
    pub rounds: Vec<Round>,
    pub programs: Vec<ProgramTimed>,
}
