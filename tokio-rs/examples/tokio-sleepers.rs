//! The Rust tokio program of async-runtimes-benchmarks-2024 ("Take 2", hez2010), as published in
//! substance: N tasks each `tokio::spawn`ed to sleep 10 s, every JoinHandle kept and awaited.
//! `spawnscope compare --reproduce async-runtimes-2024` runs it as a foreign command.
//!
//! Usage: tokio-sleepers N
use std::time::Duration;

fn main() {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(n)) => n,
        _ => {
            eprintln!("usage: tokio-sleepers N");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .expect("the tokio runtime starts");
    runtime.block_on(async {
        let mut tasks = Vec::with_capacity(n);
        for _ in 0..n {
            tasks.push(tokio::spawn(async {
                tokio::time::sleep(Duration::from_secs(10)).await;
            }));
        }
        for task in tasks {
            task.await.expect("a sleeping task does not panic");
        }
    });
}
