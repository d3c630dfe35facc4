//! `run --perfetto` for real: the run's scheduler events land raw in trace-events.bin, as the
//! collector's trace section says (all kept, the ring sized from the probes' calibration), and
//! the trace moves no memory figure — the run's memory still adds up. `--perfetto --no-probes` is
//! bad input. Root tests skip with a printed reason when not root.

mod common;

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::BufReader;

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
    // threads hold 20,000 by default, as the memory test of run.rs: what the host does besides
    // weighs less. SPAWNSCOPE_PERFETTO_RUN=RUNTIME:WORKLOAD:N runs the same checks on another
    // (the threads:hold:100000 and goroutines:hold:1000000: minutes, so not in CI).
    let spec = std::env::var("SPAWNSCOPE_PERFETTO_RUN").unwrap_or("threads:hold:20000".into());
    let [runtime, workload, n] = spec.split(':').collect::<Vec<_>>()[..] else {
        panic!("SPAWNSCOPE_PERFETTO_RUN={spec}: RUNTIME:WORKLOAD:N")
    };
    let n: usize = n.parse().expect("N");
    println!("{test}: {runtime} {workload} --n {n} --perfetto");
    let out = sandbox.run(&[
        "--runtime",
        runtime,
        "--workload",
        workload,
        "--n",
        &n.to_string(),
        "--perfetto",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    // The run says where to look.
    let said = String::from_utf8_lossy(&out.stdout);
    for file in ["trace.perfetto-trace", "swimlane.svg"] {
        assert!(
            said.contains(&format!("{}", dir.join(file).display())),
            "{said}"
        );
    }

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

    // The Perfetto trace `run` derived from them decodes: every thread of the run (N and main,
    // for threads) described with its tid and process, every track referred to described, slices
    // balanced, no sequence going back in time (check_trace), and every raw switch in it. The
    // switch-outs above are the collector's counts, which the counts verdict holds against the
    // kernel's own (rusage nvcsw + nivcsw; a thread's final switch after its exit is counted
    // apart, see collector/src/cross_checks.rs): so the trace's are the kernel's.
    let trace = dir.join("trace.perfetto-trace");
    let facts = check_trace(&trace);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    // Tasks on OS threads: each its thread; goroutines ride a few.
    let least = if runtime == "threads" { n + 1 } else { 2 };
    assert!(run_threads.len() >= least, "{}", run_threads.len());
    println!(
        "{test}: {} threads, {records} records, {} switches, trace {} bytes, {} packets",
        run_threads.len(),
        facts.switches,
        fs::metadata(&trace).unwrap().len(),
        facts.packets
    );
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
    report_ok(&[&dir]);
    assert!(
        fs::read(&trace).unwrap() == written,
        "report wrote another trace"
    );
}

/// A command that forks, traced: `forked-threads 3 200` behind a shell — the shell, the program
/// and its three children, each child's 200 threads. Every thread of every process of the run
/// is in the trace, in its own process (the child's threads under the child, not the launcher),
/// and the trace decodes whole.
#[test]
fn a_forking_command_is_traced_whole() {
    let test = "a_forking_command_is_traced_whole";
    if skip_unless_root(test) {
        return;
    }
    let program = match build_c_program("forked-threads/forked-threads.c") {
        Ok(program) => program,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    let line = format!("{} 3 200 4 500; true", program.display());
    let out = sandbox.run(&[
        "--tasks",
        "600",
        "--task-kind",
        "thread",
        "--perfetto",
        "--",
        "sh",
        "-c",
        &line,
    ]);
    let _ = fs::remove_file(&program);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    let collector = read_json(dir.join("collector.json"));
    assert_eq!(collector["trace"]["lost"], 0, "{}", collector["trace"]);

    // From the raw records: each new thread and the process it belongs to.
    let file = dir.join("trace-events.bin");
    let mut threads_of: std::collections::BTreeMap<u32, BTreeSet<u32>> = Default::default();
    for event in Reader::new(BufReader::new(File::open(&file).unwrap())) {
        let event = event.unwrap();
        if event.kind == Kind::NewTask {
            threads_of
                .entry(event.task.tgid)
                .or_default()
                .insert(event.task.tid);
        }
    }
    // Three processes (the children) with 200 threads of their own besides their main thread.
    let busy: Vec<_> = threads_of
        .iter()
        .filter(|(_, tids)| tids.len() >= 200)
        .collect();
    assert_eq!(busy.len(), 3, "{threads_of:?}");

    let facts = check_trace(&dir.join("trace.perfetto-trace"));
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    for (tgid, tids) in &threads_of {
        for tid in tids {
            let (process, _) = facts
                .threads
                .get(&(*tid as i32))
                .unwrap_or_else(|| panic!("thread {tid} of {tgid} has no descriptor"));
            assert_eq!(*process, *tgid as i32, "thread {tid}");
        }
    }
    // The children are processes of the run, each described.
    for (tgid, _) in busy {
        assert!(facts.processes.contains_key(&(*tgid as i32)), "{tgid}");
    }
}

/// The full mode's probes split the run-queue wait by what began it, by the trace's rule: where
/// both exist (`--probes full --perfetto`) each kind's count agrees with the trace's, and the
/// trace's p50 lies in the probes' log2 bucket holding theirs.
#[test]
fn the_full_probes_split_the_run_queue_wait_as_the_trace_does() {
    let test = "the_full_probes_split_the_run_queue_wait_as_the_trace_does";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    // 20 pairs on 2 CPUs: wakeups every round trip, preemptions as the pairs crowd the CPUs.
    let out = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "pingpong",
        "--n",
        "20",
        "--rounds",
        "2000",
        "--probes",
        "full",
        "--perfetto",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    let collector = read_json(dir.join("collector.json"));
    let hist_count = |name: &str| -> u64 {
        collector["histograms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("no histogram {name}"))["count"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        hist_count("wake_to_run_ns") + hist_count("preempted_to_run_ns"),
        hist_count("runq_ns")
    );
    // Where the probes (nivcsw) and the trace (prev_state) tell a preemption apart differently.
    let disagreements = collector["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "switch_rule_disagrees")
        .map_or(0, |m| m["total"].as_u64().unwrap());
    let summary = read_json(dir.join("summary.json"));
    let beside = &summary["scheduler_trace"]["probes_runq"];
    let kinds = beside["by_kind"].as_array().expect("by_kind");
    assert_eq!(kinds.len(), 2, "{beside}");
    for (k, name) in kinds.iter().zip(["wake-to-run", "preempted-to-run"]) {
        assert_eq!(k["kind"], name);
        let probes = k["probes_count"].as_u64().unwrap();
        let trace = k["trace_count"].as_u64().unwrap();
        assert!(probes > 0, "{k}");
        // The two start counting at slightly different moments (attach, first record): a few
        // samples, besides the disagreements.
        let slack = disagreements + probes / 200 + 2;
        assert!(
            probes.abs_diff(trace) <= slack,
            "{name}: probes {probes}, trace {trace}, slack {slack}"
        );
        let bound = k["probes_p50_at_most_ns"].as_u64().unwrap() as f64;
        let p50 = k["trace_p50_ns"].as_u64().unwrap() as f64;
        assert!(
            p50 <= bound * 1.01 && p50 >= bound / 2.0 * 0.99,
            "{name}: trace p50 {p50} outside the probes' bucket (≤ {bound})"
        );
    }
}
