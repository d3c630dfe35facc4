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
/// when it cannot be read or fits none, or the kernel's verifier does not give tracing programs
/// bpf_jiffies64 (it came in 5.6, and tracepoint programs got it later): a program calling it
/// would be refused, so the probes then read the clocksource (with the value 0 the call is in a
/// branch the verifier drops).
pub fn ns_per_jiffy() -> Option<u64> {
    if !has_jiffies64() {
        return None;
    }
    hz_of_timer_list(&std::fs::read_to_string("/proc/timer_list").ok()?)
        .map(|hz| 1_000_000_000 / hz)
}

/// Whether this kernel lets a tracepoint program call bpf_jiffies64, asked of the kernel itself
/// (libbpf loads a tiny program calling it): a release number cannot say, distributions
/// backport. The tp_btf programs have at least the tracepoints' helpers.
fn has_jiffies64() -> bool {
    // SAFETY: plain values and a null options pointer, which libbpf accepts.
    let answer = unsafe {
        libbpf_rs::libbpf_sys::libbpf_probe_bpf_helper(
            libbpf_rs::libbpf_sys::BPF_PROG_TYPE_TRACEPOINT,
            libbpf_rs::libbpf_sys::BPF_FUNC_jiffies64,
            std::ptr::null(),
        )
    };
    answer == 1
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
    fn the_kernel_is_asked_whether_tracepoint_programs_may_read_jiffies() {
        // Loading the probe program needs CAP_BPF: as root on these machines' kernels (6.1 and
        // later) the answer is yes; otherwise the probe cannot ask, and says no.
        let root = std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
        if root {
            assert!(has_jiffies64());
        } else {
            eprintln!("SKIP the_kernel_is_asked…: not root, the kernel cannot be asked");
        }
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
