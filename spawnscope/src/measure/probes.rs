//! Starting the eBPF collector (the spawnscope-collector crate) on a workload held at its gate.

use spawnscope_collector::{Collector, Config as CollectorConfig};

use crate::host::tracefs;

/// Loads the eBPF collector for the workload's PID. What cannot be loaded is said, not fatal.
pub fn start(pid: u32, tasks: u64, left_out: &mut Vec<String>) -> Option<Collector> {
    // libbpf finds tracepoints through tracefs.
    tracefs::mount_if_missing();
    match Collector::start(&CollectorConfig::new(pid, tasks.max(1))) {
        Ok(collector) => {
            for missing in collector.missing() {
                left_out.push(format!(
                    "probe {} not loaded: {}",
                    missing.probe, missing.reason
                ));
            }
            Some(collector)
        }
        Err(err) => {
            left_out.push(format!("eBPF probes: {err}"));
            None
        }
    }
}
