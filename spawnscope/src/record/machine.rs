//! machine.json: the machine a run was measured on. A figure means little without the hardware,
//! kernel and tunables behind it, and `report` shows fingerprints of runs from different machines
//! side by side. (host::machine reads them.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The hardware, kernel, tunables and toolchains of one machine.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
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
}

impl Fingerprint {
    /// One line: hardware, kernel, tunables and toolchains (a summary's "Machine:").
    pub fn describe(&self) -> String {
        format!(
            "{}, {} cores, {} RAM, kernel {} ({}), {}; THP {}; glibc {}; {}; {}",
            self.cpu_model,
            self.cores,
            crate::units::bytes(self.memory_total_bytes as f64),
            self.kernel,
            self.arch,
            self.virtualization,
            self.transparent_hugepages,
            self.glibc,
            self.rust.as_deref().unwrap_or("rust ?"),
            self.go.as_deref().unwrap_or("go ?")
        )
    }
}
