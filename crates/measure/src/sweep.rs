//! `spawnscope compare`: runtimes × N × workloads × repeats, and any commands × N × repeats
//! beside them, one run at a time through `run::run`. Plans first — calibrates once per runtime
//! (and per command) and clamps each N the preflight says cannot fit, saying why — writes the
//! plan, runs the matrix with a progress line, stops cleanly on a signal (after the current run
//! has restored the machine). The caller summarises each run as it ends, and renders the exports
//! from the results directories on disk, as `report` would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::loadgen::{self, LoadOptions};
use crate::options::RunOptions;
use crate::preflight;
use crate::probes::{ProbeDetail, ProbeTimes};
use crate::run::{self, Outcome, RunError};
use host::limits::can_raise_hard_limits;
use host::privileges::is_root;
use host::signals::Interrupts;
use host::{binary, limits};
use record::process::signal_name;
use record::{self, Calibration, Estimate, Plan, PlannedCell, PlannedCommand, Skipped, Target};
use runtime::command::{SweptCommand, CALIBRATION_SIZES, COMMAND_WORKLOAD};
use runtime::{Invocation, Runtime, WorkloadKind};
use units::{bytes, count};

pub const DEFAULT_NS: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];

/// A cell of a reproduction: runtime, workload, N and its own memory limit (see
/// `CompareOptions::cells`).
pub type FixedCell = (Runtime, WorkloadKind, u64, Option<u64>);

/// What to run.
pub struct CompareOptions {
    pub runtimes: Vec<Runtime>,
    pub ns: Vec<u64>,
    pub workloads: Vec<WorkloadKind>,
    pub repeats: u32,
    pub out: PathBuf,
    pub memory_limit: Option<u64>,
    /// Workload flags as given; each run gets those that apply to its workload and runtime.
    pub flags: Vec<(String, String)>,
    pub reproduce: Option<String>,
    /// Cells that are fixed rather than a product (the reproduction): (runtime, workload, N).
    /// The fourth: the cell's own memory limit, at which it runs even where the preflight says
    /// it will not fit (what happens at the limit is the experiment: rust-http-2023).
    pub cells: Option<Vec<FixedCell>>,
    /// Programs swept over `ns` beside the runtimes (`--command`), each point run as
    /// `run --tasks N -- CMD` runs it.
    pub commands: Vec<SweptCommand>,
    /// What a reproduction could not run on this host, and why (kept in the plan).
    pub skipped: Vec<Skipped>,
    /// serve cells: the load on each.
    pub load: LoadOptions,
    /// `--cpus`: the CPUs every run's workload is pinned to.
    pub cpus: Option<String>,
    /// `--cpu-counts`: every cell run at each K CPUs (`run --cpu-count K`); empty: not swept.
    pub cpu_counts: Vec<u32>,
    /// `--perfetto`: every run streams its scheduler events to its raw trace file.
    pub perfetto: bool,
    /// `--trace-max-size`: each traced run's cap on its trace file [default: each run's own,
    /// from the free room at its start].
    pub trace_max_bytes: Option<u64>,
    /// `--runtime-trace`: each cell of a runtime that has a runtime trace gets one runtime-traced
    /// run beside its ordinary ones (`runtime_traced_jobs`).
    pub runtime_trace: bool,
}

/// The flags that apply to one workload on one runtime (the workloads refuse the others).
pub fn flags_for(
    flags: &[(String, String)],
    runtime: Runtime,
    workload: WorkloadKind,
) -> Vec<(String, String)> {
    flags
        .iter()
        .filter(|(flag, _)| match flag.as_str() {
            "--sleep" => workload == WorkloadKind::Sleep,
            "--hold-for" => workload == WorkloadKind::Hold,
            "--batch" => workload == WorkloadKind::Churn,
            "--rounds" => workload == WorkloadKind::Pingpong,
            "--events" | "--queue" | "--type" | "--size" => workload == WorkloadKind::Chain,
            "--work" | "--port" | "--addrs" | "--backlog" => workload == WorkloadKind::Serve,
            // A runtime's own cost flag goes to that runtime only.
            other => Runtime::ALL
                .iter()
                .all(|r| r.describe().cost_flag != Some(other) || *r == runtime),
        })
        .cloned()
        .collect()
}

/// One run of the matrix.
#[derive(Clone)]
struct Job {
    target: Target,
    /// The cell's runtime (a command's label), workload and N, as the plan names them.
    runtime: String,
    workload: String,
    n: u64,
    repeat: u32,
    repeats: u32,
    predicted_s: f64,
    calibration: Calibration,
    /// The cell's own memory limit (forced: see CompareOptions::cells).
    memory_limit: Option<u64>,
    /// The K CPUs it is held to (`--cpu-counts`).
    cpu_count: Option<u32>,
    /// A runtime-traced run (`run --runtime-trace`), beside the cell's repeats, not one of them.
    runtime_traced: bool,
}

/// What the preflight says for one requested N of `what` ("threads hold"): the N to run, or
/// None, and why.
pub fn clamp(what: &str, requested: u64, est: &Estimate) -> (Option<u64>, Option<String>) {
    if est.fits {
        return (Some(requested), None);
    }
    // A margin under the largest N, so that the run's own preflight (with what is free then)
    // agrees, and the workload's own reserve (2 % of usable memory, 32..512 MiB of headroom
    // left in the cgroup) is not what stops it.
    let budget = est.budget_bytes as f64;
    // 10 %, because calibrated at 500 and 2,500 threads a task came out 33.7 KiB here while
    // 600,000 threads took 36.5 KiB each; plus the workload's reserve (2 %, 32..512 MiB).
    let reserve = (budget * 0.02).clamp(32.0 * 1048576.0, 512.0 * 1048576.0);
    let margin = budget * 0.10 + reserve;
    let factor = ((budget - margin) / budget).max(0.0);
    let n = preflight::round_down((est.largest_n as f64 * factor) as u64);
    let why = format!(
        "needs ≈{}, {} available",
        bytes(est.needed_bytes as f64),
        bytes(est.budget_bytes as f64)
    );
    if n == 0 {
        return (
            None,
            Some(format!(
                "{what} {}: left out — {why}; nothing fits",
                count(requested)
            )),
        );
    }
    (
        Some(n),
        Some(format!(
            "{what} {} → clamped to {}: {why}",
            count(requested),
            count(n)
        )),
    )
}

/// What one cell runs: a runtime's workload, or a command of `CompareOptions::commands`.
#[derive(Clone, Copy)]
enum Subject {
    Workload(Runtime, WorkloadKind),
    Command(usize),
}

/// serve: the connections clamped to what a process of ours can hold open (RLIMIT_NOFILE), the
/// reason added to the cell's note.
fn clamp_connections(
    what: &str,
    connections: u64,
    inv: &Invocation,
    opts: &CompareOptions,
    note: Option<String>,
) -> (Option<u64>, Option<String>) {
    let reachable = limits::open_files_reachable(can_raise_hard_limits(), is_root());
    let given: Option<u64> = inv.flag("--addrs").and_then(|v| v.parse().ok());
    let most = loadgen::most_connections(connections, &opts.load, given, &reachable);
    if most >= connections {
        return (Some(connections), note);
    }
    let most = preflight::round_down(most);
    let text = format!(
        "{what} {} → {}: one descriptor per connection, and {} open files is {}",
        count(connections),
        if most == 0 {
            "left out".to_string()
        } else {
            format!("clamped to {}", count(most))
        },
        count(reachable.0),
        reachable.1
    );
    let note = Some(match note {
        Some(before) => format!("{before}; {text}"),
        None => text,
    });
    ((most > 0).then_some(most), note)
}

/// A cell the preflight let run, before it is repeated.
struct Runnable {
    target: Target,
    runtime: String,
    workload: String,
    n: u64,
    predicted_s: f64,
    memory_limit: Option<u64>,
}

fn plan(opts: &CompareOptions, interrupts: &Interrupts) -> Result<(Plan, Vec<Job>), RunError> {
    let budget = match opts.memory_limit {
        Some(limit) => limit,
        None => preflight::default_budget()?,
    };
    // Every command's program is found before anything is calibrated.
    let programs: Vec<PathBuf> = opts
        .commands
        .iter()
        .map(|c| {
            binary::resolve_program(&c.words[0]).ok_or_else(|| {
                RunError::Usage(format!(
                    "command not found: {} (in --command of {})",
                    c.words[0], c.label
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    let product: Vec<(Subject, u64, Option<u64>)> = match &opts.cells {
        // Fixed cells, and any commands over the N (a study may run both: libcopp-2018).
        Some(cells) => cells
            .iter()
            .map(|&(rt, wl, n, limit)| (Subject::Workload(rt, wl), n, limit))
            .chain(
                (0..opts.commands.len())
                    .flat_map(|i| opts.ns.iter().map(move |&n| (Subject::Command(i), n, None))),
            )
            .collect(),
        None => {
            let workloads = opts.workloads.iter().flat_map(|&wl| {
                opts.runtimes.iter().flat_map(move |&rt| {
                    opts.ns
                        .iter()
                        .map(move |&n| (Subject::Workload(rt, wl), n, None))
                })
            });
            let commands = (0..opts.commands.len())
                .flat_map(|i| opts.ns.iter().map(move |&n| (Subject::Command(i), n, None)));
            workloads.chain(commands).collect()
        }
    };
    // One calibration per runtime: it runs `hold` under the flags that change a task's cost,
    // which are the same for every workload of the matrix. One per command, at two N of its own.
    let mut calibrations: BTreeMap<String, Calibration> = BTreeMap::new();
    let mut cells = Vec::new();
    let mut runnable: Vec<Runnable> = Vec::new();
    for (subject, requested, cell_limit) in product {
        let (runtime, workload, est, run_at): (String, String, Estimate, RunAt) = match subject {
            Subject::Workload(rt, wl) => {
                let inv = Invocation {
                    runtime: rt,
                    workload: wl,
                    n: requested,
                    flags: flags_for(&opts.flags, rt, wl),
                };
                let binary = rt.binary().map_err(|e| RunError::Usage(e.to_string()))?;
                let params = inv.validate(&binary).map_err(RunError::Usage)?;
                if !calibrations.contains_key(rt.name()) {
                    eprintln!(
                        "spawnscope compare: calibrating {}: two short hold runs to estimate the memory of N",
                        rt.name()
                    );
                    let mut cal = preflight::calibrate(&binary, &inv, interrupts).map_err(|e| {
                        RunError::Refused(format!("calibrating {}: {e:#}", rt.name()))
                    })?;
                    say_calibrated(&cal);
                    // Every run of a sweep is traced (lean): its programs' ns per run, once.
                    if is_root() {
                        if let Err(failed) = preflight::calibrate_probes(
                            &binary,
                            &inv,
                            &mut cal,
                            ProbeDetail::Lean,
                            opts.perfetto,
                            interrupts,
                        ) {
                            eprintln!("spawnscope compare: {failed}");
                        }
                    }
                    calibrations.insert(rt.name().into(), cal);
                }
                let cal = calibrations[rt.name()].clone();
                let est = preflight::estimate(&inv, cal, &params, budget);
                (
                    rt.name().into(),
                    wl.name().into(),
                    est,
                    RunAt::Workload(inv, params),
                )
            }
            Subject::Command(i) => {
                let command = &opts.commands[i];
                if !calibrations.contains_key(&command.label) {
                    eprintln!(
                        "spawnscope compare: calibrating {}: two short runs at N={} and {} to estimate the memory of N",
                        command.label,
                        count(CALIBRATION_SIZES[0]),
                        count(CALIBRATION_SIZES[1])
                    );
                    let cal = preflight::calibrate_command(command, &programs[i], interrupts)
                        .map_err(|e| {
                            RunError::Refused(format!("calibrating {}: {e:#}", command.label))
                        })?;
                    say_calibrated(&cal);
                    calibrations.insert(command.label.clone(), cal);
                }
                let cal = calibrations[&command.label].clone();
                let est = preflight::estimate_command(requested, cal, budget);
                (
                    command.label.clone(),
                    COMMAND_WORKLOAD.into(),
                    est,
                    RunAt::Command(command),
                )
            }
        };
        if let Some(sig) = interrupts.received() {
            return Err(RunError::Refused(format!(
                "{} received while planning; nothing was run",
                signal_name(sig)
            )));
        }
        let (n, note) = match cell_limit {
            Some(limit) => (
                Some(requested),
                Some(format!(
                    "{runtime} {workload} {}: memory limit {}, run at it whatever the preflight says",
                    count(requested),
                    bytes(limit as f64)
                )),
            ),
            None => clamp(&format!("{runtime} {workload}"), requested, &est),
        };
        // A command's own most N, where its study set one (Java platform threads).
        let (n, note) = match (&run_at, n) {
            (RunAt::Command(c), Some(at)) => match &c.most_tasks {
                Some((most, why)) if at > *most => (
                    Some(*most),
                    Some(format!(
                        "{runtime} {workload} {}: clamped to {}: {why}",
                        count(requested),
                        count(*most)
                    )),
                ),
                _ => (n, note),
            },
            _ => (n, note),
        };
        let (n, mut note) = match (n, &run_at) {
            (Some(c), RunAt::Workload(inv, _)) if inv.workload == WorkloadKind::Serve => {
                clamp_connections(&format!("{runtime} {workload}"), c, inv, opts, note)
            }
            _ => (n, note),
        };
        let n = match n {
            Some(n)
                if n != requested
                    && runnable
                        .iter()
                        .any(|r| r.runtime == runtime && r.workload == workload && r.n == n) =>
            {
                note = note.map(|t| format!("{t}; already in the sweep, left out"));
                None
            }
            other => other,
        };
        if let Some(text) = &note {
            eprintln!("spawnscope compare: {text}");
        }
        cells.push(PlannedCell {
            runtime: runtime.clone(),
            workload: workload.clone(),
            requested_n: requested,
            n,
            note,
        });
        if let Some(n) = n {
            let cal = &calibrations[&runtime];
            let (target, predicted_s) = match run_at {
                RunAt::Workload(inv, params) => {
                    let inv = Invocation { n, ..inv };
                    let predicted = predict(inv.workload.tasks(n), cal, &params);
                    (Target::Workload(inv), predicted)
                }
                RunAt::Command(command) => (
                    command_target(command, n),
                    predict(n, cal, &serde_json::json!({}))
                        + command.task_lifetime.map_or(0.0, |l| l.as_secs_f64()),
                ),
            };
            runnable.push(Runnable {
                target,
                runtime,
                workload,
                n,
                predicted_s,
                memory_limit: cell_limit,
            });
        }
    }
    let plan = Plan {
        schema: 1,
        created_utc: chrono::Utc::now().to_rfc3339(),
        argv: std::env::args().collect(),
        reproduce: opts.reproduce.clone(),
        repeats: opts.repeats,
        // A sweep traces every run: its times include the probes' cost, as its report says.
        traced_runs: None,
        cells,
        stopped: None,
        commands: opts
            .commands
            .iter()
            .map(|c| PlannedCommand {
                label: c.label.clone(),
                command: c.words.clone(),
                version: c.version.clone(),
            })
            .collect(),
        skipped: opts.skipped.clone(),
        // Timed by trace.sh's main job only, which writes its own plan.
        elapsed_s: None,
        warmup_runs: None,
        warmup_touched_bytes: None,
    };
    // Order: workload, then N upwards (failures show early), then repeat, then runtime
    // alternating (drift on the host falls on every runtime alike).
    let mut ns: Vec<u64> = runnable.iter().map(|r| r.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let mut jobs = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for r in &runnable {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    for wl in workloads {
        for &n in &ns {
            for repeat in 1..=opts.repeats {
                for r in runnable.iter().filter(|r| r.workload == wl && r.n == n) {
                    jobs.push(Job {
                        target: r.target.clone(),
                        runtime: r.runtime.clone(),
                        workload: r.workload.clone(),
                        n,
                        repeat,
                        repeats: opts.repeats,
                        predicted_s: r.predicted_s,
                        calibration: calibrations[&r.runtime].clone(),
                        memory_limit: r.memory_limit,
                        cpu_count: None,
                        runtime_traced: false,
                    });
                }
            }
            if opts.runtime_trace {
                let cells = runnable.iter().filter(|r| r.workload == wl && r.n == n);
                jobs.extend(runtime_traced_jobs(cells, opts.repeats, &calibrations));
            }
        }
    }
    // A CPU sweep: each run at every K in turn, K upwards (one repeat's Ks back to back, so that
    // drift on the host falls on every K alike).
    if !opts.cpu_counts.is_empty() {
        jobs = jobs
            .into_iter()
            .flat_map(|job| {
                opts.cpu_counts.iter().map(move |&k| Job {
                    cpu_count: Some(k),
                    ..job.clone()
                })
            })
            .collect();
    }
    Ok((plan, jobs))
}

/// `--runtime-trace`: one runtime-traced run per cell whose runtime has a runtime trace
/// (`Runtime::runtime_trace_flag`, the rule `run --runtime-trace` refuses by), after the cell's
/// repeats; other cells (threads, processes: the kernel's trace is their scheduler; commands)
/// get none.
fn runtime_traced_jobs<'a>(
    cells: impl Iterator<Item = &'a Runnable>,
    repeats: u32,
    calibrations: &BTreeMap<String, Calibration>,
) -> Vec<Job> {
    cells
        .filter(|r| match &r.target {
            Target::Workload(inv) => inv.runtime.runtime_trace_flag().is_ok(),
            Target::Command { .. } => false,
        })
        .map(move |r| Job {
            target: r.target.clone(),
            runtime: r.runtime.clone(),
            workload: r.workload.clone(),
            n: r.n,
            repeat: 1,
            repeats,
            predicted_s: r.predicted_s,
            calibration: calibrations[&r.runtime].clone(),
            memory_limit: r.memory_limit,
            cpu_count: None,
            runtime_traced: true,
        })
        .collect()
}

/// How a planned cell will run, once the preflight has said at which N.
enum RunAt<'a> {
    Workload(Invocation, serde_json::Value),
    Command(&'a SweptCommand),
}

fn say_calibrated(cal: &Calibration) {
    eprintln!(
        "  {} per coexisting task, {} spawned per second",
        bytes(cal.per_task_bytes),
        count(cal.spawn_per_second as u64)
    );
}

/// A command at N, run as `run --tasks N -- CMD` runs it, under its label.
fn command_target(command: &SweptCommand, n: u64) -> Target {
    Target::Command {
        argv: command.argv(n),
        tasks: Some(n),
        task_kind: command.task_kind,
        peak_when: command.peak_when.clone(),
        label: Some(command.label.clone()),
        task_lifetime_ns: command.task_lifetime.map(|l| l.as_nanos() as u64),
    }
}

/// A first guess at a run's length, from the calibration's spawn rate: the ETA is this scaled by
/// how the runs so far compared with their guesses.
fn predict(tasks: u64, cal: &Calibration, params: &serde_json::Value) -> f64 {
    let spawn = tasks as f64 / cal.spawn_per_second.max(1.0);
    let sleep = params["sleep_ns"].as_f64().unwrap_or(0.0) / 1e9;
    // Spawning, then joining and tearing down (about as long again), and the conductor's own
    // snapshots and settling.
    1.5 + spawn * 2.0 + sleep
}

fn clock(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// The matrix as it ran: the plan (with what was clamped, refused or stopped) and the results
/// directories of the runs that wrote records.
pub struct CompareOutcome {
    pub out: PathBuf,
    pub plan: Plan,
    pub dirs: Vec<PathBuf>,
    pub interrupted_by: Option<i32>,
    pub all_ok: bool,
    /// Runs that completed but whose counts are wrong (a cross-check failed).
    pub counts_wrong: usize,
    /// The results root (results/) when the sweep made it: it goes to the user who ran sudo too.
    pub made_root: Option<PathBuf>,
}

/// What the caller makes of one finished run: whether it completed, whether its counts are wrong
/// (a cross-check failed), and one line for the user.
pub struct RunVerdict {
    pub ok: bool,
    pub counts_wrong: bool,
    pub line: String,
}

/// Runs the matrix; `finished` summarises each run as its records are written.
pub fn compare(
    opts: CompareOptions,
    interrupts: &Interrupts,
    finished: &mut dyn FnMut(&Outcome) -> Result<RunVerdict>,
) -> Result<CompareOutcome, RunError> {
    if opts.repeats == 0 {
        return Err(RunError::Usage("--repeats must be at least 1".into()));
    }
    let (mut plan, jobs) = plan(&opts, interrupts)?;
    // The results root (results/) when this makes it: it goes to the user who ran sudo too.
    let new_root = opts
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
        .map(Path::to_path_buf);
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    record::write_json(&opts.out.join(record::PLAN), &plan)?;
    let total = jobs.len();
    eprintln!(
        "spawnscope compare: {total} runs ({} repeat(s) each), results in {}",
        opts.repeats,
        opts.out.display()
    );
    let started = Instant::now();
    let (mut actual, mut predicted_done) = (0.0f64, 0.0f64);
    let mut all_ok = true;
    // Runs that did not complete (failed, refused, stopped) and that completed with wrong counts.
    let (mut not_complete, mut counts_wrong) = (0usize, 0usize);
    let mut attempted = 0usize;
    let mut interrupted_by = None;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        if let Some(sig) = interrupts.received() {
            interrupted_by = Some(sig);
            break;
        }
        attempted += 1;
        let remaining: f64 = jobs[k..].iter().map(|j| j.predicted_s).sum();
        let factor = if predicted_done > 0.0 {
            actual / predicted_done
        } else {
            1.0
        };
        eprintln!(
            "spawnscope compare: run {} of {total} — {} {} {}{} ({}); elapsed {}, ETA {}",
            k + 1,
            job.runtime,
            job.workload,
            count(job.n),
            job.cpu_count
                .map(|k| format!(" on {k} CPU{}", if k == 1 { "" } else { "s" }))
                .unwrap_or_default(),
            if job.runtime_traced {
                "runtime-traced, beside the repeats".to_string()
            } else {
                format!("repeat {} of {}", job.repeat, job.repeats)
            },
            clock(started.elapsed().as_secs_f64()),
            clock(remaining * factor)
        );
        let t0 = Instant::now();
        let result = run::run(
            RunOptions {
                target: job.target.clone(),
                out_root: opts.out.clone(),
                force: job.memory_limit.is_some(),
                memory_limit: job.memory_limit.or(opts.memory_limit),
                // The collector runs in every cell: its timeline and cross-checks go in the report.
                probes: Some(ProbeDetail::Lean),
                probe_times: ProbeTimes::Calibrated,
                perf: None,
                calibration: Some(job.calibration.clone()),
                timeout: None,
                pids_limit: None,
                load: opts.load.clone(),
                cpus: opts.cpus.clone(),
                cpu_count: job.cpu_count,
                keep_command_output: matches!(job.target, Target::Command { .. }),
                // compare says what a command's N counts (--task-kind, default task).
                guess_task_kind: false,
                runtime_trace: job.runtime_traced,
                // As `run --runtime-trace`: the runtime's events join the kernel's trace.
                perfetto: opts.perfetto || job.runtime_traced,
                trace_max_bytes: opts.trace_max_bytes,
            },
            interrupts,
        );
        actual += t0.elapsed().as_secs_f64();
        predicted_done += job.predicted_s;
        match result {
            Ok(outcome) => {
                match finished(&outcome) {
                    Ok(verdict) => {
                        eprintln!("  {} → {}", verdict.line, outcome.dir.display());
                        all_ok &= verdict.ok;
                        if !verdict.ok {
                            not_complete += 1;
                        } else if verdict.counts_wrong {
                            counts_wrong += 1;
                        }
                    }
                    Err(err) => {
                        all_ok = false;
                        not_complete += 1;
                        eprintln!("  failed: {err:#}");
                        note_cell(&mut plan, job, &format!("a run failed: {err:#}"));
                    }
                }
                dirs.push(outcome.dir);
                if let Some(sig) = outcome.interrupted_by {
                    interrupted_by = Some(sig);
                    break;
                }
            }
            Err(RunError::Usage(m)) if !job.runtime_traced => return Err(RunError::Usage(m)),
            // A runtime-traced run refused (say, a workload binary built before its flag): that
            // run alone, the ordinary runs stand.
            Err(RunError::Usage(m)) => {
                all_ok = false;
                not_complete += 1;
                eprintln!("  refused: {m}");
                note_cell(
                    &mut plan,
                    job,
                    &format!("its runtime-traced run was refused: {m}"),
                );
            }
            Err(RunError::Refused(m)) => {
                all_ok = false;
                not_complete += 1;
                eprintln!("  refused: {m}");
                note_cell(
                    &mut plan,
                    job,
                    &format!("refused by the run's preflight: {m}"),
                );
                if let Some(sig) = interrupts.received() {
                    interrupted_by = Some(sig);
                    break;
                }
            }
            Err(RunError::Failed(err)) => {
                all_ok = false;
                not_complete += 1;
                eprintln!("  failed: {err:#}");
                note_cell(&mut plan, job, &format!("a run failed: {err:#}"));
            }
        }
    }
    if let Some(sig) = interrupted_by {
        plan.stopped = Some(format!(
            "{} received: the matrix stopped after run {} of {total}; the machine was restored",
            signal_name(sig),
            dirs.len()
        ));
        eprintln!(
            "spawnscope compare: {}",
            plan.stopped.as_deref().unwrap_or("")
        );
    }
    if let Some(line) = end_line(not_complete, counts_wrong, attempted) {
        eprintln!("spawnscope compare: {line}");
    }
    record::write_json(&opts.out.join(record::PLAN), &plan)?;
    Ok(CompareOutcome {
        out: opts.out,
        plan,
        dirs,
        interrupted_by,
        all_ok,
        counts_wrong,
        made_root: new_root,
    })
}

/// The sweep's end line, when a run did not complete or completed with wrong counts: "1 of 12
/// runs did not complete; 2 of 12 runs completed with their counts WRONG (a cross-check failed: each run's
/// summary says which)". The matrix went on past them; the exit code says the worst (4, else 5).
fn end_line(not_complete: usize, counts_wrong: usize, runs: usize) -> Option<String> {
    let mut said = Vec::new();
    if not_complete > 0 {
        said.push(format!("{not_complete} of {runs} runs did not complete"));
    }
    if counts_wrong > 0 {
        said.push(format!(
            "{counts_wrong} of {runs} runs completed with their counts WRONG (a cross-check \
             failed: each run's summary says which)"
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

fn note_cell(plan: &mut Plan, job: &Job, text: &str) {
    if let Some(cell) = plan
        .cells
        .iter_mut()
        .find(|c| c.runtime == job.runtime && c.workload == job.workload && c.n == Some(job.n))
    {
        let line = format!("{} {} {}: {text}", job.runtime, job.workload, count(job.n));
        cell.note = Some(match cell.note.take() {
            Some(prev) => format!("{prev}; {line}"),
            None => line,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_line_says_the_runs_that_failed_and_those_whose_counts_are_wrong() {
        assert_eq!(end_line(0, 0, 12), None);
        assert_eq!(
            end_line(1, 2, 12).as_deref(),
            Some(
                "1 of 12 runs did not complete; 2 of 12 runs completed with their counts WRONG \
                 (a cross-check failed: each run's summary says which)"
            )
        );
        assert!(end_line(0, 1, 1).is_some_and(|l| l.starts_with("1 of 1 runs completed")));
    }

    fn est(fits: bool, largest_n: u64) -> Estimate {
        Estimate {
            calibration: Calibration::from_points([500, 2_500], [23_000_000, 97_000_000], 1e4),
            alive: 1_000_000,
            needed_bytes: 37_000_000_000,
            budget_bytes: 23 << 30,
            fits,
            largest_n,
        }
    }

    #[test]
    fn what_fits_runs_as_asked() {
        assert_eq!(
            clamp("threads hold", 10_000, &est(true, 600_000)),
            (Some(10_000), None)
        );
    }

    #[test]
    fn what_does_not_fit_is_clamped_with_the_reason() {
        let (n, note) = clamp("threads hold", 1_000_000, &est(false, 667_000));
        assert_eq!(n, Some(580_000), "88 % of 667,000, two significant digits");
        assert_eq!(
            note.unwrap(),
            "threads hold 1,000,000 → clamped to 580,000: needs ≈34.5 GiB, 23.0 GiB available"
        );
        let (n, note) = clamp("node command", 1_000_000, &est(false, 0));
        assert_eq!(n, None);
        assert_eq!(
            note.unwrap(),
            "node command 1,000,000: left out — needs ≈34.5 GiB, 23.0 GiB available; nothing fits"
        );
    }

    #[test]
    fn a_runtime_traced_run_is_added_to_the_cells_whose_runtime_run_would_trace() {
        let cell = |runtime: Runtime| Runnable {
            target: Target::Workload(Invocation {
                runtime,
                workload: WorkloadKind::Pingpong,
                n: 1_000,
                flags: vec![],
            }),
            runtime: runtime.name().into(),
            workload: "pingpong".into(),
            n: 1_000,
            predicted_s: 1.0,
            memory_limit: None,
        };
        let mut cells: Vec<Runnable> = Runtime::ALL.into_iter().map(cell).collect();
        cells.push(Runnable {
            target: command_target(
                &runtime::command::pair(&["go-program {n}".into()], &["go".into()])
                    .unwrap()
                    .remove(0),
                1_000,
            ),
            runtime: "go".into(),
            ..cell(Runtime::Goroutines)
        });
        let calibrations: BTreeMap<String, Calibration> = cells
            .iter()
            .map(|c| (c.runtime.clone(), est(true, 0).calibration))
            .collect();
        let jobs = runtime_traced_jobs(cells.iter(), 3, &calibrations);
        let traced: Vec<&str> = jobs.iter().map(|j| j.runtime.as_str()).collect();
        // As `run --runtime-trace` would: goroutines (tokio once its hooks build is in), never a
        // command, threads or processes.
        let expected: Vec<&str> = Runtime::ALL
            .into_iter()
            .filter(|r| r.runtime_trace_flag().is_ok())
            .map(Runtime::name)
            .collect();
        assert_eq!(traced, expected);
        assert!(traced.contains(&"goroutines"));
        assert!(jobs
            .iter()
            .all(|j| j.runtime_traced && j.repeat == 1 && j.repeats == 3));
    }

    #[test]
    fn flags_go_where_they_apply() {
        let flags = vec![
            ("--sleep".to_string(), "2s".to_string()),
            ("--stack-size".to_string(), "64K".to_string()),
            ("--workers".to_string(), "2".to_string()),
            ("--reserve".to_string(), "0".to_string()),
        ];
        let names = |rt, wl| -> Vec<String> {
            flags_for(&flags, rt, wl).into_iter().map(|f| f.0).collect()
        };
        assert_eq!(
            names(Runtime::Threads, WorkloadKind::Sleep),
            ["--sleep", "--stack-size", "--reserve"]
        );
        assert_eq!(
            names(Runtime::Goroutines, WorkloadKind::Hold),
            ["--reserve"]
        );
        // Each runtime's own flag goes to it alone.
        assert_eq!(
            names(Runtime::Tokio, WorkloadKind::Hold),
            ["--workers", "--reserve"]
        );
    }
}
