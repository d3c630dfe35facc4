//! Whether this process may tune the kernel, make cgroups, load BPF and run perf.

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// CAP_SYS_RESOURCE (capability(7)): what raising a hard rlimit takes.
const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process may raise a hard rlimit (RLIMIT_NOFILE for a server's connections).
/// Root usually may; the root of a container started without CAP_SYS_RESOURCE may not, nor one
/// in a user namespace of its own (the capability shows, but counts only in the initial one).
/// So it is tried: this process's hard RLIMIT_NOFILE raised by one and put back. Where it is at
/// fs.nr_open already (no raise possible), the capability set says.
pub fn can_raise_hard_limits() -> bool {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills a valid rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) };
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if now.rlim_max < nr_open {
        let raised = libc::rlimit {
            rlim_max: now.rlim_max + 1,
            ..now
        };
        // SAFETY: setrlimit with valid limits; lowering back to `now` is always allowed.
        return unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0
                && libc::setrlimit(libc::RLIMIT_NOFILE, &now) == 0
        };
    }
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| effective_capabilities(&status))
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

/// The effective capability set of a /proc/PID/status text (its `CapEff:` line, hex).
fn effective_capabilities(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_sys_resource_is_read_from_cap_eff() {
        // This sandbox's root: every capability but CAP_SYS_RESOURCE.
        let without = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001fffeffffff\n";
        let caps = effective_capabilities(without).unwrap();
        assert_eq!(caps & (1 << CAP_SYS_RESOURCE), 0);
        assert_ne!(caps & 1, 0, "CAP_CHOWN");
        let with = "CapEff:\t000001ffffffffff\n";
        assert_ne!(
            effective_capabilities(with).unwrap() & (1 << CAP_SYS_RESOURCE),
            0
        );
        assert_eq!(effective_capabilities("Name:\tx\n"), None);
    }

    /// What this process reports agrees with what the kernel lets it do.
    #[test]
    fn the_answer_matches_what_setrlimit_allows() {
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: prlimit on this process reads into a valid rlimit.
        unsafe { libc::prlimit(0, libc::RLIMIT_NOFILE, std::ptr::null(), &mut now) };
        let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        // Past fs.nr_open the kernel refuses even with the capability.
        if now.rlim_max >= nr_open {
            eprintln!(
                "skipped: RLIMIT_NOFILE's hard limit {} is already at fs.nr_open",
                now.rlim_max
            );
            return;
        }
        // In a child, so this process keeps its limits.
        let raised = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -Hn {}", now.rlim_max + 1))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert_eq!(
            raised,
            can_raise_hard_limits(),
            "hard limit {}",
            now.rlim_max
        );
    }
}
