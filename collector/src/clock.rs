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

/// The kernel's tick (1e9 / HZ ns), for the probes' series clock (jiffies: `tick_ns` in
/// probes/collector/common.bpf.h). /proc/timer_list (root) gives jiffies and CLOCK_MONOTONIC at
/// one moment; jiffies start 300 s short of 2^32 ticks at boot (INITIAL_JIFFIES), so
/// (jiffies − 2^32) / (now − 300 s) is HZ, taken as the nearest of the kernel's choices. None
/// when it cannot be read or fits none, or the kernel is older than bpf_jiffies64 (5.5), whose
/// verifier would refuse every program calling it (the probes then read the clocksource: with the
/// value 0 the call is in a branch the verifier drops).
pub fn ns_per_jiffy() -> Option<u64> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    if !has_jiffies64(&release) {
        return None;
    }
    hz_of_timer_list(&std::fs::read_to_string("/proc/timer_list").ok()?)
        .map(|hz| 1_000_000_000 / hz)
}

/// A kernel release of 5.5 or later (bpf_jiffies64).
fn has_jiffies64(release: &str) -> bool {
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (5, 5)
}

fn hz_of_timer_list(text: &str) -> Option<u64> {
    let now_ns: f64 = text.lines().find_map(|l| {
        l.strip_prefix("now at ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })?;
    let jiffies: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("jiffies:")?.trim().parse().ok())?;
    let seconds = now_ns / 1e9 - 300.0;
    if seconds <= 1.0 {
        return None;
    }
    let hz = (jiffies - 4_294_967_296.0) / seconds;
    [100u64, 250, 300, 1000]
        .into_iter()
        .find(|c| (hz - *c as f64).abs() < 0.02 * *c as f64)
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

    #[test]
    fn jiffies_are_read_by_the_probes_from_5_5_on() {
        assert!(has_jiffies64("6.18.44-fc-v657\n"));
        assert!(has_jiffies64("5.5.0"));
        assert!(!has_jiffies64("5.4.280"));
        assert!(!has_jiffies64("4.19.0-27-amd64"));
        assert!(!has_jiffies64("garbage"));
    }

    #[test]
    fn the_tick_is_read_from_jiffies_against_the_clock_since_boot() {
        // This machine's: 6.4 h up at HZ 250.
        let text = "Timer List Version: v0.10\nnow at 23176562851018 nsecs\n  .last_jiffies   : 4300555299\njiffies: 4300686617\n";
        assert_eq!(hz_of_timer_list(text), Some(250));
        let at_1000 = "now at 1000000000000 nsecs\njiffies: 4295667296\n";
        assert_eq!(hz_of_timer_list(at_1000), Some(1000));
        assert_eq!(
            hz_of_timer_list("now at 5000000000000 nsecs\njiffies: 4294967296\n"),
            None,
            "no HZ fits"
        );
        assert_eq!(hz_of_timer_list("jiffies: 4300686617\n"), None, "no clock");
        assert_eq!(
            hz_of_timer_list("now at 200000000000 nsecs\njiffies: 1\n"),
            None,
            "before 300 s"
        );
    }
}
