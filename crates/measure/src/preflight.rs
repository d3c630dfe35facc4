//! Before spawning N: will it fit? Two short `hold` runs at small N, under the same flags, measure
//! what one more coexisting task takes out of MemAvailable (its RSS and the kernel memory RSS
//! hides); the estimate for N is compared with what the host can spare, and a run that cannot
//! fit is refused before anything is changed. A command swept by compare is calibrated the same
//! way, at two N of its own.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::launch::{self, ChildSetup, Stdio};
use crate::probe_rates;
use crate::probes::ProbeDetail;
use crate::sampler::memory_in_use_now;
use host::cgroup::RunCgroup;
use host::privileges::is_root;
use host::procfs;
use host::signals::Interrupts;
use record::{Calibration, Estimate};
use runtime::command::{SweptCommand, CALIBRATION_SIZES};
use runtime::{Contract, Event, Invocation, Runtime, WorkloadKind, RUNTIME_THREADS};
use units::{bytes, count};

/// What one calibration run takes out of memory: its cgroup's charge when there is a cgroup (per
/// run, exact), else the fall of MemAvailable (host-wide: anything else running blurs it).
struct MemoryGauge {
    cgroup: Option<RunCgroup>,
}

impl MemoryGauge {
    /// A cgroup of its own when root; it is gone before the run makes its own.
    fn new() -> Self {
        MemoryGauge {
            cgroup: if is_root() {
                RunCgroup::create(None).ok()
            } else {
                None
            },
        }
    }

    /// How a calibration run is started: in the gauge's cgroup, stderr dropped.
    fn child_setup(&self, stdin: Stdio, stdout: Stdio) -> ChildSetup {
        ChildSetup {
            cgroup_procs: self
                .cgroup
                .as_ref()
                .map(RunCgroup::procs_files)
                .unwrap_or_default(),
            unlimited_nproc: false,
            gated: false,
            stdin,
            stdout,
            stderr: Stdio::Null,
            env: Vec::new(),
        }
    }

    /// Bytes in use, by the same rule as the run's sampler.
    fn in_use(&self) -> u64 {
        memory_in_use_now(self.cgroup.as_ref())
    }
}

/// One `hold` run: how much memory it took at its peak, and its spawn rate.
fn measure_hold(
    binary: &Path,
    n: u64,
    flags: &[String],
    gauge: &MemoryGauge,
    interrupts: &Interrupts,
) -> Result<(u64, f64)> {
    let mut args = vec!["hold".to_string(), "--n".into(), n.to_string()];
    args.extend_from_slice(flags);
    let setup = gauge.child_setup(Stdio::Pipe, Stdio::Pipe);
    let before = gauge.in_use();
    let mut child = launch::spawn(binary, &args, setup)?;
    interrupts.watch(child.pid);
    let released = child.release();
    let stdout = BufReader::new(child.stdout.take().context("calibration stdout")?);
    let mut stdin = child.stdin.take();
    let mut at_peak = None;
    let mut spawn_per_second = 0.0;
    let contract = Contract::new()?;
    for line in stdout.lines() {
        match contract.parse(&line?) {
            Ok(Event::Peak { .. }) if at_peak.is_none() => {
                at_peak = Some(gauge.in_use());
                // Release the tasks: the reading is taken.
                let _ = stdin.take().map(|mut s| s.write_all(b"\n"));
            }
            Ok(Event::Result(result)) => {
                spawn_per_second = result["throughput"]["value"].as_f64().unwrap_or(0.0);
            }
            _ => {}
        }
    }
    let (exit, _) = launch::wait(child.pid)?;
    interrupts.unwatch(child.pid);
    released?;
    match at_peak {
        Some(peak) if exit.success() => Ok((peak.saturating_sub(before), spawn_per_second)),
        _ => bail!(
            "the calibration run `{} {}` failed ({})",
            binary.display(),
            args.join(" "),
            exit.describe()
        ),
    }
}

/// Adds the probes' calibration (measure/probe_rates.rs) to `cal` unless it has one of `detail`,
/// `traced` (`--perfetto`) or not, already: one short traced `hold` at the calibration's larger
/// size, under the same flags. A failure is returned in words, for the caller to say (a run's
/// "left out", a sweep's or a warm-up's stderr): it leaves the run's statistics on for its whole
/// run.
pub fn calibrate_probes(
    binary: &Path,
    inv: &Invocation,
    cal: &mut Calibration,
    detail: ProbeDetail,
    traced: bool,
    interrupts: &Interrupts,
) -> Result<(), String> {
    if cal
        .probes
        .as_ref()
        .is_some_and(|p| p.serves(detail.name(), traced))
    {
        return Ok(());
    }
    let n = inv.runtime.describe().calibration_sizes[1];
    let threads = if inv.runtime.describe().kernel_task_each() {
        n
    } else {
        RUNTIME_THREADS
    };
    eprintln!(
        "spawnscope: calibrating the probes: one short traced hold run of {} at N = {} for each program's ns per run{}",
        inv.runtime.name(),
        count(n),
        if traced {
            ", the trace streaming (its records per task size the run's ring)"
        } else {
            ""
        }
    );
    match probe_rates::calibrate(
        binary,
        inv.runtime.name(),
        n,
        &cost_flags(inv),
        threads,
        detail,
        traced,
        interrupts,
    ) {
        Ok(probes) => {
            cal.probes = Some(probes);
            Ok(())
        }
        Err(err) => Err(format!(
            "probes' calibration failed ({err:#}): the kernel's run-time statistics are on for the whole run, their clock reads in its times"
        )),
    }
}

/// The workload flags that change a task's cost, as the calibration runs take them.
fn cost_flags(inv: &Invocation) -> Vec<String> {
    inv.flags
        .iter()
        .filter(|(f, _)| {
            Runtime::ALL
                .iter()
                .any(|r| r.describe().cost_flag == Some(f))
        })
        .flat_map(|(f, v)| [f.clone(), v.clone()])
        .collect()
}

pub fn calibrate(binary: &Path, inv: &Invocation, interrupts: &Interrupts) -> Result<Calibration> {
    let flags = cost_flags(inv);
    calibrate_at(inv.runtime.describe().calibration_sizes, |n, gauge| {
        measure_hold(binary, n, &flags, gauge, interrupts)
    })
}

/// Two calibration runs at `sizes`, each measured by `measure` (memory taken, spawn rate) in one
/// gauge; the rate is the larger run's.
fn calibrate_at(
    sizes: [u64; 2],
    measure: impl Fn(u64, &MemoryGauge) -> Result<(u64, f64)>,
) -> Result<Calibration> {
    let gauge = MemoryGauge::new();
    let measured = (|| {
        let (small, _) = measure(sizes[0], &gauge)?;
        let (large, rate) = measure(sizes[1], &gauge)?;
        Ok(Calibration::from_points(sizes, [small, large], rate))
    })();
    if let Some(cg) = gauge.cgroup {
        cg.remove()?;
    }
    measured
}

/// How long a command's memory in use must hold still (within `LEVEL_SLACK`) for its tasks to
/// count as started, and the longest one calibration run of a command may take.
const LEVELLED_FOR: Duration = Duration::from_secs(1);
const COMMAND_AT_MOST: Duration = Duration::from_secs(60);

/// A rise in memory in use smaller than this is noise, not tasks still starting: 1 % of what the
/// run holds, at least 256 KiB.
fn level_slack(held: u64) -> u64 {
    (held / 100).max(256 << 10)
}

/// One calibration run of a command at N: the memory it took once that stopped rising (its tasks
/// started: a workload of ours says so with a peak event, a foreign program cannot), and N over
/// the time it took to get there. Then it is killed, with its cgroup when there is one.
fn measure_command(
    command: &SweptCommand,
    program: &Path,
    n: u64,
    gauge: &MemoryGauge,
    interrupts: &Interrupts,
) -> Result<(u64, f64)> {
    let argv = command.argv(n);
    let setup = gauge.child_setup(Stdio::Null, Stdio::Null);
    let before = gauge.in_use();
    let child = launch::spawn(program, &argv[1..], setup)?;
    interrupts.watch(child.pid);
    let started = Instant::now();
    let birth = procfs::start_time(child.pid);
    let (mut held, mut rose_at) = (0u64, Duration::ZERO);
    let ended = loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = gauge.in_use().saturating_sub(before);
        if now > held + level_slack(held) {
            rose_at = started.elapsed();
        }
        held = held.max(now);
        let alive = birth.is_some_and(|b| procfs::is_alive(child.pid, b));
        let waited = started.elapsed();
        if !alive
            || waited - rose_at >= LEVELLED_FOR
            || waited >= COMMAND_AT_MOST
            || interrupts.received().is_some()
        {
            break !alive;
        }
    };
    match &gauge.cgroup {
        Some(cg) => cg.kill_all()?,
        None => launch::kill(child.pid),
    }
    let (exit, _) = launch::wait(child.pid)?;
    interrupts.unwatch(child.pid);
    // Ending by itself before its memory levelled is a failure unless it exited 0 (a program
    // whose tasks end at once is still measured by what it held).
    if ended && !exit.success() {
        bail!(
            "the calibration run `{}` failed ({})",
            argv.join(" "),
            exit.describe()
        );
    }
    let rate = n as f64 / rose_at.as_secs_f64().max(0.05);
    Ok((held, rate))
}

/// A command's calibration: two short runs at `CALIBRATION_SIZES`, in a cgroup of their own when
/// root. `program`: its first word, resolved.
pub fn calibrate_command(
    command: &SweptCommand,
    program: &Path,
    interrupts: &Interrupts,
) -> Result<Calibration> {
    calibrate_at(CALIBRATION_SIZES, |n, gauge| {
        measure_command(command, program, n, gauge, interrupts)
    })
}

/// How many tasks are alive at once at the run's peak.
pub fn expected_alive(inv: &Invocation, cal: &Calibration, params: &serde_json::Value) -> u64 {
    let tasks = inv.workload.tasks(inv.n);
    match inv.workload {
        // serve: one task per connection, all C open at once under wrk.
        WorkloadKind::Hold | WorkloadKind::Pingpong | WorkloadKind::Chain | WorkloadKind::Serve => {
            tasks
        }
        WorkloadKind::Churn => params["batch"].as_u64().unwrap_or(100).min(tasks),
        // Tasks live for the sleep; spawning at the calibrated rate, about rate x sleep coexist.
        WorkloadKind::Sleep => {
            let sleep_s = params["sleep_ns"].as_u64().unwrap_or(1_000_000_000) as f64 / 1e9;
            let alive = (cal.spawn_per_second * sleep_s * 1.25) as u64 + 1_000;
            alive.min(tasks)
        }
    }
}

pub fn estimate(
    inv: &Invocation,
    cal: Calibration,
    params: &serde_json::Value,
    budget: u64,
) -> Estimate {
    let alive = expected_alive(inv, &cal, params);
    verdict(cal, alive, inv.workload.tasks(1), budget)
}

/// A command at N: its N tasks are taken to coexist (nothing says otherwise).
pub fn estimate_command(n: u64, cal: Calibration, budget: u64) -> Estimate {
    verdict(cal, n, 1, budget)
}

/// What `alive` tasks need against the budget, and the largest N that fits (`tasks_per_n`: tasks
/// one N spawns).
fn verdict(cal: Calibration, alive: u64, tasks_per_n: u64, budget: u64) -> Estimate {
    let needed = cal.fixed_bytes + cal.per_task_bytes * alive as f64;
    let per_n = cal.per_task_bytes * tasks_per_n as f64;
    let largest_n = if per_n > 0.0 {
        ((budget as f64 - cal.fixed_bytes).max(0.0) / per_n) as u64
    } else {
        u64::MAX
    };
    Estimate {
        calibration: cal,
        alive,
        needed_bytes: needed as u64,
        budget_bytes: budget,
        fits: needed <= budget as f64,
        largest_n,
    }
}

/// The one-paragraph refusal, with what would fit.
pub fn refusal(inv: &Invocation, est: &Estimate) -> String {
    let mut text = format!(
        "{} with {} {} needs ≈{} ({} per task, calibrated at N={} and {}); {} available; largest N that fits ≈{}",
        inv.workload.name(),
        count(inv.n),
        inv.runtime.name(),
        bytes(est.needed_bytes as f64),
        bytes(est.calibration.per_task_bytes),
        count(est.calibration.sizes[0]),
        count(est.calibration.sizes[1]),
        bytes(est.budget_bytes as f64),
        count(round_down(est.largest_n)),
    );
    if inv.workload != WorkloadKind::Sleep {
        text.push_str(" — or use sleep, where tasks do not coexist");
    }
    text.push_str(". --force runs it anyway, inside the cgroup memory limit.");
    text
}

/// A command's refusal, in the same terms.
pub fn command_refusal(label: &str, n: u64, est: &Estimate) -> String {
    format!(
        "`{label}` at N={} needs ≈{} ({} per task, calibrated at N={} and {}); {} available; largest N that fits ≈{}. --force runs it anyway, inside the cgroup memory limit.",
        count(n),
        bytes(est.needed_bytes as f64),
        bytes(est.calibration.per_task_bytes),
        count(est.calibration.sizes[0]),
        count(est.calibration.sizes[1]),
        bytes(est.budget_bytes as f64),
        count(round_down(est.largest_n)),
    )
}

/// 561,234 -> 560,000: an estimate should not look more precise than it is.
pub fn round_down(n: u64) -> u64 {
    if n < 1_000 {
        return n;
    }
    let scale = 10u64.pow((n as f64).log10() as u32 - 1);
    n / scale * scale
}

/// What a run may use: MemAvailable less a reserve for the host (1 GiB or 5 % of RAM).
pub fn default_budget() -> Result<u64> {
    let meminfo = procfs::meminfo()?;
    let available = meminfo.get("MemAvailable").copied().unwrap_or(0) * 1024;
    let total = meminfo.get("MemTotal").copied().unwrap_or(0) * 1024;
    Ok(available.saturating_sub((1u64 << 30).max(total / 20)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold_threads(n: u64) -> Invocation {
        Invocation {
            runtime: Runtime::Threads,
            workload: WorkloadKind::Hold,
            n,
            flags: vec![],
        }
    }

    #[test]
    fn slope_and_intercept_from_two_sizes() {
        let cal = Calibration::from_points([500, 2_500], [23_000_000, 97_000_000], 10_000.0);
        assert!((cal.per_task_bytes - 37_000.0).abs() < 1e-6);
        assert!((cal.fixed_bytes - 4_500_000.0).abs() < 1e-3);
    }

    #[test]
    fn a_million_threads_do_not_fit_in_23_gib() {
        let cal = Calibration::from_points([500, 2_500], [23_000_000, 97_000_000], 10_000.0);
        let budget = 23u64 << 30;
        let est = estimate(
            &hold_threads(1_000_000),
            cal,
            &serde_json::json!({}),
            budget,
        );
        assert!(!est.fits);
        assert_eq!(est.alive, 1_000_000);
        assert!(
            (660_000..670_000).contains(&est.largest_n),
            "{}",
            est.largest_n
        );
        let text = refusal(&hold_threads(1_000_000), &est);
        assert!(
            text.starts_with("hold with 1,000,000 threads needs ≈34.5 GiB"),
            "{text}"
        );
        assert!(
            text.contains("largest N that fits ≈660,000 — or use sleep"),
            "{text}"
        );
    }

    #[test]
    fn sleep_counts_only_the_tasks_alive_at_once() {
        let cal = Calibration::from_points([500, 2_500], [23_000_000, 97_000_000], 10_000.0);
        let inv = Invocation {
            workload: WorkloadKind::Sleep,
            ..hold_threads(1_000_000)
        };
        let est = estimate(
            &inv,
            cal,
            &serde_json::json!({"sleep_ns": 1_000_000_000u64}),
            23 << 30,
        );
        assert_eq!(
            est.alive, 13_500,
            "10,000/s for 1 s, with a 25 % margin and 1,000 spare"
        );
        assert!(est.fits);
    }

    #[test]
    fn rounding_keeps_two_significant_digits() {
        assert_eq!(round_down(561_234), 560_000);
        assert_eq!(round_down(999), 999);
        assert_eq!(round_down(12_345), 12_000);
    }
}
