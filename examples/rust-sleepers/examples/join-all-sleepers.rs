//! The Rust `futures::join_all` program of async-runtimes-benchmarks-2024 (hez2010; its first
//! take's tokio program): N `tokio::time::sleep(10 s)` futures, none spawned, polled together by
//! `futures::future::join_all` on tokio's multi-thread runtime (as `#[tokio::main]` starts it).
//! No task is spawned: the N futures live in join_all's one Vec, which is what makes it the
//! article's leanest Rust row. `spawnscope compare --reproduce async-runtimes-2024` runs it as a
//! foreign command.
//!
//! Usage: join-all-sleepers N
use std::time::Duration;

fn main() {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(n)) => n,
        _ => {
            eprintln!("usage: join-all-sleepers N");
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
            tasks.push(tokio::time::sleep(Duration::from_secs(10)));
        }
        futures::future::join_all(tasks).await;
    });
}
