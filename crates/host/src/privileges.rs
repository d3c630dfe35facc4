//! Whether this process may tune the kernel, make cgroups, load BPF and run perf.

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// CAP_SYS_RESOURCE (capability(7)): what raising a hard rlimit takes.
pub const CAP_SYS_RESOURCE: u32 = 24;

/// Whether `cap` is in this process's effective capability set, as /proc/self/status shows it
/// (in a user namespace of its own, a capability shows that counts only there).
pub fn has_capability(cap: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| effective_capabilities(&status))
        .is_some_and(|caps| caps & (1 << cap) != 0)
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
}
