//! The syscalls that serve requests (`Config::net_syscalls`): which counters each one's probe
//! keeps, so that a report leaves out what was not measured — every one of them when they were
//! not asked for, a syscall's own when its probe could not be attached — rather than show 0.

use crate::model::ProbeStatus;

/// Each syscall's exit tracepoint (a row of `PROBES`) and the counters of enum sc_counter its
/// program adds to.
pub(crate) const NET_SYSCALLS: &[(&str, &[&str])] = &[
    (
        "syscalls:sys_exit_accept",
        &["accept_calls", "accept_failed", "accept_eagain"],
    ),
    (
        "syscalls:sys_exit_accept4",
        &["accept4_calls", "accept4_failed", "accept4_eagain"],
    ),
    (
        "syscalls:sys_exit_read",
        &["read_calls", "read_bytes", "read_eagain"],
    ),
    (
        "syscalls:sys_exit_readv",
        &["readv_calls", "readv_bytes", "readv_eagain"],
    ),
    (
        "syscalls:sys_exit_recvfrom",
        &["recvfrom_calls", "recvfrom_bytes", "recvfrom_eagain"],
    ),
    (
        "syscalls:sys_exit_recvmsg",
        &["recvmsg_calls", "recvmsg_bytes", "recvmsg_eagain"],
    ),
    (
        "syscalls:sys_exit_write",
        &["write_calls", "write_bytes", "write_eagain"],
    ),
    (
        "syscalls:sys_exit_writev",
        &["writev_calls", "writev_bytes", "writev_eagain"],
    ),
    (
        "syscalls:sys_exit_sendto",
        &["sendto_calls", "sendto_bytes", "sendto_eagain"],
    ),
    (
        "syscalls:sys_exit_sendmsg",
        &["sendmsg_calls", "sendmsg_bytes", "sendmsg_eagain"],
    ),
    (
        "syscalls:sys_exit_epoll_wait",
        &["epoll_wait_calls", "epoll_wait_empty"],
    ),
    (
        "syscalls:sys_exit_epoll_pwait",
        &["epoll_pwait_calls", "epoll_pwait_empty"],
    ),
    (
        "syscalls:sys_exit_epoll_pwait2",
        &["epoll_pwait2_calls", "epoll_pwait2_empty"],
    ),
    ("syscalls:sys_exit_epoll_ctl", &["epoll_ctl_calls"]),
    ("syscalls:sys_exit_poll", &["poll_calls"]),
    ("syscalls:sys_exit_ppoll", &["ppoll_calls"]),
    ("syscalls:sys_exit_close", &["close_calls"]),
    ("syscalls:sys_exit_shutdown", &["shutdown_calls"]),
];

/// The counters a report leaves out: all of the above when they were not asked for, else those
/// whose probe is not attached.
pub(crate) fn not_measured(asked: bool, probes: &[ProbeStatus]) -> Vec<&'static str> {
    let attached = |id: &str| probes.iter().any(|p| p.probe == id && p.attach.is_some());
    NET_SYSCALLS
        .iter()
        .filter(|(probe, _)| !asked || !attached(probe))
        .flat_map(|(_, metrics)| metrics.iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::counter;
    use crate::model::Attach;
    use crate::probes::PROBES;

    #[test]
    fn every_net_counter_has_its_probe_and_every_net_probe_its_counters() {
        for (probe, metrics) in NET_SYSCALLS {
            let row = PROBES
                .iter()
                .find(|p| p.id() == *probe)
                .unwrap_or_else(|| panic!("{probe} not in PROBES"));
            assert!(row.net_only && !row.btf && row.classic, "{probe}");
            let syscall = probe.strip_prefix("syscalls:sys_exit_").unwrap();
            for m in *metrics {
                assert!(counter::NAMES.contains(m), "{m}");
                assert!(m.starts_with(&format!("{syscall}_")), "{m} of {probe}");
            }
        }
        let net_probes = PROBES.iter().filter(|p| p.net_only).count();
        assert_eq!(net_probes, NET_SYSCALLS.len());
        // The counters from accept_calls on are exactly these, in this order.
        let first = counter::NAMES
            .iter()
            .position(|n| *n == "accept_calls")
            .unwrap();
        let listed: Vec<&str> = NET_SYSCALLS
            .iter()
            .flat_map(|(_, m)| m.iter().copied())
            .collect();
        assert_eq!(&counter::NAMES[first..], &listed[..]);
    }

    #[test]
    fn not_asked_leaves_all_out_and_a_missing_probe_its_own() {
        let all = not_measured(false, &[]);
        assert_eq!(all.len(), counter::NAMES.len() - counter::ACCEPT_CALLS);
        let probes: Vec<ProbeStatus> = NET_SYSCALLS
            .iter()
            .map(|(probe, _)| ProbeStatus {
                probe: probe.to_string(),
                attach: (*probe != "syscalls:sys_exit_epoll_pwait2").then_some(Attach::Tracepoint),
                note: None,
            })
            .collect();
        assert_eq!(
            not_measured(true, &probes),
            ["epoll_pwait2_calls", "epoll_pwait2_empty"]
        );
        assert!(not_measured(false, &probes).len() > 2);
    }
}
