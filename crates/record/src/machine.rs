//! machine.json: the machine a run was measured on. A figure means little without the hardware,
//! kernel and tunables behind it, and `report` shows fingerprints of runs from different machines
//! side by side. (host::machine reads them.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The hardware, kernel, tunables and toolchains of one machine.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Fingerprint {
    pub hostname: String,
    pub kernel: String,
    pub arch: String,
    pub cpu_model: String,
    pub cores: usize,
    pub memory_total_bytes: u64,
    pub virtualization: String,
    /// /sys/kernel/mm/transparent_hugepage/enabled, the bracketed choice.
    pub transparent_hugepages: String,
    pub glibc: String,
    pub go: Option<String>,
    pub rust: Option<String>,
    pub cgroup: String,
    pub sysctls: BTreeMap<String, String>,
    // Added with the noise sentinels; absent from older machine.json files (and then not
    // written back, so a comparison of old runs keeps its bytes).
    /// Free page reporting (the guest hands free memory back to the host): the module's
    /// parameters, page_reporting_order first among them. None: the kernel has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_page_reporting: Option<BTreeMap<String, String>>,
    /// Virtio balloon devices (virtio0…); empty with none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balloon_devices: Option<Vec<String>>,
    /// DAMON's kdamonds and their states ("2 kdamonds: on, off"); None without DAMON sysfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damon: Option<String>,
    /// /sys/devices/system/cpu/vulnerabilities: name -> the first words of its state.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mitigations: BTreeMap<String, String>,
    /// /sys/devices/system/cpu/smt: "active 0, control notsupported".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt: Option<String>,
    /// cpufreq scaling governors in use (one, or several joined by ", ").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpufreq_governor: Option<String>,
    /// /proc/cmdline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_cmdline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawnscope_version: Option<String>,
    /// The git commit spawnscope was built from ("abc1234", "abc1234-dirty", "unknown").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawnscope_commit: Option<String>,
    /// Where `go` and `rust` were read: "workload start event", "goroutines binary build info
    /// (PATH)", "threads binary .comment (PATH)", "toolchain on PATH".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub toolchain_sources: BTreeMap<String, String>,
    /// Fingerprint fields this host cannot give, with why (never an empty value as if read).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_available: BTreeMap<String, String>,
    /// The hypervisor's CPUID signature (leaf 0x40000000: "KVMKVMKVM", "TCGTCGTCGTCG" for
    /// QEMU's emulation); None on bare metal, off x86 or in fingerprints older than the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
}

/// The CPUID hypervisor signature of QEMU's emulation (TCG).
pub const TCG_SIGNATURE: &str = "TCGTCGTCGTCG";

impl Fingerprint {
    /// The memory controller is on cgroup v2 ("v2", or a hybrid whose memory is v2).
    pub fn memory_cgroup_v2(&self) -> bool {
        self.cgroup == "v2" || self.cgroup.contains("memory: v2")
    }

    /// The emulator that ran this machine's CPU, when it was emulated (QEMU's TCG, as the kernel
    /// matrix's VMs are when KVM cannot boot their kernel): its time figures measure the
    /// emulator, not the kernel. Older fingerprints have no signature; TCG names itself in the
    /// CPU model as well ("QEMU TCG CPU version 2.5+").
    pub fn emulator(&self) -> Option<&'static str> {
        let tcg = self.hypervisor.as_deref() == Some(TCG_SIGNATURE)
            || self.cpu_model.contains("QEMU TCG");
        tcg.then_some("QEMU TCG")
    }

    /// One line: hardware, kernel, tunables and toolchains (a summary's "Machine:").
    pub fn describe(&self) -> String {
        format!(
            "{}, {} cores, {} RAM, kernel {} ({}), {}; THP {}; glibc {}; {}; {}",
            self.cpu_model,
            self.cores,
            units::bytes(self.memory_total_bytes as f64),
            self.kernel,
            self.arch,
            self.virtualization,
            self.transparent_hugepages,
            self.glibc,
            self.rust.as_deref().unwrap_or("rust ?"),
            self.go.as_deref().unwrap_or("go ?")
        )
    }

    /// One more line for fingerprints that have the sentinel-era fields (None for older ones):
    /// the conductor, the host's memory give-back, DAMON, SMT, governor and mitigations, briefly.
    pub fn describe_details(&self) -> Option<String> {
        let version = self.spawnscope_version.as_ref()?;
        let absent = |field: &str| {
            if self.not_available.contains_key(field) {
                "not available here".to_string()
            } else {
                "?".to_string()
            }
        };
        let reporting = match &self.free_page_reporting {
            Some(p) => format!(
                "order {}",
                p.get("page_reporting_order").map_or("?", String::as_str)
            ),
            None => absent("free_page_reporting"),
        };
        let balloon = match &self.balloon_devices {
            Some(d) if !d.is_empty() => d.join(", "),
            Some(_) => "none".into(),
            None => absent("balloon_devices"),
        };
        let vulnerable = self
            .mitigations
            .values()
            .filter(|v| v.starts_with("Vulnerable"))
            .count();
        let mitigated = self
            .mitigations
            .values()
            .filter(|v| v.starts_with("Mitigation"))
            .count();
        let field = |v: &Option<String>, name: &str| v.clone().unwrap_or_else(|| absent(name));
        Some(format!(
            "spawnscope {version} ({}); free page reporting: {reporting}; balloon: {balloon}; DAMON: {}; SMT: {}; governor: {}; CPU vulnerabilities: {mitigated} mitigated, {vulnerable} vulnerable (machine.json)",
            self.spawnscope_commit.as_deref().unwrap_or("?"),
            field(&self.damon, "damon"),
            field(&self.smt, "smt"),
            field(&self.cpufreq_governor, "cpufreq_governor"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcg_is_told_by_its_cpuid_signature_or_its_cpu_model_and_kvm_is_not_emulated() {
        let machine = |cpu_model: &str, hypervisor: Option<&str>| Fingerprint {
            cpu_model: cpu_model.into(),
            hypervisor: hypervisor.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(
            machine("QEMU Virtual CPU version 2.5+", Some("TCGTCGTCGTCG")).emulator(),
            Some("QEMU TCG")
        );
        // Fingerprints from before the signature was recorded: the model names TCG.
        assert_eq!(
            machine("QEMU TCG CPU version 2.5+", None).emulator(),
            Some("QEMU TCG")
        );
        assert_eq!(machine("AMD EPYC", Some("KVMKVMKVM")).emulator(), None);
        assert_eq!(
            machine("QEMU Virtual CPU version 2.5+", Some("KVMKVMKVM")).emulator(),
            None
        );
        assert_eq!(machine("AMD EPYC", None).emulator(), None);
    }
}
