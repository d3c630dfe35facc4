//! This machine: what the kernel shows in /proc and /sys, the cgroups and sysctls a run changes
//! (and puts back), the machine's fingerprint, privileges, clocks, tracefs and signals. Nothing
//! here knows about runtimes, workloads or figures.

pub mod binary;
pub mod cgroup;
pub mod clock;
pub mod cpu_order;
pub mod disk;
pub mod jdk;
pub mod limits;
pub mod machine;
pub mod privileges;
pub mod procfs;
pub mod rcu;
pub mod sentinels;
pub mod signals;
pub mod sysctl;
pub mod tracefs;
