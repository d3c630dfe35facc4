//! Same records, same figures: `report` on a results set recorded before the conductor was re-cut
//! into rooms (tests/fixtures/before-house: a compare directory of threads and goroutines, hold and
//! sleep, with the eBPF collector; a `run --perf` directory, perf.data dropped, perf.folded kept;
//! a command run) must give byte for byte the summary.json, summary.md, compare.json (less its
//! rendering time), compare.md and CSVs that were recorded with them. And reading results must
//! never rewrite them. A figure added since is added to the expected files, never a changed one:
//! compare.json and compare.md gained the headline lines ("hold: a thread costs 13.7× a
//! goroutine…"); compare.json and compare-fits.csv each fit's verdict on its resolution
//! (`resolved`, …), and compare.md, where the fixture's lines through two points have no standard
//! error, says so before each of their slopes and states the rule; the threads runs' summaries
//! their exit path (`stacks_freed_by_threads`, the "Exit path" line); compare.json each workload
//! run's own figures from its result event (`program`: `spawn_ns_per_task`, `throughput_per_s`);
//! each run's memory per task its resolution (`resolved`, …: the goroutine runs, 2–8 MiB held,
//! say "not resolved" in their summary.md, in compare.md's runs table (‡) and in the headline);
//! compare.json each cell's `times_from` (every run here traced: times from the traced runs) and
//! compare.md the line that says so ("Times include the probes' cost: every run was traced.");
//! each summary its counts verdict (`counts_verdict`, summary.md's "Counts" line; the command
//! run, whose threads check failed when it was recorded, its outcome flagged "counts WRONG") and
//! compare.json each run's: every number they had before is as recorded.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use common::*;

fn fixture() -> PathBuf {
    repo_root().join("spawnscope/tests/fixtures/before-house")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        let dest = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            fs::copy(&path, &dest).unwrap();
        }
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The figures' files of a results set, relative to it.
fn derived(dir: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    files(dir, &mut all);
    let mut wanted: Vec<PathBuf> = all
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("summary.") || name.starts_with("compare")
        })
        .map(|p| p.strip_prefix(dir).unwrap().to_path_buf())
        .collect();
    wanted.sort();
    wanted
}

fn report(args: &[&Path]) {
    let output = Command::new(spawnscope_bin())
        .arg("report")
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn without_render_time(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains("\"rendered_utc\""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("run.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn report_recomputes_the_recorded_figures_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    copy_dir(&fixture(), &set);
    let expected = derived(&fixture());
    assert!(
        expected.len() >= 20,
        "the fixture holds {} derived files",
        expected.len()
    );
    // Every figure goes; only raw records stay.
    for f in derived(&set) {
        fs::remove_file(set.join(f)).unwrap();
    }
    report(&[&set.join("compare")]);
    let singles = run_dirs(&set.join("single"));
    assert_eq!(singles.len(), 2);
    report(&singles.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let mut differ = Vec::new();
    for f in &expected {
        let want = fs::read_to_string(fixture().join(f)).unwrap();
        let got = fs::read_to_string(set.join(f)).unwrap_or_else(|_| "(missing)".into());
        let same = if f.ends_with("compare.json") {
            without_render_time(&want) == without_render_time(&got)
        } else {
            want == got
        };
        if !same {
            differ.push(f.display().to_string());
        }
    }
    assert!(
        differ.is_empty(),
        "recomputed figures differ from the recorded ones: {differ:?}"
    );
    // The perf run's attribution came back from perf.folded alone.
    let perf_summary = read_json(singles[0].join("summary.json"));
    assert_eq!(perf_summary["attribution"]["flame_graph"], "flame.svg");
    assert!(perf_summary["attribution"]["samples"].as_u64().unwrap() > 0);
}

fn stamps(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut all = Vec::new();
    files(dir, &mut all);
    all.into_iter()
        .map(|p| {
            let meta = fs::metadata(&p).unwrap();
            (p.clone(), (fs::read(&p).unwrap(), meta.modified().unwrap()))
        })
        .collect()
}

#[test]
fn reading_results_never_rewrites_a_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    copy_dir(&fixture(), &set);
    let runs: Vec<PathBuf> = run_dirs(&set.join("compare"))
        .into_iter()
        .chain(run_dirs(&set.join("single")))
        .collect();
    let before: BTreeMap<_, _> = runs.iter().flat_map(|r| stamps(r)).collect();
    // mtimes have a coarse clock on some filesystems: make any rewrite show.
    std::thread::sleep(std::time::Duration::from_millis(20));
    report(&[&set.join("compare")]);
    report(&runs.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let out = tmp.path().join("elsewhere");
    let report_to = |out: &Path| {
        Command::new(spawnscope_bin())
            .arg("report")
            .arg(set.join("compare"))
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    let output = report_to(&out);
    assert!(output.status.success());
    // It says where it writes, and, the second time, what it replaces there.
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains(&format!("writing the set's exports to {}\n", out.display())),
        "{said}"
    );
    let again = report_to(&out);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains("(replacing compare.json, compare.csv, compare-fits.csv, compare.md, report.html, charts)"),
        "{said}"
    );
    let after: BTreeMap<_, _> = runs.iter().flat_map(|r| stamps(r)).collect();
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "report added or removed files in run directories"
    );
    for (path, (bytes, mtime)) in &before {
        let (bytes_after, mtime_after) = &after[path];
        assert!(
            bytes == bytes_after && mtime == mtime_after,
            "report rewrote {}",
            path.display()
        );
    }
    assert!(out.join("compare.json").is_file() && out.join("report.html").is_file());
    // The result first, the way hyperfine states it: at the top of report.html.
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    let headline = html
        .find("<p class=\"headline\"><b>hold: a thread costs 13.7× a goroutine in memory")
        .expect("report.html opens with the headline");
    assert!(headline < html.find("<h2").unwrap(), "before any section");
}
