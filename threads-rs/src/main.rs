//! `threads`: the spawnscope workload on OS threads (Rust std::thread, no crates).
//! The contract it shares with `goroutines` is in schema/ and the architecture notes.

mod cli;
mod harness;
mod json;
mod limits;
mod sys;
#[cfg(test)]
mod tables;
mod units;
mod workloads;

use cli::{Command, Workload, PROGRAM};
use harness::Harness;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match cli::parse(&args) {
        Ok(Command::Run(cfg)) => cfg,
        Ok(Command::Help) => {
            print!("{}", cli::usage());
            return;
        }
        Ok(Command::Version) => {
            println!(
                "{PROGRAM} {} ({})",
                env!("CARGO_PKG_VERSION"),
                env!("THREADS_RUSTC_VERSION")
            );
            return;
        }
        Err(reason) => {
            eprintln!("{PROGRAM}: {reason}");
            eprint!("{}", cli::usage());
            std::process::exit(2);
        }
    };
    let dry_run = cfg.dry_run;
    let mut harness = Harness::new(cfg);
    harness.start();
    if dry_run {
        return;
    }
    let throughput = match harness.cfg.workload {
        Workload::Sleep => workloads::sleep(&mut harness),
        Workload::Hold => workloads::hold(&mut harness),
        Workload::Churn => workloads::churn(&mut harness),
        Workload::Pingpong => workloads::pingpong(&mut harness),
        Workload::Chain => workloads::chain(&mut harness),
    };
    std::process::exit(harness.finish(throughput));
}
