//! Reads the fingerprint of this machine (record::Fingerprint, machine.json).

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

use crate::host::{cgroup, procfs, sysctl};
use crate::record::Fingerprint;

fn first_line(path: &str) -> String {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| t.lines().next().map(str::to_string))
        .unwrap_or_default()
}

fn uname() -> (String, String, String) {
    // SAFETY: a zeroed utsname is valid; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.nodename), field(&u.release), field(&u.machine))
}

fn glibc_version() -> String {
    extern "C" {
        fn gnu_get_libc_version() -> *const libc::c_char;
    }
    // SAFETY: glibc returns a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) }
        .to_string_lossy()
        .into_owned()
}

/// "virtual machine (…)" when the CPU reports a hypervisor, with what systemd-detect-virt and
/// DMI add; "bare metal" otherwise.
fn virtualization() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut notes = Vec::new();
    let product = first_line("/sys/class/dmi/id/product_name");
    if !product.is_empty() {
        notes.push(product);
    }
    if let Some(out) = Command::new("systemd-detect-virt")
        .output()
        .ok()
        .filter(|o| o.status.success())
    {
        notes.push(format!(
            "systemd-detect-virt: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    let kind = if cpuinfo.contains(" hypervisor") {
        "virtual machine"
    } else {
        "bare metal"
    };
    if notes.is_empty() {
        kind.into()
    } else {
        format!("{kind} ({})", notes.join("; "))
    }
}

fn transparent_hugepages() -> String {
    let text = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']').map(str::to_string))
        .unwrap_or(text)
}

/// Reads the fingerprint. Go and Rust versions come from the workloads' own `start` events when
/// known (what built the measured binaries), else from the toolchains on PATH.
pub fn fingerprint(go: Option<String>, rust: Option<String>) -> Fingerprint {
    let (hostname, kernel, arch) = uname();
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let tool_version = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let mut sysctls = BTreeMap::new();
    for key in sysctl::MANAGED
        .iter()
        .chain(["vm.overcommit_memory", "kernel.perf_event_paranoid"].iter())
    {
        if let Ok(value) = fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/"))) {
            sysctls.insert(key.to_string(), value.trim().to_string());
        }
    }
    Fingerprint {
        hostname,
        kernel,
        arch,
        cpu_model,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_total_bytes: procfs::meminfo()
            .ok()
            .and_then(|m| m.get("MemTotal").copied())
            .unwrap_or(0)
            * 1024,
        virtualization: virtualization(),
        transparent_hugepages: transparent_hugepages(),
        glibc: glibc_version(),
        go: go.or_else(|| tool_version("go", "version")),
        rust: rust.or_else(|| tool_version("rustc", "--version")),
        cgroup: cgroup::describe_host(),
        sysctls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_machine() {
        let f = fingerprint(Some("go1.0".into()), None);
        assert!(!f.kernel.is_empty() && f.cores >= 1 && f.memory_total_bytes > 0);
        assert!(f.glibc.starts_with("2."), "{}", f.glibc);
        assert_eq!(
            f.go.as_deref(),
            Some("go1.0"),
            "the workload's own version wins"
        );
        assert!(f.sysctls.contains_key("kernel.pid_max"));
        assert!(["always", "madvise", "never"].contains(&f.transparent_hugepages.as_str()));
    }
}
