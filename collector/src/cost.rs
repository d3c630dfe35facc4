//! What the probes themselves cost. Each program counts its own runs (a per-CPU add, map
//! `prog_runs`); the nanoseconds a run takes come from the kernel's run-time statistics
//! (`bpf_prog_info.run_cnt`, `run_time_ns`), which cost two clock reads per program run while
//! they are on — about as much as a lean program itself, and counted in no program's time. So
//! they are best left off in the measured run: a calibration run (spawnscope's probes'
//! calibration, a short `hold` with the statistics on throughout) gives each program's ns per run,
//! and the measured run, given those rates (`Config::program_rates`), leaves them off. Without
//! rates they are on for the whole run (`ProgramStats::Always`), or in short windows (20 ms of
//! every 200 ms, `Sampled`), each program's time then its runs times the windows' ns per run.
//!
//! The statistics are turned on with `BPF_ENABLE_STATS`, which hands back a file descriptor: the
//! kernel counts while any such descriptor is open and stops by itself when the last one closes
//! — on every exit path, SIGKILL included — so `kernel.bpf_stats_enabled` is never left changed.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libbpf_rs::libbpf_sys;
use libbpf_rs::Object;

use crate::layout::prog;
use crate::model::{ProgramCost, ProgramRates, Report};
use crate::probes::PROBES;

/// When the kernel's run-time statistics are on during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgramStats {
    /// On for `on` of every `every` (e.g. 20 ms of 200 ms): each switch flips the kernel's
    /// `bpf_stats_enabled_key`, a static branch patched with int3 and IPIs to every CPU.
    Sampled { on: Duration, every: Duration },
    /// On for the whole run: exact per-program times, at the statistics' own cost. The
    /// default: switching ten times a second crashed Debian's 6.12 under QEMU's emulation (an
    /// int3 Oops in bpf_trace_run2 during the patching, the kernel matrix) and costs every CPU an
    /// IPI per switch on real machines.
    #[default]
    Always,
    /// Off: runs counted, no times.
    Off,
}

/// The statistics' descriptor: counting while it is open (the kernel's BPF_ENABLE_STATS; for a
/// caller that times a stretch of its own, as `spawnscope probe-cost` does).
pub fn enable_stats() -> Result<OwnedFd, String> {
    // SAFETY: bpf_enable_stats takes a plain enum and returns a new descriptor or -errno.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(format!(
            "BPF run-time statistics could not be turned on (BPF_ENABLE_STATS: {}); the probes' time is not measured, only their runs",
            std::io::Error::from_raw_os_error(-fd)
        ));
    }
    // SAFETY: fd is a descriptor the kernel just gave this process, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The statistics, on as `ProgramStats` says for as long as this lives.
pub(crate) struct Stats {
    always: Option<OwnedFd>,
    sampler: Option<(Arc<AtomicBool>, JoinHandle<Duration>)>,
    started: Instant,
    /// Why there are no times, when there are none.
    pub note: Option<String>,
}

impl Stats {
    pub fn start(mode: ProgramStats) -> Stats {
        let mut stats = Stats {
            always: None,
            sampler: None,
            started: Instant::now(),
            note: None,
        };
        // Probe once: a kernel or a process that cannot turn them on says why here.
        let probe = match mode {
            ProgramStats::Off => return stats,
            _ => enable_stats(),
        };
        match (mode, probe) {
            (_, Err(why)) => stats.note = Some(why),
            (ProgramStats::Always, Ok(fd)) => stats.always = Some(fd),
            (ProgramStats::Sampled { on, every }, Ok(fd)) => {
                drop(fd);
                let stop = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&stop);
                let handle = std::thread::spawn(move || sample(&flag, on, every));
                stats.sampler = Some((stop, handle));
            }
            (ProgramStats::Off, Ok(_)) => unreachable!(),
        }
        stats
    }

    /// Turns them off; (ms they were on, ms since start), None when never on.
    pub fn stop(self) -> Option<(u64, u64)> {
        let total = self.started.elapsed();
        let on = if let Some((stop, handle)) = self.sampler {
            stop.store(true, Ordering::Relaxed);
            handle.join().unwrap_or_default()
        } else if self.always.is_some() {
            total
        } else {
            return None;
        };
        drop(self.always);
        Some((on.as_millis() as u64, total.as_millis() as u64))
    }
}

/// On for `on`, off for the rest of `every`, until `stop`; the time it was on.
fn sample(stop: &AtomicBool, on: Duration, every: Duration) -> Duration {
    let mut was_on = Duration::ZERO;
    let off = every.saturating_sub(on);
    while !stop.load(Ordering::Relaxed) {
        let Ok(fd) = enable_stats() else {
            break;
        };
        let since = Instant::now();
        std::thread::sleep(on);
        drop(fd);
        was_on += since.elapsed();
        let mut slept = Duration::ZERO;
        while slept < off && !stop.load(Ordering::Relaxed) {
            let step = (off - slept).min(Duration::from_millis(10));
            std::thread::sleep(step);
            slept += step;
        }
    }
    was_on
}

/// The tracepoint a program serves (`btf_<name>` / `tp_<name>`, the floor's `floor_<name>`).
pub(crate) fn tracepoint_of(program: &str) -> String {
    let name = probe_name(program);
    PROBES
        .iter()
        .find(|p| p.name() == name)
        .map_or_else(|| name.to_string(), |p| p.tracepoint.to_string())
}

fn probe_name(program: &str) -> &str {
    program
        .strip_prefix("btf_")
        .or_else(|| program.strip_prefix("tp_"))
        .or_else(|| program.strip_prefix("floor_"))
        .unwrap_or(program)
}

/// Runs times the sampled ns per run (0 when no run was sampled).
pub(crate) fn estimated_ns(runs: u64, sampled_runs: u64, sampled_ns: u64) -> u64 {
    if sampled_runs == 0 {
        return 0;
    }
    (runs as f64 * sampled_ns as f64 / sampled_runs as f64).round() as u64
}

/// The runs and nanoseconds a program's ns per run comes from, and whether they are the
/// calibration's: the kernel's own for this run when it timed any, else the calibration's for the
/// same program (none: no time, not a guess).
fn rate_basis(program: &str, kernel: (u64, u64), rates: Option<&ProgramRates>) -> (u64, u64, bool) {
    if kernel.0 > 0 {
        return (kernel.0, kernel.1, false);
    }
    rates
        .and_then(|r| r.programs.iter().find(|p| p.program == program))
        .map_or((kernel.0, kernel.1, false), |p| (p.runs, p.ns, true))
}

impl Report {
    /// Each program's ns per run as this run measured them (its statistics on), for a later run
    /// to take as `Config::program_rates`; programs timed on no run are left out.
    pub fn program_rates(&self, from: impl Into<String>) -> ProgramRates {
        ProgramRates {
            from: from.into(),
            programs: self
                .program_costs
                .iter()
                .filter(|p| p.sampled_runs > 0)
                .map(|p| crate::model::ProgramRate {
                    program: p.program.clone(),
                    runs: p.sampled_runs,
                    ns: p.sampled_ns,
                })
                .collect(),
        }
    }
}

/// The kernel's record of a loaded program: its runs and their time while the statistics were
/// on (`run_cnt`, `run_time_ns`), and the runs it skipped (`recursion_misses`).
pub(crate) fn prog_info(
    prog: &libbpf_rs::Program<'_>,
) -> Result<libbpf_sys::bpf_prog_info, std::io::Error> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info is a zeroed bpf_prog_info of `len` bytes, which the kernel fills; every
    // pointer field in it is zero, so the kernel writes nothing else.
    let ret = unsafe {
        libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len)
    };
    if ret != 0 {
        return Err(std::io::Error::from_raw_os_error(-ret));
    }
    Ok(info)
}

/// Each loaded program's runs and their time as the statistics have counted them so far (both
/// grow only while the statistics are on): read live, for a caller that times stretches of its
/// own (`spawnscope probe-cost`).
pub(crate) fn program_totals(obj: &Object) -> Result<Vec<ProgramTotals>, String> {
    let mut totals = Vec::new();
    for prog in obj.progs() {
        if !prog.autoload() {
            continue;
        }
        let program = prog.name().to_string_lossy().into_owned();
        let info = prog_info(&prog).map_err(|err| format!("bpf_prog_info of {program}: {err}"))?;
        totals.push(ProgramTotals {
            tracepoint: tracepoint_of(&program),
            program,
            run_cnt: info.run_cnt,
            run_time_ns: info.run_time_ns,
            recursion_misses: info.recursion_misses,
        });
    }
    Ok(totals)
}

/// One program's counts so far, as the kernel's run-time statistics keep them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramTotals {
    pub program: String,
    /// `category:name` of its tracepoint.
    pub tracepoint: String,
    /// Runs while the statistics were on, and their nanoseconds.
    pub run_cnt: u64,
    pub run_time_ns: u64,
    /// Runs the kernel skipped: the program was already running on that CPU.
    pub recursion_misses: u64,
}

/// Every loaded program's runs (its own count, `prog_runs`) and time, most expensive first. Read
/// while the object still holds the programs (after detaching, so every run is in). A program
/// the kernel timed no run of takes its ns per run from `rates`, when given.
pub(crate) fn read_programs(
    obj: &Object,
    prog_runs: &[u64],
    prog_filtered: &[u64],
    rates: Option<&ProgramRates>,
) -> (Vec<ProgramCost>, Vec<String>) {
    let mut costs = Vec::new();
    let mut errors = Vec::new();
    for prog in obj.progs() {
        if !prog.autoload() {
            continue;
        }
        let name = prog.name().to_string_lossy().into_owned();
        let info = match prog_info(&prog) {
            Ok(info) => info,
            Err(err) => {
                errors.push(format!("bpf_prog_info of {name}: {err}"));
                continue;
            }
        };
        let slot = prog::NAMES.iter().position(|n| *n == probe_name(&name));
        let runs = slot
            .and_then(|i| prog_runs.get(i).copied())
            .unwrap_or(info.run_cnt);
        let filtered_runs = slot
            .and_then(|i| prog_filtered.get(i).copied())
            .unwrap_or(0);
        let (sampled_runs, sampled_ns, from_calibration) =
            rate_basis(&name, (info.run_cnt, info.run_time_ns), rates);
        costs.push(ProgramCost {
            tracepoint: tracepoint_of(&name),
            program: name,
            run_cnt: runs,
            filtered_runs,
            run_time_ns: estimated_ns(runs, sampled_runs, sampled_ns),
            recursion_misses: info.recursion_misses,
            sampled_runs,
            sampled_ns,
            from_calibration,
        });
    }
    costs.sort_by(|a, b| {
        b.run_time_ns
            .cmp(&a.run_time_ns)
            .then_with(|| a.program.cmp(&b.program))
    });
    (costs, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_named_by_the_tracepoint_they_serve() {
        assert_eq!(tracepoint_of("btf_sched_switch"), "sched:sched_switch");
        assert_eq!(
            tracepoint_of("tp_page_fault_user"),
            "exceptions:page_fault_user"
        );
        assert_eq!(tracepoint_of("btf_sys_enter"), "raw_syscalls:sys_enter");
        assert_eq!(tracepoint_of("helper"), "helper");
    }

    #[test]
    fn a_program_untimed_here_takes_the_calibrations_rate_and_only_its_own() {
        let rates = ProgramRates {
            from: "threads hold --n 2500".into(),
            programs: vec![crate::model::ProgramRate {
                program: "btf_sched_switch".into(),
                runs: 200,
                ns: 30_000,
            }],
        };
        // Statistics off here: the calibration's runs and ns.
        assert_eq!(
            rate_basis("btf_sched_switch", (0, 0), Some(&rates)),
            (200, 30_000, true)
        );
        // Timed here: this run's own, the calibration unused.
        assert_eq!(
            rate_basis("btf_sched_switch", (10, 2_000), Some(&rates)),
            (10, 2_000, false)
        );
        // Not in the calibration: no time.
        assert_eq!(
            rate_basis("btf_sys_enter", (0, 0), Some(&rates)),
            (0, 0, false)
        );
        assert_eq!(rate_basis("btf_sched_switch", (0, 0), None), (0, 0, false));
    }

    #[test]
    fn a_programs_time_is_its_runs_at_the_sampled_rate() {
        assert_eq!(estimated_ns(1000, 100, 15_000), 150_000);
        assert_eq!(
            estimated_ns(1000, 0, 0),
            0,
            "nothing sampled: no time, not a guess"
        );
        assert_eq!(estimated_ns(0, 10, 500), 0);
    }
}
