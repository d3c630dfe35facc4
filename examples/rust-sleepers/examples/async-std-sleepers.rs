//! The Rust async-std program of async-runtimes-benchmarks-2024 ("Take 2", hez2010), as
//! published in substance: N tasks each `async_std::task::spawn`ed to sleep 10 s, every
//! JoinHandle kept and awaited, under `#[async_std::main]`. `spawnscope compare --reproduce
//! async-runtimes-2024` runs it as a foreign command.
//!
//! Usage: async-std-sleepers N
use std::time::Duration;

use async_std::task;

#[async_std::main]
async fn main() {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(n)) => n,
        _ => {
            eprintln!("usage: async-std-sleepers N");
            std::process::exit(2);
        }
    };
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        tasks.push(task::spawn(task::sleep(Duration::from_secs(10))));
    }
    for task in tasks {
        task.await;
    }
}
