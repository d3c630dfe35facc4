//! Go built with cgo on, as most Go programs are (root): the goroutines workload built so
//! (`scripts/build-goroutines.sh --cgo`) and a small cgo program run as a command
//! (`tests/programs/cgo-threads`). Their threads are started through pthread_create (clone3), and
//! the runtime keeps an extra M for C callbacks that has no thread of its own: every cross-check
//! passes, the threads one held to the threads the kernel created (before: "threads created vs
//! spawned: expected 5, probes counted 4", the extra M counted as a thread).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::Value;

/// Every cross-check measured and passed, each named in the failure.
fn assert_every_check_passes(test: &str, summary: &Value) {
    let checks = summary["probes"]["cross_checks"].as_array().unwrap();
    assert!(checks.len() >= 4, "{test}: {checks:?}");
    for c in checks {
        assert_eq!(c["verdict"], "pass", "{test}: {c}");
    }
    assert_eq!(summary["probes"]["cross_checks_pass"], true, "{test}");
    assert_eq!(
        summary["counts_verdict"]["counts"], "checked",
        "{test}: {}",
        summary["counts_verdict"]
    );
}

/// A probe row's total (absent: 0).
fn probe_total(summary: &Value, metric: &str) -> u64 {
    summary["probes"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .map_or(0, |r| r["total"].as_u64().unwrap())
}

/// The cross-check named `name`.
fn check<'a>(test: &str, summary: &'a Value, name: &str) -> &'a Value {
    summary["probes"]["cross_checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{test}: no check {name:?}: {}", summary["probes"]))
}

/// The goroutines workload built with cgo on, into the temporary directory; Err with the reason
/// when this host cannot build it (the script's exit 3: no Go; 77: no C compiler). Any other
/// failure is the test's.
fn goroutines_with_cgo(test: &str) -> Result<PathBuf, String> {
    let out =
        std::env::temp_dir().join(format!("spawnscope-goroutines-cgo-{}", std::process::id()));
    let built = Command::new(repo_root().join("scripts/build-goroutines.sh"))
        .arg("--cgo")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&built.stderr).trim().to_string();
    match built.status.code() {
        Some(0) => Ok(out),
        Some(3 | 77) => Err(said),
        _ => panic!(
            "{test}: build-goroutines.sh --cgo failed: {}: {said}",
            built.status
        ),
    }
}

/// tests/programs/cgo-threads, built with cgo on into the temporary directory; Err with the
/// reason when there is no Go or no C compiler (`go env CC`: $CC, else go's default).
fn cgo_threads(test: &str) -> Result<PathBuf, String> {
    let cc = Command::new("go")
        .args(["env", "CC"])
        .output()
        .map_err(|e| format!("no Go toolchain ({e})"))?;
    let cc = String::from_utf8_lossy(&cc.stdout);
    let cc = cc.split_whitespace().next().unwrap_or("cc").to_string();
    let found = Command::new("sh")
        .args(["-c", "command -v \"$1\"", "sh", &cc])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        return Err(format!(
            "no C compiler for cgo ({cc} is not on PATH; set CC)"
        ));
    }
    let out = std::env::temp_dir().join(format!("spawnscope-cgo-threads-{}", std::process::id()));
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .env("CGO_ENABLED", "1")
        .current_dir(repo_root().join("spawnscope/tests/programs/cgo-threads"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{test}: building cgo-threads: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    Ok(out)
}

#[test]
fn the_goroutines_workload_built_with_cgo_adds_up_its_threads() {
    let test = "the_goroutines_workload_built_with_cgo_adds_up_its_threads";
    if skip_unless_root(test) {
        return;
    }
    let bin = match goroutines_with_cgo(test) {
        Ok(bin) => bin,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    let results = sandbox.out();
    let out = sandbox
        .command(&[
            "run",
            "--out",
            results.to_str().unwrap(),
            "--runtime",
            "goroutines",
            "--workload",
            "hold",
            "--n",
            "1000",
        ])
        .env("SPAWNSCOPE_GOROUTINES_BIN", &bin)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&bin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{test}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    assert_every_check_passes(test, &summary);
    // The cgo build's threads: started by glibc's pthread_create (clone3), not the runtime's clone.
    assert!(
        probe_total(&summary, "clone3_calls") > 0,
        "{test}: cgo's clone3"
    );
    assert_eq!(probe_total(&summary, "clone_calls"), 0, "{test}: no clone");
    let threads = check(test, &summary, "threads created vs spawned");
    assert!(
        threads["expected"].as_u64().unwrap() >= 2,
        "{test}: {threads}"
    );
    assert_eq!(
        threads["expected"], threads["observed"],
        "{test}: {threads}"
    );
}

#[test]
fn a_cgo_programs_threads_are_counted_as_a_command() {
    let test = "a_cgo_programs_threads_are_counted_as_a_command";
    if skip_unless_root(test) {
        return;
    }
    let program = match cgo_threads(test) {
        Ok(program) => program,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            return;
        }
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    // 1,000 goroutines each held in a C call: a thread each, started by runtime/cgo.
    let out = sandbox.run(&[
        "--tasks",
        "1000",
        "--task-kind",
        "thread",
        "--peak-when",
        "all 1000 in C",
        "--",
        program.to_str().unwrap(),
        "1000",
        "1s",
    ]);
    let _ = std::fs::remove_file(&program);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{test}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    assert_every_check_passes(test, &summary);
    let threads = check(test, &summary, "threads created vs --tasks");
    assert_eq!(threads["expected"], 1000, "{test}: {threads}");
    // Each through pthread_create: every thread the probes saw created is a clone3.
    let created = probe_total(&summary, "new_threads");
    assert!(created >= 1000, "{test}: {created} threads created");
    assert_eq!(probe_total(&summary, "clone3_calls"), created, "{test}");
}
