//! `run --runtime-trace` for real (issue 39, the Go half): the goroutines workload writes the Go
//! execution trace into the run directory, gotrace-reduce turns it into raw records, and the
//! derivation puts every goroutine's running slices on a track under its OS thread's in the
//! Perfetto trace (the M's TID is a thread the kernel's trace describes in the workload's
//! process: the ThreadID = gettid() claim, checked), counts the runtime's transitions
//! beside the workload's own (created = spawned), and `report` writes it all again byte for byte.
//! Runtimes without a runtime trace are bad input. Root tests skip with a printed reason.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use common::trace::check_trace;
use common::*;
use perfetto_protos::trace_packet::TracePacket;
use perfetto_protos::track_event::track_event::Type;
use protobuf::CodedInputStream;

/// The reducer beside spawnscope (where it is looked for), built when missing; None (said) where
/// this machine's Go cannot build it.
fn ensure_reducer(test: &str) -> Option<PathBuf> {
    let path = spawnscope_bin().parent().unwrap().join("gotrace-reduce");
    let status = Command::new(repo_root().join("scripts/build-gotrace-reduce.sh"))
        .arg(&path)
        .status()
        .unwrap();
    match status.code() {
        Some(0) => Some(path),
        Some(3) => {
            println!("SKIP {test}: no Go 1.26 toolchain to build gotrace-reduce");
            None
        }
        _ => panic!("building gotrace-reduce: {status}"),
    }
}

#[test]
fn runtimes_without_a_runtime_trace_are_bad_input() {
    ensure_workloads();
    let sandbox = Sandbox::new();
    let run = |runtime: &'static str| -> Vec<&'static str> {
        vec![
            "--runtime",
            runtime,
            "--workload",
            "hold",
            "--n",
            "10",
            "--runtime-trace",
        ]
    };
    let threads = run("threads");
    let mut no_probes = run("goroutines");
    no_probes.push("--no-probes");
    let command = ["--runtime-trace", "--", "true"];
    let cases: Vec<(&[&str], &str)> = vec![
        (&threads, "--runtime-trace: threads"),
        (&no_probes, "--no-probes"),
        (&command, "--runtime-trace is for a workload"),
    ];
    // tokio takes it through its hooks build: tests/runtime_trace_tokio.rs.
    assert_runs_refused(&sandbox, &cases);
}

#[test]
fn goroutines_run_on_their_threads_in_the_trace_and_created_is_spawned() {
    let test = "goroutines_run_on_their_threads_in_the_trace_and_created_is_spawned";
    if skip_unless_root(test) {
        return;
    }
    let Some(_reducer) = ensure_reducer(test) else {
        return;
    };
    // The goroutines binary must have --go-trace: built fresh, the one way it is built.
    let status = Command::new(repo_root().join("scripts/build-goroutines.sh"))
        .arg(spawnscope_bin().with_file_name("goroutines"))
        .status()
        .unwrap();
    assert!(status.success(), "building goroutines");
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox.run(&[
        "--runtime",
        "goroutines",
        "--workload",
        "pingpong",
        "--n",
        "100",
        "--rounds",
        "50",
        "--runtime-trace",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let dir = sandbox.only_results_dir();
    for raw in [
        "go-execution.trace",
        "go-sched.bin",
        "go-sched.json",
        "trace-events.bin",
    ] {
        assert!(dir.join(raw).is_file(), "{raw} missing");
    }
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    let go = &summary["runtime_trace"];
    let reduced = read_json(dir.join("go-sched.json"));
    // Created in the trace = the workload's spawned (2 × 100), the runtime's own apart.
    assert_eq!(go["created_check"]["by_the_workload"], 200, "{go}");
    assert_eq!(go["created_check"]["workload_spawned"], 200, "{go}");
    assert_eq!(go["created_check"]["agrees"], true);
    assert!(go["created_check"]["runtime_own"]
        .as_object()
        .unwrap()
        .keys()
        .all(|f| !f.starts_with("main.")));
    assert_eq!(go["runtime_traced"], true);
    // Every round trip blocks both sides on a channel receive at least once per round.
    assert!(go["blocked_by_reason"]["chan receive"].as_u64().unwrap() >= 100 * 50);
    let whole = go["readied_to_running"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "whole run")
        .expect("a whole-run row");
    assert_eq!(whole["count"], reduced["counts"]["readied_to_running"]);
    assert_eq!(go["records"], reduced["records"]);
    // Every runtime event on a CPU by the kernel's trace, its thread's.
    let on_cpu = &go["on_cpu"];
    assert_eq!(on_cpu["passed"], true, "{on_cpu}");
    assert!(
        on_cpu["checked"].as_u64().unwrap() * 10 >= go["records"].as_u64().unwrap() * 9,
        "{on_cpu}"
    );
    assert!(
        summary["left_out"]
            .as_array()
            .is_none_or(|l| l.iter().all(|i| !i.as_str().unwrap().contains("runtime"))),
        "{}",
        summary["left_out"]
    );

    // The Perfetto trace: whole and sound, with the goroutines' tracks under the kernel's
    // threads of the workload's process.
    let trace_path = dir.join("trace.perfetto-trace");
    let facts = check_trace(&trace_path);
    assert!(facts.problems.is_empty(), "{:?}", facts.problems);
    let pid = read_json(dir.join("run.json"))["pid"].as_i64().unwrap() as i32;
    let bytes = fs::read(&trace_path).unwrap();
    let mut input = CodedInputStream::from_bytes(&bytes);
    let mut parents: BTreeMap<u64, u64> = BTreeMap::new();
    let mut thread_of_track: BTreeMap<u64, i32> = BTreeMap::new();
    let mut begins_by_track: BTreeMap<u64, u64> = BTreeMap::new();
    let mut goids = BTreeSet::new();
    let mut begins = 0u64;
    while input.read_raw_tag_or_eof().unwrap().is_some() {
        let p: TracePacket = input.read_message().unwrap();
        if p.has_track_descriptor() {
            let d = p.track_descriptor();
            if let Some(th) = d.thread.as_ref() {
                thread_of_track.insert(d.uuid(), th.tid());
                assert_eq!(th.pid(), pid, "thread {} of another process", th.tid());
            }
            if d.name() == "goroutines" {
                parents.insert(d.uuid(), d.parent_uuid());
            }
        }
        if p.trusted_packet_sequence_id() == 3 && p.has_track_event() {
            let e = p.track_event();
            assert!(
                parents.contains_key(&e.track_uuid()),
                "a slice off the goroutines tracks"
            );
            if e.type_() == Type::TYPE_SLICE_BEGIN {
                begins += 1;
                *begins_by_track.entry(e.track_uuid()).or_default() += 1;
                let a = &e.debug_annotations;
                assert_eq!(a.len(), 1, "one annotation: the goid");
                goids.insert(a[0].uint_value());
            }
        }
    }
    assert_eq!(begins, go["running_slices"].as_u64().unwrap());
    // Every goroutines track hangs under a thread the kernel's trace describes (the M's TID is
    // the kernel's), and goroutines ran on each.
    let kernel_threads: BTreeSet<i32> = facts.threads.keys().copied().collect();
    let go_threads: Vec<i64> = go["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    assert_eq!(parents.len(), go_threads.len());
    for (track, parent) in &parents {
        let tid = thread_of_track[parent];
        assert!(
            kernel_threads.contains(&tid),
            "goroutines on TID {tid}, a thread the kernel's trace does not know"
        );
        assert!(go_threads.contains(&(tid as i64)));
        assert!(
            begins_by_track.get(track).is_some_and(|&n| n > 0),
            "no slice on TID {tid}"
        );
    }
    // The workload's 200 goroutines each ran (their goids among the slices).
    assert!(goids.len() >= 200, "{} goroutines with slices", goids.len());
    assert!(
        facts
            .slices
            .keys()
            .any(|name| name.starts_with("main.runPingpong")),
        "{:?}",
        facts.slices.keys()
    );

    // Everything derived comes again from the raw records, byte for byte.
    let derived = [
        "summary.json",
        "summary.md",
        "trace.perfetto-trace",
        "swimlane.svg",
    ];
    let before: Vec<Vec<u8>> = derived
        .iter()
        .map(|f| fs::read(dir.join(f)).unwrap())
        .collect();
    for f in derived {
        fs::remove_file(dir.join(f)).unwrap();
    }
    report_ok(&[&dir]);
    for (f, bytes) in derived.iter().zip(before) {
        assert!(
            fs::read(dir.join(f)).unwrap() == bytes,
            "{f} differs when derived again"
        );
    }
}
