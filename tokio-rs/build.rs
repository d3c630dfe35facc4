//! Records which tokio (from the workspace's Cargo.lock) and which Rust built the workload, so
//! `start` events can say so.
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "rustc (unknown)".into());
    let tokio_version = std::fs::read_to_string("../Cargo.lock")
        .ok()
        .and_then(|lock| locked_version(&lock, "tokio"))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TOKIO_VERSION={tokio_version}");
    println!("cargo:rustc-env=TOKIO_RUNTIME_VERSION=tokio {tokio_version}, {rustc_version}");
    // The hooks build's cfg (a RUSTFLAGS cfg tokio reads, not a feature).
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../Cargo.lock");
}

/// The version Cargo.lock pins for package `name`.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"") {
            let version = lines
                .next()?
                .strip_prefix("version = \"")?
                .strip_suffix('"')?;
            return Some(version.to_string());
        }
    }
    None
}
