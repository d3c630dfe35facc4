//! The kernel's waits, counted by the collector on small programs whose waits are known: this
//! test binary re-execs itself to run one of the `child_*` functions below (ignored as tests of
//! their own) under the collector, as root. Without root, BPF or a tracepoint each test prints
//! `SKIP <test>: <reason>` and returns.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{serial, skip, ChildRun as Run};
use serde_json::{json, Value};
use spawnscope_collector::{jhash, monotonic_ns, Config, Report};

// ---- the children: one JSON event per line on stdout, phases as the workloads write them ----

fn phase(name: &str) {
    // One write starting with `{"event":"phase"`: the kernel side switches phase on seeing it.
    let line = format!(
        "{{\"event\":\"phase\",\"name\":\"{name}\",\"t_ns\":{}}}\n",
        monotonic_ns()
    );
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes()).unwrap();
    out.flush().unwrap();
}

fn result(fields: Value) {
    let mut event = json!({"event": "result"});
    event
        .as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    println!("{event}");
}

/// Mappings made, touched and unmapped in all, split over `threads`: the same work each time.
const CHURN_ROUNDS: usize = 16_000;
const CHURN_BYTES: usize = 128 * 1024;

fn mmap_churn(threads: usize) {
    let page = 4096;
    phase("churn");
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..CHURN_ROUNDS / threads {
                    // SAFETY: a fresh private anonymous mapping, touched within its length and
                    // unmapped once.
                    unsafe {
                        let p = libc::mmap(
                            std::ptr::null_mut(),
                            CHURN_BYTES,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        assert_ne!(p, libc::MAP_FAILED);
                        for at in (0..CHURN_BYTES).step_by(page) {
                            *(p as *mut u8).add(at) = 1;
                        }
                        libc::munmap(p, CHURN_BYTES);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    phase("end");
    result(json!({ "threads": threads }));
}

#[test]
#[ignore = "a child of mmap_lock_waits_grow_with_threads_that_map_concurrently"]
fn child_mmap_churn_1() {
    mmap_churn(1);
}

#[test]
#[ignore = "a child of mmap_lock_waits_grow_with_threads_that_map_concurrently"]
fn child_mmap_churn_4() {
    mmap_churn(4);
}

const PARKED: usize = 2_000;
const WAKES: usize = 200;
const PR_FUTEX_HASH: i32 = 78;
const PR_FUTEX_HASH_GET_SLOTS: u64 = 2;

fn futex(word: &AtomicU32, op: i32, val: u32) -> i64 {
    // SAFETY: a futex call on a live, aligned u32; no timeout, no second address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op | libc::FUTEX_PRIVATE_FLAG,
            val,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0,
        )
    }
}

/// Parks PARKED threads on futex A, then wakes (nobody) on B, in A's bucket, WAKES times, then
/// on C, in another bucket, WAKES times: each wake on B walks the parked threads' chain.
#[test]
#[ignore = "a child of futex_wakes_walk_every_waiter_of_their_bucket"]
fn child_futex_buckets() {
    let gate = Arc::new(AtomicU32::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    phase("park");
    let threads: Vec<_> = (0..PARKED)
        .map(|_| {
            let (gate, parked) = (gate.clone(), parked.clone());
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    parked.fetch_add(1, Ordering::SeqCst);
                    while gate.load(Ordering::SeqCst) == 0 {
                        futex(&gate, libc::FUTEX_WAIT, 0);
                    }
                })
                .unwrap()
        })
        .collect();
    while parked.load(Ordering::SeqCst) < PARKED {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500)); // each one from its count into its wait
                                                    // SAFETY: prctl with integer arguments.
    let slots = unsafe { libc::prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0) };
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let words: Vec<AtomicU32> = (0..4096).map(|_| AtomicU32::new(0)).collect();
    let a = gate.as_ptr() as u64;
    let (mut b, mut c) = (None, None);
    if slots > 0 {
        let slots = slots as u64;
        let bucket_a = jhash::futex_bucket(a, 4096, slots);
        for w in &words {
            let at = w.as_ptr() as u64;
            let bucket = jhash::futex_bucket(at, 4096, slots);
            if bucket == bucket_a && b.is_none() {
                b = Some(w);
            } else if bucket != bucket_a && c.is_none() {
                c = Some(w);
            }
        }
    }
    phase("wake_same_bucket");
    if let Some(b) = b {
        for _ in 0..WAKES {
            futex(b, libc::FUTEX_WAKE, 1);
        }
    }
    phase("wake_other_bucket");
    if let Some(c) = c {
        for _ in 0..WAKES {
            futex(c, libc::FUTEX_WAKE, 1);
        }
    }
    phase("release");
    gate.store(1, Ordering::SeqCst);
    futex(&gate, libc::FUTEX_WAKE, i32::MAX as u32);
    for t in threads {
        t.join().unwrap();
    }
    phase("end");
    let addr = |w: Option<&AtomicU32>| w.map(|w| w.as_ptr() as u64);
    result(json!({
        "slots": slots, "errno": errno, "a": a, "b": addr(b), "c": addr(c),
    }));
}

// ---- running a child under the collector ----

/// This binary re-exec'd to run `child` under the collector (lean probes, as the conductor's
/// default), or None after a printed SKIP.
fn run_child(test: &str, child: &str, config: impl FnOnce(&mut Config)) -> Option<Run> {
    common::run_child(test, child, PARKED as u64, config)
}

/// The figure's reason for being unavailable, if it is.
fn unavailable(report: &Report, figure: &str) -> Option<String> {
    let waits = report.waits.as_ref().expect("a waits section");
    waits
        .unavailable
        .iter()
        .find(|u| u.figure == figure)
        .map(|u| u.why.clone())
}

// ---- the tests ----

#[test]
fn mmap_lock_waits_grow_with_threads_that_map_concurrently() {
    let _one = serial();
    let test = "mmap_lock_waits";
    let Some(one) = run_child(test, "child_mmap_churn_1", |_| {}) else {
        return;
    };
    if let Some(why) = unavailable(&one.report, "mmap_lock waits") {
        skip(test, &format!("mmap_lock waits not available here: {why}"));
        return;
    }
    let Some(four) = run_child(test, "child_mmap_churn_4", |_| {}) else {
        return;
    };
    let figures = |r: &Run| {
        let wait_ns = r.in_phase("mmap_lock_write_wait_ns", "churn")
            + r.in_phase("mmap_lock_read_wait_ns", "churn");
        let waits = r.in_phase("mmap_lock_write_waits", "churn")
            + r.in_phase("mmap_lock_read_waits", "churn");
        println!(
            "{test}: {} thread(s): {waits} waits for mmap_lock, {:.1} ms waited ({:.0} ns each); \
             TLB shootdowns asked of other CPUs {} (flushes gone remote {}); IPIs {} to {} CPUs",
            r.result["threads"],
            wait_ns as f64 / 1e6,
            wait_ns as f64 / waits.max(1) as f64,
            r.report.total("csd_tlb_queued"),
            r.report.total("tlb_remote_send_ipi"),
            r.report.total("ipi_sends"),
            r.report.total("ipi_targets"),
        );
        (waits, wait_ns)
    };
    let (waits_1, ns_1) = figures(&one);
    let (waits_4, ns_4) = figures(&four);
    // The same mmap/munmap work, each call taking the lock for writing. Alone, nobody holds it
    // when the thread asks: (almost) no wait. Four threads queue for it behind each other.
    assert!(
        waits_1 <= 10,
        "{waits_1} waits for mmap_lock with one thread"
    );
    assert!(
        waits_4 >= 20,
        "{waits_4} waits for mmap_lock with four threads"
    );
    assert!(
        ns_4 >= 1_000_000 && ns_4 >= 10 * ns_1,
        "four threads waited {ns_4} ns for mmap_lock, one thread {ns_1} ns"
    );
    // Unmapping memory other CPUs may cache asks them to flush: hardly ever with one thread
    // (the sleeping main thread's CPU, seldom), all the time with four.
    if unavailable(&four.report, "TLB shootdowns asked of other CPUs").is_none() {
        let (tlb_1, tlb_4) = (
            one.report.total("csd_tlb_queued"),
            four.report.total("csd_tlb_queued"),
        );
        assert!(tlb_4 >= 100 && tlb_1 * 10 <= tlb_4, "{tlb_1} vs {tlb_4}");
    }
}

#[test]
fn futex_wakes_walk_every_waiter_of_their_bucket() {
    let _one = serial();
    let test = "futex_bucket_walks";
    let Some(run) = run_child(test, "child_futex_buckets", |_| {}) else {
        return;
    };
    let r = &run.result;
    if r["slots"].as_i64().unwrap_or(-1) <= 0 {
        skip(
            test,
            &format!(
                "prctl(PR_FUTEX_HASH, GET_SLOTS) gave {} (errno {}): no per-process futex hash \
                 (Linux < 6.16)",
                r["slots"], r["errno"]
            ),
        );
        return;
    }
    if let Some(why) = unavailable(&run.report, "futex hash walks") {
        skip(test, &format!("futex hash walks not available here: {why}"));
        return;
    }
    let slots = r["slots"].as_u64().unwrap();
    let (a, b, c) = (
        r["a"].as_u64().unwrap(),
        r["b"].as_u64().expect("an address in A's bucket"),
        r["c"].as_u64().expect("an address in another bucket"),
    );
    let hash = run
        .report
        .waits
        .as_ref()
        .and_then(|w| w.futex_hash.clone())
        .unwrap();
    let per_wake = |phase: &str| {
        let wakes = run.in_phase("futex_private_wakes", phase);
        let walked = run.in_phase("futex_wake_walked", phase);
        let ns = run.in_phase("futex_wake_ns", phase);
        (wakes, walked, ns)
    };
    let (wakes_b, walked_b, ns_b) = per_wake("wake_same_bucket");
    let (wakes_c, walked_c, ns_c) = per_wake("wake_other_bucket");
    let bucket = |addr: u64| jhash::futex_bucket(addr, 4096, slots);
    println!(
        "{test}: hash of {slots} slots (kernel side saw {:?}); A {a:#x} bucket {}, B {b:#x} \
         bucket {}, C {c:#x} bucket {}",
        hash.slots,
        bucket(a),
        bucket(b),
        bucket(c)
    );
    println!(
        "{test}: wakes on B: {wakes_b}, {:.1} waiters walked each, {:.1} µs each; wakes on C: \
         {wakes_c}, {:.1} walked each, {:.1} µs each; most walked by one wake {}",
        walked_b as f64 / wakes_b.max(1) as f64,
        ns_b as f64 / wakes_b.max(1) as f64 / 1e3,
        walked_c as f64 / wakes_c.max(1) as f64,
        ns_c as f64 / wakes_c.max(1) as f64 / 1e3,
        hash.walk_max
    );
    println!(
        "{test}: top futexes {:?}",
        &hash.top_futexes[..hash.top_futexes.len().min(3)]
    );
    println!(
        "{test}: busiest buckets {:?}",
        &hash.busiest_buckets[..hash.busiest_buckets.len().min(3)]
    );
    assert_eq!(
        hash.slots,
        Some(slots),
        "the kernel side read the same size"
    );
    assert!(
        !hash.resized,
        "the hash kept its size (2,000 threads on this machine)"
    );
    assert_eq!((wakes_b, wakes_c), (WAKES as u64, WAKES as u64));
    // Every wake on B finds the PARKED waiters of A in its bucket (a few more: the harness's
    // own threads may wait there too); C's bucket holds next to none.
    let k = PARKED as u64;
    assert!(
        walked_b >= k * WAKES as u64 && walked_b <= (k + 10) * WAKES as u64,
        "walked on B: {walked_b}"
    );
    assert!(walked_c <= 10 * WAKES as u64, "walked on C: {walked_c}");
    // All of them wait on another address than B's: each wake on B walks past them, none on C.
    let past_b = run.in_phase("futex_wake_walked_others", "wake_same_bucket");
    let past_c = run.in_phase("futex_wake_walked_others", "wake_other_bucket");
    assert!(
        past_b >= k * WAKES as u64 && past_b <= walked_b,
        "walked past on B: {past_b} of {walked_b}"
    );
    assert!(past_c <= walked_c, "walked past on C: {past_c}");
    // That the kernel walks the same bucket is seen in its time (printed above: each wake on B
    // takes tens of µs, on C well under one), which the manual quotes (docs/manual/waits.md); a timing is not asserted.
    // B is named, in A's bucket, and that bucket held the parked threads at once.
    let top = &hash.top_futexes[0];
    assert_eq!(top.address, format!("{b:#x}"));
    assert_eq!(top.bucket, bucket(a));
    assert_eq!(top.wakes, WAKES as u64);
    let busiest = &hash.busiest_buckets[0];
    assert_eq!(busiest.bucket, bucket(a));
    assert!(busiest.peak_waiters >= k, "{busiest:?}");
}

/// A tracepoint this kernel refuses (here: made to by the test seam) leaves its figure out, with
/// why, and the other figures in.
#[test]
fn a_missing_wait_probe_makes_its_figure_not_available_not_zero() {
    let _one = serial();
    let test = "missing_wait_probe";
    let Some(run) = run_child(test, "child_mmap_churn_1", |c| {
        c.refuse_btf_for = Some("mm_vmscan_direct_reclaim_end".into())
    }) else {
        return;
    };
    let r = &run.report;
    // Every other program loads as written: none refused by the verifier.
    for p in &r.probes {
        if p.probe != "vmscan:mm_vmscan_direct_reclaim_end" {
            let note = p.note.as_deref().unwrap_or("");
            assert!(!note.contains("verifier"), "{p:?}");
        }
    }
    let status = r
        .probes
        .iter()
        .find(|p| p.probe == "vmscan:mm_vmscan_direct_reclaim_end")
        .unwrap();
    assert_eq!(status.attach, None, "{status:?}");
    for metric in [
        "machine_direct_reclaims",
        "machine_direct_reclaim_ns",
        "machine_direct_reclaimed_pages",
    ] {
        assert!(
            r.metric(metric).is_none(),
            "{metric} shown without its probe"
        );
    }
    let why = unavailable(r, "direct reclaim (machine)").expect("said unavailable");
    assert!(why.contains("mm_vmscan_direct_reclaim_end"), "{why}");
    // The other machine-wide figures stay.
    assert!(r.metric("outside_oncpu_ns").is_some());
    assert!(
        r.metric("machine_thp_collapses").is_some()
            || unavailable(r, "THP collapses (machine)").is_some()
    );
    println!(
        "{test}: outside the run {:.1} ms on-CPU; unavailable: {:?}",
        r.total("outside_oncpu_ns") as f64 / 1e6,
        r.waits.as_ref().unwrap().unavailable
    );
}
