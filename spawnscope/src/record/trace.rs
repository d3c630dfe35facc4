//! What the capture of `--perfetto` said about itself: collector.json's `trace` section, read
//! tolerantly (absent in runs recorded without `--perfetto` or before the section existed), and
//! the raw records' file, opened as a stream (`spawnscope_collector::trace_events::Reader`:
//! bounded memory however many records).

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use serde_json::Value;
use spawnscope_collector::trace_events::Reader;

use crate::record::{COLLECTOR, TRACE_EVENTS};

/// The capture's own account of the raw records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceCapture {
    /// Records the capture could not keep: the ring buffer had no room (counted by the probes,
    /// never silently dropped), or taken from it but not written (a write error).
    pub records_lost: Option<u64>,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC at the capture's start, ns: the records are on the boot
    /// clock, the conductor's marks and samples on the monotonic one.
    pub boottime_minus_monotonic_ns: Option<i64>,
    /// Why the capture stopped writing (a full disk…), when it did: the records are a prefix.
    pub incomplete: Option<String>,
    /// Switches of the run's tasks no program saw (the kernel's doing): a thread's stint on a CPU
    /// may be missing from the records.
    pub switches_unseen: Option<u64>,
}

/// collector.json's `trace` section; None when the file or the section is absent.
pub fn read_capture(dir: &Path) -> Option<TraceCapture> {
    let text = std::fs::read_to_string(dir.join(COLLECTOR)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    capture_of(v.get("trace")?)
}

fn capture_of(trace: &Value) -> Option<TraceCapture> {
    let first = |names: &[&str]| names.iter().find_map(|n| trace.get(*n)).cloned();
    // The capture's own section (collector.json `trace`: `lost` in the ring, `lost_writing` after
    // a write error) or this reader's name for their sum.
    let lost_writing = trace
        .get("lost_writing")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let capture = TraceCapture {
        records_lost: first(&["records_lost", "lost"])
            .and_then(|v| v.as_u64())
            .map(|n| n + lost_writing),
        boottime_minus_monotonic_ns: first(&["boottime_minus_monotonic_ns", "boot_offset_ns"])
            .and_then(|v| v.as_i64()),
        incomplete: first(&["incomplete", "error"]).and_then(|v| v.as_str().map(str::to_string)),
        switches_unseen: trace.get("switches_unseen").and_then(Value::as_u64),
    };
    trace.is_object().then_some(capture)
}

/// Whether the run directory holds raw trace records.
pub fn has_events(dir: &Path) -> bool {
    dir.join(TRACE_EVENTS).is_file()
}

/// The raw records, one at a time.
pub fn open_events(dir: &Path) -> io::Result<Reader<BufReader<File>>> {
    let file = File::open(dir.join(TRACE_EVENTS))?;
    Ok(Reader::new(BufReader::with_capacity(1 << 20, file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_is_read_by_its_names_and_absent_fields_stay_unknown() {
        let v: Value = serde_json::json!({
            "records_lost": 3, "boottime_minus_monotonic_ns": 1_500_000_000i64
        });
        assert_eq!(
            capture_of(&v),
            Some(TraceCapture {
                records_lost: Some(3),
                boottime_minus_monotonic_ns: Some(1_500_000_000),
                incomplete: None,
                switches_unseen: None,
            })
        );
        // As the capture writes it (collector/src/model.rs, Trace).
        let v: Value = serde_json::json!({
            "records": 10, "lost": 2, "lost_writing": 1, "error": "No space left on device",
            "boottime_minus_monotonic_ns": 7u64, "complete": false, "switches_unseen": 15
        });
        assert_eq!(
            capture_of(&v),
            Some(TraceCapture {
                records_lost: Some(3),
                boottime_minus_monotonic_ns: Some(7),
                incomplete: Some("No space left on device".into()),
                switches_unseen: Some(15),
            })
        );
        assert_eq!(capture_of(&serde_json::json!(null)), None);
        assert_eq!(
            capture_of(&serde_json::json!({})),
            Some(TraceCapture::default())
        );
    }
}
