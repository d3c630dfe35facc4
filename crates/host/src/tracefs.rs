//! tracefs, where tracepoints are defined: libbpf finds them there. Where it is mounted is the
//! collector's rule (`spawnscope_collector::tracefs_root`); this adds mounting it.

use std::path::PathBuf;

/// Where tracepoint definitions are readable, if tracefs is mounted.
pub fn events_dir() -> Option<PathBuf> {
    spawnscope_collector::tracefs_root().map(|root| root.join("events"))
}

/// Whether a tracefs is mounted (its directory may be readable by root only).
pub fn mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
    })
}

/// Mounts tracefs at /sys/kernel/tracing when no tracefs is mounted (root only).
pub fn mount_if_missing() {
    if events_dir().is_none() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
}
