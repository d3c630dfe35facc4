//! `run --runtime tokio --runtime-trace` for real (issue 39, the tokio half): the workload's hooks
//! build (tokio-tasks-hooks, --cfg tokio_unstable) runs in the default binary's place and writes
//! tokio's task hooks into the run directory; the derivation puts every poll on a "tokio tasks"
//! track under the thread that ran it in the Perfetto trace (a thread the kernel's trace describes
//! in the workload's process), counts spawns against the workload's own, takes tokio's
//! scheduled→polled per phase, holds every hook event to its thread's on-CPU spans, and `report`
//! writes it all again byte for byte. The default tokio-tasks has no hooks and refuses the flag.
//! Root tests skip with a printed reason.

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

/// The hooks build beside spawnscope (where it is looked for), built the one way it is built,
/// once for all the tests here (they run in parallel; one build, one copy).
fn ensure_hooks() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let path = spawnscope_bin().with_file_name("tokio-tasks-hooks");
            let status = Command::new(repo_root().join("scripts/build-tokio-hooks.sh"))
                .arg(&path)
                .status()
                .unwrap();
            assert!(status.success(), "building tokio-tasks-hooks: {status}");
            path
        })
        .clone()
}

/// A tokio task's hooks are compiled into the hooks build only: the default binary, which memory
/// and time are measured on, has none of its code and refuses the flag; the conductor refuses a
/// runtime trace with no hooks build, or with the default binary in its place, in one line.
#[test]
fn the_default_tokio_binary_has_no_hooks_and_without_the_hooks_build_the_run_is_refused() {
    ensure_workloads();
    let hooks = ensure_hooks();
    let default = spawnscope_bin().with_file_name("tokio-tasks");
    let has_hooks = |p: &PathBuf| {
        let bytes = fs::read(p).unwrap();
        bytes.windows(18).any(|w| w == b"tokio_tasks::hooks")
    };
    assert!(has_hooks(&hooks), "the hooks build's own module is in it");
    assert!(
        !has_hooks(&default),
        "the default tokio-tasks holds the hooks' code"
    );
    let out = Command::new(&default)
        .args(["hold", "--tokio-trace", "/tmp/t.bin"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'--tokio-trace' is not supported"));

    let sandbox = Sandbox::new();
    let out_dir = sandbox.out();
    let args = [
        "run",
        "--out",
        out_dir.to_str().unwrap(),
        "--runtime",
        "tokio",
        "--workload",
        "hold",
        "--n",
        "10",
        "--runtime-trace",
    ];
    for (bin, says) in [
        (
            PathBuf::from("/nonexistent/tokio-tasks-hooks"),
            "build-tokio-hooks.sh",
        ),
        (default.clone(), "is not the hooks build"),
    ] {
        let out = sandbox
            .command(&args)
            .env("SPAWNSCOPE_TOKIO_HOOKS_BIN", &bin)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bin:?}: {stderr}");
        assert!(stderr.contains(says), "{bin:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(sandbox.results_dirs().is_empty());
    }
}

/// One runtime-traced run and what its derivation must show.
fn traced_run(test: &str, args: &[&str]) {
    if skip_unless_root(test) {
        return;
    }
    ensure_hooks();
    let _one = serial();
    let sandbox = Sandbox::new();
    let mut full = vec!["--runtime", "tokio", "--runtime-trace"];
    full.extend_from_slice(args);
    let out = sandbox.run(&full);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let dir = sandbox.only_results_dir();
    for raw in ["tokio-sched.bin", "tokio-sched.json", "trace-events.bin"] {
        assert!(dir.join(raw).is_file(), "{raw} missing");
    }
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    let t = &summary["tokio_trace"];
    let written = read_json(dir.join("tokio-sched.json"));
    // Spawned by the hooks = the workload's own count = tokio's.
    let spawned = t["spawn_check"]["workload_spawned"].as_u64().unwrap();
    assert!(spawned > 0, "{t}");
    assert_eq!(t["spawn_check"]["hooks_spawned"], spawned, "{t}");
    assert_eq!(t["spawn_check"]["runtime_spawned"], spawned, "{t}");
    assert_eq!(t["spawn_check"]["agrees"], true);
    assert_eq!(t["runtime_traced"], true);
    assert_eq!(t["records"], written["records"]);
    assert_eq!(t["dropped"], 0, "{t}");
    // Every task polled at least once, terminated once (the runtime's own apart).
    assert!(t["polls"].as_u64().unwrap() >= spawned);
    assert_eq!(
        t["terminated"].as_u64().unwrap() - t["terminated_unspawned"].as_u64().unwrap(),
        spawned,
        "{t}"
    );
    let rows = t["scheduled_to_polled"].as_array().unwrap();
    let whole = rows.last().expect("a whole-run row");
    assert_eq!(whole["phase"], "whole run");
    assert_eq!(whole["count"], written["counts"]["polls_begun"], "{t}");
    // Every hook event on a CPU by the kernel's trace, its thread's.
    let on_cpu = &t["on_cpu"];
    assert_eq!(on_cpu["passed"], true, "{on_cpu}");
    assert_eq!(on_cpu["checked"], t["records"], "{on_cpu}");
    // tokio's workers: each with its TID, the kernel's futex waits of it counted.
    let workers = t["workers"].as_array().unwrap();
    assert!(!workers.is_empty());
    for w in workers {
        assert!(w["tid"].as_u64().is_some(), "{w}");
        assert!(w["kernel_futex_waits"].as_u64().is_some(), "{w}");
    }
    assert!(
        summary["left_out"]
            .as_array()
            .is_none_or(|l| l.iter().all(|i| !i.as_str().unwrap().contains("tokio"))),
        "{}",
        summary["left_out"]
    );

    // The Perfetto trace: whole and sound, every poll on a "tokio tasks" track under a thread of
    // the workload's process that the kernel's trace describes.
    let trace_path = dir.join("trace.perfetto-trace");
    let facts = check_trace(&trace_path);
    assert!(facts.problems.is_empty(), "{:?}", facts.problems);
    let pid = read_json(dir.join("run.json"))["pid"].as_i64().unwrap() as i32;
    let bytes = fs::read(&trace_path).unwrap();
    let mut input = CodedInputStream::from_bytes(&bytes);
    let mut parents: BTreeMap<u64, u64> = BTreeMap::new();
    let mut thread_of_track: BTreeMap<u64, i32> = BTreeMap::new();
    let mut begins_by_track: BTreeMap<u64, u64> = BTreeMap::new();
    let mut tasks = BTreeSet::new();
    let mut begins = 0u64;
    while input.read_raw_tag_or_eof().unwrap().is_some() {
        let p: TracePacket = input.read_message().unwrap();
        if p.has_track_descriptor() {
            let d = p.track_descriptor();
            if let Some(th) = d.thread.as_ref() {
                thread_of_track.insert(d.uuid(), th.tid());
                assert_eq!(th.pid(), pid, "thread {} of another process", th.tid());
            }
            if d.name() == "tokio tasks" {
                parents.insert(d.uuid(), d.parent_uuid());
            }
        }
        if p.trusted_packet_sequence_id() == 4 && p.has_track_event() {
            let e = p.track_event();
            assert!(
                parents.contains_key(&e.track_uuid()),
                "a slice off the tokio tracks"
            );
            if e.type_() == Type::TYPE_SLICE_BEGIN {
                begins += 1;
                *begins_by_track.entry(e.track_uuid()).or_default() += 1;
                let a = &e.debug_annotations;
                assert_eq!(a.len(), 1, "one annotation: the task id");
                tasks.insert(a[0].uint_value());
            }
        }
    }
    assert_eq!(begins, t["poll_slices"].as_u64().unwrap());
    assert_eq!(begins, t["polls"].as_u64().unwrap());
    let kernel_threads: BTreeSet<i32> = facts.threads.keys().copied().collect();
    let polled_on: Vec<i64> = t["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    assert_eq!(parents.len(), polled_on.len());
    for (track, parent) in &parents {
        let tid = thread_of_track[parent];
        assert!(
            kernel_threads.contains(&tid),
            "polls on TID {tid}, a thread the kernel's trace does not know"
        );
        assert!(polled_on.contains(&(tid as i64)));
        assert!(begins_by_track.get(track).is_some_and(|&n| n > 0));
    }
    // Every spawned task polled: its id among the slices.
    assert_eq!(tasks.len() as u64, spawned, "tasks with a poll slice");
    assert!(
        facts.slices.contains_key("poll"),
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

#[test]
fn tokio_pingpong_polls_on_its_workers_and_spawns_are_the_workloads() {
    traced_run(
        "tokio_pingpong_polls_on_its_workers_and_spawns_are_the_workloads",
        &["--workload", "pingpong", "--n", "200", "--rounds", "50"],
    );
}

#[test]
fn tokio_hold_polls_on_its_workers_and_spawns_are_the_workloads() {
    traced_run(
        "tokio_hold_polls_on_its_workers_and_spawns_are_the_workloads",
        &["--workload", "hold", "--n", "10000", "--hold-for", "1s"],
    );
}
