//! The trace's cap (`--trace-max-size`) on real runs, as root: a threads pingpong whose records
//! far exceed 1 MiB keeps at most 1 MiB of whole records, counts the rest past the cap (the
//! accounting adds up to what the programs emitted, none lost), says so in collector.json, the
//! run's left-out and the trace's figures, and `report` derives the Perfetto trace again from
//! the capped file. A results filesystem with too little room refuses a traced run before
//! anything is written; a bad SIZE is bad input. Root tests skip with a printed reason.

mod common;

use std::fs::{self, File};
use std::io::BufReader;
use std::path::PathBuf;
use std::process::Command;

use common::trace::check_trace;
use common::*;
use spawnscope_collector::trace_events::{Reader, RECORD_BYTES};

#[test]
fn a_bad_size_is_bad_input() {
    let sandbox = Sandbox::new();
    assert_runs_refused(
        &sandbox,
        &[(
            &[
                "--runtime",
                "threads",
                "--workload",
                "pingpong",
                "--n",
                "10",
                "--perfetto",
                "--trace-max-size",
                "12q",
            ],
            "--trace-max-size",
        )],
    );
}

#[test]
fn a_capped_trace_keeps_its_first_mib_counts_the_rest_and_says_its_window() {
    let test = "a_capped_trace_keeps_its_first_mib_counts_the_rest_and_says_its_window";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    // 200 pairs × 200 rounds: about 330,000 records uncapped (20 MiB), twenty times the cap.
    let out = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "pingpong",
        "--n",
        "200",
        "--rounds",
        "200",
        "--perfetto",
        "--trace-max-size",
        "1M",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let collector = read_json(dir.join("collector.json"));
    let trace = &collector["trace"];
    println!("{test}: {trace}");
    let u = |name: &str| trace[name].as_u64().unwrap_or_else(|| panic!("{name}"));
    let most = (1u64 << 20) / RECORD_BYTES as u64;
    let records = u("records");
    assert!(records > 0 && records <= most, "{records}");
    assert!(u("past_cap") > 0, "{trace}");
    assert_eq!(u("max_bytes"), 1 << 20);
    assert_eq!(trace["max_rule"], "given by --trace-max-size");
    // Every record the programs emitted is kept, past the cap, or lost (none here).
    assert_eq!(u("lost"), 0, "{trace}");
    assert_eq!(
        records + u("past_cap") + u("lost_writing"),
        u("emitted"),
        "{trace}"
    );
    assert_eq!(trace["complete"], false);
    // The file holds those records, whole, and none stamped after the kept window's end by
    // more than the ring's reserve-to-stamp skew (a record kept after the earliest not kept).
    let file = dir.join("trace-events.bin");
    assert_eq!(
        fs::metadata(&file).unwrap().len(),
        records * RECORD_BYTES as u64
    );
    let mut reader = Reader::new(BufReader::new(File::open(&file).unwrap()));
    let stamps: Vec<u64> = reader.by_ref().map(|e| e.unwrap().ts).collect();
    assert_eq!((reader.unknown, reader.trailing_bytes), (0, 0));
    assert_eq!(stamps.len() as u64, records);
    let kept_until = u("kept_until_ns");
    assert!(kept_until <= *stamps.last().unwrap(), "{trace}");
    assert!(kept_until >= stamps[0], "{trace}");

    // Said in the run's left-out, the trace's figures and the summary.
    let summary = read_json(dir.join("summary.json"));
    let left_out: Vec<&str> = summary["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    let said = left_out
        .iter()
        .find(|l| l.contains("past the cap"))
        .unwrap_or_else(|| panic!("{left_out:?}"));
    assert!(
        said.starts_with(&format!(
            "trace: {} records kept up to ",
            fmt_count(records)
        )),
        "{said}"
    );
    assert!(
        said.ends_with("the figures from the trace cover that window"),
        "{said}"
    );
    let window = summary["scheduler_trace"]["kept_window"].as_str().unwrap();
    assert!(window.contains("capped at 1.0 MiB"), "{window}");
    assert_eq!(summary["swimlane"]["kept_window"].as_str(), Some(window));
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("the figures cover the kept window only"),
        "{md}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("these cover the kept window only"),
        "{stdout}"
    );

    // The Perfetto trace from the capped file decodes whole, and `report` writes it again,
    // byte for byte.
    let perfetto = dir.join("trace.perfetto-trace");
    let facts = check_trace(&perfetto);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    let written = fs::read(&perfetto).unwrap();
    fs::remove_file(&perfetto).unwrap();
    report_ok(&[&dir]);
    assert!(
        fs::read(&perfetto).unwrap() == written,
        "report wrote another trace"
    );
}

/// 1234567 -> "1,234,567", as the left-out says counts.
fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A tmpfs of 100 MiB, unmounted when dropped.
struct SmallFs(PathBuf);

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = fs::remove_dir(&self.0);
    }
}

#[test]
fn a_traced_run_on_a_filesystem_without_room_is_refused_before_anything_is_written() {
    let test = "a_traced_run_on_a_filesystem_without_room_is_refused_before_anything_is_written";
    if skip_unless_root(test) {
        return;
    }
    let mount = std::env::temp_dir().join(format!("spawnscope-tracecap-{}", std::process::id()));
    fs::create_dir_all(&mount).unwrap();
    let small = SmallFs(mount);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=100M", "tmpfs"])
        .arg(&small.0)
        .status()
        .unwrap();
    if !mounted.success() {
        eprintln!("SKIP {test}: no tmpfs mounted");
        return;
    }
    let out_root = small.0.join("results");
    let out = Command::new(spawnscope_bin())
        .args([
            "run",
            "--runtime",
            "threads",
            "--workload",
            "pingpong",
            "--n",
            "10",
        ])
        .arg("--perfetto")
        .arg("--out")
        .arg(&out_root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("has 100 MiB"), "{stderr}");
    assert!(
        !out_root.exists(),
        "the refused run made {}",
        out_root.display()
    );
}
