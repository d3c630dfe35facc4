//! Several runs side by side: cells, fits over N, CPU sweeps, headlines, published studies beside ours.

pub mod compare;
pub mod cpu_sweep;
