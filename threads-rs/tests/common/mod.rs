//! Helpers shared by the threads and tokio-tasks integration tests: running a workload binary, validating its
//! JSON Lines against schema/workload-events.schema.json, and the shared bad-input table; serve's
//! client is serve.rs.
#![allow(dead_code)]

pub mod serve;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `threads` binary cargo built for these tests (this module is shared with tokio-rs/tests,
/// whose package has no `threads`).
pub fn threads_bin() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_threads") {
        Some(path) => PathBuf::from(path),
        None => panic!("only threads' own tests run the threads binary"),
    }
}

pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Runs a binary with empty stdin (EOF releases `hold` at once).
pub fn run(bin: &Path, args: &[&str]) -> Output {
    let out = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    Output {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

pub fn validator() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string(repo_root().join("schema/workload-events.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

/// Every stdout line as JSON, each validated against the schema with `event` first.
pub fn events(validator: &jsonschema::Validator, stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if let Err(err) = validator.validate(&value) {
                panic!("invalid event: {err}\n{line}");
            }
            assert!(
                line.starts_with(r#"{"event":"#),
                "`event` is not the first key: {line}"
            );
            value
        })
        .collect()
}

pub fn only<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = events.iter().filter(|e| e["event"] == kind).collect();
    assert_eq!(found.len(), 1, "want exactly one {kind:?} event");
    found[0]
}

/// A port taken: the table's `{busy_port}` while the returned listener lives.
pub fn busy_port() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("a free port on the loopback")
}

/// The rows of schema/bad-input.tsv that apply to `runtime`: (expected text, arguments), with
/// `{busy_port}` the port `busy` listens on.
pub fn bad_input_rows(runtime: &str, busy: &TcpListener) -> Vec<(String, Vec<String>)> {
    let busy_port = busy.local_addr().unwrap().port().to_string();
    let text = std::fs::read_to_string(repo_root().join("schema/bad-input.tsv")).unwrap();
    let rows: Vec<(String, Vec<String>)> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let cols: Vec<&str> = line.splitn(3, '\t').collect();
            assert_eq!(cols.len(), 3, "malformed row {line:?}");
            let applies = cols[0] == "all" || cols[0].split(',').any(|name| name == runtime);
            applies.then(|| {
                (
                    cols[1].to_string(),
                    cols[2]
                        .split_whitespace()
                        .map(|arg| arg.replace("{busy_port}", &busy_port))
                        .collect(),
                )
            })
        })
        .collect();
    assert!(rows.len() >= 20, "only {} rows for {runtime}", rows.len());
    rows
}

/// Checks one bad-input row: exit 2, empty stdout, a first stderr line naming the value, usage.
pub fn assert_refused(
    bin: &Path,
    program: &str,
    expect: &str,
    args: &[String],
) -> Result<(), String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(bin, &args);
    let first = out.stderr.lines().next().unwrap_or("");
    if out.code != 2 {
        return Err(format!("{args:?}: exit {}, want 2", out.code));
    }
    if !out.stdout.is_empty() {
        return Err(format!("{args:?}: stdout not empty: {:?}", out.stdout));
    }
    if !first.starts_with(&format!("{program}: ")) || !first.contains(expect) {
        return Err(format!(
            "{args:?}: first stderr line {first:?} does not name {expect:?}"
        ));
    }
    if !out.stderr.contains(&format!("usage: {program}")) {
        return Err(format!("{args:?}: no usage on stderr"));
    }
    Ok(())
}

/// A process's threads, from /proc/PID/status.
pub fn threads_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("Threads in status")
}

/// The processes a process has forked that are still there (every thread's children).
pub fn children_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .map(|children| children.split_whitespace().count())
        .sum()
}

/// The start gate (--wait-to-start) of `hold`: after `start` the workload prints nothing, has
/// `threads_at_gate` threads and no child until a line on stdin; the gate's line and hold's release
/// written at once, the release is still read (stdin buffered once for the process).
pub fn check_start_gate(bin: &Path, extra: &[&str], threads_at_gate: u64) {
    let mut args = vec!["hold", "--n", "100", "--wait-to-start"];
    args.extend_from_slice(extra);
    let mut run = serve::Serving::start(bin, &args);
    run.wait_for("start");
    if let Some(line) = run.line_within(std::time::Duration::from_millis(300)) {
        panic!("{args:?}: printed before the gate's line: {line}");
    }
    assert_eq!(
        threads_of(run.pid()),
        threads_at_gate,
        "{args:?}: at the gate"
    );
    assert_eq!(children_of(run.pid()), 0, "{args:?}: no task at the gate");
    run.write("start\nrelease\n");
    let phase = run.wait_for("phase");
    assert_eq!(
        phase["name"], "spawn",
        "{args:?}: the first phase follows the gate"
    );
    run.wait_for("peak");
    let out = run.wait();
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    let result = only(&events(&validator(), &out.stdout), "result").clone();
    assert_eq!(result["spawned"], 100, "{args:?}");
}
