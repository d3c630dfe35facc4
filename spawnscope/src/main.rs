//! spawnscope, the conductor: runs a workload (or any command) with the kernel tuned for it, in a
//! cgroup of its own, measures it from outside, restores the machine and says what one task cost.

mod analysis;
mod attribution;
mod cgroup;
mod charts;
mod check;
mod cli;
mod compare;
mod costs;
mod flame;
mod html;
mod launch;
mod machine;
mod perf;
mod preflight;
mod procfs;
mod regression;
mod report;
mod results;
mod run;
mod signals;
mod sysctl;
mod units;
mod workload;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command, SysctlAction};
use results::Target;
use run::{RunError, RunOptions};
use workload::Invocation;

/// Bad arguments: one line, exit 2, nothing changed.
pub(crate) fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("spawnscope: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            let _ = err.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            let text = err.render().to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            return usage_error(format!("{first} (see spawnscope --help)"));
        }
    };
    if let Err(err) = run::recover_interrupted_runs() {
        eprintln!("spawnscope: {err:#}");
        return ExitCode::from(1);
    }
    match cli.command {
        Command::Check(args) => {
            let lines = check::lines(&args);
            for l in &lines {
                println!("{l}");
            }
            if lines.iter().any(|l| l.status == check::Status::Missing) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Run(args) => run_command(*args),
        Command::Sysctl { action } => sysctl_command(action),
        Command::Compare(args) => compare::command(*args),
        Command::Report { dirs, out } => compare::report_command(&dirs, out),
        Command::Flame { dirs, out, diff } => flame_command(&dirs, &out, diff),
    }
}

fn run_command(args: cli::RunArgs) -> ExitCode {
    if !args.perf && (args.perf_freq.is_some() || args.perf_call_graph.is_some()) {
        return usage_error("--perf-freq and --perf-call-graph go with --perf");
    }
    let target = match (
        &args.runtime,
        &args.workload,
        args.n,
        args.command.is_empty(),
    ) {
        (Some(runtime), Some(workload), Some(n), true) => {
            if args.tasks.is_some() {
                return usage_error(
                    "--tasks is for a command after --; a workload's tasks come from --n",
                );
            }
            Target::Workload(Invocation {
                runtime: *runtime,
                workload: *workload,
                n,
                flags: args.workload_flags.pairs(),
            })
        }
        (None, None, None, false) => {
            if !args.workload_flags.pairs().is_empty() {
                return usage_error("workload flags do not apply to a command after --");
            }
            Target::Command {
                argv: args.command.clone(),
                tasks: args.tasks,
            }
        }
        (_, _, _, false) => {
            return usage_error(
                "give either --runtime/--workload/--n or a command after --, not both",
            )
        }
        _ => return usage_error("run needs --runtime, --workload and --n (or a command after --)"),
    };
    let interrupts = match signals::Interrupts::install() {
        Ok(i) => i,
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            return ExitCode::from(1);
        }
    };
    let opts = RunOptions {
        target,
        out_root: args.out,
        force: args.force,
        memory_limit: args.memory_limit,
        probes: !args.no_probes,
        perf: args.perf.then_some(perf::Options {
            freq: args.perf_freq,
            call_graph: args.perf_call_graph,
        }),
        calibration: None,
    };
    let result = run::run(opts, &interrupts).map(|outcome| {
        print!("{}", report::terminal(&outcome.summary, &outcome.dir));
        (outcome.interrupted_by, outcome.summary.ok)
    });
    exit_code(result)
}

/// The exit code of a run or a sweep, as the help's table says: Ok carries the interrupting
/// signal, if any, and whether every run completed.
pub(crate) fn exit_code(result: Result<(Option<i32>, bool), RunError>) -> ExitCode {
    match result {
        Ok((Some(sig), _)) => ExitCode::from(128 + sig as u8),
        Ok((None, true)) => ExitCode::SUCCESS,
        Ok((None, false)) => ExitCode::from(4),
        Err(RunError::Usage(message)) => usage_error(message),
        Err(RunError::Refused(message)) => {
            eprintln!("spawnscope: refused: {message}");
            ExitCode::from(3)
        }
        Err(RunError::Failed(err)) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn sysctl_command(action: SysctlAction) -> ExitCode {
    let store = sysctl::SysctlStore::system();
    let tasks_on_host = procfs::tasks_on_host().unwrap_or(0);
    let result = match action {
        SysctlAction::Show { n } => (|| -> anyhow::Result<()> {
            let needs = n
                .map(|n| sysctl::needs_for_threads(n, tasks_on_host))
                .transpose()?
                .unwrap_or_default();
            for key in sysctl::MANAGED {
                let current = store.read(key)?;
                let need = needs.iter().find(|nd| nd.key == key);
                match need {
                    Some(need) if current < need.min => println!(
                        "{key} = {current}   (needs {} for {} threads)",
                        need.min,
                        n.unwrap_or(0)
                    ),
                    _ => println!("{key} = {current}"),
                }
            }
            for entry in store.entries()? {
                println!(
                    "raised: {}={} (was {}) by {:?}",
                    entry.key, entry.applied, entry.original, entry.owner
                );
            }
            Ok(())
        })(),
        SysctlAction::Apply { n } => (|| -> anyhow::Result<()> {
            let changes = store.plan(&sysctl::needs_for_threads(n, tasks_on_host)?)?;
            store.apply(&changes, &sysctl::Owner::Manual)?;
            for c in &changes {
                println!("{} {} -> {}  ({})", c.key, c.from, c.to, c.why);
            }
            if changes.is_empty() {
                println!("nothing to raise: every limit already fits {n} threads");
            } else {
                println!(
                    "recorded in {}; `spawnscope sysctl restore` puts the originals back",
                    store.state_path().display()
                );
            }
            Ok(())
        })(),
        SysctlAction::Restore => (|| -> anyhow::Result<()> {
            let restored = store.restore_all()?;
            for e in &restored {
                println!("{} = {} (restored from {})", e.key, e.original, e.applied);
            }
            if restored.is_empty() {
                println!("nothing to restore");
            }
            Ok(())
        })(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn flame_command(dirs: &[std::path::PathBuf], out: &std::path::Path, diff: bool) -> ExitCode {
    if diff && dirs.len() != 2 {
        return usage_error("--diff compares two results directories");
    }
    let mut sides = Vec::new();
    for dir in dirs {
        let loaded = match report::load(dir) {
            Ok(l) => l,
            Err(err) => return usage_error(format!("{}: {err:#}", dir.display())),
        };
        match attribution::profile_of(dir, &loaded.run, &loaded.memory) {
            Ok(Some(attribution::RunProfile { profile, .. })) => {
                let cpu_us = loaded.run.rusage.map_or(0, |r| r.user_us + r.sys_us);
                let per = cpu_us as f64 / profile.samples().max(1) as f64;
                sides.push((loaded.run.target.label(), profile, per));
            }
            Ok(None) => {
                return usage_error(format!(
                    "{} was not recorded with `run --perf` (no perf.data)",
                    dir.display()
                ))
            }
            Err(err) => {
                eprintln!("spawnscope: {}: {err:#}", dir.display());
                return ExitCode::from(1);
            }
        }
    }
    let sides: Vec<flame::Side> = sides
        .iter()
        .map(|(label, profile, per)| flame::Side {
            label: label.clone(),
            profile,
            us_per_sample: *per,
        })
        .collect();
    let drawn = if diff {
        flame::differential(&sides[0], &sides[1], out)
    } else {
        flame::side_by_side(&sides, out)
    };
    match drawn {
        Ok(()) => {
            println!("{}", out.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}
