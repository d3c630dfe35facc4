//! The one clock: CLOCK_MONOTONIC, which bpf_ktime_get_ns() reads in the kernel and the workloads
//! stamp their events with, so times from all three sides compare directly. And the one
//! exception, CLOCK_BOOTTIME, which the trace's records are stamped on (Perfetto reads ftrace
//! data on it), with the offset that lines the two up.

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_BOOTTIME in ns: CLOCK_MONOTONIC plus the time the machine was suspended.
pub fn boottime_ns() -> u64 {
    read(libc::CLOCK_BOOTTIME)
}

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_BOOTTIME − CLOCK_MONOTONIC, ns, and how far it may be off: each of `tries` readings of
/// BOOTTIME is bracketed by two of MONOTONIC, and the tightest bracket is kept (its midpoint;
/// half its width is the uncertainty). The two clocks move together unless the machine suspends.
pub fn boottime_offset(tries: usize) -> (u64, u64) {
    (0..tries.max(1))
        .map(|_| {
            let before = monotonic_ns();
            let boot = boottime_ns();
            let after = monotonic_ns();
            let width = after - before;
            (boot.saturating_sub(before + width / 2), width.div_ceil(2))
        })
        .min_by_key(|&(_, uncertainty)| uncertainty)
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }

    #[test]
    fn boottime_runs_with_monotonic_and_the_offset_says_how_far_apart() {
        let (offset, uncertainty) = boottime_offset(8);
        assert!(uncertainty < 1_000_000, "a bracket of {uncertainty} ns");
        // A reading of each, taken in between: the offset holds within the brackets.
        let before = monotonic_ns();
        let boot = boottime_ns();
        let after = monotonic_ns();
        assert!(
            boot >= before + offset - uncertainty,
            "{boot} {before} {offset}"
        );
        assert!(
            boot <= after + offset + uncertainty,
            "{boot} {after} {offset}"
        );
    }
}
