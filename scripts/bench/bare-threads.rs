// The least a program can do to hold N OS threads alive at once: the floor `threads hold` is
// compared with by scripts/bench-workloads.sh. Prints `rss_kb=… spawn_ns=…`.
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::RwLock;
use std::time::{Duration, Instant};

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).expect("usage: bare-threads N");
    let gate = RwLock::new(());
    let closed = gate.write().unwrap();
    let started = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let t0 = Instant::now();
        for _ in 0..n {
            s.spawn(|| {
                started.fetch_add(1, Relaxed);
                drop(gate.read());
            });
        }
        while started.load(Relaxed) < n {
            std::thread::sleep(Duration::from_millis(1));
        }
        let spawn_ns = t0.elapsed().as_nanos() / n as u128;
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let rss = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB");
        println!("rss_kb={rss} spawn_ns={spawn_ns}");
        drop(closed);
    });
}
