//! Reads the fingerprint of this machine (record::Fingerprint, machine.json).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{binary, cgroup, procfs, sentinels, sysctl};
use record::Fingerprint;

/// What tells the toolchains that built the workloads, best first: the workloads' own `start`
/// events (a run of that runtime), then the binaries themselves, then the toolchains on PATH.
#[derive(Clone, Debug, Default)]
pub struct Toolchains {
    pub go_from_event: Option<String>,
    pub rust_from_event: Option<String>,
    /// The runtime whose start event gave the version above ("threads", "tokio"), for its source.
    pub event_runtime: Option<String>,
    /// The goroutines binary a run would start.
    pub goroutines_bin: Option<PathBuf>,
    /// The threads binary a run would start.
    pub threads_bin: Option<PathBuf>,
}

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

/// The THP mode in force: always, madvise or never.
pub fn transparent_hugepages() -> String {
    let text = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']').map(str::to_string))
        .unwrap_or(text)
}

/// The first words of a /sys/devices/system/cpu/vulnerabilities file: the state before any `;`
/// detail, three words at most ("Mitigation: Retpolines", "Vulnerable", "Not affected").
pub fn mitigation_words(text: &str) -> String {
    let head = text
        .lines()
        .next()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("");
    let words: Vec<&str> = head.split_whitespace().take(3).collect();
    words
        .join(" ")
        .trim_end_matches([',', ':', ';'])
        .to_string()
}

fn mitigations() -> BTreeMap<String, String> {
    let Ok(entries) = fs::read_dir("/sys/devices/system/cpu/vulnerabilities") else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let text = fs::read_to_string(e.path()).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                mitigation_words(&text),
            ))
        })
        .collect()
}

/// DAMON's kdamonds from its sysfs admin directory: "no kdamond", "1 kdamond: on",
/// "2 kdamonds: on, off". None when the directory is absent (no DAMON sysfs in this kernel).
pub fn damon_in(kdamonds: &Path) -> Option<String> {
    let count: usize = fs::read_to_string(kdamonds.join("nr_kdamonds"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if count == 0 {
        return Some("no kdamond".into());
    }
    let states: Vec<String> = (0..count)
        .map(|i| {
            fs::read_to_string(kdamonds.join(i.to_string()).join("state"))
                .map_or("?".into(), |s| s.trim().to_string())
        })
        .collect();
    Some(format!(
        "{count} kdamond{}: {}",
        if count == 1 { "" } else { "s" },
        states.join(", ")
    ))
}

fn smt() -> Option<String> {
    let active = fs::read_to_string("/sys/devices/system/cpu/smt/active").ok();
    let control = fs::read_to_string("/sys/devices/system/cpu/smt/control").ok();
    match (active, control) {
        (None, None) => None,
        (a, c) => Some(format!(
            "active {}, control {}",
            a.as_deref().map_or("?", str::trim),
            c.as_deref().map_or("?", str::trim)
        )),
    }
}

/// The scaling governors in use over the CPUs; None without cpufreq.
fn cpufreq_governor() -> Option<String> {
    let governors: BTreeSet<String> = fs::read_dir("/sys/devices/system/cpu")
        .ok()?
        .flatten()
        .filter_map(|e| {
            fs::read_to_string(e.path().join("cpufreq/scaling_governor"))
                .ok()
                .map(|g| g.trim().to_string())
        })
        .collect();
    (!governors.is_empty()).then(|| governors.into_iter().collect::<Vec<_>>().join(", "))
}

/// A place a toolchain's version may be read from: its name, and the reading.
type VersionSource<'a> = (String, Box<dyn FnOnce() -> Option<String> + 'a>);

/// A toolchain's version from the first place that has it, in order of trust; `sources` records
/// which (by `key`).
fn first_found(
    sources: &mut BTreeMap<String, String>,
    key: &str,
    tries: Vec<VersionSource<'_>>,
) -> Option<String> {
    for (from, get) in tries {
        if let Some(version) = get() {
            sources.insert(key.to_string(), from);
            return Some(version);
        }
    }
    None
}

/// Reads the fingerprint. Go and Rust versions: see `Toolchains`.
pub fn fingerprint(toolchains: &Toolchains) -> Fingerprint {
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
    let mut sources = BTreeMap::new();
    let mut not_available = BTreeMap::new();
    let path_of = |p: &Path| p.display().to_string();
    let event_source = |usual: &str| {
        format!(
            "{} start event",
            toolchains.event_runtime.as_deref().unwrap_or(usual)
        )
    };
    let go = first_found(
        &mut sources,
        "go",
        vec![
            (
                event_source("goroutines"),
                Box::new(|| toolchains.go_from_event.clone()),
            ),
            (
                toolchains
                    .goroutines_bin
                    .as_ref()
                    .map_or(String::new(), |b| {
                        format!("goroutines binary build info ({})", path_of(b))
                    }),
                Box::new(|| binary::go_version(toolchains.goroutines_bin.as_ref()?)),
            ),
            (
                "go toolchain on PATH".into(),
                Box::new(|| tool_version("go", "version")),
            ),
        ],
    );
    let rust = first_found(
        &mut sources,
        "rust",
        vec![
            (
                event_source("threads"),
                Box::new(|| toolchains.rust_from_event.clone()),
            ),
            (
                toolchains.threads_bin.as_ref().map_or(String::new(), |b| {
                    format!("threads binary .comment ({})", path_of(b))
                }),
                Box::new(|| binary::rust_version(toolchains.threads_bin.as_ref()?)),
            ),
            (
                "rustc on PATH".into(),
                Box::new(|| tool_version("rustc", "--version")),
            ),
        ],
    );
    let free_page_reporting = sentinels::page_reporting_parameters();
    if free_page_reporting.is_none() {
        not_available.insert(
            "free_page_reporting".to_string(),
            "no /sys/module/page_reporting: the kernel has no free page reporting".to_string(),
        );
    }
    let balloon = Path::new("/sys/bus/virtio/drivers/virtio_balloon")
        .is_dir()
        .then(sentinels::balloon_devices);
    if balloon.is_none() {
        not_available.insert(
            "balloon_devices".to_string(),
            "no virtio_balloon driver in /sys/bus/virtio/drivers".to_string(),
        );
    }
    let damon = damon_in(Path::new("/sys/kernel/mm/damon/admin/kdamonds"));
    if damon.is_none() {
        not_available.insert(
            "damon".to_string(),
            "no /sys/kernel/mm/damon/admin: the kernel has no DAMON sysfs".to_string(),
        );
    }
    let smt = smt();
    if smt.is_none() {
        not_available.insert(
            "smt".to_string(),
            "no /sys/devices/system/cpu/smt".to_string(),
        );
    }
    let cpufreq_governor = cpufreq_governor();
    if cpufreq_governor.is_none() {
        not_available.insert(
            "cpufreq_governor".to_string(),
            "no cpufreq in /sys/devices/system/cpu/cpu*/ (usual in a VM)".to_string(),
        );
    }
    let mitigations = mitigations();
    if mitigations.is_empty() {
        not_available.insert(
            "mitigations".to_string(),
            "no /sys/devices/system/cpu/vulnerabilities".to_string(),
        );
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
        go,
        rust,
        cgroup: cgroup::describe_host(),
        sysctls,
        free_page_reporting,
        balloon_devices: balloon,
        damon,
        mitigations,
        smt,
        cpufreq_governor,
        kernel_cmdline: fs::read_to_string("/proc/cmdline")
            .ok()
            .map(|c| c.trim().to_string()),
        spawnscope_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        spawnscope_commit: Some(BUILD_COMMIT.get().copied().unwrap_or("unknown").to_string()),
        toolchain_sources: sources,
        not_available,
        hypervisor: hypervisor_signature(),
    }
}

/// The commit the running binary was built from ("abc1234", with "-dirty"): the binary's build
/// script stamps it, so main hands it over before anything is measured ("unknown" until then, as
/// in this crate's tests). Kept here rather than stamped into this crate, so that a change in
/// another crate does not rebuild the host and everything above it.
static BUILD_COMMIT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Says which commit the running conductor was built from (main, at its start).
pub fn set_build_commit(commit: &'static str) {
    let _ = BUILD_COMMIT.set(commit);
}

/// This machine's CPU is emulated (QEMU's TCG): everything takes many times longer.
pub fn cpu_emulated() -> bool {
    hypervisor_signature().as_deref() == Some(record::machine::TCG_SIGNATURE)
}

/// The hypervisor's CPUID signature (leaf 0x40000000, 12 bytes in EBX, ECX, EDX), when CPUID
/// leaf 1 says a hypervisor is present (ECX bit 31).
#[cfg(target_arch = "x86_64")]
fn hypervisor_signature() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // Leaves past the CPU's highest return another leaf's values: the presence bit rules that out.
    let present = __cpuid(1).ecx & (1 << 31) != 0;
    if !present {
        return None;
    }
    let leaf = __cpuid(0x4000_0000);
    let bytes: Vec<u8> = [leaf.ebx, leaf.ecx, leaf.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .filter(|b| *b != 0)
        .collect();
    let signature = String::from_utf8_lossy(&bytes).trim().to_string();
    (!signature.is_empty()).then_some(signature)
}

#[cfg(not(target_arch = "x86_64"))]
fn hypervisor_signature() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mitigations_in_a_few_words() {
        // This dev VM's /sys/devices/system/cpu/vulnerabilities.
        for (text, words) in [
            ("Not affected\n", "Not affected"),
            ("Vulnerable\n", "Vulnerable"),
            (
                "Vulnerable: Safe RET, no microcode\n",
                "Vulnerable: Safe RET",
            ),
            (
                "Mitigation: Retpolines; STIBP: disabled; RSB filling; PBRSB-eIBRS: Not affected\n",
                "Mitigation: Retpolines",
            ),
            (
                "Mitigation: usercopy/swapgs barriers and __user pointer sanitization\n",
                "Mitigation: usercopy/swapgs barriers",
            ),
        ] {
            assert_eq!(mitigation_words(text), words);
        }
    }

    #[test]
    fn damon_from_its_sysfs() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(damon_in(&dir.path().join("absent")), None, "no DAMON sysfs");
        // DAMON sysfs with no kdamond configured.
        fs::write(dir.path().join("nr_kdamonds"), "0\n").unwrap();
        assert_eq!(damon_in(dir.path()).as_deref(), Some("no kdamond"));
        fs::write(dir.path().join("nr_kdamonds"), "2\n").unwrap();
        for (i, state) in ["on\n", "off\n"].iter().enumerate() {
            fs::create_dir(dir.path().join(i.to_string())).unwrap();
            fs::write(dir.path().join(i.to_string()).join("state"), state).unwrap();
        }
        assert_eq!(damon_in(dir.path()).as_deref(), Some("2 kdamonds: on, off"));
        // Live: the dev VM runs one ("1 kdamond: on"); a host without DAMON gives None.
        let here = damon_in(Path::new("/sys/kernel/mm/damon/admin/kdamonds"));
        assert_eq!(
            here.is_some(),
            Path::new("/sys/kernel/mm/damon/admin/kdamonds").is_dir()
        );
    }

    #[test]
    fn reads_this_machine() {
        let f = fingerprint(&Toolchains {
            go_from_event: Some("go1.0".into()),
            threads_bin: std::env::current_exe().ok(),
            ..Default::default()
        });
        assert!(f.rust.as_deref().is_some_and(|r| r.starts_with("rustc 1.")));
        assert!(f.toolchain_sources["rust"].starts_with("threads binary .comment"));
        assert!(f.kernel_cmdline.is_some() && f.spawnscope_commit.is_some());
        assert!(f.describe_details().is_some());
        // Every fingerprint field the host lacks is said so, not left empty.
        assert_eq!(
            f.free_page_reporting.is_none(),
            f.not_available.contains_key("free_page_reporting")
        );
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
