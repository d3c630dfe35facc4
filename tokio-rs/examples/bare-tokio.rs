//! The least a program can do to hold N tokio tasks alive at once: the floor `tokio-tasks hold` is
//! compared with by scripts/bench-workloads.sh (as bare-threads.rs and bare-goroutines.go are for
//! the others). Prints `rss_kb=… spawn_ns=…`.
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

static STARTED: AtomicUsize = AtomicUsize::new(0);
static GATE: Semaphore = Semaphore::const_new(0);

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .expect("usage: bare-tokio N");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .build()
        .expect("the tokio runtime starts");
    let t0 = Instant::now();
    for _ in 0..n {
        runtime.spawn(async {
            STARTED.fetch_add(1, Relaxed);
            let _ = GATE.acquire().await;
        });
    }
    while STARTED.load(Relaxed) < n {
        std::thread::sleep(Duration::from_millis(1));
    }
    let spawn_ns = t0.elapsed().as_nanos() / n as u128;
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB");
    println!("rss_kb={rss} spawn_ns={spawn_ns}");
    GATE.close();
}
