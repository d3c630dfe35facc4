//! `report DIR --perfetto` with a window and a sample: a cut of the run's Perfetto trace, for one
//! larger than the UI opens. On the synthetic run of tests/common/trace.rs (the fixture's threads
//! sleep run with 200 threads spawned and joined in its phases): the cut decodes and passes
//! `check_trace`; its switches with a kept thread are exactly the raw records' in the window; its
//! threads are exactly the sample (plus the placeholder of the others); waits are clipped to the
//! window; the full trace and every other file are left as they were; bad input is refused with
//! one line and nothing written.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::trace::{
    check_trace, phase_t, synthetic_run, Shape, TraceFacts, FIXTURE_RUN, OFFSET_NS,
};
use common::*;
use spawnscope_collector::trace_events::{Kind, TraceEvent, Wait};

const THREADS: u32 = 200;
/// The placeholders' tids: 2^30 + the process's id.
const PLACEHOLDER_BASE: i32 = 1 << 30;

fn traced_run(tmp: &Path) -> (PathBuf, Vec<TraceEvent>) {
    common::trace::traced_run(tmp, Some(OFFSET_NS), |pid, spawn_ns, join_ns| {
        synthetic_run(Shape {
            pid,
            threads: THREADS,
            spawn_ns,
            spawn_step_ns: 50_000,
            join_ns,
        })
    })
}

fn report(args: &[&str]) -> Output {
    Command::new(spawnscope_bin())
        .arg("report")
        .args(args)
        .output()
        .unwrap()
}

fn first_ts(events: &[TraceEvent]) -> u64 {
    events.iter().map(|e| e.ts).min().unwrap()
}

/// A moment as `--from`/`--to` take it: seconds from the first record, to the nanosecond.
fn secs(events: &[TraceEvent], ts: u64) -> String {
    format!("{:.9}", (ts - first_ts(events)) as f64 / 1e9)
}

/// Every file of a directory: its bytes and mtime.
fn files(dir: &Path) -> BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                (
                    fs::read(e.path()).unwrap(),
                    e.metadata().unwrap().modified().unwrap(),
                ),
            )
        })
        .collect()
}

fn cut_path(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find(|l| l.contains("a cut of the Perfetto trace: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let rest = line.split("a cut of the Perfetto trace: ").nth(1).unwrap();
    PathBuf::from(rest.rsplit_once(" (").unwrap().0)
}

fn kept_threads(facts: &TraceFacts) -> BTreeSet<i32> {
    facts
        .threads
        .keys()
        .copied()
        .filter(|t| *t < PLACEHOLDER_BASE)
        .collect()
}

/// The waits of `tids` overlapping [from, to], from the raw records paired naively (per thread
/// and kind, begin then end; the synthetic run's waits do not nest within a kind): how many
/// there are, and how many are open at the window's start and at its end (one never ended is
/// open to the end).
fn waits_overlapping(
    events: &[TraceEvent],
    tids: &BTreeSet<u32>,
    from: u64,
    to: u64,
) -> (u64, u64, u64) {
    let mut sorted = events.to_vec();
    sorted.sort_by_key(|e| e.ts);
    let mut open: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for e in &sorted {
        if !tids.contains(&e.task.tid) {
            continue;
        }
        match e.kind {
            Kind::WaitBegin => {
                open.insert((e.task.tid, e.arg), e.ts);
            }
            Kind::WaitEnd => {
                if let Some(b) = open.remove(&(e.task.tid, e.arg)) {
                    spans.push((b, e.ts));
                }
            }
            Kind::Exit => {
                let of: Vec<(u32, u64)> = open
                    .keys()
                    .filter(|(t, _)| *t == e.task.tid)
                    .copied()
                    .collect();
                for k in of {
                    spans.push((open.remove(&k).unwrap(), e.ts));
                }
            }
            _ => {}
        }
    }
    spans.extend(open.values().map(|&b| (b, u64::MAX)));
    let over: Vec<&(u64, u64)> = spans
        .iter()
        .filter(|(b, e)| *b <= to && *e >= from)
        .collect();
    let at_start = over.iter().filter(|(b, _)| *b < from).count() as u64;
    let at_end = over.iter().filter(|(_, e)| *e > to).count() as u64;
    (over.len() as u64, at_start, at_end)
}

#[test]
fn a_cut_holds_the_sample_s_records_in_the_window_and_leaves_the_full_trace_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, events) = traced_run(tmp.path());
    report_ok(&[&dir]);
    let before = files(&dir);
    let pid = events
        .iter()
        .find(|e| e.kind == Kind::NewTask)
        .unwrap()
        .other
        .tid;
    // From 5 ms in (about a hundred threads spawned, asleep in their futex) to 0.2 ms into the
    // join (about a hundred woken and gone).
    let join = events
        .iter()
        .filter(|e| e.kind == Kind::Wakeup)
        .map(|e| e.ts)
        .min()
        .unwrap();
    let (from, to) = (first_ts(&events) + 5_001_000, join + 200_000);
    // Main (its join wait open at the window's end), two threads created before the window and
    // asleep at its start (woken in it), one created in it (asleep at its end).
    let tids = [pid, pid + 3, pid + 50, pid + 150];
    let tids_arg = tids.map(|t| t.to_string()).join(",");
    let out = report(&[
        dir.to_str().unwrap(),
        "--perfetto",
        "--from",
        &secs(&events, from),
        "--to",
        &secs(&events, to),
        "--tids",
        &tids_arg,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = cut_path(&stdout);
    assert_eq!(path.parent(), Some(dir.as_path()));
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(
        name.starts_with("trace.cut-")
            && name.ends_with(&format!(
                "-tids-{}.perfetto-trace",
                tids.map(|t| t.to_string()).join("-")
            )),
        "{name}"
    );
    assert!(!dir.join(format!("{name}.partial")).exists());
    // Nothing else written, nothing rewritten: the full trace byte for byte.
    let mut after = files(&dir);
    after.remove(name.as_ref());
    assert!(after == before, "the run directory changed");

    let facts = check_trace(&path);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    // Its threads are exactly the sample, and the others one placeholder in their process.
    let kept: BTreeSet<u32> = tids.into_iter().collect();
    assert_eq!(
        kept_threads(&facts),
        kept.iter().map(|&t| t as i32).collect()
    );
    let placeholder = PLACEHOLDER_BASE + pid as i32;
    assert_eq!(
        facts.threads[&placeholder],
        (
            pid as i32,
            "other threads of the run (not in the sample)".to_string()
        )
    );
    assert_eq!(facts.threads.len(), tids.len() + 1);
    // Nothing outside the window.
    assert!(
        facts.first_ts >= Some(from) && facts.last_ts <= Some(to),
        "{:?}..{:?} outside {from}..{to}",
        facts.first_ts,
        facts.last_ts
    );

    // Switches with a kept thread: exactly the raw records' in the window with one on a side.
    let in_window = |e: &&TraceEvent| (from..=to).contains(&e.ts);
    let switches: Vec<&TraceEvent> = events
        .iter()
        .filter(|e| e.kind == Kind::Switch)
        .filter(in_window)
        .collect();
    let naive_kept = switches
        .iter()
        .filter(|e| kept.contains(&e.task.tid) || kept.contains(&e.other.tid))
        .count() as u64;
    let is_kept = |t: i32| t > 0 && kept.contains(&(t as u32));
    let cut_kept = facts
        .switch_sides
        .iter()
        .filter(|(_, prev, next)| is_kept(*prev) || is_kept(*next))
        .count() as u64;
    assert!(naive_kept > 10, "{naive_kept}");
    assert_eq!(cut_kept, naive_kept);
    // The others: a switch between a thread left out and an outside task or the idle one stays
    // (the placeholder on its side), one between two left out goes.
    let run_thread = |tid: u32| {
        tid != 0
            && events
                .iter()
                .any(|e| e.task.tid == tid && e.task.tgid == pid)
    };
    let naive_placeholder = switches
        .iter()
        .filter(|e| !kept.contains(&e.task.tid) && !kept.contains(&e.other.tid))
        .filter(|e| !(run_thread(e.task.tid) && run_thread(e.other.tid)))
        .count() as u64;
    assert!(naive_placeholder > 0);
    assert_eq!(facts.switches, naive_kept + naive_placeholder);
    assert!(facts
        .switch_sides
        .iter()
        .any(|(_, prev, next)| *prev == placeholder || *next == placeholder));
    // The kept threads' wakeups in the window.
    let naive_wakings = events
        .iter()
        .filter(|e| matches!(e.kind, Kind::Wakeup | Kind::WakeupNew))
        .filter(in_window)
        .filter(|e| kept.contains(&e.task.tid))
        .count() as u64;
    assert_eq!(facts.wakings, naive_wakings);
    assert_eq!(facts.newtasks, 1, "pid + 150 is created in the window");

    // Waits clipped: those open at the window's start begin at it, those open at its end end
    // there.
    let (overlapping, at_start, at_end) = waits_overlapping(&events, &kept, from, to);
    assert!(at_start >= 2 && at_end >= 2, "{at_start} {at_end}");
    let begins: Vec<u64> = facts
        .slice_begins
        .iter()
        .filter(|(name, _)| Wait::ALL.iter().any(|w| w.name() == name.as_str()))
        .flat_map(|(_, ts)| ts.iter().copied())
        .collect();
    assert_eq!(begins.len() as u64, overlapping);
    assert_eq!(
        begins.iter().filter(|&&ts| ts == from).count() as u64,
        at_start
    );
    let thread_ends_at_to = facts
        .slice_ends
        .iter()
        .filter(|(track, ts)| track >> 32 == 2 && *ts == to)
        .count() as u64;
    assert_eq!(thread_ends_at_to, at_end);
    // The phases clipped (the window runs from spawn into join), the notes say what the cut is.
    assert_eq!(facts.slices.get("spawn"), Some(&1));
    assert_eq!(facts.slices.get("join"), Some(&1));
    assert!(!facts.slices.contains_key("exit"));
    assert!(facts
        .track_names
        .iter()
        .any(|n| n.starts_with("note: a cut of the run's trace")));
    assert!(facts
        .track_names
        .iter()
        .any(|n| n.contains("one thread per process")));
}

#[test]
fn a_sample_of_k_threads_is_the_swimlane_s_and_a_phase_is_a_window() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, events) = traced_run(tmp.path());
    report_ok(&[&dir]);
    // Over the whole run, 32 threads are the swimlane's lanes: one chooser.
    let out = report(&[dir.to_str().unwrap(), "--perfetto", "--threads", "32"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = cut_path(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        path.file_name().unwrap().to_string_lossy(),
        format!(
            "trace.cut-0s-{}s-32threads.perfetto-trace",
            // The trace's length as the cut names it (ms precision).
            String::from_utf8_lossy(&out.stdout)
                .split("of the trace's ")
                .nth(1)
                .unwrap()
                .split(" s")
                .next()
                .unwrap()
        )
    );
    let facts = check_trace(&path);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    let summary = read_json(dir.join("summary.json"));
    let lanes: BTreeSet<i32> = summary["swimlane"]["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["tid"].as_i64().unwrap() as i32)
        .collect();
    assert_eq!(lanes.len(), 32);
    assert_eq!(kept_threads(&facts), lanes);

    // A phase as the window: 10 threads among those alive in it, the spawning one first.
    let out = report(&[
        dir.to_str().unwrap(),
        "--perfetto",
        "--window",
        "join",
        "--threads",
        "10",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = cut_path(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        path.file_name().unwrap().to_string_lossy(),
        "trace.cut-join-10threads.perfetto-trace"
    );
    let facts = check_trace(&path);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    let kept = kept_threads(&facts);
    let pid = events
        .iter()
        .find(|e| e.kind == Kind::NewTask)
        .unwrap()
        .other
        .tid as i32;
    assert_eq!(kept.len(), 10);
    assert!(kept.contains(&pid));
    let join_ns = (phase_t(&dir, "join") as i64 + OFFSET_NS) as u64;
    assert!(
        facts.first_ts >= Some(join_ns),
        "{:?} {join_ns}",
        facts.first_ts
    );
    assert_eq!(facts.slices.get("join"), Some(&1));
    assert!(!facts.slices.contains_key("spawn"));
    // A cut with --out goes where it is told.
    let elsewhere = tmp.path().join("cut.perfetto-trace");
    let out = report(&[
        dir.to_str().unwrap(),
        "--perfetto",
        "--threads",
        "3",
        "--out",
        elsewhere.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(check_trace(&elsewhere).problems.is_empty());
}

#[test]
fn bad_input_is_refused_in_one_line_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = traced_run(tmp.path());
    let untraced = tmp.path().join("untraced");
    fs::create_dir_all(&untraced).unwrap();
    for entry in fs::read_dir(repo_root().join(FIXTURE_RUN))
        .unwrap()
        .flatten()
    {
        fs::copy(entry.path(), untraced.join(entry.file_name())).unwrap();
    }
    let d = dir.to_str().unwrap();
    let full = dir.join("trace.perfetto-trace");
    let cases: &[(&[&str], &str)] = &[
        (&[d, "--perfetto", "--from", "1000"], "outside the run"),
        (&[d, "--perfetto", "--to", "1000"], "outside the run"),
        (&[d, "--perfetto", "--from", "-1"], "0 or more"),
        (
            &[d, "--perfetto", "--from", "0.002", "--to", "0.001"],
            "before --to",
        ),
        (&[d, "--perfetto", "--threads", "0"], "one thread at least"),
        (
            &[d, "--perfetto", "--tids", "999999"],
            "999999 is not one of the run's threads",
        ),
        (&[d, "--perfetto", "--window", "nosuch"], "no such phase"),
        (&[d, "--perfetto"], "give a window"),
        (
            &[
                d,
                "--perfetto",
                "--threads",
                "2",
                "--out",
                full.to_str().unwrap(),
            ],
            "the full trace's name",
        ),
        (
            &[untraced.to_str().unwrap(), "--perfetto", "--threads", "2"],
            "no trace-events.bin",
        ),
        (&[d, "--from", "1"], "--perfetto"),
        (
            &[d, "--perfetto", "--window", "join", "--from", "0"],
            "cannot be used with",
        ),
    ];
    let before = files(&dir);
    let before_untraced = files(&untraced);
    for (args, says) in cases {
        let out = report(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(
        files(&dir) == before,
        "a refused cut wrote in the run directory"
    );
    assert!(files(&untraced) == before_untraced);
}

/// A real traced run (threads hold 2,000 --perfetto), cut to the middle half of its trace and 32
/// threads: the cut decodes and passes `check_trace`, holds 32 of the run's threads (the
/// spawning one among them), and its switches with a kept thread are the raw records' in the
/// window. Root (the collector); skipped with the reason otherwise.
#[test]
fn a_real_run_s_trace_is_cut() {
    let test = "a_real_run_s_trace_is_cut";
    if skip_unless_root(test) {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    sandbox.hold_2000_threads("0s", &["--perfetto"]);
    let dir = sandbox.only_results_dir();
    let events: Vec<TraceEvent> = spawnscope_collector::trace_events::Reader::new(
        std::io::BufReader::new(fs::File::open(dir.join("trace-events.bin")).unwrap()),
    )
    .map(Result::unwrap)
    .collect();
    let first = first_ts(&events);
    let last = events.iter().map(|e| e.ts).max().unwrap();
    let (from, to) = (first + (last - first) / 4, first + 3 * (last - first) / 4);
    let out = report(&[
        dir.to_str().unwrap(),
        "--perfetto",
        "--from",
        &secs(&events, from),
        "--to",
        &secs(&events, to),
        "--threads",
        "32",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{test}: {stdout}");
    let path = cut_path(&stdout);
    let facts = check_trace(&path);
    assert!(facts.problems.is_empty(), "{:#?}", facts.problems);
    let kept = kept_threads(&facts);
    assert_eq!(kept.len(), 32);
    let pid = read_json(dir.join("run.json"))["pid"].as_i64().unwrap() as i32;
    assert!(kept.contains(&pid));
    let is_kept = |t: i32| kept.contains(&t);
    let naive = events
        .iter()
        .filter(|e| e.kind == Kind::Switch && (from..=to).contains(&e.ts))
        .filter(|e| is_kept(e.task.tid as i32) || is_kept(e.other.tid as i32))
        .count();
    let cut = facts
        .switch_sides
        .iter()
        .filter(|(_, prev, next)| is_kept(*prev) || is_kept(*next))
        .count();
    assert!(naive > 0);
    assert_eq!(cut, naive);
    assert!(
        fs::metadata(&path).unwrap().len()
            < fs::metadata(dir.join("trace.perfetto-trace"))
                .unwrap()
                .len()
    );
}
