//! The trace (`Config::trace`, `run --perfetto`) on real runs, as root: its raw records decode,
//! none is lost, and they agree with what the collector counts from the same programs — every
//! switch of the run's threads, every thread's creation and exit, every wakeup, the waits as
//! nested begin/end pairs, timestamps that never go back on one CPU and that line up with the
//! MONOTONIC clock of the rest of the report. A rename is seen; a tracepoint the kernel lacks
//! (hidden through the test seam) leaves its records out and says so; a full disk keeps the
//! records written before it. Without root or BPF each test prints `SKIP <test>: <reason>`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{serial, skip, Run};
use spawnscope_collector::trace_events::{Kind, Reader, TraceEvent, Wait};
use spawnscope_collector::{Attach, Config, Report, Trace, TraceConfig};

const THREADS: u64 = 2_000;
const CLONE_THREAD: u64 = 0x0001_0000;

/// A raw file in the temporary directory, removed when dropped.
struct TraceFile(PathBuf);

impl TraceFile {
    fn new(test: &str) -> TraceFile {
        TraceFile(std::env::temp_dir().join(format!(
            "spawnscope-{test}-{}.trace-events.bin",
            std::process::id()
        )))
    }

    fn config(&self, ring_bytes: u64) -> TraceConfig {
        TraceConfig {
            path: self.0.clone(),
            ring_bytes,
            ring_rule: "the test's: 16 MiB".into(),
            max_bytes: None,
            max_rule: "none".into(),
        }
    }
}

impl Drop for TraceFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Every record of the file, in its order; the reader must find no unknown kind and no cut
/// record.
fn decode(path: &Path) -> Vec<TraceEvent> {
    let mut reader = Reader::new(BufReader::new(File::open(path).expect("the raw file")));
    let events: Vec<TraceEvent> = reader.by_ref().map(|e| e.expect("reading")).collect();
    assert_eq!((reader.unknown, reader.trailing_bytes), (0, 0));
    events
}

fn trace(report: &Report) -> &Trace {
    report.trace.as_ref().expect("a trace section")
}

/// 2,000 threads in `hold` (released after 300 ms), traced into `file` as `config` says.
fn threads_hold(test: &str, file: &TraceFile, config: impl FnOnce(&mut Config)) -> Option<Run> {
    let bin = common::threads_bin().expect("the threads workload");
    let n = THREADS.to_string();
    common::run(
        test,
        &bin,
        &["hold", "--n", &n, "--hold-for", "300ms"],
        |c| {
            c.expected_tasks = THREADS;
            c.per_thread = false;
            c.trace = Some(file.config(16 << 20));
            config(c);
        },
    )
}

/// Switches out and in of each of the run's threads alternate (in time order), from the first
/// switch-in of a new thread (the main thread is running at exec: it starts with an out) to the
/// final switch-out of a dead thread (X or Z). Returns where they do not (each a switch no
/// program saw: the report counts those as `switches_unseen`).
fn switch_breaks(events: &[TraceEvent], pid: u32) -> u64 {
    let mut by_tid: BTreeMap<u32, Vec<(u64, bool, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == Kind::Switch) {
        if e.task.tgid == pid {
            by_tid
                .entry(e.task.tid)
                .or_default()
                .push((e.ts, false, e.arg));
        }
        if e.other.tgid == pid {
            by_tid.entry(e.other.tid).or_default().push((e.ts, true, 0));
        }
    }
    let mut breaks = 0;
    for (tid, mut switches) in by_tid {
        switches.sort_by_key(|&(ts, is_in, _)| (ts, is_in));
        let mut on_cpu = tid == pid;
        for &(_, is_in, _) in &switches {
            if is_in == on_cpu {
                breaks += 1;
            }
            on_cpu = is_in;
        }
        let &(_, last_in, state) = switches.last().unwrap();
        assert!(
            !last_in && (state == 0x10 || state == 0x20),
            "thread {tid} ends with {state:#x}"
        );
    }
    breaks
}

/// Each task's waits are begun and ended as a stack: every end closes the last wait begun, and
/// none is left open at its exit — except where the kernel skipped a program's run (counted in
/// `runs_skipped`): returns the waits counted by (begin, wait) and those that broke the rule.
fn waits_nest(events: &[TraceEvent]) -> (BTreeMap<(bool, &'static str), u64>, u64) {
    let mut open: BTreeMap<u32, Vec<Wait>> = BTreeMap::new();
    let mut counted = BTreeMap::new();
    let mut broken = 0;
    for e in events {
        match e.kind {
            Kind::WaitBegin => {
                let wait = e.wait().expect("a known wait");
                open.entry(e.task.tid).or_default().push(wait);
                *counted.entry((true, wait.name())).or_default() += 1;
            }
            Kind::WaitEnd => {
                let wait = e.wait().expect("a known wait");
                let top = open.get_mut(&e.task.tid).and_then(Vec::pop);
                if top != Some(wait) {
                    println!("task {}: {wait:?} ends, {top:?} was open", e.task.tid);
                    broken += 1;
                }
                *counted.entry((false, wait.name())).or_default() += 1;
            }
            Kind::Exit => {
                let left = open.remove(&e.task.tid).unwrap_or_default();
                if !left.is_empty() {
                    println!("task {} exits inside {left:?}", e.task.tid);
                    broken += left.len() as u64;
                }
            }
            _ => {}
        }
    }
    (counted, broken)
}

/// On each CPU, records come in the order of their timestamps.
fn assert_per_cpu_order(events: &[TraceEvent]) {
    let mut last: BTreeMap<u32, u64> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let before = last.insert(e.cpu, e.ts).unwrap_or(0);
        assert!(
            e.ts >= before,
            "record {i} on CPU {} goes back {} ns",
            e.cpu,
            before - e.ts
        );
    }
}

fn count(events: &[TraceEvent], kind: Kind, pid: u32) -> u64 {
    events
        .iter()
        .filter(|e| e.kind == kind && e.task.tgid == pid)
        .count() as u64
}

#[test]
fn a_traced_threads_hold_keeps_every_event_and_agrees_with_the_counters() {
    let _one = serial();
    let test = "traced_threads_hold";
    let file = TraceFile::new(test);
    let Some(run) = threads_hold(test, &file, |_| {}) else {
        return;
    };
    let r = &run.report;
    let t = trace(r);
    println!("{test}: {t:?}");
    assert!(t.complete && t.error.is_none(), "{t:?}");
    assert_eq!((t.lost, t.lost_writing), (0, 0));
    assert_eq!(t.gaps, [], "every hook as tp_btf here");
    assert_eq!(t.ring_bytes, 16 << 20);
    let events = decode(&file.0);
    assert_eq!(events.len() as u64, t.records);
    assert_eq!(t.records, t.emitted);
    let pid = r.tgid;

    // Switches: the run's threads switched out are the collector's count, record for record.
    let out = count(&events, Kind::Switch, pid);
    let counted = r.total("switches_voluntary") + r.total("switches_involuntary");
    assert_eq!(out, counted, "switch records vs sched_switch counts");
    let breaks = switch_breaks(&events, pid);
    assert!(
        breaks <= 2 * t.switches_unseen,
        "{breaks} breaks, {} switches unseen",
        t.switches_unseen
    );
    let blocking = events
        .iter()
        .filter(|e| e.kind == Kind::Switch && e.task.tgid == pid && !e.preempted())
        .count();
    println!(
        "{test}: {out} switches out ({blocking} blocking; the collector's voluntary {}), {} records",
        r.total("switches_voluntary"),
        events.len()
    );

    // Creation and exit: every thread made has a NEWTASK, a first wakeup, and an EXIT; the main
    // thread (exec'd, not created) has its EXIT and no NEWTASK.
    let made: BTreeSet<u32> = events
        .iter()
        .filter(|e| e.kind == Kind::NewTask && e.task.tgid == pid)
        .inspect(|e| {
            assert!(e.arg & CLONE_THREAD != 0, "{e:?}");
            assert_eq!(e.other.tgid, pid, "made by the run: {e:?}");
        })
        .map(|e| e.task.tid)
        .collect();
    assert_eq!(made.len() as u64, r.total("new_threads"));
    assert!(made.len() as u64 >= THREADS && !made.contains(&pid));
    let exited: BTreeSet<u32> = events
        .iter()
        .filter(|e| e.kind == Kind::Exit && e.task.tgid == pid)
        .map(|e| e.task.tid)
        .collect();
    assert_eq!(exited.len() as u64, r.total("thread_exits"));
    assert!(exited.contains(&pid));
    assert!(made.is_subset(&exited), "a thread made never exited");
    assert_eq!(count(&events, Kind::WakeupNew, pid), made.len() as u64);
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    for e in events.iter().filter(|e| e.kind == Kind::Wakeup) {
        assert!(e.arg < cpus.max(64), "the CPU a woken task runs on: {e:?}");
    }
    assert_eq!(
        count(&events, Kind::Wakeup, pid) + count(&events, Kind::WakeupNew, pid),
        r.total("wakeups")
    );
    // The exec names the launched process after its binary, just before counting starts.
    assert!(
        events
            .iter()
            .any(|e| e.kind == Kind::Rename && e.task.tid == pid && e.comm() == "threads"),
        "the exec's rename"
    );

    // Waits nest per task, and agree with the counters timed by the same programs.
    let (waits, broken) = waits_nest(&events);
    assert!(
        broken <= t.runs_skipped,
        "{broken} waits broken, {} runs skipped",
        t.runs_skipped
    );
    let w = |kind, name| waits.get(&(kind, name)).copied().unwrap_or(0);
    println!("{test}: waits {waits:?}");
    assert_eq!(
        w(true, "clone"),
        r.total("clone_calls") + r.total("clone3_calls")
    );
    assert_eq!(
        w(false, "clone"),
        r.total("clone_ok")
            + r.total("clone3_ok")
            + r.total("clone_failed")
            + r.total("clone3_failed")
    );
    assert!(w(true, "futex") > 0);
    if r.diagnostics.task_storage {
        for (name, metric) in [
            ("mmap_lock_read", "mmap_lock_read_waits"),
            ("mmap_lock_write", "mmap_lock_write_waits"),
        ] {
            assert_eq!(w(false, name), r.total(metric), "{name}");
        }
    }

    // One clock per CPU, and BOOTTIME lined up with the report's MONOTONIC times.
    assert_per_cpu_order(&events);
    let offset = t.boottime_minus_monotonic_ns;
    let slack = t.clock_offset_uncertainty_ns + 1_000;
    for e in events.iter().filter(|e| e.kind != Kind::Rename) {
        let mono = e.ts - offset;
        assert!(
            mono + slack >= r.t0_ns && mono <= r.finished_ns + slack,
            "{e:?} outside {}..{}",
            r.t0_ns,
            r.finished_ns
        );
    }
}

#[test]
fn the_classic_twins_trace_what_their_records_hold_and_say_what_they_lack() {
    let _one = serial();
    let test = "traced_classic_threads_hold";
    let file = TraceFile::new(test);
    let Some(run) = threads_hold(test, &file, |c| {
        c.classic_only = true;
        c.per_thread = true;
    }) else {
        return;
    };
    let r = &run.report;
    let t = trace(r);
    assert!(t.complete, "{t:?}");
    let events = decode(&file.0);
    let pid = r.tgid;
    let counted = r.total("switches_voluntary") + r.total("switches_involuntary");
    assert_eq!(count(&events, Kind::Switch, pid), counted);
    assert_eq!(count(&events, Kind::NewTask, pid), r.total("new_threads"));
    assert_eq!(count(&events, Kind::Exit, pid), r.total("thread_exits"));
    // The classic wakeup record has no tgid: the woken tids are the run's threads.
    let wakeups = events
        .iter()
        .filter(|e| matches!(e.kind, Kind::Wakeup | Kind::WakeupNew))
        .count() as u64;
    assert_eq!(wakeups, r.total("wakeups"));
    let (_, broken) = waits_nest(&events);
    assert!(
        broken <= t.runs_skipped,
        "{broken} waits broken, {} runs skipped",
        t.runs_skipped
    );
    assert_per_cpu_order(&events);
    let hooks: Vec<&str> = t.gaps.iter().map(|g| g.hook.as_str()).collect();
    for hook in [
        "sched:sched_switch",
        "sched:sched_wakeup",
        "sched:sched_wakeup_new",
        "task:task_newtask",
        "task:task_rename",
    ] {
        assert!(hooks.contains(&hook), "{hook} not said in {:?}", t.gaps);
    }
    // The lock waits need task storage: their hooks are missing, and said so.
    assert!(hooks.contains(&"lock:contention_begin"), "{:?}", t.gaps);
    println!("{test}: {} records; gaps {:?}", events.len(), t.gaps);
}

// ---- a child that names its threads ----

const NAMED: usize = 8;

#[test]
#[ignore = "run by the named-threads test under the collector"]
fn child_named_threads() {
    let phase = |name: &str| {
        println!(
            "{{\"event\":\"phase\",\"name\":\"{name}\",\"t_ns\":{}}}",
            spawnscope_collector::monotonic_ns()
        )
    };
    phase("spawn");
    let threads: Vec<_> = (0..NAMED)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("sc-named-{i}"))
                .spawn(|| std::thread::sleep(std::time::Duration::from_millis(20)))
                .unwrap()
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    phase("end");
    println!("{{\"event\":\"result\"}}");
}

fn named_threads(
    test: &str,
    file: &TraceFile,
    config: impl FnOnce(&mut Config),
) -> Option<common::ChildRun> {
    common::run_child(test, "child_named_threads", NAMED as u64, |c| {
        c.trace = Some(file.config(4 << 20));
        config(c);
    })
}

#[test]
fn a_thread_naming_itself_is_a_rename_record() {
    let _one = serial();
    let test = "traced_renames";
    let file = TraceFile::new(test);
    let Some(run) = named_threads(test, &file, |_| {}) else {
        return;
    };
    let t = trace(&run.report);
    assert!(t.complete, "{t:?}");
    let events = decode(&file.0);
    let pid = run.report.tgid;
    let made: BTreeSet<u32> = events
        .iter()
        .filter(|e| e.kind == Kind::NewTask && e.task.tgid == pid)
        .map(|e| e.task.tid)
        .collect();
    for i in 0..NAMED {
        let name = format!("sc-named-{i}");
        let renamed = events
            .iter()
            .find(|e| e.kind == Kind::Rename && e.comm() == name)
            .unwrap_or_else(|| panic!("no rename to {name}"));
        assert_eq!(renamed.task.tgid, pid);
        assert!(made.contains(&renamed.task.tid), "{renamed:?}");
        // Its exit carries its new name.
        assert!(events
            .iter()
            .any(|e| e.kind == Kind::Exit && e.task == renamed.task && e.comm() == name));
    }
}

/// A kernel without one of the trace's tracepoints (hidden here through the seam) gives the run
/// without those records, and the report says which.
#[test]
fn a_missing_tracepoint_leaves_its_records_out_and_is_named() {
    let _one = serial();
    let test = "traced_without_rename";
    let file = TraceFile::new(test);
    let Some(run) = named_threads(test, &file, |c| {
        c.hide_tracepoint = Some("task:task_rename".into())
    }) else {
        return;
    };
    let r = &run.report;
    let t = trace(r);
    let status = r
        .probes
        .iter()
        .find(|p| p.probe == "task:task_rename")
        .expect("listed");
    assert_eq!(status.attach, None);
    let gap = t
        .gaps
        .iter()
        .find(|g| g.hook == "task:task_rename")
        .expect("the missing hook named");
    assert!(gap.why.contains("hidden"), "{gap:?}");
    assert!(t.complete && t.lost == 0, "{t:?}");
    let events = decode(&file.0);
    assert!(!events.iter().any(|e| e.kind == Kind::Rename));
    // The rest is there: the named threads' creation, switches and exits.
    let pid = r.tgid;
    // (The test harness runs the child's test on a thread of its own, also made and exited.)
    let made = count(&events, Kind::NewTask, pid);
    assert!(made > NAMED as u64, "{made}");
    assert!(count(&events, Kind::Switch, pid) > 0);
    assert_eq!(count(&events, Kind::Exit, pid), made + 1);
    assert!(r.probes.iter().any(|p| p.attach == Some(Attach::TpBtf)));
}

/// A kernel without BPF ring buffers (before 5.8; here the seam says so): the run goes on, the
/// programs load without the ring (their emission pruned), and the report says why there is no
/// trace.
#[test]
fn without_ring_buffers_the_run_goes_on_without_its_trace_and_says_why() {
    let _one = serial();
    let test = "traced_without_ring_buffers";
    let file = TraceFile::new(test);
    let Some(run) = named_threads(test, &file, |c| c.hide_ring_buffers = true) else {
        return;
    };
    let r = &run.report;
    let t = trace(r);
    let error = t.error.as_deref().expect("why there is no trace");
    assert!(error.contains("no BPF ring buffer"), "{error}");
    assert_eq!((t.records, t.emitted, t.lost), (0, 0, 0));
    assert!(!t.complete);
    assert!(!file.0.exists(), "no file made");
    let rename = r
        .probes
        .iter()
        .find(|p| p.probe == "task:task_rename")
        .unwrap();
    assert_eq!(rename.attach, None, "{rename:?}");
    // The counting went on as without the trace.
    assert!(r.total("new_threads") > NAMED as u64);
    assert_eq!(r.total("thread_exits"), r.total("new_threads") + 1);
    let switch = r
        .probes
        .iter()
        .find(|p| p.probe == "sched:sched_switch")
        .unwrap();
    assert_eq!(switch.attach, Some(Attach::TpBtf));
}

/// A tmpfs of `kib` KiB, unmounted and removed when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(test: &str, kib: u64) -> Result<SmallDisk, String> {
        let dir = std::env::temp_dir().join(format!("spawnscope-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(&dir)
            .status()
            .map_err(|e| format!("mount did not start: {e}"))?;
        if !status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("mount -t tmpfs failed: {status}"));
        }
        Ok(SmallDisk(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_full_disk_keeps_the_records_before_it_and_marks_the_capture_incomplete() {
    let _one = serial();
    let test = "traced_full_disk";
    if !common::is_root() {
        return skip(test, "needs root to load BPF programs and mount a tmpfs");
    }
    let disk = match SmallDisk::mount(test, 64) {
        Ok(d) => d,
        Err(why) => return skip(test, &why),
    };
    let file = TraceFile(disk.0.join("trace-events.bin"));
    let Some(run) = threads_hold(test, &file, |_| {}) else {
        return;
    };
    let r = &run.report;
    let t = trace(r);
    println!("{test}: {t:?}");
    let error = t.error.as_deref().expect("the write error said");
    assert!(error.contains("No space left"), "{error}");
    assert!(!t.complete);
    let events = decode(&file.0);
    assert_eq!(events.len() as u64, t.records);
    assert!(t.records > 0 && t.records <= 1024, "{}", t.records);
    assert_eq!(t.records + t.lost_writing, t.emitted);
    assert!(t.lost_writing > 0);
    // The run itself went on: its counts are whole.
    assert!(r.total("new_threads") >= THREADS);
    drop(file);
}
