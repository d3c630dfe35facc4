//! From raw records to figures, and nothing else: no process is started, no file is read or
//! written here (the commands load records and write what is derived). One run: its summary (time,
//! memory that adds up, phases), its probe figures, the kernel's waits and where its CPU time went. Several runs:
//! cells, fits over N (and whether each is resolved at the N measured), and published experiments beside ours.

pub mod attribution;
pub mod compare;
pub mod counts_verdict;
pub mod cpu_sweep;
pub mod go_gc;
pub mod go_procs;
pub mod go_sched;
pub mod headline;
pub mod kernel_gaps;
pub mod on_cpu;
pub mod overhead_band;
pub mod paired;
pub mod phases;
pub mod probe_cost;
pub mod probes;
pub mod processes;
pub mod regression;
pub mod repeats;
pub mod reproduce;
pub mod resolution;
pub mod rules;
pub mod run_point;
pub mod runtime_latency;
pub mod sched_trace;
pub mod sentinels;
pub mod serving;
pub mod summary;
pub mod swimlane;
#[cfg(test)]
pub mod test_support;
pub mod timeline;
pub mod times_from;
pub mod tokio_sched;
pub mod trace_cut;
pub mod untraced_causes;
pub mod verdict;
pub mod waits;
