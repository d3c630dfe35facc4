//! `spawnscope syscall-cost [--cycles K] [--calls C] [--json]`: the floor under a traced run's
//! syscalls (measure/syscall_cost.rs), its figures (analyse/syscall_cost.rs) on the terminal or,
//! with --json, the raw rounds and the figures as one JSON object on stdout.

use std::process::ExitCode;

use crate::analyse::syscall_cost::figures;
use crate::cli::{exit_code, Ended};
use crate::host::privileges::is_root;
use crate::host::procfs;
use crate::measure::run::RunError;
use crate::measure::syscall_cost::measure;
use crate::render::syscall_cost::text;

pub fn command(cycles: u32, calls: u64, json: bool) -> ExitCode {
    exit_code(syscall_cost(cycles, calls, json).map(|()| (None, Ended::Done)))
}

fn syscall_cost(cycles: u32, calls: u64, json: bool) -> Result<(), RunError> {
    if !is_root() {
        return Err(RunError::Refused(
            "the eBPF probes need root: sudo spawnscope syscall-cost".into(),
        ));
    }
    if let Some(why) = procfs::bpf_stats_on() {
        return Err(RunError::Refused(format!(
            "the kernel's BPF run-time statistics are on already ({why}): the traced state would be timed with them"
        )));
    }
    let measured = measure(cycles, calls)?;
    let figures = figures(&measured).ok_or_else(|| anyhow::anyhow!("a state was never timed"))?;
    if json {
        let all = serde_json::json!({ "measured": measured, "figures": figures });
        println!("{all}");
    } else {
        print!("{}", text(&measured, &figures));
    }
    Ok(())
}
