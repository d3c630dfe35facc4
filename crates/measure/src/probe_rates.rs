//! The probes' calibration: one short traced `hold` with the kernel's BPF run-time statistics on
//! throughout gives each probe program's ns per run, so that the measured traced run can leave
//! the statistics off. While on, they cost two clock reads per program run (about as much as a
//! lean program), counted in no program's time: in the measured run that is perturbation, here it
//! is only the calibration's. The run's programs' times are then its own runs (each program counts
//! them) at these rates (docs/manual/probe-cost.md says how far the rates move with N).
//! For a `--perfetto` run it streams the trace too: its rates then include the records'
//! emission, and its records per task size the traced run's ring buffer (probes::trace_ring).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::launch::{self, ChildSetup, Stdio};
use crate::probes::{self, ProbeDetail};
use host::signals::Interrupts;
use record::{FloorRate, ProbeCalibration, TraceCalibration};

use runtime::{Contract, Event};
use spawnscope_collector::Floor;

/// The hooks whose floor the calibration times: the raw_syscalls pair's, which every process's
/// syscalls fire while a run is traced.
pub const PAIR_HOOKS: [&str; 2] = ["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"];

/// Runs `binary hold --n N FLAGS` gated, the collector attached with `detail` and the statistics
/// on, releases it at its peak, and reads what each program cost a run (`runtime` names it in the
/// rates' description). `threads`: the OS threads the collector sizes its tables for. `traced`:
/// with the trace streaming (`--perfetto`), its records counted (to size a traced run's ring)
/// and dropped.
#[allow(clippy::too_many_arguments)]
pub fn calibrate(
    binary: &Path,
    runtime: &str,
    n: u64,
    flags: &[String],
    threads: u64,
    detail: ProbeDetail,
    traced: bool,
    interrupts: &Interrupts,
) -> Result<ProbeCalibration> {
    let mut args = vec!["hold".to_string(), "--n".into(), n.to_string()];
    args.extend_from_slice(flags);
    let setup = ChildSetup {
        cgroup_procs: Vec::new(),
        unlimited_nproc: false,
        gated: true,
        stdin: Stdio::Pipe,
        stdout: Stdio::Pipe,
        stderr: Stdio::Null,
        env: Vec::new(),
    };
    let mut child = launch::spawn(binary, &args, setup)?;
    interrupts.watch(child.pid);
    let mut not_loaded = Vec::new();
    // The calibration's records go to a file of its own, removed once counted.
    let records = std::env::temp_dir().join(format!(
        "spawnscope-calibration-{}.trace-events.bin",
        std::process::id()
    ));
    let trace = traced.then(|| probes::trace_config(&records, None, Some(n), None));
    // The raw_syscalls pair's floor beside the probes, timed by the same statistics: what a
    // syscall the pair filters out costs at least (the host's share of a run's cost). Its failure
    // leaves the floor unmeasured, not the calibration.
    let floor = Floor::attach(&PAIR_HOOKS);
    // No cgroup here: the probes follow the one process by its tgid.
    let collector = probes::start(
        child.pid,
        None,
        threads,
        detail,
        false,
        None,
        trace,
        &mut not_loaded,
    );
    let released = child.release();
    let mut stdin = child.stdin.take();
    let stdout = BufReader::new(child.stdout.take().context("calibration stdout")?);
    let contract = Contract::new()?;
    let mut peaked = false;
    for line in stdout.lines() {
        if let Ok(Event::Peak { .. }) = contract.parse(&line?) {
            peaked = true;
            let _ = stdin.take().map(|mut s| s.write_all(b"\n"));
        }
    }
    let (exit, _) = launch::wait(child.pid)?;
    interrupts.unwatch(child.pid);
    released?;
    let described = format!("`{} {}`", binary.display(), args.join(" "));
    let Some(collector) = collector else {
        bail!(
            "the probes' calibration run {described} could not load the probes: {}",
            not_loaded.join("; ")
        );
    };
    let report = collector.finish();
    let floors = floor.and_then(|f| f.program_totals()).map_or_else(
        |why| {
            eprintln!("spawnscope: the raw_syscalls pair's floor was not timed: {why}");
            Vec::new()
        },
        |totals| {
            totals
                .into_iter()
                .filter(|t| t.run_cnt > 0)
                .map(|t| FloorRate {
                    hook: t.tracepoint,
                    runs: t.run_cnt,
                    ns: t.run_time_ns,
                })
                .collect()
        },
    );
    let _ = std::fs::remove_file(&records);
    if !peaked || !exit.success() {
        bail!(
            "the probes' calibration run {described} failed ({})",
            exit.describe()
        );
    }
    if let Some(why) = &report.program_costs_note {
        bail!("the probes' calibration run {described} timed no program: {why}");
    }
    let rates = report.program_rates(format!(
        "{runtime} hold --n {n}, {} probes, {}",
        detail.name(),
        chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ"),
    ));
    if rates.programs.is_empty() {
        bail!("the probes' calibration run {described} timed no program run");
    }
    let trace = match (traced, &report.trace) {
        (false, _) => None,
        (true, Some(t)) if t.error.is_none() => Some(TraceCalibration {
            records: t.emitted + t.lost,
            tasks: n,
        }),
        (true, t) => bail!(
            "the probes' calibration run {described} could not stream the trace: {}",
            t.as_ref()
                .and_then(|t| t.error.clone())
                .unwrap_or_else(|| "no trace section".into())
        ),
    };
    Ok(ProbeCalibration {
        detail: detail.name().into(),
        rates,
        trace,
        floors,
    })
}
