//! Memory: what one task holds, part by part, and the run's processes at the peak.

pub mod per_task;
pub mod processes;
