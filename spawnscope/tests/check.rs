//! `spawnscope check` tells the truth: as a normal user (root drops to `nobody` with setpriv, as a
//! person without sudo would run it) and as root, where it and `report` change nothing.

mod common;

use std::fs;
use std::process::Command;

use common::*;

/// `spawnscope check ARGS…` as user and group 65534; None (with SKIP) when that cannot be done.
fn check_as_nobody(test: &str, args: &[&str]) -> Option<(i32, String)> {
    if skip_unless_root(test) {
        return None;
    }
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file());
    let Some(setpriv) = setpriv else {
        println!("SKIP {test}: no setpriv (util-linux) to drop privileges");
        return None;
    };
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(spawnscope_bin())
        .arg("check")
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Permission denied") {
        println!(
            "SKIP {test}: user 65534 cannot run {}",
            spawnscope_bin().display()
        );
        return None;
    }
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

fn line<'a>(out: &'a str, item: &str) -> Option<&'a str> {
    out.lines()
        .find(|l| l.get(8..).is_some_and(|rest| rest.starts_with(item)))
}

#[test]
fn without_root_check_says_what_a_run_leaves_out_and_nothing_false() {
    let test = "without_root_check_says_what_a_run_leaves_out_and_nothing_false";
    let Some((code, out)) = check_as_nobody(test, &["--runtime", "goroutines", "--n", "1000000"])
    else {
        return;
    };
    let root = line(&out, "root").expect("a root line");
    assert!(
        root.starts_with("WARN") && root.contains("eBPF probes"),
        "root is a warning that names what is left out: {root}"
    );
    let tracefs_mounted = fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"));
    if tracefs_mounted {
        assert!(
            !out.contains("not mounted"),
            "tracefs is mounted here:\n{out}"
        );
    }
    assert!(
        line(&out, "RLIMIT_NPROC").is_none(),
        "goroutines are not threads: RLIMIT_NPROC does not apply\n{out}"
    );
    assert!(!out.contains("MISSING root"));
    // With the binaries and perf in place, nothing is missing: exit 0.
    if !out.contains("MISSING") {
        assert_eq!(code, 0, "{out}");
    }
}

#[test]
fn check_and_report_change_nothing_even_as_root() {
    if skip_unless_root("check_and_report_change_nothing_even_as_root") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    fs::create_dir_all(sandbox.state_dir()).unwrap();
    // What a SIGKILLed run leaves: an entry owned by a run that is gone. Any invocation that
    // changes the machine puts it back; check and report must not.
    let current = fs::read_to_string("/proc/sys/vm/max_map_count").unwrap();
    let value: u64 = current.trim().parse().unwrap();
    let state = sandbox.state_dir().join("sysctl-state.json");
    let stale = format!(
        r#"{{"entries":[{{"key":"vm.max_map_count","original":{value},"applied":{value},"owner":{{"kind":"run","pid":4194303,"start_time":1}}}}]}}"#
    );
    fs::write(&state, &stale).unwrap();
    let fixture = repo_root().join("spawnscope/tests/fixtures/before-house/single");
    let tmp = tempfile::tempdir().unwrap();
    let runs: Vec<String> = fs::read_dir(&fixture)
        .unwrap()
        .flatten()
        .map(|e| {
            let to = tmp.path().join(e.file_name());
            fs::create_dir_all(&to).unwrap();
            for f in fs::read_dir(e.path()).unwrap().flatten() {
                fs::copy(f.path(), to.join(f.file_name())).unwrap();
            }
            to.display().to_string()
        })
        .collect();
    for args in [vec!["check".to_string()], {
        let mut r = vec!["report".to_string()];
        r.extend(runs.iter().cloned());
        r
    }] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = sandbox.command(&args).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("restored"),
            "{args:?} restored something: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            fs::read_to_string(&state).unwrap(),
            stale,
            "{args:?} changed the sysctl state"
        );
    }
    // A command that changes the machine does put it back (the entry was real).
    let out = sandbox.command(&["sysctl", "restore"]).output().unwrap();
    assert!(out.status.success());
    assert!(
        !state.exists()
            || !fs::read_to_string(&state)
                .unwrap()
                .contains("max_map_count")
    );
    assert_eq!(
        fs::read_to_string("/proc/sys/vm/max_map_count").unwrap(),
        current
    );
}
