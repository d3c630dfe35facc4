//! What the capture of `--perfetto` said about itself: collector.json's `trace` section, read
//! tolerantly (absent in runs recorded without `--perfetto` or before the section existed), and
//! the raw records' file, opened as a stream (`spawnscope_collector::trace_events::Reader`:
//! bounded memory however many records).

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use serde_json::Value;
use spawnscope_collector::trace_events::Reader;

use crate::{COLLECTOR, TRACE_EVENTS};
use units::{bytes, count};

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
    /// Where the capture reached its cap (`--trace-max-size`), in words: the records kept, up to
    /// when, those past it. The records are whole up to that time, and the trace's figures cover
    /// that window only.
    pub capped: Option<String>,
    /// Past the cap: every record stamped before this (BOOTTIME ns) is in the file.
    pub kept_until_ns: Option<u64>,
}

/// collector.json's `trace` section; None when the file or the section is absent.
pub fn read_capture(dir: &Path) -> Option<TraceCapture> {
    let text = std::fs::read_to_string(dir.join(COLLECTOR)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    capture_of(v.get("trace")?, v.get("t0_ns").and_then(Value::as_u64))
}

/// The section; `t0_ns`: the report's start (MONOTONIC), where the kept window is told from.
fn capture_of(trace: &Value, t0_ns: Option<u64>) -> Option<TraceCapture> {
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
        capped: capped(trace, t0_ns),
        kept_until_ns: trace
            .get("kept_until_ns")
            .and_then(Value::as_u64)
            .filter(|_| trace.get("past_cap").and_then(Value::as_u64) > Some(0)),
    };
    trace.is_object().then_some(capture)
}

/// The capped capture's window in words, from the section's `past_cap`, `records`,
/// `kept_until_ns` and `max_bytes`; None when nothing went past the cap.
fn capped(trace: &Value, t0_ns: Option<u64>) -> Option<String> {
    let u = |name: &str| trace.get(name).and_then(Value::as_u64);
    let past = u("past_cap").filter(|&n| n > 0)?;
    let offset = u("boottime_minus_monotonic_ns");
    let until = match (u("kept_until_ns"), offset, t0_ns) {
        (Some(boot), Some(offset), Some(t0)) => format!(
            "up to {:.3} s into the run",
            (boot as f64 - offset as f64 - t0 as f64) / 1e9
        ),
        _ => "up to a time not said".into(),
    };
    Some(format!(
        "the trace was capped at {} (--trace-max-size): {} records kept, {until}, {} past the cap",
        bytes(u("max_bytes").unwrap_or(0) as f64),
        count(u("records").unwrap_or(0)),
        count(past)
    ))
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
            capture_of(&v, None),
            Some(TraceCapture {
                records_lost: Some(3),
                boottime_minus_monotonic_ns: Some(1_500_000_000),
                incomplete: None,
                switches_unseen: None,
                capped: None,
                kept_until_ns: None,
            })
        );
        // As the capture writes it (collector/src/model.rs, Trace).
        let v: Value = serde_json::json!({
            "records": 10, "lost": 2, "lost_writing": 1, "error": "No space left on device",
            "boottime_minus_monotonic_ns": 7u64, "complete": false, "switches_unseen": 15
        });
        assert_eq!(
            capture_of(&v, None),
            Some(TraceCapture {
                records_lost: Some(3),
                boottime_minus_monotonic_ns: Some(7),
                incomplete: Some("No space left on device".into()),
                switches_unseen: Some(15),
                capped: None,
                kept_until_ns: None,
            })
        );
        assert_eq!(capture_of(&serde_json::json!(null), None), None);
        assert_eq!(
            capture_of(&serde_json::json!({}), None),
            Some(TraceCapture::default())
        );
    }

    #[test]
    fn a_capped_capture_says_its_window() {
        let v: Value = serde_json::json!({
            "records": 16384, "past_cap": 5000, "max_bytes": 1048576u64,
            "kept_until_ns": 12_500_000_000u64, "boottime_minus_monotonic_ns": 2_000_000_000u64
        });
        assert_eq!(
            capture_of(&v, Some(10_000_000_000)).unwrap().capped.as_deref(),
            Some("the trace was capped at 1.0 MiB (--trace-max-size): 16,384 records kept, up to 0.500 s into the run, 5,000 past the cap")
        );
        let none_past = serde_json::json!({"records": 3, "past_cap": 0});
        assert_eq!(capture_of(&none_past, Some(0)).unwrap().capped, None);
    }
}
