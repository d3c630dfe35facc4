//! Time and its verdict: trustworthy or suspect and why, the noise sentinels, repeats, paired runs, where the CPU time went.

pub mod attribution;
pub mod outside_cpu;
pub mod paired;
pub mod repeats;
pub mod rules;
pub mod sentinels;
pub mod times_from;
pub mod untraced_causes;
pub mod verdict;
