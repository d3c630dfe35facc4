//! Time and its verdict: trustworthy or suspect and why, the noise sentinels, repeats, paired runs, where the CPU time went.

pub mod attribution;
pub mod flame;
pub mod repeats;
pub mod sentinels;
pub mod verdict;
