//! `spawnscope probe-cost [--rounds K] [--seconds S] [--hooks H,…] [--json]` (alias
//! `syscall-cost`): each probe program's cost an event against the floor of its hook
//! (measure/probe_cost.rs), its figures (analyse/probes/probe_cost.rs) on the terminal or, with --json,
//! the raw rounds and the figures as one JSON object on stdout (`measured` first: the raw records
//! are written before anything derived from them). And the hidden `probe-loop`, its loops.

use std::process::ExitCode;

use crate::cli::{exit_code, Ended};
use analyse::probes::probe_cost::figures;
use host::privileges::is_root;
use host::procfs;
use measure::probe_cost::{measure, Options, HOOKS};
use measure::probe_loops;
use measure::run::RunError;
use render::probes::probe_cost::text;

pub fn command(rounds: u32, seconds: f64, hooks: Vec<String>, json: bool) -> ExitCode {
    exit_code(probe_cost(rounds, seconds, hooks, json).map(|()| (None, Ended::Done)))
}

fn probe_cost(rounds: u32, seconds: f64, hooks: Vec<String>, json: bool) -> Result<(), RunError> {
    let known: Vec<&str> = HOOKS.iter().map(|(h, _, _)| *h).collect();
    if let Some(unknown) = hooks.iter().find(|h| !known.contains(&h.as_str())) {
        return Err(RunError::Usage(format!(
            "--hooks: no loop for {unknown:?}; the hooks: {}",
            known.join(", ")
        )));
    }
    if !is_root() {
        return Err(RunError::Refused(
            "the eBPF probes need root: sudo spawnscope probe-cost".into(),
        ));
    }
    if let Some(why) = procfs::bpf_stats_on() {
        return Err(RunError::Refused(format!(
            "the kernel's BPF run-time statistics are on already ({why}): the rounds with them off would be timed with them"
        )));
    }
    let options = Options {
        cycles: rounds,
        seconds,
        hooks,
    };
    let measured = measure(&options)?;
    let figures = figures(&measured);
    if figures.hooks.is_empty() {
        return Err(RunError::Failed(anyhow::anyhow!("no hook was timed")));
    }
    if json {
        // A struct, not json!'s map, which would sort `figures` before `measured`.
        #[derive(serde::Serialize)]
        struct Written<'a> {
            measured: &'a record::probe_cost::Measured,
            figures: &'a analyse::probes::probe_cost::Figures,
        }
        let all = Written {
            measured: &measured,
            figures: &figures,
        };
        println!(
            "{}",
            serde_json::to_string(&all).map_err(anyhow::Error::from)?
        );
    } else {
        print!("{}", text(&measured, &figures));
    }
    Ok(())
}

/// `spawnscope probe-loop`: exit 1 and one line when an order cannot be carried out.
pub fn probe_loop() -> ExitCode {
    match probe_loops::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("spawnscope probe-loop: {err:#}");
            ExitCode::from(1)
        }
    }
}
