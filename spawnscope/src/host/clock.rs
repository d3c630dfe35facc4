//! The clock every timestamp of a run is on: CLOCK_MONOTONIC, which the workloads' `t_ns`, perf's
//! `-k CLOCK_MONOTONIC` samples and the collector's bpf_ktime_get_ns() share.

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
