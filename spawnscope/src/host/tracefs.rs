//! tracefs, where tracepoints are defined: libbpf finds them there.

use std::path::Path;

/// Where tracepoint definitions are readable, if tracefs is mounted.
pub fn events_dir() -> Option<&'static Path> {
    [
        "/sys/kernel/tracing/events",
        "/sys/kernel/debug/tracing/events",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.join("sched").is_dir())
}

/// Mounts tracefs at /sys/kernel/tracing when no tracefs is mounted (root only).
pub fn mount_if_missing() {
    if events_dir().is_none() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
}
