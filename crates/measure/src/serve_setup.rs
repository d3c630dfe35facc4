//! What a serve run is set up with before it starts: its connections and the loopback addresses
//! its server listens on, the accept queue it needs, and the defaults a serve invocation gets.

use crate::options::RunOptions;
use host::sysctl::{self};
use record::{self, Target};
use runtime::{Invocation, WorkloadKind};

/// serve: (connections, loopback addresses the server listens on), from the invocation.
pub(crate) fn serve_connections(target: &Target) -> Option<(u64, u64)> {
    match target {
        Target::Workload(inv) if inv.workload == WorkloadKind::Serve => {
            let addresses = inv
                .flag("--addrs")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            Some((inv.n, addresses))
        }
        _ => None,
    }
}

/// serve: the listen(2) backlog it asks for (--backlog, else the workloads' 4096).
pub(crate) fn serve_backlog(target: &Target) -> u64 {
    match target {
        Target::Workload(inv) => inv
            .flag("--backlog")
            .and_then(|v| v.parse().ok())
            .unwrap_or(WORKLOAD_BACKLOG),
        Target::Command { .. } => 0,
    }
}

/// A server's flags where the user gave none, for C connections:
/// - more connections than one address takes (CONNECTIONS_PER_ADDRESS: the load generator's
///   ephemeral ports): more loopback addresses (--addrs);
/// - more connections per address than the workloads' own backlog (4096): an accept queue that
///   holds them (--backlog). wrk connects all of them at once; past a full queue, the kernel
///   drops the handshake's last ACK and the client retransmits after 1 s, 3 s…, and the load
///   measures the connecting. (Not seen on the 2-core VM, whose connects the port search held
///   back: host/sysctl.rs, PORT_RANGE; a faster load generator fills the queue.)
pub(crate) fn with_serve_defaults(mut opts: RunOptions) -> RunOptions {
    if let Target::Workload(inv) = &mut opts.target {
        add_serve_defaults(inv);
    }
    opts
}

fn add_serve_defaults(inv: &mut Invocation) {
    if inv.workload != WorkloadKind::Serve {
        return;
    }
    // A value that does not parse is the workload's to refuse (bad input), not to add to.
    let addresses = match inv.flag("--addrs") {
        Some(given) => given.parse().unwrap_or(1),
        None => {
            let needed = sysctl::addresses_for(inv.n);
            if needed > 1 {
                inv.flags.push(("--addrs".into(), needed.to_string()));
            }
            needed
        }
    };
    let per_address = inv.n.div_ceil(addresses.max(1));
    if inv.flag("--backlog").is_none() && per_address > WORKLOAD_BACKLOG {
        let backlog = per_address.min(sysctl::BACKLOG_LIMIT);
        inv.flags.push(("--backlog".into(), backlog.to_string()));
    }
}

/// The workloads' own listen(2) backlog, where --backlog is not given.
const WORKLOAD_BACKLOG: u64 = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::{Invocation, Runtime, WorkloadKind};

    #[test]
    fn a_server_gets_addresses_and_an_accept_queue_for_its_connections() {
        let serve = |n: u64, flags: &[(&str, &str)]| {
            let mut inv = Invocation {
                runtime: Runtime::Tokio,
                workload: WorkloadKind::Serve,
                n,
                flags: flags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            };
            add_serve_defaults(&mut inv);
            let flag = |name| inv.flag(name).map(String::from);
            (flag("--addrs"), flag("--backlog"))
        };
        assert_eq!(
            serve(1000, &[]),
            (None, None),
            "the workloads' own defaults"
        );
        assert_eq!(serve(19_000, &[]), (None, Some("19000".into())));
        assert_eq!(
            serve(120_000, &[]),
            (Some("4".into()), Some("30000".into())),
            "a queue per address"
        );
        assert_eq!(
            serve(19_000, &[("--backlog", "128"), ("--addrs", "2")]),
            (Some("2".into()), Some("128".into())),
            "what the user gave stands"
        );
        assert_eq!(
            serve(19_000, &[("--addrs", "4")]),
            (Some("4".into()), Some("4750".into()))
        );
    }
}
