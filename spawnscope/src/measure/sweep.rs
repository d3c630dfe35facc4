//! `spawnscope compare`: runtimes × N × workloads × repeats, one run at a time through
//! `run::run`. Plans first — calibrates once per runtime and clamps each N the preflight says
//! cannot fit, saying why — writes the plan, runs the matrix with a progress line, stops cleanly
//! on a signal (after the current run has restored the machine). The caller summarises each run
//! as it ends, and renders the exports from the results directories on disk, as `report` would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::host::signals::Interrupts;
use crate::measure::preflight;
use crate::measure::probes::ProbeDetail;
use crate::measure::run::{self, Outcome, RunError, RunOptions};
use crate::record::process::signal_name;
use crate::record::{self, Calibration, Estimate, Plan, PlannedCell, Target};
use crate::runtime::{Invocation, Runtime, WorkloadKind};
use crate::units::{bytes, count};

pub const DEFAULT_NS: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];

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
    pub cells: Option<Vec<(Runtime, WorkloadKind, u64)>>,
}

impl CompareOptions {
    /// `--reproduce hansen2023`: the article's experiment (1M threads and 1M goroutines, each
    /// sleeping 1 s) and our hold figures beside it (threads at the largest N that fits).
    pub fn hansen2023(out: PathBuf, repeats: u32, memory_limit: Option<u64>) -> Self {
        CompareOptions {
            runtimes: vec![Runtime::Threads, Runtime::Goroutines],
            ns: vec![1_000_000],
            workloads: vec![WorkloadKind::Sleep, WorkloadKind::Hold],
            repeats,
            out,
            memory_limit,
            flags: vec![("--sleep".into(), "1s".into())],
            reproduce: Some("hansen2023".into()),
            cells: Some(vec![
                (Runtime::Threads, WorkloadKind::Sleep, 1_000_000),
                (Runtime::Goroutines, WorkloadKind::Sleep, 1_000_000),
                (Runtime::Threads, WorkloadKind::Hold, 1_000_000),
                (Runtime::Goroutines, WorkloadKind::Hold, 1_000_000),
            ]),
        }
    }
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
            // A runtime's own cost flag goes to that runtime only.
            other => Runtime::ALL
                .iter()
                .all(|r| r.describe().cost_flag != other || *r == runtime),
        })
        .cloned()
        .collect()
}

/// One run of the matrix.
struct Job {
    inv: Invocation,
    repeat: u32,
    repeats: u32,
    predicted_s: f64,
    calibration: Calibration,
}

/// What the preflight says for one requested N: the N to run, or None, and why.
pub fn clamp(inv: &Invocation, est: &Estimate) -> (Option<u64>, Option<String>) {
    if est.fits {
        return (Some(inv.n), None);
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
                "{} {} {}: left out — {why}; nothing fits",
                inv.runtime.name(),
                inv.workload.name(),
                count(inv.n)
            )),
        );
    }
    (
        Some(n),
        Some(format!(
            "{} {} {} → clamped to {}: {why}",
            inv.runtime.name(),
            inv.workload.name(),
            count(inv.n),
            count(n)
        )),
    )
}

fn plan(opts: &CompareOptions, interrupts: &Interrupts) -> Result<(Plan, Vec<Job>), RunError> {
    let budget = match opts.memory_limit {
        Some(limit) => limit,
        None => preflight::default_budget()?,
    };
    let product: Vec<(Runtime, WorkloadKind, u64)> = match &opts.cells {
        Some(cells) => cells.clone(),
        None => opts
            .workloads
            .iter()
            .flat_map(|&wl| {
                opts.runtimes
                    .iter()
                    .flat_map(move |&rt| opts.ns.iter().map(move |&n| (rt, wl, n)))
            })
            .collect(),
    };
    // One calibration per runtime: it runs `hold` under the flags that change a task's cost,
    // which are the same for every workload of the matrix.
    let mut calibrations: BTreeMap<&'static str, Calibration> = BTreeMap::new();
    let mut cells = Vec::new();
    let mut runnable: Vec<(Invocation, serde_json::Value)> = Vec::new();
    for (rt, wl, requested) in product {
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
            let cal = preflight::calibrate(&binary, &inv, interrupts)
                .map_err(|e| RunError::Refused(format!("calibrating {}: {e:#}", rt.name())))?;
            eprintln!(
                "  {} per coexisting task, {} spawned per second",
                bytes(cal.per_task_bytes),
                count(cal.spawn_per_second as u64)
            );
            calibrations.insert(rt.name(), cal);
        }
        if let Some(sig) = interrupts.received() {
            return Err(RunError::Refused(format!(
                "{} received while planning; nothing was run",
                signal_name(sig)
            )));
        }
        let cal = calibrations[rt.name()].clone();
        let est = preflight::estimate(&inv, cal, &params, budget);
        let (n, mut note) = clamp(&inv, &est);
        let n = match n {
            Some(n)
                if n != requested
                    && runnable
                        .iter()
                        .any(|(i, _)| i.runtime == rt && i.workload == wl && i.n == n) =>
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
            runtime: rt.name().into(),
            workload: wl.name().into(),
            requested_n: requested,
            n,
            note,
        });
        if let Some(n) = n {
            runnable.push((Invocation { n, ..inv }, params));
        }
    }
    let plan = Plan {
        schema: 1,
        created_utc: chrono::Utc::now().to_rfc3339(),
        argv: std::env::args().collect(),
        reproduce: opts.reproduce.clone(),
        repeats: opts.repeats,
        cells,
        stopped: None,
    };
    // Order: workload, then N upwards (failures show early), then repeat, then runtime
    // alternating (drift on the host falls on both runtimes alike).
    let mut ns: Vec<u64> = runnable.iter().map(|(i, _)| i.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let mut jobs = Vec::new();
    let mut workloads: Vec<WorkloadKind> = Vec::new();
    for (i, _) in &runnable {
        if !workloads.contains(&i.workload) {
            workloads.push(i.workload);
        }
    }
    for wl in workloads {
        for &n in &ns {
            for repeat in 1..=opts.repeats {
                for (inv, params) in runnable
                    .iter()
                    .filter(|(i, _)| i.workload == wl && i.n == n)
                {
                    let cal = &calibrations[inv.runtime.name()];
                    jobs.push(Job {
                        inv: inv.clone(),
                        repeat,
                        repeats: opts.repeats,
                        predicted_s: predict(inv, cal, params),
                        calibration: cal.clone(),
                    });
                }
            }
        }
    }
    Ok((plan, jobs))
}

/// A first guess at a run's length, from the calibration's spawn rate: the ETA is this scaled by
/// how the runs so far compared with their guesses.
fn predict(inv: &Invocation, cal: &Calibration, params: &serde_json::Value) -> f64 {
    let tasks = inv.workload.tasks(inv.n) as f64;
    let spawn = tasks / cal.spawn_per_second.max(1.0);
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
    /// The results root (results/) when the sweep made it: it goes to the user who ran sudo too.
    pub made_root: Option<PathBuf>,
}

/// What the caller makes of one finished run: whether it completed, and one line for the user.
pub struct RunVerdict {
    pub ok: bool,
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
    let mut interrupted_by = None;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        if let Some(sig) = interrupts.received() {
            interrupted_by = Some(sig);
            break;
        }
        let remaining: f64 = jobs[k..].iter().map(|j| j.predicted_s).sum();
        let factor = if predicted_done > 0.0 {
            actual / predicted_done
        } else {
            1.0
        };
        eprintln!(
            "spawnscope compare: run {} of {total} — {} {} {} (repeat {} of {}); elapsed {}, ETA {}",
            k + 1,
            job.inv.runtime.name(),
            job.inv.workload.name(),
            count(job.inv.n),
            job.repeat,
            job.repeats,
            clock(started.elapsed().as_secs_f64()),
            clock(remaining * factor)
        );
        let t0 = Instant::now();
        let result = run::run(
            RunOptions {
                target: Target::Workload(job.inv.clone()),
                out_root: opts.out.clone(),
                force: false,
                memory_limit: opts.memory_limit,
                // The collector runs in every cell: its timeline and cross-checks go in the report.
                probes: Some(ProbeDetail::Lean),
                perf: None,
                calibration: Some(job.calibration.clone()),
                timeout: None,
                pids_limit: None,
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
                    }
                    Err(err) => {
                        all_ok = false;
                        eprintln!("  failed: {err:#}");
                        note_cell(&mut plan, &job.inv, &format!("a run failed: {err:#}"));
                    }
                }
                dirs.push(outcome.dir);
                if let Some(sig) = outcome.interrupted_by {
                    interrupted_by = Some(sig);
                    break;
                }
            }
            Err(RunError::Usage(m)) => return Err(RunError::Usage(m)),
            Err(RunError::Refused(m)) => {
                all_ok = false;
                eprintln!("  refused: {m}");
                note_cell(
                    &mut plan,
                    &job.inv,
                    &format!("refused by the run's preflight: {m}"),
                );
                if let Some(sig) = interrupts.received() {
                    interrupted_by = Some(sig);
                    break;
                }
            }
            Err(RunError::Failed(err)) => {
                all_ok = false;
                eprintln!("  failed: {err:#}");
                note_cell(&mut plan, &job.inv, &format!("a run failed: {err:#}"));
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
    record::write_json(&opts.out.join(record::PLAN), &plan)?;
    Ok(CompareOutcome {
        out: opts.out,
        plan,
        dirs,
        interrupted_by,
        all_ok,
        made_root: new_root,
    })
}

fn note_cell(plan: &mut Plan, inv: &Invocation, text: &str) {
    if let Some(cell) = plan.cells.iter_mut().find(|c| {
        c.runtime == inv.runtime.name() && c.workload == inv.workload.name() && c.n == Some(inv.n)
    }) {
        let line = format!(
            "{} {} {}: {text}",
            inv.runtime.name(),
            inv.workload.name(),
            count(inv.n)
        );
        cell.note = Some(match cell.note.take() {
            Some(prev) => format!("{prev}; {line}"),
            None => line,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn inv(n: u64) -> Invocation {
        Invocation {
            runtime: Runtime::Threads,
            workload: WorkloadKind::Hold,
            n,
            flags: vec![],
        }
    }

    #[test]
    fn what_fits_runs_as_asked() {
        assert_eq!(
            clamp(&inv(10_000), &est(true, 600_000)),
            (Some(10_000), None)
        );
    }

    #[test]
    fn what_does_not_fit_is_clamped_with_the_reason() {
        let (n, note) = clamp(&inv(1_000_000), &est(false, 667_000));
        assert_eq!(n, Some(580_000), "88 % of 667,000, two significant digits");
        assert_eq!(
            note.unwrap(),
            "threads hold 1,000,000 → clamped to 580,000: needs ≈34.5 GiB, 23.0 GiB available"
        );
        let (n, note) = clamp(&inv(1_000_000), &est(false, 0));
        assert_eq!(n, None);
        assert!(note.unwrap().contains("left out"));
    }

    #[test]
    fn flags_go_where_they_apply() {
        let flags = vec![
            ("--sleep".to_string(), "2s".to_string()),
            ("--stack-size".to_string(), "64K".to_string()),
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
    }
}
