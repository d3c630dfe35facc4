//! The swimlane of a traced run (swimlane.svg, report.html): a real run's records
//! (tests/fixtures/before-house) beside synthetic raw scheduler records on its clock
//! (tests/common/trace.rs), then `report`. Each lane's time running, runnable and blocked, and
//! each CPU's time per holder, as summary.json gives them from the model the SVG is drawn from,
//! equal what the raw records say computed naively here, to the nanosecond; headless Chromium
//! shows every state's colour in the lanes; a 100,000-thread trace's swimlane stays small.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::browser::{chromium, screenshot};
use common::trace::{synthetic_run, traced_run, Shape, OFFSET_NS};
use common::*;
use serde_json::Value;
use spawnscope_collector::trace_events::{Kind, Task, TraceEvent};

const MS: u64 = 1_000_000;
const TASK_INTERRUPTIBLE: u64 = 1;
const TASK_DEAD: u64 = 0x80;

/// The end of the swimlane as the raw records and run.json say: the later of the last record
/// and the reap (on the trace's clock).
fn end_of(dir: &Path, events: &[TraceEvent]) -> u64 {
    let run = read_json(dir.join("run.json"));
    let reaped = (run["reaped_t_ns"].as_u64().unwrap() as i64 + OFFSET_NS) as u64;
    events.iter().map(|e| e.ts).max().unwrap().max(reaped)
}

fn in_time_order(events: &[TraceEvent]) -> Vec<TraceEvent> {
    let mut sorted = events.to_vec();
    // Stable: records of one moment stay in file order.
    sorted.sort_by_key(|e| e.ts);
    sorted
}

/// One thread's time running, runnable and blocked, naively: walk its records in time order
/// (switches with it on either side, its wakeups, its exit) and give the time up to each record
/// to the state the one before left it in — a switch-in makes it running, a switch out
/// runnable (prev_state 0, preempted) or blocked, a wakeup runnable unless it is running; its
/// exit ends it (nothing after counts); its last state lasts to `end`.
fn naive_states(sorted: &[TraceEvent], tid: u32, end: u64) -> [u64; 3] {
    const RUNNING: usize = 0;
    const RUNNABLE: usize = 1;
    const BLOCKED: usize = 2;
    let mut total = [0u64; 3];
    let mut state: Option<(usize, u64)> = None;
    for e in sorted {
        let next = match e.kind {
            Kind::Switch if e.other.tid == tid => Some(RUNNING),
            Kind::Switch if e.task.tid == tid && e.arg == 0 => Some(RUNNABLE),
            Kind::Switch if e.task.tid == tid => Some(BLOCKED),
            Kind::Wakeup | Kind::WakeupNew if e.task.tid == tid => {
                if state.is_some_and(|(s, _)| s == RUNNING) {
                    continue;
                }
                Some(RUNNABLE)
            }
            Kind::Exit if e.task.tid == tid => None,
            _ => continue,
        };
        if let Some((s, since)) = state {
            total[s] += e.ts - since;
        }
        match next {
            Some(s) => state = Some((s, e.ts)),
            None => return total,
        }
    }
    if let Some((s, since)) = state {
        total[s] += end - since;
    }
    total
}

/// Per CPU, naively: each switch's next holds the CPU until the CPU's next switch (the last
/// until `end`), summed as the spawning thread (tid `pid`), another of the run's threads (tgid
/// `pid`), an outside task, idle (tid 0).
fn naive_cpus(sorted: &[TraceEvent], pid: u32, end: u64) -> BTreeMap<u32, [u64; 4]> {
    let mut switches: BTreeMap<u32, Vec<(u64, Task)>> = BTreeMap::new();
    for e in sorted.iter().filter(|e| e.kind == Kind::Switch) {
        switches.entry(e.cpu).or_default().push((e.ts, e.other));
    }
    switches
        .into_iter()
        .map(|(cpu, list)| {
            let mut held = [0u64; 4];
            for (i, (ts, next)) in list.iter().enumerate() {
                let until = list.get(i + 1).map_or(end, |n| n.0);
                let who = match next {
                    t if t.tid == 0 => 3,
                    t if t.tid == pid => 0,
                    t if t.tgid == pid => 1,
                    _ => 2,
                };
                held[who] += until - ts;
            }
            (cpu, held)
        })
        .collect()
}

/// The swimlane's figures in summary.json held to the raw records; returns them.
fn check_against_raw(dir: &Path, events: &[TraceEvent], pid: u32, threads: u64) -> Value {
    let summary = read_json(dir.join("summary.json"));
    let lanes = summary["swimlane"].clone();
    assert!(lanes.is_object(), "no swimlane in summary.json");
    assert_eq!(lanes["threads"], threads);
    let end = end_of(dir, events);
    assert_eq!(lanes["end_ns"], end);
    let sorted = in_time_order(events);
    let drawn = lanes["lanes"].as_array().unwrap();
    assert_eq!(drawn.len() as u64, threads.min(32));
    assert_eq!(drawn[0]["tid"], pid, "the spawning thread first");
    assert_eq!(drawn[0]["why"], "spawning thread");
    for lane in drawn {
        let tid = lane["tid"].as_u64().unwrap() as u32;
        let [running, runnable, blocked] = naive_states(&sorted, tid, end);
        assert_eq!(
            (
                &lane["running_ns"],
                &lane["runnable_ns"],
                &lane["blocked_ns"]
            ),
            (&running.into(), &runnable.into(), &blocked.into()),
            "thread {tid}: running, runnable, blocked"
        );
        assert!(running > 0, "thread {tid} never ran");
    }
    let cpus = naive_cpus(&sorted, pid, end);
    let drawn_cpus = lanes["cpus"].as_array().unwrap();
    assert_eq!(drawn_cpus.len(), cpus.len());
    for c in drawn_cpus {
        let cpu = c["cpu"].as_u64().unwrap() as u32;
        let held = [
            c["spawning_ns"].as_u64().unwrap(),
            c["run_ns"].as_u64().unwrap(),
            c["outside_ns"].as_u64().unwrap(),
            c["idle_ns"].as_u64().unwrap(),
        ];
        assert_eq!(held, cpus[&cpu], "CPU {cpu}: spawning, run, outside, idle");
    }
    lanes
}

fn event(
    ts: u64,
    kind: Kind,
    cpu: u32,
    task: Task,
    other: Task,
    arg: u64,
    comm: &str,
) -> TraceEvent {
    TraceEvent::nice_zero(ts, kind, cpu, task, other, arg, comm)
}

/// A run whose every state lasts milliseconds (a pixel is about 0.2 ms of the fixture's 175 ms):
/// main on CPU 0 creates 6 threads 2 ms apart, is preempted by a kworker for 10 ms, blocks in
/// its join; the threads wait their turn on CPU 1 (runnable 4 to 24 ms), run 4 ms each, block
/// (an outside task holds CPU 1 for 2 ms after the third, idle otherwise); in the join phase
/// each is woken, waits 2 ms, runs 3 ms on CPU 0 or 1 and exits; main then runs and exits.
fn wide_run(pid: u32, spawn: u64, join: u64) -> Vec<TraceEvent> {
    let idle = Task::default();
    let main = Task {
        tid: pid,
        tgid: pid,
    };
    let kworker = Task { tid: 40, tgid: 40 };
    let outside = Task { tid: 50, tgid: 50 };
    let mut e = vec![event(spawn - MS, Kind::Switch, 0, idle, main, 0, "threads")];
    let mut cpu1_last = idle;
    for i in 0..6u64 {
        let t = Task {
            tid: pid + 1 + i as u32,
            tgid: pid,
        };
        let created = spawn + i * 2 * MS;
        e.push(event(created, Kind::NewTask, 0, t, main, 0, "threads"));
        e.push(event(
            created + 1,
            Kind::WakeupNew,
            0,
            t,
            main,
            1,
            "threads",
        ));
        let runs = spawn + 4 * MS + i * 6 * MS;
        let name = format!("w{i}");
        e.push(event(
            runs,
            Kind::Switch,
            1,
            cpu1_last,
            t,
            TASK_INTERRUPTIBLE,
            &name,
        ));
        let next = if i == 2 { outside } else { idle };
        e.push(event(
            runs + 4 * MS,
            Kind::Switch,
            1,
            t,
            next,
            TASK_INTERRUPTIBLE,
            "x",
        ));
        cpu1_last = next;
    }
    e.push(event(
        spawn + 15 * MS,
        Kind::Switch,
        0,
        main,
        kworker,
        0,
        "kworker/0:1",
    ));
    e.push(event(
        spawn + 25 * MS,
        Kind::Switch,
        0,
        kworker,
        main,
        0,
        "threads",
    ));
    e.push(event(
        spawn + 30 * MS,
        Kind::Switch,
        0,
        main,
        idle,
        TASK_INTERRUPTIBLE,
        "swapper/0",
    ));
    let mut cpu_last = [idle, cpu1_last];
    for i in 0..6u64 {
        let t = Task {
            tid: pid + 1 + i as u32,
            tgid: pid,
        };
        let cpu = (i % 2) as u32;
        let woken = join + i * 5 * MS;
        e.push(event(woken, Kind::Wakeup, cpu, t, idle, cpu as u64, "w"));
        let runs = woken + 2 * MS;
        e.push(event(
            runs,
            Kind::Switch,
            cpu,
            cpu_last[cpu as usize],
            t,
            TASK_INTERRUPTIBLE,
            "w",
        ));
        e.push(event(runs + 3 * MS, Kind::Exit, cpu, t, idle, 0, "w"));
        e.push(event(
            runs + 3 * MS + 10_000,
            Kind::Switch,
            cpu,
            t,
            idle,
            TASK_DEAD,
            "swapper",
        ));
        cpu_last[cpu as usize] = idle;
    }
    e.push(event(
        join + 35 * MS,
        Kind::Wakeup,
        0,
        main,
        idle,
        0,
        "threads",
    ));
    e.push(event(
        join + 36 * MS,
        Kind::Switch,
        0,
        idle,
        main,
        TASK_INTERRUPTIBLE,
        "threads",
    ));
    e.push(event(
        join + 45 * MS,
        Kind::Exit,
        0,
        main,
        idle,
        0,
        "threads",
    ));
    e.push(event(
        join + 45 * MS + 10_000,
        Kind::Switch,
        0,
        main,
        idle,
        TASK_DEAD,
        "swapper/0",
    ));
    e.sort_by_key(|x| x.ts);
    e
}

fn pid_of(dir: &Path) -> u32 {
    read_json(dir.join("run.json"))["pid"].as_u64().unwrap() as u32
}

#[test]
fn each_lane_holds_the_raw_records_durations() {
    let tmp = tempfile::tempdir().unwrap();
    // 200 threads: more than the lanes, so the sample is taken by its rule.
    let (dir, events) = traced_run(tmp.path(), Some(OFFSET_NS), |pid, spawn_ns, join_ns| {
        synthetic_run(Shape {
            pid,
            threads: 200,
            spawn_ns,
            spawn_step_ns: 50_000,
            join_ns,
        })
    });
    report_ok(&[&dir]);
    let pid = pid_of(&dir);
    let lanes = check_against_raw(&dir, &events, pid, 201);
    let why = |tid: u32| {
        lanes["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["tid"] == tid)
            .map(|l| l["why"].as_str().unwrap().to_string())
    };
    for tid in pid + 1..=pid + 8 {
        assert_eq!(why(tid).as_deref(), Some("first created"), "{tid}");
    }
    assert_eq!(
        why(pid + 200).as_deref(),
        Some("spread"),
        "the last created"
    );
    let longest = lanes["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["why"] == "longest wait")
        .count();
    assert_eq!(longest, 8);
    // The picture: written beside the trace, the same bytes when written again.
    let svg = dir.join("swimlane.svg");
    let first = fs::read(&svg).unwrap();
    assert!(String::from_utf8_lossy(&first).contains("<svg"));
    fs::remove_file(&svg).unwrap();
    report_ok(&[&dir]);
    assert_eq!(fs::read(&svg).unwrap(), first, "swimlane.svg written again");
    let md = fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("## Swimlane (`swimlane.svg`)"), "{md}");
}

#[test]
fn a_wide_run_s_lanes_hold_its_durations_and_report_html_draws_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, events) = traced_run(tmp.path(), Some(OFFSET_NS), wide_run);
    let out = tmp.path().join("out");
    report_ok(&[&dir, Path::new("--out"), &out]);
    let pid = pid_of(&dir);
    let lanes = check_against_raw(&dir, &events, pid, 7);
    assert!(lanes["lanes"].as_array().unwrap()[1..]
        .iter()
        .all(|l| l["why"] == "every thread"));
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(html.matches("<figure class=\"chart swimlane\"").count(), 1);
    assert!(html.contains("<h2 id=\"swimlanes\">"));
    // Under its run's heading (its label), named by its directory.
    let compare = read_json(out.join("compare.json"));
    let run = &compare["runs"][0];
    let heading = format!(
        "<h3>{}</h3><figure class=\"chart swimlane\" id=\"swimlane-{}\">",
        run["label"].as_str().unwrap(),
        run["dir"].as_str().unwrap()
    );
    assert!(html.contains(&heading), "{heading}");
}

/// The swimlane's figure alone in a page with report.html's head, as Chromium draws it; every
/// state's and holder's colour below the legend.
#[test]
fn chromium_draws_every_state_in_the_lanes() {
    let Some(browser) = chromium() else {
        println!("SKIP: chromium is not installed (apt-get install chromium; scripts/test.sh installs it)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = traced_run(tmp.path(), Some(OFFSET_NS), wide_run);
    let out = tmp.path().join("out");
    report_ok(&[&dir, Path::new("--out"), &out]);
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    let head = &html[..html.find("<body>").unwrap() + "<body>".len()];
    let from = html
        .find("<figure class=\"chart swimlane\"")
        .expect("the swimlane's figure");
    let to = from + html[from..].find("</figure>").unwrap() + "</figure>".len();
    let page = tmp.path().join("swimlane.html");
    fs::write(&page, format!("{head}{}</body></html>", &html[from..to])).unwrap();
    let shot = screenshot(&browser, &page, tmp.path(), "swimlane", (1300, 900));
    println!("screenshot: {}", shot.png.display());
    if let Some(path) = std::env::var_os("SPAWNSCOPE_KEEP_SCREENSHOT") {
        fs::copy(&shot.png, path).unwrap();
    }
    // The lanes: below the title and legend (the SVG's top 56 px, 25 px down the page) and right
    // of the lanes' labels (250 px, the page centred at 1,240 px at most); filled blocks only.
    let (xs, ys) = (300..shot.width, 90..shot.height);
    for (what, colour, at_least) in [
        ("running", [44, 160, 44], 2_000),
        ("runnable", [255, 127, 14], 2_000),
        ("blocked", [107, 174, 214], 2_000),
        ("CPU held by the spawning thread", [148, 103, 189], 1_000),
        ("CPU held by an outside task", [127, 127, 127], 300),
        ("CPU idle", [222, 222, 222], 1_000),
    ] {
        let n = shot.solid(colour, xs.clone(), ys.clone());
        println!("{what}: {n} pixels");
        assert!(
            n >= at_least,
            "{what}: {n} pixels of {colour:?} in the lanes"
        );
    }
}

/// 100,000 threads (about 1.5 M records): the swimlane keeps 32 lanes and its SVG stays small.
#[test]
fn a_hundred_thousand_threads_make_a_small_swimlane() {
    let tmp = tempfile::tempdir().unwrap();
    let threads = 100_000u32;
    let (dir, events) = traced_run(tmp.path(), Some(OFFSET_NS), |pid, spawn_ns, _| {
        synthetic_run(Shape {
            pid,
            threads,
            spawn_ns,
            spawn_step_ns: 30_000,
            join_ns: spawn_ns + threads as u64 * 40_000,
        })
    });
    report_ok(&[&dir]);
    let summary = read_json(dir.join("summary.json"));
    assert_eq!(summary["swimlane"]["threads"], threads as u64 + 1);
    assert_eq!(summary["swimlane"]["lanes"].as_array().unwrap().len(), 32);
    let size = fs::metadata(dir.join("swimlane.svg")).unwrap().len();
    println!(
        "{} records, {} threads: swimlane.svg {} bytes",
        events.len(),
        threads + 1,
        size
    );
    assert!(size < 1 << 20, "swimlane.svg is {size} bytes");
    // Kept for a person to look at.
    if let Some(path) = std::env::var_os("SPAWNSCOPE_KEEP_SWIMLANE") {
        fs::copy(dir.join("swimlane.svg"), path).unwrap();
    }
}
