//! The runtimes' own schedulers: the Go runtime's goroutines, Ps and GC, tokio's tasks.

pub mod go_gc;
pub mod go_procs;
pub mod go_sched;
pub mod tokio_sched;
