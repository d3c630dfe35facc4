//! The contract test: the four workload binaries, run with identical arguments for every
//! workload (serve driven by the same clients), print the same events with the same keys and JSON
//! types (runtime_stats excepted: it is the one runtime-specific object) and all validate against
//! the shared schema.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::serve::{serve_with_clients, Serving};
use common::*;
use serde_json::Value;

/// The goroutines binary: $GOROUTINES_BIN, or built by scripts/build-goroutines.sh (the one way
/// it is built: pure Go).
fn goroutines_bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GOROUTINES_BIN") {
        return Some(PathBuf::from(path));
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("goroutines");
    let status = Command::new(repo_root().join("scripts/build-goroutines.sh"))
        .arg(&out)
        .status()
        .unwrap();
    match status.code() {
        Some(0) => Some(out),
        Some(3) => {
            eprintln!("SKIP contract test: no Go toolchain to build goroutines");
            None
        }
        _ => panic!("building goroutines failed: {status}"),
    }
}

/// Every JSON path below `value` with its JSON type, `runtime_stats` left out.
fn shape(value: &Value, path: String, out: &mut BTreeMap<String, &'static str>) {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    out.insert(path.clone(), kind);
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key != "runtime_stats" {
                    shape(child, format!("{path}.{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            for child in items {
                shape(child, format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// One shape per event kind (progress events vary in number, not in shape).
fn shapes(events: &[Value]) -> BTreeMap<String, BTreeMap<String, &'static str>> {
    let mut by_kind = BTreeMap::new();
    for event in events {
        let kind = event["event"].as_str().unwrap().to_string();
        let mut s = BTreeMap::new();
        shape(event, String::new(), &mut s);
        by_kind.entry(kind).or_insert_with(BTreeMap::new).extend(s);
    }
    by_kind
}

/// The tokio-tasks binary: $TOKIO_TASKS_BIN, or cargo's build of it beside `threads` (a workspace
/// `cargo test` builds every package's binaries before it runs any test).
fn tokio_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("TOKIO_TASKS_BIN") {
        return PathBuf::from(path);
    }
    let path = threads_bin().with_file_name("tokio-tasks");
    assert!(
        path.is_file(),
        "{} is missing: run the workspace's tests (cargo test --workspace), or build it first (cargo build -p tokio-tasks, same profile)",
        path.display()
    );
    path
}

/// The processes binary: $PROCESSES_BIN, or cargo's build of it beside `threads`.
fn processes_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("PROCESSES_BIN") {
        return PathBuf::from(path);
    }
    let path = threads_bin().with_file_name("processes");
    assert!(
        path.is_file(),
        "{} is missing: run the workspace's tests (cargo test --workspace), or build it first (cargo build -p processes, same profile)",
        path.display()
    );
    path
}

/// The four binaries by program name, `threads` first (the one the others are compared with).
fn binaries() -> Option<Vec<(&'static str, PathBuf)>> {
    Some(vec![
        ("threads", threads_bin()),
        ("goroutines", goroutines_bin()?),
        ("tokio-tasks", tokio_bin()),
        ("processes", processes_bin()),
    ])
}

/// How a run is driven: on its own (stdin empty: EOF releases hold and serve at once), by
/// serve's clients (connections, requests each, body bytes), or through its start gate
/// (--wait-to-start: nothing past `start` until a line on stdin; then, where hold or serve waits
/// for its release, a second line at that event).
enum Driver {
    Alone,
    Clients(usize, usize, usize),
    Gated(Option<&'static str>),
}

impl Driver {
    fn run(&self, bin: &Path, args: &[&str]) -> Output {
        match *self {
            Driver::Alone => run(bin, args),
            Driver::Clients(connections, requests_each, body) => {
                serve_with_clients(bin, args, connections, requests_each, body)
            }
            Driver::Gated(release_at) => {
                let mut run = Serving::start(bin, args);
                run.wait_for("start");
                if let Some(line) = run.line_within(Duration::from_millis(200)) {
                    panic!(
                        "{args:?}: {} printed before the gate's line: {line}",
                        bin.display()
                    );
                }
                run.write("\n");
                if let Some(kind) = release_at {
                    run.wait_for(kind);
                    run.write("\n");
                }
                run.wait()
            }
        }
    }
}

#[test]
fn all_binaries_print_the_same_events() {
    let Some(binaries) = binaries() else {
        return;
    };
    let validator = validator();
    let alone: &[&[&str]] = &[
        &["sleep", "--n", "200", "--sleep", "10ms"],
        &["hold", "--n", "200"],
        &["hold", "--n", "200", "--hold-for", "5ms"],
        &["churn", "--n", "200", "--batch", "10"],
        &["pingpong", "--n", "2", "--rounds", "200"],
        &["chain", "--n", "10", "--events", "20", "--type", "str"],
        &["hold", "--n", "300", "--reserve", "1048576G"],
        &["serve", "--n", "5", "--serve-for", "50ms"],
        &["serve", "--n", "5"],
    ];
    let served: &[(&[&str], Driver)] = &[(
        &[
            "serve",
            "--n",
            "20",
            "--addrs",
            "2",
            "--work",
            "spin=1ms,body=1K",
        ],
        Driver::Clients(20, 3, 1024),
    )];
    let gated: &[(&[&str], Driver)] = &[
        (
            &["hold", "--n", "200", "--wait-to-start"],
            Driver::Gated(Some("peak")),
        ),
        (
            &["sleep", "--n", "100", "--sleep", "10ms", "--wait-to-start"],
            Driver::Gated(None),
        ),
        (
            &["serve", "--n", "5", "--wait-to-start"],
            Driver::Gated(Some("listening")),
        ),
    ];
    let runs = alone.iter().map(|args| (*args, &Driver::Alone));
    let kinds = |evs: &[Value]| -> Vec<String> {
        let mut k: Vec<String> = evs
            .iter()
            .map(|e| e["event"].as_str().unwrap().to_string())
            .filter(|k| k != "progress")
            .collect();
        k.dedup();
        k
    };
    let driven = served
        .iter()
        .chain(gated)
        .map(|(args, driver)| (*args, driver));
    for (args, driver) in runs.chain(driven) {
        let outputs: Vec<(&str, Output)> = binaries
            .iter()
            .map(|(name, bin)| (*name, driver.run(bin, args)))
            .collect();
        let (base_name, base) = &outputs[0];
        let base_events = events(&validator, &base.stdout);
        let base_shapes = shapes(&base_events);
        let base_result = only(&base_events, "result");
        for (name, out) in &outputs[1..] {
            assert_eq!(
                base.code, out.code,
                "{args:?}: exit codes of {base_name} and {name} differ\n{}\n{}",
                base.stderr, out.stderr
            );
            let evs = events(&validator, &out.stdout);
            assert_eq!(
                kinds(&base_events),
                kinds(&evs),
                "{args:?}: event sequences of {base_name} and {name} differ"
            );
            let their_shapes = shapes(&evs);
            for (kind, shape) in &base_shapes {
                // serve prints progress while it serves, ~100 ms apart: a short run may have none.
                if kind == "progress" && !their_shapes.contains_key(kind) {
                    continue;
                }
                assert_eq!(
                    Some(shape),
                    their_shapes.get(kind),
                    "{args:?}: {kind} events of {base_name} and {name} differ in keys or types"
                );
            }
            let result = only(&evs, "result");
            assert_eq!(
                base_result["params"], result["params"],
                "{args:?}: params of {base_name} and {name} differ"
            );
            assert_eq!(base_result["target"], result["target"]);
            if out.code == 0 {
                // All of the work done, as much of it as threads did (their own tests count it).
                assert_eq!(
                    base_result["spawned"], result["spawned"],
                    "{args:?}: {name}"
                );
                assert_eq!(
                    base_result["throughput"]["count"], result["throughput"]["count"],
                    "{args:?}: {name} did not do all the work"
                );
                assert_eq!(
                    base_result["serve"], result["serve"],
                    "{args:?}: {name} served otherwise"
                );
            }
            assert_eq!(result["runtime"], start_runtime(&evs), "{args:?}: {name}");
        }
    }
}

/// The `runtime` of a run's start event.
fn start_runtime(events: &[Value]) -> Value {
    only(events, "start")["runtime"].clone()
}

#[test]
fn all_binaries_refuse_the_same_bad_input() {
    let Some(binaries) = binaries() else {
        return;
    };
    let busy = busy_port();
    let mut failures = Vec::new();
    for (name, bin) in &binaries {
        for (expect, args) in bad_input_rows(name, &busy) {
            failures.extend(assert_refused(bin, name, &expect, &args).err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
