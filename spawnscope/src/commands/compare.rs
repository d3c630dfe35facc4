//! `spawnscope compare`: the sweep (measure::sweep), each run summarised as it ends, then the
//! exports from the results directories on disk, as `report` would make them.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::{exit_code, usage_error, CompareArgs, Ended};
use crate::commands::derive;
use crate::commands::run::finish;
use analyse::probes::counts_verdict;
use host::signals::Interrupts;
use measure::run::RunError;
use measure::sweep::{compare, CompareOptions, RunVerdict, DEFAULT_NS};
use measure::trace_cap;
use runtime::command::SweptCommand;
use runtime::{Runtime, TaskKind, WorkloadKind};
use studies::{self, Asked};
use units::bytes;

/// `spawnscope compare …`
pub fn command(args: CompareArgs) -> ExitCode {
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "compare-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        ))
    });
    let flags = args.workload_flags.pairs();
    // A CPU no run could be pinned to is bad input before the sweep starts (each run checks again).
    if let Some(text) = args.cpus.as_deref() {
        let usable = host::limits::usable_cpus();
        if let Err(err) = usable.and_then(|u| host::limits::cpus_to_pin(text, &u)) {
            return usage_error(format!("--cpus {text}: {err:#}"));
        }
    }
    let commands = match runtime::command::pair(&args.commands, &args.labels) {
        Ok(commands) => commands
            .into_iter()
            .map(|c| SweptCommand {
                task_kind: args.task_kind.unwrap_or(TaskKind::Task),
                task_lifetime: args.task_lifetime,
                ..c
            })
            .collect::<Vec<_>>(),
        Err(why) => return usage_error(why),
    };
    // Commands alone: the runtimes' workloads and their flags have nothing to apply to.
    let commands_only = !commands.is_empty() && args.runtimes.is_empty();
    if commands_only && (!args.workloads.is_empty() || !flags.is_empty()) {
        return usage_error(
            "--workloads and workload flags are for --runtimes; a --command runs as it is (add --runtimes to run both)",
        );
    }
    let mut opts = match args.reproduce.as_deref() {
        Some(name) => {
            let Some(plan) = studies::find(name).and_then(|s| s.plan) else {
                return usage_error(format!("--reproduce {name}: no such study"));
            };
            let load_over = |article| args.load.options_over(article);
            let asked = Asked {
                out,
                repeats: args.repeats,
                memory_limit: args.memory_limit,
                cpus: args.cpus.as_deref(),
                flags: &flags,
                load_over: &load_over,
            };
            match plan(&asked) {
                Ok(opts) => opts,
                Err(why) => return usage_error(why),
            }
        }
        None => CompareOptions {
            // The three runtimes of the default sweep unless named (processes only on request:
            // `Runtime::DEFAULT_SWEEP` says why): the question is how they stand against each other, and
            // tokio's runs are the shortest of the three (tasks of a few hundred bytes, spawned
            // in about a microsecond): its 24 runs of the default sweep took 93 s on the dev VM,
            // beside ≈15 min for threads and goroutines.
            runtimes: if commands_only {
                Vec::new()
            } else if args.runtimes.is_empty() {
                Runtime::DEFAULT_SWEEP.to_vec()
            } else {
                dedup(args.runtimes)
            },
            ns: if args.n.is_empty() {
                DEFAULT_NS.to_vec()
            } else {
                let mut ns = args.n;
                ns.sort_unstable();
                ns.dedup();
                ns
            },
            workloads: if args.workloads.is_empty() {
                vec![WorkloadKind::Hold, WorkloadKind::Sleep]
            } else {
                dedup(args.workloads)
            },
            repeats: args.repeats.unwrap_or(3),
            out,
            memory_limit: args.memory_limit,
            flags,
            reproduce: None,
            cells: None,
            commands,
            skipped: Vec::new(),
            load: args.load.options(),
            cpus: args.cpus.clone(),
            cpu_counts: Vec::new(),
            perfetto: false,
            trace_max_bytes: None,
            runtime_trace: false,
        },
    };
    // Every run of the sweep is traced (lean probes): with --perfetto each streams its trace.
    // --runtime-trace implies it, as on `run`: the threads' side of the latencies is the kernel's.
    opts.perfetto = args.perfetto || args.runtime_trace;
    opts.trace_max_bytes = args.trace_max_size;
    // A traced sweep on a filesystem without room for its traces is refused before it starts
    // (each run chooses its own default cap again at its start).
    if opts.perfetto && host::privileges::is_root() {
        if let Err(why) = trace_cap::for_results(&opts.out, opts.trace_max_bytes) {
            return exit_code(Err(RunError::Refused(why)));
        }
    }
    if args.runtime_trace {
        if let Err(why) = runtime_trace_ready(&opts.runtimes) {
            return usage_error(format!("--runtime-trace: {why}"));
        }
    }
    opts.runtime_trace = args.runtime_trace;
    let mut cpu_counts = args.cpu_counts.clone();
    cpu_counts.sort_unstable();
    cpu_counts.dedup();
    // A K past the CPUs this process may use is bad input before the sweep starts.
    if let Some(&most) = cpu_counts.last() {
        if let Err(err) = host::cpu_order::cpus_for_count(most as usize) {
            return usage_error(format!("--cpu-counts {most}: {err:#}"));
        }
    }
    opts.cpu_counts = cpu_counts;
    let json = args.json;
    let interrupts = match Interrupts::install() {
        Ok(i) => i,
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            return ExitCode::from(1);
        }
    };
    let mut summarise = |outcome: &measure::run::Outcome| -> anyhow::Result<RunVerdict> {
        let s = finish(outcome).map_err(|e| match e {
            measure::run::RunError::Failed(err) => err,
            other => anyhow::anyhow!("{other:?}"),
        })?;
        let memory = s.memory_per_task.as_ref().map_or(String::new(), |m| {
            format!(
                ", {} per task alive (RSS {})",
                bytes(m.total_kb * 1024.0),
                bytes(m.rss_kb * 1024.0)
            )
        });
        let counts_wrong = counts_verdict::wrong(s.counts_verdict.as_ref());
        Ok(RunVerdict {
            ok: s.ok,
            counts_wrong,
            line: format!(
                "{} {}: {:.2} s wall, {:.2} s user, {:.2} s system{memory}",
                match Ended::of_run(s.ok, counts_wrong) {
                    Ended::Done => "done",
                    Ended::CountsWrong => "COUNTS WRONG",
                    Ended::NotComplete => "NOT OK",
                },
                s.outcome.split(':').next().unwrap_or(""),
                s.wall_s,
                s.user_s,
                s.sys_s,
            ),
        })
    };
    let result = compare(opts, &interrupts, &mut summarise).and_then(|outcome| {
        if !outcome.dirs.is_empty() {
            let report = derive::comparison(&outcome.dirs, Some(outcome.plan), &outcome.out)?;
            if json {
                println!("{}", render::json_with_dir(&report, &outcome.out));
            } else {
                println!("{}", render::comparisons::compare::markdown(&report));
                eprintln!(
                    "results (compare.md, compare.json, compare.csv, compare-fits.csv, charts/, report.html):"
                );
                // Alone on the last line, for scripts.
                println!("{}", outcome.out.display());
            }
        }
        record::give_to_invoking_user(outcome.made_root.as_deref().unwrap_or(&outcome.out));
        // A run that did not complete is the stronger news (4); else a run's wrong counts (5).
        let ended = Ended::of_run(outcome.all_ok, outcome.counts_wrong > 0);
        Ok((outcome.interrupted_by, ended))
    });
    exit_code(result)
}

/// `--runtime-trace` before the sweep: some runtime swept must have a runtime trace (else each
/// refusal is said), and the reducer its runs need must be there (not found after the ordinary
/// runs have taken their time).
fn runtime_trace_ready(runtimes: &[Runtime]) -> Result<(), String> {
    let (traced, refused): (Vec<_>, Vec<_>) = runtimes
        .iter()
        .map(|r| r.runtime_trace_flag())
        .partition(Result::is_ok);
    if traced.is_empty() {
        let why: Vec<String> = refused.into_iter().filter_map(Result::err).collect();
        return Err(if why.is_empty() {
            "no runtime is swept".to_string()
        } else {
            format!("no runtime swept has a runtime trace ({})", why.join("; "))
        });
    }
    // Each traced runtime's own tool: Go's reducer, tokio's hooks build.
    for runtime in runtimes.iter().filter(|r| r.runtime_trace_flag().is_ok()) {
        match runtime {
            Runtime::Tokio => measure::tokio_trace::hooks_binary().map(|_| ())?,
            _ => measure::go_trace::reducer().map(|_| ())?,
        }
    }
    Ok(())
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
