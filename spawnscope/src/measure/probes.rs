//! Starting the eBPF collector (the spawnscope-collector crate) on a workload held at its gate.

use spawnscope_collector::{Collector, Config as CollectorConfig, FaultKinds};

use crate::host::tracefs;

/// Loads the eBPF collector for the workload's PID. What cannot be loaded is said, not fatal.
/// `full` (`--probes full`): the collector's per-thread state and the kinds of page faults too;
/// without it, counters, series and cross-checks only, at a fraction of the cost.
pub fn start(pid: u32, tasks: u64, full: bool, left_out: &mut Vec<String>) -> Option<Collector> {
    // libbpf finds tracepoints through tracefs.
    tracefs::mount_if_missing();
    let mut config = CollectorConfig::new(pid, tasks.max(1));
    config.per_thread = full;
    config.fault_kinds = if full {
        FaultKinds::StackHeap
    } else {
        FaultKinds::Off
    };
    match Collector::start(&config) {
        Ok(collector) => {
            // Probes left out by choice are said once, below, not one by one.
            for missing in collector
                .missing()
                .iter()
                .filter(|m| m.reason != spawnscope_collector::PER_THREAD_ONLY)
            {
                left_out.push(format!(
                    "probe {} not loaded: {}",
                    missing.probe, missing.reason
                ));
            }
            if !full {
                left_out.push("eBPF probes: per-thread figures (on-CPU, run-queue, futex and clone times, RSS over time) and page faults by kind not kept: --probes full keeps them, at about twice the cost".into());
            }
            Some(collector)
        }
        Err(err) => {
            left_out.push(format!("eBPF probes: {err}"));
            None
        }
    }
}
