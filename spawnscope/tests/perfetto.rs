//! The Perfetto trace derived from a run's raw scheduler records: a real run's records
//! (tests/fixtures/before-house: threads sleep 1,000, with the collector) beside a synthetic but
//! realistic trace-events.bin on the same clock (tests/common/trace.rs), then `report`. The
//! written trace is decoded with perfetto_protos and held to what the raw records say
//! (`check_trace`, reusable on a real run's trace); wake-to-run and preempted-to-run in the
//! summary equal the naive counts; deleting the trace and reporting again writes the same bytes.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::trace::{check_trace, naive_counts, synthetic_run, Shape, FIXTURE_RUN, OFFSET_NS};
use common::*;
use serde_json::Value;
use spawnscope_collector::trace_events::{Kind, TraceEvent};

const THREADS: u32 = 200;

/// The fixture's run with [`THREADS`] synthetic threads spawned and joined in its phases.
fn traced_run(tmp: &Path, offset: Option<i64>) -> (PathBuf, Vec<TraceEvent>) {
    common::trace::traced_run(tmp, offset, |pid, spawn_ns, join_ns| {
        synthetic_run(Shape {
            pid,
            threads: THREADS,
            spawn_ns,
            spawn_step_ns: 50_000,
            join_ns,
        })
    })
}

#[test]
fn the_trace_decodes_and_says_what_the_raw_records_say() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, events) = traced_run(tmp.path(), Some(OFFSET_NS));
    report_ok(&[&dir]);
    let trace = dir.join("trace.perfetto-trace");
    let facts = check_trace(&trace);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    assert!(facts.clock_snapshot);

    let pid = events
        .iter()
        .find(|e| e.kind == Kind::NewTask)
        .unwrap()
        .other
        .tid as i32;
    // Every thread of the run, main included, with its tid, process and last name.
    assert_eq!(facts.threads.len(), THREADS as usize + 1);
    assert_eq!(facts.threads[&pid], (pid, "threads".to_string()));
    for i in 0..THREADS as i32 {
        assert_eq!(facts.threads[&(pid + 1 + i)], (pid, format!("w{i}")));
    }
    assert_eq!(
        facts.processes.get(&pid).map(String::as_str),
        Some("threads")
    );

    // Every switch of the raw records, each with the run on a side as Perfetto reads it.
    let count = |kind: Kind| events.iter().filter(|e| e.kind == kind).count() as u64;
    assert_eq!(facts.switches, count(Kind::Switch));
    assert_eq!(facts.run_switches, count(Kind::Switch));
    assert!(
        facts.full_switches > 0,
        "the outside tasks' gaps go out as full switches"
    );
    assert_eq!(facts.wakings, count(Kind::Wakeup) + count(Kind::WakeupNew));
    assert_eq!(facts.newtasks, THREADS as u64);
    assert_eq!(facts.renames, count(Kind::Rename));
    assert_eq!(facts.exits, THREADS as u64 + 1);

    // The phases on the process track, the waits on their threads, the counters.
    for phase in ["startup", "spawn", "join", "exit"] {
        assert_eq!(
            facts.slices.get(phase),
            Some(&1),
            "{phase}: {:?}",
            facts.slices
        );
    }
    assert_eq!(facts.slices["clone"], THREADS as u64);
    assert_eq!(facts.slices["futex"], THREADS as u64 + 1);
    assert_eq!(facts.slices["mmap_lock_write"], 1);
    let memory = read_json(dir.join("memory.json"));
    let samples = memory["timeline"].as_array().unwrap().len() as u64;
    let counter = |prefix: &str| {
        facts
            .counters
            .iter()
            .find(|(name, _)| name.starts_with(prefix))
            .map(|(_, n)| *n)
            .unwrap_or_else(|| panic!("no counter {prefix}: {:?}", facts.counters))
    };
    assert_eq!(counter("memory in use"), samples);
    assert!(counter("tasks alive") > 0);
    assert!(counter("page faults per bucket") > 0);
    assert!(counter("clones") > 0);
    assert!(counter("context switches per bucket") > 0);
    assert_eq!(counter("records lost"), 1);
    assert!(facts
        .track_names
        .iter()
        .any(|n| n.starts_with("note: only switches")));

    // The summary's figures: counts equal the naive ones; the full mode's histogram beside.
    let summary = read_json(dir.join("summary.json"));
    let figures = &summary["scheduler_trace"];
    let whole = |rows: &Value| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["phase"] == "whole run")
            .unwrap()["count"]
            .as_u64()
            .unwrap()
    };
    let (wake, preempted) = naive_counts(&events, pid as u32);
    assert!(wake > THREADS as u64 && preempted > 0, "{wake} {preempted}");
    assert_eq!(whole(&figures["wake_to_run"]), wake);
    assert_eq!(whole(&figures["preempted_to_run"]), preempted);
    let by_phase: u64 = figures["wake_to_run"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] != "whole run")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(by_phase, wake);
    assert_eq!(figures["threads"], THREADS as u64 + 1);
    assert_eq!(figures["records_lost"], 0);
    assert!(figures["probes_runq"]["probes_count"].as_u64().unwrap() > 0);
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("Wake-to-run"), "{md}");
    assert_matches_schemas(&dir);
}

#[test]
fn report_writes_a_missing_trace_again_byte_for_byte_and_leaves_a_present_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = traced_run(tmp.path(), Some(OFFSET_NS));
    report_ok(&[&dir]);
    let trace = dir.join("trace.perfetto-trace");
    let first = fs::read(&trace).unwrap();
    let written_at = fs::metadata(&trace).unwrap().modified().unwrap();
    report_ok(&[&dir]);
    assert_eq!(
        fs::metadata(&trace).unwrap().modified().unwrap(),
        written_at
    );
    fs::remove_file(&trace).unwrap();
    report_ok(&[&dir]);
    assert!(
        fs::read(&trace).unwrap() == first,
        "the trace differs when written again"
    );
}

#[test]
fn without_the_clocks_lined_up_the_trace_has_no_phases_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, events) = traced_run(tmp.path(), None);
    report_ok(&[&dir]);
    let facts = check_trace(&dir.join("trace.perfetto-trace"));
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    assert!(!facts.clock_snapshot);
    assert!(!facts.slices.contains_key("spawn"));
    assert!(facts.counters.is_empty(), "{:?}", facts.counters);
    assert!(facts
        .track_names
        .iter()
        .any(|n| n.contains("no phases or counters")));
    let summary = read_json(dir.join("summary.json"));
    let figures = &summary["scheduler_trace"];
    let rows = figures["wake_to_run"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["phase"], "whole run");
    let pid = events
        .iter()
        .find(|e| e.kind == Kind::NewTask)
        .unwrap()
        .other
        .tid;
    assert_eq!(
        rows[0]["count"].as_u64().unwrap(),
        naive_counts(&events, pid).0
    );
    assert!(figures["records_lost"].is_null());
}

#[test]
fn a_trace_that_cannot_be_written_keeps_the_raw_records_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = traced_run(tmp.path(), Some(OFFSET_NS));
    // Where the trace is written first: a directory, so creating the file fails.
    fs::create_dir(dir.join("trace.perfetto-trace.partial")).unwrap();
    report_ok(&[&dir]);
    assert!(!dir.join("trace.perfetto-trace").exists());
    assert!(dir.join("trace-events.bin").is_file());
    let summary = read_json(dir.join("summary.json"));
    let notes = summary["scheduler_trace"]["notes"].to_string();
    assert!(
        notes.contains("the Perfetto trace is incomplete"),
        "{notes}"
    );
    // Once it can be written, report writes it.
    fs::remove_dir(dir.join("trace.perfetto-trace.partial")).unwrap();
    report_ok(&[&dir]);
    assert!(check_trace(&dir.join("trace.perfetto-trace"))
        .problems
        .is_empty());
}

#[test]
fn a_set_with_a_traced_run_shows_its_latencies_beside_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let (traced, _) = traced_run(tmp.path(), Some(OFFSET_NS));
    let set = tmp.path().join("set");
    fs::create_dir_all(&set).unwrap();
    fs::rename(&traced, set.join("traced")).unwrap();
    let untraced = set.join("untraced");
    fs::create_dir_all(&untraced).unwrap();
    for entry in fs::read_dir(repo_root().join(FIXTURE_RUN))
        .unwrap()
        .flatten()
    {
        fs::copy(entry.path(), untraced.join(entry.file_name())).unwrap();
    }
    report_ok(&[&set]);
    let md = fs::read_to_string(set.join("compare.md")).unwrap();
    assert!(md.contains("## Wake-to-run and preempted-to-run"), "{md}");
    assert!(md.contains("| traced |"), "{md}");
    assert!(!md.contains("| untraced |"), "{md}");
    let compare = read_json(set.join("compare.json"));
    let runs = compare["runs"].as_array().unwrap();
    let traced = runs.iter().find(|r| r["dir"] == "traced").unwrap();
    let summary = read_json(set.join("traced/summary.json"));
    let whole = summary["scheduler_trace"]["wake_to_run"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "whole run")
        .unwrap()
        .clone();
    assert_eq!(traced["wake_to_run"], whole);
    let untraced = runs.iter().find(|r| r["dir"] == "untraced").unwrap();
    assert!(untraced.get("wake_to_run").is_none());
    let html = fs::read_to_string(set.join("report.html")).unwrap();
    assert!(html.contains("id=\"scheduler\""));
}
