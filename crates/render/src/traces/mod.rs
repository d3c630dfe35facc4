//! Traces: the scheduler trace and its cuts, swimlanes, timelines, wake-to-run latency.

pub mod perfetto;
pub mod perfetto_goroutines;
pub mod perfetto_procs;
pub mod perfetto_runtime;
pub mod perfetto_tokio;
pub mod runtime_latency;
pub mod sched_trace;
pub mod swimlane;
