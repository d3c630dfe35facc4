//! The contract test: both workload binaries, run with identical arguments for every workload,
//! print the same events with the same keys and JSON types (runtime_stats excepted: it is the one
//! runtime-specific object) and both validate against the shared schema.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::Value;

/// The goroutines binary: $GOROUTINES_BIN, or built from goroutines-go/ with `go build`.
fn goroutines_bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GOROUTINES_BIN") {
        return Some(PathBuf::from(path));
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("goroutines");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(repo_root().join("goroutines-go"))
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("go build failed: {s}"),
        Err(e) => {
            eprintln!("SKIP contract test: no Go toolchain to build goroutines ({e})");
            None
        }
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

#[test]
fn both_binaries_print_the_same_events() {
    let Some(goroutines) = goroutines_bin() else {
        return;
    };
    let validator = validator();
    let runs: &[&[&str]] = &[
        &["sleep", "--n", "200", "--sleep", "10ms"],
        &["hold", "--n", "200"],
        &["hold", "--n", "200", "--hold-for", "5ms"],
        &["churn", "--n", "200", "--batch", "10"],
        &["pingpong", "--n", "2", "--rounds", "200"],
        &["chain", "--n", "10", "--events", "20", "--type", "str"],
        &["hold", "--n", "300", "--reserve", "1048576G"],
    ];
    for args in runs {
        let threads = run(&threads_bin(), args);
        let gos = run(&goroutines, args);
        assert_eq!(
            threads.code, gos.code,
            "{args:?}: exit codes differ\n{}\n{}",
            threads.stderr, gos.stderr
        );
        let (t_events, g_events) = (
            events(&validator, &threads.stdout),
            events(&validator, &gos.stdout),
        );
        let kinds = |evs: &[Value]| -> Vec<String> {
            let mut k: Vec<String> = evs
                .iter()
                .map(|e| e["event"].as_str().unwrap().to_string())
                .filter(|k| k != "progress")
                .collect();
            k.dedup();
            k
        };
        assert_eq!(
            kinds(&t_events),
            kinds(&g_events),
            "{args:?}: event sequences differ"
        );
        let (t_shapes, g_shapes) = (shapes(&t_events), shapes(&g_events));
        for (kind, t_shape) in &t_shapes {
            assert_eq!(
                Some(t_shape),
                g_shapes.get(kind),
                "{args:?}: {kind} events differ in keys or types"
            );
        }
        let (t_result, g_result) = (only(&t_events, "result"), only(&g_events, "result"));
        assert_eq!(
            t_result["params"], g_result["params"],
            "{args:?}: params differ"
        );
        assert_eq!(t_result["target"], g_result["target"]);
    }
}

#[test]
fn both_binaries_refuse_the_same_bad_input() {
    let Some(goroutines) = goroutines_bin() else {
        return;
    };
    let mut failures = Vec::new();
    for (expect, args) in bad_input_rows("threads") {
        failures.extend(assert_refused(&threads_bin(), "threads", &expect, &args).err());
    }
    for (expect, args) in bad_input_rows("goroutines") {
        failures.extend(assert_refused(&goroutines, "goroutines", &expect, &args).err());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
