//! Traces: the scheduler trace and its cuts, swimlanes, timelines, wake-to-run latency.

pub mod on_cpu;
pub mod runtime_latency;
pub mod sched_trace;
pub mod swimlane;
pub mod timeline;
pub mod trace_cut;
