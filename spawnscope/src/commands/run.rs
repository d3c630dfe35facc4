//! `spawnscope run`: one run of a workload or of any command, then what one task cost.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{exit_code, usage_error, Ended, RunArgs};
use crate::commands::derive::{self, Writes};
use analyse::probes::counts_verdict;
use analyse::run::summary::Summary;
use host::signals::Interrupts;
use measure::options::RunOptions;
use measure::perf;
use measure::run::{self, Outcome, RunError};
use record::{self, Calibration, RunRecord, Target, WarmUpRecord};
use runtime::{Invocation, TaskKind};

/// `spawnscope run …`
pub fn command(args: RunArgs) -> ExitCode {
    if !args.perf && (args.perf_freq.is_some() || args.perf_call_graph.is_some()) {
        return usage_error("--perf-freq and --perf-call-graph go with --perf");
    }
    if args.runtime_trace && args.no_probes {
        return usage_error(
            "--runtime-trace implies --perfetto, which streams the probes' scheduler events: it cannot go with --no-probes",
        );
    }
    if args.perfetto && args.no_probes {
        return usage_error(
            "--perfetto streams the probes' scheduler events: it cannot go with --no-probes",
        );
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
            if args.peak_when.is_some() || args.task_kind.is_some() {
                return usage_error(
                    "--peak-when and --task-kind are for a command after --; a workload says its own peak",
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
            if let Some(Err(err)) = args.peak_when.as_deref().map(regex::Regex::new) {
                let first = err.to_string();
                let why = first.lines().last().unwrap_or("invalid");
                return usage_error(format!("--peak-when is not a regular expression: {why}"));
            }
            Target::Command {
                argv: args.command.clone(),
                tasks: args.tasks,
                task_kind: args.task_kind.unwrap_or(TaskKind::Thread),
                peak_when: args.peak_when.clone(),
                label: None,
                task_lifetime_ns: None,
            }
        }
        (_, _, _, false) => {
            return usage_error(
                "give either --runtime/--workload/--n or a command after --, not both",
            )
        }
        _ => return usage_error("run needs --runtime, --workload and --n (or a command after --)"),
    };
    let calibration = match &args.calibration_from {
        None => None,
        Some(dir) => match calibration_from(dir, &target) {
            Ok(cal) => Some(cal),
            Err(why) => return usage_error(why),
        },
    };
    let interrupts = match Interrupts::install() {
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
        probes: (!args.no_probes).then_some(args.probes),
        probe_times: args.probe_times,
        perf: args.perf.then_some(perf::Options {
            freq: args.perf_freq,
            call_graph: args.perf_call_graph,
        }),
        calibration,
        timeout: args.timeout,
        pids_limit: args.pids_limit,
        load: args.load.options(),
        cpus: args.cpus.clone(),
        cpu_count: args.cpu_count,
        keep_command_output: false,
        guess_task_kind: args.task_kind.is_none() && !args.command.is_empty(),
        // --runtime-trace puts the runtime's events on the kernel trace's threads.
        perfetto: args.perfetto || args.runtime_trace,
        trace_max_bytes: args.trace_max_size,
        runtime_trace: args.runtime_trace,
    };
    let json = args.json;
    let result = run::run(opts, &interrupts).and_then(|outcome| {
        let summary = finish(&outcome)?;
        if json {
            println!("{}", render::json_with_dir(&summary, &outcome.dir));
        } else {
            print!("{}", render::run::summary::terminal(&summary, &outcome.dir));
        }
        let counts_wrong = counts_verdict::wrong(summary.counts_verdict.as_ref());
        Ok((
            outcome.interrupted_by,
            Ended::of_run(summary.ok, counts_wrong),
        ))
    });
    exit_code(result)
}

/// The calibration an earlier run recorded (`--calibration-from DIR`), when it calibrated the same
/// runtime with the same workload flags: calibration runs `hold` at two small sizes, so the
/// workload and N may differ; a command's own calibration is not reused.
fn calibration_from(dir: &Path, target: &Target) -> Result<Calibration, String> {
    let Target::Workload(now) = target else {
        return Err("--calibration-from is for a workload (--runtime/--workload/--n); a command is not calibrated".into());
    };
    if dir.join(record::WARMUP).exists() {
        return calibration_from_warm_up(dir, now);
    }
    let earlier: RunRecord =
        record::read_json(dir, record::RUN).map_err(|e| format!("--calibration-from: {e:#}"))?;
    let Target::Workload(then) = &earlier.target else {
        return Err(format!(
            "--calibration-from: {} ran a command, not a workload",
            dir.display()
        ));
    };
    if then.runtime != now.runtime || then.flags != now.flags {
        return Err(format!(
            "--calibration-from: {} calibrated {}, not {}",
            dir.display(),
            described(then),
            described(now)
        ));
    }
    earlier.estimate.map(|e| e.calibration).ok_or_else(|| {
        format!(
            "--calibration-from: {} recorded no calibration",
            dir.display()
        )
    })
}

/// The calibration a warm-up made (`spawnscope warm-up`) for the same runtime and flags.
fn calibration_from_warm_up(dir: &Path, now: &Invocation) -> Result<Calibration, String> {
    let warm: WarmUpRecord =
        record::read_json(dir, record::WARMUP).map_err(|e| format!("--calibration-from: {e:#}"))?;
    warm.calibrated
        .into_iter()
        .find(|c| c.runtime == now.runtime.name() && c.flags == now.flags)
        .map(|c| c.calibration)
        .ok_or_else(|| {
            format!(
                "--calibration-from: {} calibrated no {}",
                dir.display(),
                described(now)
            )
        })
}

/// "threads --stack-size 65536": what a calibration is made for.
fn described(i: &Invocation) -> String {
    std::iter::once(i.runtime.name().to_string())
        .chain(i.flags.iter().map(|(k, v)| format!("--{k} {v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// After a run's records are written: its summary (written beside them), and the results given to
/// the user who ran sudo.
pub fn finish(outcome: &Outcome) -> Result<Summary, RunError> {
    let derived = derive::run_dir(&outcome.dir, Writes::Run)?;
    record::give_to_invoking_user(&outcome.dir);
    if outcome.made_out_root {
        if let Some(root) = outcome.dir.parent() {
            record::give_to_invoking_user(root);
        }
    }
    Ok(derived.summary)
}
