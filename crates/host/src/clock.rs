//! The clock every timestamp of a run is on: CLOCK_MONOTONIC, which the workloads' `t_ns`, perf's
//! `-k CLOCK_MONOTONIC` samples and the collector's bpf_ktime_get_ns() share. One reader for the
//! whole project: the collector crate's.

pub use spawnscope_collector::clock::monotonic_ns;

/// CLOCK_BOOTTIME, ns: the clock of a task's start time in /proc/PID/stat (suspend included).
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which lives on this stack frame.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
