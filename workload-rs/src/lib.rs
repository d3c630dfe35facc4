//! The workload contract in Rust, shared by the `threads` and `tokio-tasks` binaries: flags and
//! bad input (cli), the events on stdout (harness, json), why spawning stopped (limits), what a
//! process reads about itself (sys), and serve's HTTP (http) and listeners and counts (serve).
//! Standard library only: it is part of what is measured.
//! goroutines-go/ is the same contract in Go; schema/ holds what all three are tested against.

pub mod cli;
pub mod harness;
pub mod http;
pub mod json;
pub mod limits;
pub mod serve;
pub mod sys;
#[cfg(test)]
mod tables;
pub mod units;

pub use cli::RuntimeFlag;

/// What one workload binary is: its names, and the flags that differ between runtimes.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    /// The binary's name: the start of every stderr line, and the usage's.
    pub name: &'static str,
    /// The `runtime` of its events (`threads`, `tokio`).
    pub runtime: &'static str,
    /// The `runtime_version` of its `start` event (the compiler, or the runtime crate).
    pub runtime_version: &'static str,
    /// The usage's first words: what it spawns ("Spawns OS threads (Rust std::thread)").
    pub about: &'static str,
    /// The channels pingpong and chain use, for the usage.
    pub channels: &'static str,
    /// --stack-size: a thread's stack; async tasks have none.
    pub stack_size: RuntimeFlag,
    /// --workers: the worker threads of an async runtime.
    pub workers: RuntimeFlag,
    /// Why --gomaxprocs (the Go scheduler's processor count) does not apply.
    pub gomaxprocs_refusal: &'static str,
    /// --tokio-trace: tokio's task hooks recorded to a file; only the tokio workload's hooks
    /// build (`--cfg tokio_unstable`, tokio-tasks-hooks) takes it.
    pub tokio_trace: RuntimeFlag,
}
