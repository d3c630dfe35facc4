//! Nothing: this crate holds the async-runtimes-benchmarks-2024 programs that need crates the
//! workloads must not (async-std, futures), as cargo examples built beside spawnscope:
//! `cargo build --release -p rust-sleepers --examples`.
