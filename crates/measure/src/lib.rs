//! The run: refuse what cannot fit, tune the kernel, make the cgroup, start the workload gated,
//! follow it, sample the machine, record perf and the eBPF collector, put everything back, and
//! write the raw records (record/). Nothing here computes a figure for people to read.

pub mod examples;
pub mod execute;
pub mod follow;
pub mod go_trace;
pub mod leash;
pub mod loadgen;
pub mod options;
/// The one launcher (fork, join the cgroup, hold at a gate, exec, wait4), from the collector crate.
pub use spawnscope_collector::launch;
pub mod perf;
pub mod preflight;
pub mod probe_cost;
pub mod probe_loops;
pub mod probe_rates;
pub mod probes;
pub mod run;
pub mod sampler;
pub mod sentinels;
pub mod serve_setup;
pub mod stop;
pub mod sweep;
pub mod tokio_trace;
pub mod trace_cap;
pub mod warmup;
