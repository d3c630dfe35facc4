//! `spawnscope warm-up RUNTIME:WORKLOAD:N… --out DIR`: a set's warm-up (measure/warmup.rs), written
//! to DIR/warmup.json before it is described; the counted runs take its calibrations.

use std::process::ExitCode;

use crate::cli::{exit_code, Ended, RunSpec, WarmUpArgs};
use host::privileges::is_root;
use host::signals::Interrupts;
use measure::run::RunError;
use measure::{preflight, warmup};
use record::{self, Touched, WarmUpCalibration, WarmUpRecord};
use runtime::Invocation;
use units::{bytes, count};

/// What the counted runs may use is asked for, with a quarter more: the conductor and its probes'
/// maps come on top of the workload's own memory.
const MARGIN: f64 = 1.25;

pub fn command(args: &WarmUpArgs) -> ExitCode {
    let interrupts = match Interrupts::install() {
        Ok(i) => i,
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            return ExitCode::from(1);
        }
    };
    exit_code(warm_up(args, &interrupts).map(|sig| (sig, Ended::Done)))
}

fn warm_up(args: &WarmUpArgs, interrupts: &Interrupts) -> Result<Option<i32>, RunError> {
    // Everything is validated before anything runs: a refused warm-up changes nothing.
    let mut planned = Vec::new();
    for spec in &args.runs {
        let inv = invocation(spec);
        let binary = inv
            .runtime
            .binary()
            .map_err(|e| RunError::Usage(e.to_string()))?;
        let params = inv.validate(&binary).map_err(RunError::Usage)?;
        planned.push((inv, binary, params));
    }
    let mut calibrated = Vec::new();
    for (inv, binary, params) in &planned {
        eprintln!(
            "spawnscope warm-up: calibrating {}: two short hold runs to estimate the memory of N",
            inv.runtime.name()
        );
        let cal = preflight::calibrate(binary, inv, interrupts).map_err(RunError::Failed)?;
        if let Some(sig) = interrupts.received() {
            return Ok(Some(sig));
        }
        let mut est = preflight::estimate(inv, cal, params, preflight::default_budget()?);
        if !est.fits {
            return Err(RunError::Refused(preflight::refusal(inv, &est)));
        }
        if is_root() && !args.no_probes {
            if let Err(failed) = preflight::calibrate_probes(
                binary,
                inv,
                &mut est.calibration,
                args.probes,
                false,
                interrupts,
            ) {
                eprintln!("spawnscope warm-up: {failed}");
            }
            if let Some(sig) = interrupts.received() {
                return Ok(Some(sig));
            }
        }
        calibrated.push(WarmUpCalibration {
            runtime: inv.runtime.name().into(),
            workload: inv.workload.name().into(),
            n: inv.n,
            flags: inv.flags.clone(),
            calibration: est.calibration,
            needed_bytes: est.needed_bytes,
        });
    }
    let largest = calibrated.iter().map(|c| c.needed_bytes).max().unwrap_or(0);
    let wanted = (largest as f64 * MARGIN) as u64;
    let may_use = preflight::default_budget()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut touched = warmup::touch(wanted.min(may_use), threads, interrupts)?;
    touched.wanted_bytes = wanted;
    if wanted > may_use && touched.short.is_none() {
        touched.short = Some(format!(
            "capped at what a run may use now, {}",
            bytes(may_use as f64)
        ));
    }
    let record = WarmUpRecord {
        schema: 1,
        created_utc: chrono::Utc::now().to_rfc3339(),
        argv: std::env::args().collect(),
        calibrated,
        touched,
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| RunError::Failed(anyhow::anyhow!("{}: {e}", args.out.display())))?;
    let path = args.out.join(record::WARMUP);
    record::write_json(&path, &record)?;
    record::give_to_invoking_user(&args.out);
    for c in &record.calibrated {
        println!(
            "warm-up: {} {} --n {}: {} a task calibrated at N = {} and {}; ≈{} at N",
            c.runtime,
            c.workload,
            count(c.n),
            bytes(c.calibration.per_task_bytes),
            count(c.calibration.sizes[0]),
            count(c.calibration.sizes[1]),
            bytes(c.needed_bytes as f64),
        );
        if let Some(p) = &c.calibration.probes {
            println!(
                "warm-up: {} probes' ns per run calibrated ({} programs, {})",
                p.detail,
                p.rates.programs.len(),
                p.rates.from
            );
        }
    }
    println!("warm-up: {}", touched_line(&record.touched));
    println!(
        "warm-up: nothing of it is counted; recorded in {}",
        path.display()
    );
    Ok(interrupts.received())
}

fn invocation(spec: &RunSpec) -> Invocation {
    Invocation {
        runtime: spec.runtime,
        workload: spec.workload,
        n: spec.n,
        flags: Vec::new(),
    }
}

/// "wrote 4.4 GiB a page at a time in 1.6 s on 2 threads: 1.4 µs a page (chunks of 256 MiB:
/// 1.2 … 2.0 µs), 0 chunks cold (≥ 3× the fastest); 0 B initialized for the first time since boot"
fn touched_line(t: &Touched) -> String {
    let per_page = t.per_page_ns();
    let median = per_page.get(per_page.len() / 2).copied().unwrap_or(0.0);
    let (fastest, slowest) = (
        per_page.first().copied().unwrap_or(0.0),
        per_page.last().copied().unwrap_or(0.0),
    );
    let us = |ns: f64| format!("{:.1} µs", ns / 1e3);
    let first = match t.first_used_kb() {
        Some(kb) => format!(
            "; {} of it initialized by the kernel for the first time since boot",
            bytes(kb as f64 * 1024.0)
        ),
        None => String::new(),
    };
    let short = t.short.as_ref().map_or(String::new(), |why| {
        format!(" (of {} wanted: {why})", bytes(t.wanted_bytes as f64))
    });
    format!(
        "wrote {}{short} a page at a time in {:.1} s on {} threads: {} a page (chunks of {}: {} … {}), {} of {} chunks cold (≥ {}× the fastest's time a page){first}",
        bytes(t.bytes as f64),
        t.wall_ns as f64 / 1e9,
        t.threads,
        us(median),
        bytes(warmup::CHUNK_BYTES as f64),
        us(fastest),
        us(slowest),
        t.cold_chunks(),
        t.chunks.len(),
        record::warmup::COLD_FACTOR,
    )
}
