//! warmup.json: what `spawnscope warm-up` did before a set's counted runs (trace.sh's `warmup/`).

use serde::{Deserialize, Serialize};

use super::Calibration;

/// The warm-up of a set: one calibration per workload to be run, then memory touched page by page
/// as much as the largest of them will use, and given back. Nothing in it is counted.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct WarmUpRecord {
    pub schema: u32,
    pub created_utc: String,
    pub argv: Vec<String>,
    /// One calibration per workload named, which the counted runs take (`run --calibration-from`).
    pub calibrated: Vec<WarmUpCalibration>,
    /// What was touched, and how long each chunk took.
    pub touched: Touched,
}

/// A workload's calibration, as `run` would have made it, with what it estimated for N.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WarmUpCalibration {
    pub runtime: String,
    pub workload: String,
    pub n: u64,
    /// The workload's flags (`--stack-size 65536` …) as `run` records them.
    pub flags: Vec<(String, String)>,
    pub calibration: Calibration,
    /// What the run at N is estimated to take out of free memory.
    pub needed_bytes: u64,
}

/// Anonymous memory written one byte a page, in chunks spread over the CPUs, then unmapped.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Touched {
    /// What was asked: the largest estimate, with a quarter more for the conductor and the probes.
    pub wanted_bytes: u64,
    /// What was touched (less than wanted when interrupted, or capped at what may be used).
    pub bytes: u64,
    pub page_bytes: u64,
    /// Why less than wanted was touched, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
    /// Each chunk's size and the time its pages took to write, in the order they finished.
    pub chunks: Vec<TouchedChunk>,
    pub threads: u32,
    /// From the first touch to the last chunk given back.
    pub wall_ns: u64,
    /// Σ `managed` of /proc/zoneinfo before and after, in KiB: its growth is memory the kernel
    /// initialized for the first time since boot (deferred page init) during the warm-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_kb_before: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_kb_after: Option<u64>,
}

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TouchedChunk {
    pub bytes: u64,
    pub ns: u64,
}

impl Touched {
    /// Nanoseconds a page, per chunk, sorted.
    pub fn per_page_ns(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .chunks
            .iter()
            .filter(|c| c.bytes >= self.page_bytes && self.page_bytes > 0)
            .map(|c| c.ns as f64 / (c.bytes / self.page_bytes) as f64)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Chunks whose pages took at least `COLD_FACTOR` times the fastest chunk's: memory the host
    /// had to back (first touched since boot, or handed back to it), or the kernel to initialize.
    pub fn cold_chunks(&self) -> usize {
        let per_page = self.per_page_ns();
        let Some(fastest) = per_page.first().copied() else {
            return 0;
        };
        per_page
            .iter()
            .filter(|&&ns| ns >= fastest * COLD_FACTOR)
            .count()
    }

    /// KiB the kernel initialized for the first time since boot while touching.
    pub fn first_used_kb(&self) -> Option<u64> {
        Some(
            self.managed_kb_after?
                .saturating_sub(self.managed_kb_before?),
        )
    }
}

/// A chunk this many times slower a page than the fastest is cold: on M1 a page first touched
/// since boot took 16 µs against 2 µs warm (docs/first-run), 8×; noise between warm chunks
/// stays within 1.5×.
pub const COLD_FACTOR: f64 = 3.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn touched(chunks_ns: &[u64]) -> Touched {
        Touched {
            page_bytes: 4096,
            chunks: chunks_ns
                .iter()
                .map(|&ns| TouchedChunk {
                    bytes: 4096 * 1000,
                    ns,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_chunk_three_times_slower_a_page_than_the_fastest_is_cold() {
        // 2 µs a page warm, 16 µs cold (the first-run evidence), and warm noise.
        let t = touched(&[2_000_000, 2_900_000, 16_000_000, 5_900_000, 6_000_000]);
        assert_eq!(t.per_page_ns()[0], 2_000.0);
        assert_eq!(t.cold_chunks(), 2);
        assert_eq!(touched(&[]).cold_chunks(), 0);
    }

    #[test]
    fn first_used_memory_is_the_growth_of_the_managed_pages() {
        let mut t = touched(&[1]);
        assert_eq!(t.first_used_kb(), None);
        t.managed_kb_before = Some(4_417_748);
        t.managed_kb_after = Some(4_417_748 + 131_072);
        assert_eq!(t.first_used_kb(), Some(131_072));
    }
}
