//! Several runs side by side: cells, fits over N, CPU sweeps, headlines, published studies beside ours.

pub mod compare;
pub mod cpu_sweep;
pub mod headline;
pub mod kernel_gaps;
pub mod regression;
pub mod reproduce;
pub mod run_point;
