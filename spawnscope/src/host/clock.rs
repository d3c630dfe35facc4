//! The clock every timestamp of a run is on: CLOCK_MONOTONIC, which the workloads' `t_ns`, perf's
//! `-k CLOCK_MONOTONIC` samples and the collector's bpf_ktime_get_ns() share. One reader for the
//! whole project: the collector crate's.

pub use spawnscope_collector::clock::monotonic_ns;
