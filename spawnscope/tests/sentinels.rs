//! The noise sentinels of a real run: sentinels.json has a mark per phase event, and CPU burnt by
//! another process during the run shows up as "CPU time spent outside the run". Root: the run's
//! CPU time is read from its cgroup. A count, not a timing assertion.

mod common;

use common::*;
use serde_json::Value;

/// A 2,000-thread hold of 2 s: its summary.json and sentinels.json.
fn hold_run(sandbox: &Sandbox) -> (Value, Value, String) {
    sandbox.hold_2000_threads("2s", &["--no-probes"]);
    let dir = sandbox.only_results_dir();
    (
        read_json(dir.join("summary.json")),
        read_json(dir.join("sentinels.json")),
        events_so_far(&dir),
    )
}

fn phase<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["sentinels"]["per_phase"]
        .as_array()
        .expect("summary.json has the sentinels per phase")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no {name} phase in {summary}"))
}

#[test]
fn cpu_burnt_beside_the_run_shows_as_outside_the_run() {
    if skip_unless_root("cpu_burnt_beside_the_run_shows_as_outside_the_run") {
        return;
    }
    let _one = serial();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;

    // Without a hog: whatever else this machine runs (printed, not asserted: it is shared).
    let quiet = Sandbox::new();
    let (summary, sentinels, events) = hold_run(&quiet);
    let phase_events = events.matches(r#""event":"phase""#).count();
    let marks: Vec<&str> = sentinels["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        marks.len(),
        phase_events + 2,
        "start, one per phase event, reaped: {marks:?}"
    );
    assert_eq!((marks[0], marks[marks.len() - 1]), ("start", "reaped"));
    assert_eq!(
        sentinels["run_cpu_source"]
            .as_str()
            .map(|s| s.starts_with("cgroup")),
        Some(true),
        "a root run's CPU time comes from its cgroup: {}",
        sentinels["run_cpu_source"]
    );
    let quiet_steady = phase(&summary, "steady").clone();
    let quiet_md = std::fs::read_to_string(quiet.only_results_dir().join("summary.md")).unwrap();
    assert!(quiet_md.contains("## Noise sentinels"), "{quiet_md}");

    // With a busy loop per CPU for the whole run.
    let loud = Sandbox::new();
    let hogs = Hogs::busy_loops();
    let (summary, _, _) = hold_run(&loud);
    drop(hogs);
    let steady = phase(&summary, "steady");
    let wall = steady["wall_ns"].as_f64().unwrap();
    let outside = steady["outside_cpu_ns"]
        .as_f64()
        .expect("/proc/stat and the cgroup are readable here");
    eprintln!(
        "steady {:.0} ms: CPU outside the run {:.0} ms with busy loops, {:.0} ms without",
        wall / 1e6,
        outside / 1e6,
        quiet_steady["outside_cpu_ns"].as_f64().unwrap_or(f64::NAN) / 1e6
    );
    assert!(
        outside >= 0.5 * wall,
        "busy loops on every CPU: outside {outside} ns of {wall} ns"
    );
    assert!(
        outside <= cpus * wall * 1.1 + 50e6,
        "no more than the machine has: {outside} ns of {wall} ns × {cpus} CPUs"
    );
    assert!(run_cgroups().is_empty(), "{:?}", run_cgroups());
}
