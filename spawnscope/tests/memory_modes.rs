//! Memory that adds up in every mode (root): `sleep`, where few tasks may be alive at any moment,
//! measured at the moment the most are; and any command, whose tasks may not be threads.

mod common;

use common::*;
use serde_json::Value;

/// The parts (RSS, kernel stacks, page tables, slab) within ±5 % of what MemAvailable fell by,
/// and the moment measured said with the tasks alive then.
fn assert_adds_up(summary: &Value) {
    let m = &summary["memory_per_task"];
    let difference = m["difference_percent"].as_f64().unwrap_or(f64::NAN);
    assert!(
        difference.abs() <= 5.0 && m["adds_up"] == true,
        "parts within ±5 % of the MemAvailable drop: {m}"
    );
    assert!(summary["peak_moment"].is_object(), "{summary}");
    assert_eq!(summary["alive_at_peak"], summary["peak_moment"]["alive"]);
}

fn run_ok(sandbox: &Sandbox, args: &[&str]) -> (Value, Vec<Value>, String) {
    let out = sandbox.run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let events = std::fs::read_to_string(dir.join("workload.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        read_json(dir.join("summary.json")),
        events,
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

fn result_event(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["event"] == "result")
        .expect("a result event")
}

/// `sleep` measured at its real peak: not when spawning ends (when, with short sleeps, few tasks
/// are left), but at a moment with (nearly) the most tasks alive, read with the workload stopped
/// where that moment has a still reading. Returns the summary.
fn sleep_at_its_peak(runtime: &str, n: &str, sleep: Option<&str>) -> Value {
    let sandbox = Sandbox::new();
    let mut args = vec!["--runtime", runtime, "--workload", "sleep", "--n", n];
    if let Some(sleep) = sleep {
        args.extend(["--sleep", sleep]);
    }
    let (summary, events, stdout) = run_ok(&sandbox, &args);
    assert!(summary["peak_moment"].is_object(), "{summary}");
    assert_eq!(summary["alive_at_peak"], summary["peak_moment"]["alive"]);
    let chosen = summary["peak_moment"]["chosen"]["kind"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(chosen == "most_alive" || chosen == "stopped", "{chosen}");
    // The base is read at the start gate, before any task, still as the reading it is compared
    // with (no stop at the first phase any more); the stops, the gate's wait too, are left out of
    // the wall time.
    let stops = summary["stops"].as_array().expect("stops");
    assert_eq!(stops[0]["at"], "start_gate", "{stops:?}");
    assert!(stops[0].get("at_once").is_none(), "read still: {stops:?}");
    assert!(stops.iter().all(|s| s["at"] != "first_phase"), "{stops:?}");
    let stopped_ns: u64 = stops
        .iter()
        .map(|s| s["to_t_ns"].as_u64().unwrap() - s["from_t_ns"].as_u64().unwrap())
        .sum();
    let run = read_json(sandbox.only_results_dir().join("run.json"));
    let wall_ns = run["wall_ns"].as_u64().unwrap();
    let wall_s = summary["wall_s"].as_f64().unwrap();
    assert!(
        ((wall_ns - stopped_ns) as f64 / 1e9 - wall_s).abs() < 1e-6,
        "wall {wall_s} s = {wall_ns} ns less {stopped_ns} ns stopped"
    );
    let alive = summary["alive_at_peak"].as_u64().unwrap();
    let most = result_event(&events)["alive_max"].as_u64().unwrap();
    // Threads are counted net of those already started at the base (less the main thread):
    // the moment itself had them too.
    let at_base = summary["peak_moment"]["counted"]["before"]
        .as_u64()
        .map_or(0, |before| before.saturating_sub(1));
    if runtime == "threads" {
        assert_eq!(at_base, 0, "main alone at the gate");
    }
    // Snapshots follow the live count ten times a second: the one kept holds most of the most
    // the workload ever saw alive at once (at the end of spawning, with 10 ms sleeps, a tenth).
    // The kernel's count may be a little higher: it still lists threads whose work is done and
    // which the workload has counted gone, but which have not finished exiting (and still hold
    // their memory). `most` is the workload's own maximum, which also sees spikes between two
    // progress events that no snapshot can catch (a CI run: 190 on a plateau, 400 at most once),
    // hence a third rather than half. Above it, the threads still exiting: with 30,000 a second
    // exiting on two CPUs, each one the hypervisor holds back adds to them (a clean-clone CI run
    // counted 372 against the workload's 308), hence twice the workload's most; a count of the
    // threads spawned (100,000), not those alive, would still fail.
    assert!(
        (alive + at_base) * 3 >= most && alive <= 2 * most + 1,
        "{alive} alive at the moment measured ({at_base} more at the base), {most} at most"
    );
    let said = match chosen.as_str() {
        "stopped" => "Memory measured at a moment with nearly the most tasks alive",
        _ => "Memory measured at the moment the most tasks were alive",
    };
    assert!(stdout.contains(said), "{stdout}");
    assert!(
        stdout.contains("The base was read with the workload waiting at its start gate"),
        "{stdout}"
    );
    println!(
        "{runtime} sleep {n}: {alive} alive, {chosen}, {}",
        summary["memory_per_task"]
    );
    summary
}

fn difference_percent(summary: &Value) -> f64 {
    summary["memory_per_task"]["difference_percent"]
        .as_f64()
        .unwrap_or(f64::NAN)
}

fn sleep_adds_up_at_its_peak(runtime: &str, n: &str, sleep: Option<&str>) {
    let _one = serial();
    let difference = difference_percent(&sleep_at_its_peak(runtime, n, sleep));
    assert!(
        difference.abs() <= 5.0,
        "parts {difference:+.1} % from the MemAvailable drop"
    );
}

#[test]
fn threads_sleeping_10ms_add_up_at_the_moment_most_are_alive() {
    if skip_unless_root("threads_sleeping_10ms_add_up_at_the_moment_most_are_alive") {
        return;
    }
    let _one = serial();
    // A few hundred threads alive at any moment here, 10 MiB in all, while 30,000 a second
    // start and exit. Read on the run, what the kernel frees late (exited threads' stacks and
    // task structs, after RCU grace periods) moved one reading by ±15 %; read with the workload
    // stopped, after rcu_barrier, the median of three runs is within ±5 % and each run within
    // ±10 %. One run in a few, right after the million-goroutine test, still misses ±5 % (−7.9 %
    // in a clean-clone CI run): the slab room is the cgroup's slab charge less the host's own
    // Slab growth, and the whole host's slab moves by a few hundred KiB, which at 200 tasks is
    // several percent (README, "Where few tasks are alive").
    // The stop is taken when the count levels off; a run whose stops all fell short of half
    // the most seen alive is read on the run instead (most_alive, as the tool documents), which
    // this test is not about: up to three runs are given to get a stopped reading (a CI run had
    // its three levelled stops short of the 404 it saw once).
    let stopped_run = || {
        let mut last = Value::Null;
        for _ in 0..3 {
            last = sleep_at_its_peak("threads", "100000", Some("10ms"));
            if last["peak_moment"]["chosen"]["kind"] == "stopped" {
                return last;
            }
        }
        panic!("no stopped reading in three runs: {last}");
    };
    let mut differences: Vec<f64> = (0..3)
        .map(|_| {
            let summary = stopped_run();
            let difference = difference_percent(&summary);
            // One reading of free memory resolves ±5 % of 16 MiB (0.8 MiB: the tool's rule for
            // "resolved"). Most runs here hold less (130–220 alive, 5–8 MiB) and say they are not
            // resolved; such a run is held to twice that reading's error in absolute terms
            // instead of ±10 % (a CI run with the hypervisor stealing: 158 alive, 5.9 MiB,
            // −14.5 %, 0.86 MiB off).
            let m = &summary["memory_per_task"];
            let held_kib =
                summary["alive_at_peak"].as_f64().unwrap() * m["total_kb"].as_f64().unwrap();
            let off_kib = difference.abs() / 100.0 * held_kib;
            let unresolved = m["resolved"] == false;
            if unresolved {
                let note = m["resolution_note"].as_str().unwrap_or("");
                assert!(note.starts_with("not resolved: "), "{m}");
            }
            assert!(
                difference.abs() <= 10.0 || (unresolved && off_kib <= 2.0 * 0.05 * 16384.0),
                "parts {difference:+.1} % ({off_kib:.0} KiB) from the MemAvailable drop: {m}"
            );
            difference
        })
        .collect();
    differences.sort_by(f64::total_cmp);
    assert!(
        differences[1].abs() <= 5.0,
        "median {:+.1} % from the MemAvailable drop ({differences:?})",
        differences[1]
    );
}

#[test]
fn twenty_thousand_sleeping_threads_add_up() {
    if skip_unless_root("twenty_thousand_sleeping_threads_add_up") {
        return;
    }
    sleep_adds_up_at_its_peak("threads", "20000", None);
}

#[test]
fn a_million_sleeping_goroutines_add_up() {
    if skip_unless_root("a_million_sleeping_goroutines_add_up") {
        return;
    }
    sleep_adds_up_at_its_peak("goroutines", "1000000", None);
}

#[test]
fn an_async_command_adds_up_and_is_not_failed_for_its_threads() {
    if skip_unless_root("an_async_command_adds_up_and_is_not_failed_for_its_threads") {
        return;
    }
    let Some(program) = build_sleepers() else {
        eprintln!("SKIP an_async_command_adds_up_and_is_not_failed_for_its_threads: go cannot build tests/programs/sleepers");
        return;
    };
    let _one = serial();
    let program_arg = program.to_str().unwrap();
    for peak_when in [Some("^all [0-9]+ sleeping$"), None] {
        let sandbox = Sandbox::new();
        let mut args = vec!["--tasks", "300000", "--task-kind", "task"];
        if let Some(pattern) = peak_when {
            args.extend(["--peak-when", pattern]);
        }
        args.extend(["--", program_arg, "300000", "4s"]);
        let (summary, _, stdout) = run_ok(&sandbox, &args);
        assert_adds_up(&summary);
        assert_eq!(summary["alive_at_peak"], 300_000);
        assert_eq!(summary["peak_moment"]["counted"]["kind"], "declared");
        let chosen = &summary["peak_moment"]["chosen"];
        match peak_when {
            Some(_) => {
                assert_eq!(chosen["kind"], "matched");
                assert_eq!(chosen["line"], "all 300000 sleeping");
                let kept = sandbox.only_results_dir().join("command.stdout");
                assert_eq!(
                    std::fs::read_to_string(kept).unwrap(),
                    "all 300000 sleeping\n"
                );
            }
            None => assert_eq!(chosen["kind"], "most_memory"),
        }
        // A runtime's tasks are not threads: no "threads created" check to fail, and the
        // others pass.
        let checks = summary["probes"]["cross_checks"].as_array().unwrap();
        assert_eq!(checks.len(), 3, "{checks:?}");
        assert!(checks.iter().all(|c| c["verdict"] == "pass"), "{checks:?}");
        assert!(!stdout.contains("threads created vs spawned"), "{stdout}");
    }
    let _ = std::fs::remove_file(program);
}

/// The moment of most memory is never one at which the process had let go of its address space
/// while its memory was still charged (a tie, taken as the later reading): as a process exits,
/// or here, where its main thread ends first and its threads hold their pages 1.7 s more.
#[test]
fn a_moment_the_process_no_longer_says_its_memory_is_not_the_one_measured() {
    if skip_unless_root("a_moment_the_process_no_longer_says_its_memory_is_not_the_one_measured") {
        return;
    }
    let program = match build_c_program("leader-exits/leader-exits.c") {
        Ok(p) => p,
        Err(why) => {
            eprintln!("SKIP a_moment_the_process_no_longer_says_its_memory_is_not_the_one_measured: {why}");
            return;
        }
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    let program_arg = program.to_str().unwrap();
    let args = [
        "--tasks",
        "200",
        "--task-kind",
        "thread",
        "--",
        program_arg,
        "200",
        "0.3",
        "2",
    ];
    let (summary, _, _) = run_ok(&sandbox, &args);
    let memory = read_json(sandbox.only_results_dir().join("memory.json"));
    // The case is there: samples with the threads alive and no RSS said, after the main
    // thread ended.
    let timeline = memory["timeline"].as_array().unwrap();
    let leader_gone_ns = timeline
        .iter()
        .find(|s| s["rss_kb"] == 0 && s["threads"].as_u64() > Some(1))
        .and_then(|s| s["t_ns"].as_u64())
        .unwrap_or_else(|| panic!("no sample after the main thread ended: {timeline:?}"));
    assert_eq!(summary["peak_moment"]["chosen"]["kind"], "most_memory");
    let peak = &memory["peak"];
    assert!(peak["status"]["VmRSS"].as_u64() > Some(0), "{peak}");
    assert!(peak["t_ns"].as_u64() < Some(leader_gone_ns), "{peak}");
    assert_adds_up(&summary);
    let _ = std::fs::remove_file(program);
}

#[test]
fn bad_command_mode_flags_are_refused_before_anything_changes() {
    let _one = serial();
    let sandbox = Sandbox::new();
    assert_runs_refused(
        &sandbox,
        &[
            (
                &["--tasks", "5", "--peak-when", "(", "--", "true"][..],
                "--peak-when is not a regular expression",
            ),
            (
                &[
                    "-r",
                    "threads",
                    "-w",
                    "sleep",
                    "-n",
                    "5",
                    "--peak-when",
                    "x",
                ][..],
                "--peak-when and --task-kind are for a command",
            ),
            (
                &["--task-kind", "fibre", "--", "true"][..],
                "invalid value 'fibre' for '--task-kind",
            ),
        ],
    );
}

/// A forking program's memory on a busy machine: a parent that writes 64 MiB and forks four
/// workers that only read it (their RSS summed counts it four times, PSS once) and start 500
/// threads each, run while another process writes gigabytes to disk and another burns a CPU.
/// Each run's memory is counted by PSS and adds up to what its cgroup was charged within ±5 %,
/// or is "not resolved" with why — never a figure from RSS summed. SPAWNSCOPE_FORK_RUNS runs
/// [3]; the issue's evidence took ten.
#[test]
fn a_forking_program_beside_disk_and_cpu_work_adds_up_or_says_why_not() {
    let test = "a_forking_program_beside_disk_and_cpu_work_adds_up_or_says_why_not";
    if skip_unless_root(test) {
        return;
    }
    let program = match build_c_program("forked-threads/forked-threads.c") {
        Ok(p) => p,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    };
    let _one = serial();
    let runs: usize = std::env::var("SPAWNSCOPE_FORK_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let scratch = tempfile::tempdir_in("/var/tmp").unwrap();
    let writer = DiskWriter::start(scratch.path());
    let burner = Hogs::named_busy_loop("cpu-burner");
    let program = program.to_str().unwrap().to_string();
    for run in 1..=runs {
        let sandbox = Sandbox::new();
        let args = [
            "--tasks",
            "2000",
            "--task-kind",
            "thread",
            "--",
            &program,
            "4",
            "500",
            "4",
            "2000",
            "64",
        ];
        let (summary, _, _) = run_ok(&sandbox, &args);
        let m = &summary["memory_per_task"];
        let counted = m["rss_counted"].as_str().unwrap_or_default().to_string();
        let resolution = &m["resolution"];
        eprintln!(
            "run {run} of {runs}: {counted}; charge difference {} %; {}",
            m["charge_difference_percent"], resolution["resolution_note"]
        );
        if resolution["resolved"] == false {
            assert_eq!(
                resolution["unresolved"], "not_every_process_walked",
                "run {run}: not resolved, and why: {m}"
            );
            assert!(!resolution["resolution_note"].as_str().unwrap().is_empty());
            continue;
        }
        assert!(
            counted.contains("by PSS"),
            "run {run}: several workers counted by PSS, never RSS summed: {m}"
        );
        let by_charge = m["charge_difference_percent"].as_f64().unwrap_or(f64::NAN);
        assert!(
            by_charge.abs() <= 5.0,
            "run {run}: the parts within ±5 % of the cgroup's charge: {m}"
        );
        // The shared pages are counted once: RSS summed says far more.
        let (pss, summed) = (
            m["rss_kb"].as_f64().unwrap(),
            m["rss_summed_kb"].as_f64().unwrap(),
        );
        assert!(
            summed > 2.0 * pss,
            "run {run}: PSS {pss} kB against RSS summed {summed} kB"
        );
    }
    drop(burner);
    drop(writer);
    assert!(run_cgroups().is_empty(), "{:?}", run_cgroups());
}

/// A shell writing 3 GiB to a file again and again, in a process group of its own, so that
/// dropping it ends the dd it is running too.
struct DiskWriter(std::process::Child);

impl DiskWriter {
    fn start(dir: &std::path::Path) -> DiskWriter {
        use std::os::unix::process::CommandExt;
        let fill = dir.join("fill");
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while :; do dd if=/dev/zero of='{0}' bs=1M count=3072 conv=fsync status=none; rm -f '{0}'; done",
                fill.display()
            ))
            .process_group(0)
            .spawn()
            .expect("starting the disk writer");
        DiskWriter(child)
    }
}

impl Drop for DiskWriter {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.0.wait();
    }
}
