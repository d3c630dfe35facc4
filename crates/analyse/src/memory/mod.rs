//! Memory: the run's processes at the peak and whether a per-task figure is resolved.

pub mod per_task;
pub mod processes;
pub mod resolution;
