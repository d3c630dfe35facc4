//! The eBPF probes: their counts and the counts' verdict, what each program costs, the kernel's waits.

pub mod counts;
pub mod probe_cost;
pub mod waits;
