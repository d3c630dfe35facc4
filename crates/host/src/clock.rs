//! The clock every timestamp of a run is on: CLOCK_MONOTONIC, which the workloads' `t_ns`, perf's
//! `-k CLOCK_MONOTONIC` samples and the collector's bpf_ktime_get_ns() share. One reader for the
//! whole project: the collector crate's.

pub use spawnscope_collector::clock::monotonic_ns;

/// This process's CPU time so far, every thread of it (CLOCK_PROCESS_CPUTIME_ID), ns: exact, the
/// threads' time up to now included, where /proc/self/stat counts clock ticks. None if the
/// clock cannot be read.
pub fn process_cpu_ns() -> Option<u64> {
    read_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn read_clock(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which lives on this stack frame.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_BOOTTIME, ns: the clock of a task's start time in /proc/PID/stat (suspend included).
pub fn boottime_ns() -> u64 {
    read_clock(libc::CLOCK_BOOTTIME).unwrap_or(0)
}
