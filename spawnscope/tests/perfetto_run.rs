//! `run --perfetto` for real: the run's scheduler events land raw in trace-events.bin, as the
//! collector's trace section says (all kept, the ring sized from the probes' calibration), and
//! the trace moves no memory figure — the run's memory still adds up. `--perfetto --no-probes` is
//! bad input. Root tests skip with a printed reason when not root.

mod common;

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::BufReader;
use std::process::Command;

use common::trace::check_trace;
use common::*;
use spawnscope_collector::trace_events::{Kind, Reader};

#[test]
fn perfetto_without_the_probes_is_bad_input() {
    let sandbox = Sandbox::new();
    assert_runs_refused(
        &sandbox,
        &[(
            &[
                "--runtime",
                "threads",
                "--workload",
                "hold",
                "--n",
                "10",
                "--perfetto",
                "--no-probes",
            ],
            "--perfetto",
        )],
    );
}

#[test]
fn a_perfetto_run_writes_its_events_raw_and_its_memory_still_adds_up() {
    let test = "a_perfetto_run_writes_its_events_raw_and_its_memory_still_adds_up";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    // 20,000 threads, as the memory test of run.rs: what the host does besides weighs less.
    let out = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "hold",
        "--n",
        "20000",
        "--perfetto",
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
    assert_eq!(trace["file"], "trace-events.bin");
    assert_eq!(trace["lost"], 0, "{trace}");
    assert_eq!(trace["complete"], true, "{trace}");
    // The ring was sized from the probes' calibration, traced too.
    let rule = trace["ring_rule"].as_str().unwrap();
    assert!(rule.contains("the probes' calibration"), "{rule}");
    let run = read_json(dir.join("run.json"));
    let calibrated = &run["estimate"]["calibration"]["probes"];
    assert!(
        calibrated["trace"]["records"].as_u64().unwrap() > 0,
        "{calibrated}"
    );

    // The file holds every record, each decodable.
    let file = dir.join("trace-events.bin");
    let mut reader = Reader::new(BufReader::new(File::open(&file).unwrap()));
    let (mut records, mut switches_out, mut switches) = (0u64, 0u64, 0u64);
    let pid = run["pid"].as_u64().unwrap() as u32;
    // The run's threads: the launched process's main thread and every thread it created.
    let mut run_threads = BTreeSet::from([pid]);
    for event in reader.by_ref() {
        let event = event.unwrap();
        records += 1;
        if event.kind == Kind::Switch {
            switches += 1;
            if event.task.tgid == pid {
                switches_out += 1;
            }
        }
        if event.kind == Kind::NewTask && event.task.tgid == pid {
            run_threads.insert(event.task.tid);
        }
    }
    assert_eq!((reader.unknown, reader.trailing_bytes), (0, 0));
    assert_eq!(records, trace["records"].as_u64().unwrap());
    assert_eq!(records, trace["emitted"].as_u64().unwrap());
    let total = |name: &str| {
        collector["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map_or(0, |m| m["total"].as_u64().unwrap())
    };
    assert_eq!(
        switches_out,
        total("switches_voluntary") + total("switches_involuntary")
    );

    // The ring (made before the base reading) and the file (the conductor's page cache) leave
    // the memory figures as they are.
    let summary = read_json(dir.join("summary.json"));
    let m = &summary["memory_per_task"];
    assert_eq!(m["adds_up"], true, "{m}");
    assert!(trace["memory"]
        .as_str()
        .unwrap()
        .contains("before the run's base reading"));

    // The Perfetto trace `run` derived from them decodes: every thread of the run (20,000 and
    // main) described with its tid and process, every track referred to described, slices
    // balanced, no sequence going back in time (check_trace), and every raw switch in it. The
    // switch-outs above are the collector's counts, which the counts verdict holds against the
    // kernel's own (rusage nvcsw + nivcsw; a thread's final switch after its exit is counted
    // apart, see collector/src/cross_checks.rs): so the trace's are the kernel's.
    let trace = dir.join("trace.perfetto-trace");
    let facts = check_trace(&trace);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    assert!(run_threads.len() > 20_000, "{}", run_threads.len());
    for tid in &run_threads {
        let (process, _) = facts
            .threads
            .get(&(*tid as i32))
            .unwrap_or_else(|| panic!("thread {tid} has no descriptor"));
        assert_eq!(*process, pid as i32);
    }
    assert_eq!(facts.switches, switches);
    assert_eq!(
        summary["counts_verdict"]["counts"], "checked",
        "{}",
        summary["counts_verdict"]
    );

    // Deleted, `report` writes it again byte for byte.
    let written = fs::read(&trace).unwrap();
    fs::remove_file(&trace).unwrap();
    let out = Command::new(spawnscope_bin())
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        fs::read(&trace).unwrap() == written,
        "report wrote another trace"
    );
}
