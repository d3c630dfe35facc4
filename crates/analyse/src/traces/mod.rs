//! Traces: the scheduler trace and its cuts, swimlanes, timelines, wake-to-run latency.

pub mod on_cpu;
pub mod run_tracks;
pub mod runtime_latency;
pub mod sched_figures;
pub mod sched_trace;
pub mod swimlane;
pub mod thread_states;
pub mod timeline;
pub mod trace_cut;
