//! spawnscope, the conductor: runs a workload (or any command) with the kernel tuned for it, in a
//! cgroup of its own, measures it from outside, restores the machine and says what one task cost.
//!
//! The binary of the layer crates under crates/ (lowest first: `units` → `runtime` → `record` →
//! `host` → `measure` → `analyse` → `studies` → `render`; ARCHITECTURE.md draws the graph), with
//! the command line (`cli`) and one module per subcommand (`commands`).

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    host::machine::set_build_commit(env!("SPAWNSCOPE_GIT_COMMIT"));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            let _ = err.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(err) => return cli::usage_error(cli::one_line(&err)),
    };
    // What an interrupted run left is put back before anything else changes the machine; the
    // commands that only read (check, report, flame) change nothing, even as root.
    let changes_the_machine = matches!(
        cli.command,
        Command::Run(_) | Command::Compare(_) | Command::Sysctl { .. } | Command::WarmUp(_)
    );
    if changes_the_machine {
        if let Err(err) = measure::run::recover_interrupted_runs() {
            eprintln!("spawnscope: {err:#}");
            return ExitCode::from(1);
        }
    }
    match cli.command {
        Command::Check(args) => commands::check::command(&args),
        Command::Run(args) => commands::run::command(*args),
        Command::Sysctl { action } => commands::sysctl::command(action),
        Command::Compare(args) => commands::compare::command(*args),
        Command::WarmUp(args) => commands::warmup::command(&args),
        Command::Report { dirs, out, cut } if cut.perfetto => {
            commands::perfetto_cut::command(&dirs, out, &cut)
        }
        Command::Report { dirs, out, .. } => commands::report::command(&dirs, out),
        Command::Flame { dirs, out, diff } => commands::flame::command(&dirs, &out, diff),
        Command::Pairs {
            csv,
            workload,
            exclude,
            margin,
            programs,
            band,
        } => commands::pairs::command(
            &csv,
            &workload,
            &exclude,
            margin,
            programs.as_deref(),
            band.as_deref(),
        ),
        Command::ProbeCost {
            rounds,
            seconds,
            hooks,
            json,
        } => commands::probe_cost::command(rounds, seconds, hooks, json),
        Command::ProbeLoop => commands::probe_cost::probe_loop(),
        Command::Completions { shell } => commands::docs::completions(shell),
        Command::Man => commands::docs::man(),
        Command::Docs { action } => commands::docs::command(action),
        Command::Schema { file } => commands::schema::command(file),
        Command::Published { study } => commands::published::command(&study),
    }
}
