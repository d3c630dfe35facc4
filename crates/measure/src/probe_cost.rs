//! What each probe program costs an event of its hook, against the floor of that hook: for every
//! hook the lean probes use, a loop that fires it (measure/probe_loops.rs, run in a process of its
//! own, `spawnscope probe-loop`) is timed untraced, with the floor's program attached
//! (probes/floor.bpf.c: one per-CPU array increment), with the collector's lean program attached
//! for a run the loop is not part of (filtered out), with it attached for the loop's own process
//! (the loop is the run: the program's whole work), and, listed, with the full probes' program
//! and with the trace's records. Only the hook's own program is attached (`only_tracepoints`,
//! beside the exec program that arms the counting), so each round's difference is that program's.
//!
//! Every attached state is timed twice: with the kernel's run-time statistics off (the loop's time,
//! what the workload pays: the dispatch, the program, its misses) and on (each program's runs and
//! nanoseconds as the kernel counts them from its first clock read to its second). Then the floor
//! and the lean program are timed with the loop cold (the CPU's own caches emptied before each
//! event, the lean program's maps sized for a run of RUN_SIZED_TASKS), and the lean program
//! coldest (every cache emptied), the statistics on: what an event costs a run whose tasks' slots
//! and structures are out of the CPU's caches, and the most it can cost. The states run in cycles, each
//! hook in every state in turn, so that the machine's drift falls on all alike.
//! The figures are analyse/probes/probe_cost.rs's; the raw rounds are record/probe_cost.rs's types.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::launch::{self, ChildSetup, Spawned, Stdio};
use crate::probe_loops::{Chill, Loop, READY};
use crate::probes::{self, ProbeDetail};
use host::tracefs;
use record::probe_cost::{HookLoop, Measured, ProgramRound, Round, State};
use spawnscope_collector::{Collector, Floor, ProgramStats, ProgramTotals, TraceConfig};

/// Every hook timed: the tracepoint, the loop that fires it, and whether the trace emits a record
/// from its program (then the trace's state is timed too).
pub const HOOKS: &[(&str, Loop, bool)] = &[
    ("raw_syscalls:sys_enter", Loop::Getppid, false),
    ("raw_syscalls:sys_exit", Loop::Getppid, false),
    ("sched:sched_switch", Loop::PingPong, true),
    ("sched:sched_wakeup", Loop::PingPong, true),
    ("lock:contention_begin", Loop::FilePosLock, false),
    ("lock:contention_end", Loop::FilePosLock, false),
    ("exceptions:page_fault_user", Loop::Faults, false),
    ("task:task_newtask", Loop::Spawn, true),
    ("sched:sched_wakeup_new", Loop::Spawn, true),
    ("sched:sched_process_exit", Loop::Spawn, true),
    ("signal:signal_deliver", Loop::Signal, false),
    ("sched:sched_migrate_task", Loop::Migrate, false),
    ("ipi:ipi_send_cpu", Loop::CrossPingPong, false),
    ("csd:csd_queue_cpu", Loop::RemoteUnmap, false),
    ("tlb:tlb_flush", Loop::Unmap, false),
    ("exceptions:page_fault_kernel", Loop::KernelFaults, false),
];

/// The attached states of a cycle, in order (each timed with the statistics off, then on).
const ATTACHED: [State; 5] = [
    State::Floor,
    State::Filtered,
    State::Lean,
    State::Full,
    State::Trace,
];

/// The cold states, after the attached ones (each timed with the statistics on only).
const COLD: [State; 3] = [State::FloorCold, State::LeanCold, State::LeanColdest];

/// How cold the loop runs in a state.
fn chill_of(state: State) -> Chill {
    match state {
        State::FloorCold | State::LeanCold => Chill::Own,
        State::LeanColdest => Chill::All,
        _ => Chill::Warm,
    }
}

/// The least a round lasts: shorter ones are mostly the clock and the scheduler's tick.
const LEAST_ROUND_NS: f64 = 20e6;
/// The least iterations a warm round holds, however long: the statistics' ns a run of a loop of
/// thread starts (~400 µs an iteration) over 190 a round moved by half from one round to the next
/// (one interrupt inside a program's window weighs on a few hundred runs).
const LEAST_ROUND_ITERATIONS: u64 = 1_000;
/// The least a cold round lasts: an iteration is milliseconds of emptying the caches, and the
/// statistics' figure wants a few hundred events a round.
const LEAST_COLD_ROUND_NS: f64 = 400e6;
/// The tasks the cold lean program's maps are sized for: the main job's threads run.
pub const RUN_SIZED_TASKS: u64 = 100_000;

/// What to measure.
pub struct Options {
    pub cycles: u32,
    /// About how long the rounds take in all (attaching and loading come on top).
    pub seconds: f64,
    /// The hooks to time (`category:name`), in HOOKS' order; all when empty.
    pub hooks: Vec<String>,
}

/// Root only, with the statistics off to begin with (the caller refuses otherwise).
pub fn measure(options: &Options) -> Result<Measured> {
    tracefs::mount_if_missing();
    let hooks: Vec<&(&str, Loop, bool)> = HOOKS
        .iter()
        .filter(|(h, _, _)| options.hooks.is_empty() || options.hooks.iter().any(|o| o == h))
        .collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut left_out = Vec::new();
    let hooks: Vec<&(&str, Loop, bool)> = hooks
        .into_iter()
        .filter(|(hook, l, _)| {
            let fits = l.cpus_needed() <= cpus;
            if !fits {
                left_out.push(format!(
                    "{hook}: its loop ({}) needs {} CPUs, this process may use {cpus}",
                    l.name(),
                    l.cpus_needed()
                ));
            }
            fits
        })
        .collect();
    let load_before = load_average();
    let mut subject = LoopProcess::start()?;
    let mut bystander = LoopProcess::start()?;
    // Rounds a cycle: untraced, two for each attached state (the trace's on some hooks), and the
    // cold ones, whose length is their own.
    let rounds_a_cycle: usize = hooks
        .iter()
        .map(|(_, _, traced)| 1 + 2 * (ATTACHED.len() - usize::from(!traced)))
        .sum();
    let round_ns = (options.seconds * 1e9 / (f64::from(options.cycles) * rounds_a_cycle as f64))
        .max(LEAST_ROUND_NS);
    let mut loops = Vec::new();
    for (hook, l, _) in &hooks {
        let iterations =
            calibrate(&mut subject, *l, round_ns, Chill::Warm)?.max(LEAST_ROUND_ITERATIONS);
        let cold_round_ns = round_ns.max(LEAST_COLD_ROUND_NS);
        let cold_iterations = calibrate(&mut subject, *l, cold_round_ns, Chill::Own)?;
        let coldest_iterations = calibrate(&mut subject, *l, cold_round_ns, Chill::All)?;
        loops.push(HookLoop {
            hook: hook.to_string(),
            loop_does: format!("{}: {}", l.name(), l.does()),
            iterations,
            cold_iterations,
            coldest_iterations,
            cold_does: l.cold_does().to_string(),
        });
    }
    let trace_file = std::env::temp_dir().join(format!(
        "spawnscope-probe-cost-{}.trace",
        std::process::id()
    ));
    let mut rounds = Vec::new();
    for cycle in 0..options.cycles {
        for ((hook, l, traced), hl) in hooks.iter().zip(&loops) {
            let timing = Timing {
                hook,
                cycle,
                l: *l,
                iterations: hl.iterations,
                cold_iterations: hl.cold_iterations,
                coldest_iterations: hl.coldest_iterations,
            };
            rounds.push(timing.round(&mut subject, State::Untraced, false, None)?);
            // The attached states with the statistics off, then on; the cold ones on only (an
            // iteration is mostly the emptying).
            let states = ATTACHED
                .iter()
                .filter(|&&s| s != State::Trace || *traced)
                .map(|&s| (s, &[false, true][..]))
                .chain(COLD.iter().map(|&s| (s, &[true][..])));
            for (state, statistics) in states {
                match attach(state, hook, &mut subject, &mut bystander, &trace_file) {
                    Ok(attached) => {
                        for &on in statistics {
                            let counted = on.then_some(&attached);
                            rounds.push(timing.round(&mut subject, state, on, counted)?);
                        }
                        attached.detach();
                    }
                    Err(why) => {
                        let said = format!("{hook}, {state:?}: {why:#}");
                        if !left_out.contains(&said) {
                            left_out.push(said);
                        }
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_file(&trace_file);
    subject.end();
    bystander.end();
    Ok(Measured {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| r.trim().to_string())
            .unwrap_or_default(),
        cpus,
        load_before,
        load_after: load_average(),
        cycles: options.cycles,
        loops,
        rounds,
        left_out,
    })
}

/// /proc/loadavg's 1-minute figure (NaN when unreadable: said as such, not as 0).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Iterations of `l` (as cold as `chill`) that take about `round_ns` untraced (short rounds to
/// learn the rate).
fn calibrate(subject: &mut LoopProcess, l: Loop, round_ns: f64, chill: Chill) -> Result<u64> {
    let mut n = if chill == Chill::Warm { 64u64 } else { 1 };
    loop {
        let ns = subject.run(l, n, chill)?;
        if ns as f64 >= round_ns / 8.0 || n >= 1 << 32 {
            return Ok(((n as f64 * round_ns / ns.max(1) as f64).ceil() as u64).max(1));
        }
        n *= 4;
    }
}

struct Timing<'a> {
    hook: &'a str,
    cycle: u32,
    l: Loop,
    iterations: u64,
    cold_iterations: u64,
    coldest_iterations: u64,
}

impl Timing<'_> {
    fn round(
        &self,
        subject: &mut LoopProcess,
        state: State,
        statistics: bool,
        attached: Option<&Attached>,
    ) -> Result<Round> {
        let on = if statistics {
            Some(statistics_on()?)
        } else {
            None
        };
        let chill = chill_of(state);
        let iterations = match chill {
            Chill::Warm => self.iterations,
            Chill::Own => self.cold_iterations,
            Chill::All => self.coldest_iterations,
        };
        let before = attached.map(|a| a.totals(self.hook)).transpose()?;
        let ns = subject.run(self.l, iterations, chill)?;
        let after = attached.map(|a| a.totals(self.hook)).transpose()?;
        drop(on);
        let programs = match (before, after) {
            (Some(before), Some(after)) => after
                .iter()
                .map(|a| {
                    let b = before.iter().find(|b| b.program == a.program);
                    let was = |f: fn(&ProgramTotals) -> u64| b.map_or(0, f);
                    ProgramRound {
                        program: a.program.clone(),
                        runs: a.run_cnt - was(|b| b.run_cnt),
                        ns: a.run_time_ns - was(|b| b.run_time_ns),
                        recursion_misses: a.recursion_misses - was(|b| b.recursion_misses),
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Round {
            hook: self.hook.to_string(),
            cycle: self.cycle,
            state,
            statistics,
            iterations,
            ns,
            programs,
        })
    }
}

/// The kernel's run-time statistics, on while the descriptor lives.
fn statistics_on() -> Result<OwnedFd> {
    spawnscope_collector::enable_stats().map_err(anyhow::Error::msg)
}

/// What is attached to the hook in a state.
enum Attached {
    Floor(Floor),
    Collector(Box<Collector>),
}

impl Attached {
    /// The programs on `hook` and their counts so far.
    fn totals(&self, hook: &str) -> Result<Vec<ProgramTotals>> {
        let all = match self {
            Attached::Floor(f) => f.program_totals(),
            Attached::Collector(c) => c.program_totals(),
        }
        .map_err(anyhow::Error::msg)?;
        Ok(all.into_iter().filter(|p| p.tracepoint == hook).collect())
    }

    fn detach(self) {
        match self {
            Attached::Floor(f) => drop(f),
            Attached::Collector(c) => drop(c.finish()),
        }
    }
}

/// Attaches `state`'s program to `hook`: the collector's for the subject's run (it execs again,
/// which arms the counting) or for the bystander's (the subject then is not the run).
fn attach(
    state: State,
    hook: &str,
    subject: &mut LoopProcess,
    bystander: &mut LoopProcess,
    trace_file: &std::path::Path,
) -> Result<Attached> {
    if matches!(state, State::Floor | State::FloorCold) {
        return Floor::attach(&[hook])
            .map(Attached::Floor)
            .map_err(anyhow::Error::msg);
    }
    let run = if state == State::Filtered {
        &mut *bystander
    } else {
        &mut *subject
    };
    let detail = if state == State::Full {
        ProbeDetail::Full
    } else {
        ProbeDetail::Lean
    };
    // Room in the per-thread map for the loops' threads, alive at once (one a CPU at most); the
    // cold program's maps as large as a big run's.
    let tasks = if matches!(state, State::LeanCold | State::LeanColdest) {
        RUN_SIZED_TASKS
    } else {
        64
    };
    let mut config = probes::config(run.pid(), tasks, detail);
    config.program_stats = ProgramStats::Off;
    config.only_tracepoints = Some(vec![hook.to_string()]);
    if state == State::Trace {
        config.trace = Some(TraceConfig {
            path: PathBuf::from(trace_file),
            ring_bytes: 32 << 20,
            ring_rule: "probe-cost: 32 MiB".into(),
            max_bytes: None,
            max_rule: "none: probe-cost's loops are short".into(),
        });
    }
    let collector = Collector::start(&config).context("loading the eBPF probes")?;
    if !collector
        .probes()
        .iter()
        .any(|p| p.probe == hook && p.attach.is_some())
    {
        let why = collector
            .probes()
            .iter()
            .find(|p| p.probe == hook)
            .and_then(|p| p.note.clone())
            .unwrap_or_else(|| "not loaded".into());
        drop(collector.finish());
        bail!("the collector's program could not be attached: {why}");
    }
    run.exec()?;
    Ok(Attached::Collector(Box::new(collector)))
}

/// A `spawnscope probe-loop` process: runs a loop when told, execs itself again when told.
struct LoopProcess {
    child: Spawned,
    input: std::fs::File,
    answers: BufReader<std::fs::File>,
}

impl LoopProcess {
    fn start() -> Result<LoopProcess> {
        let exe = std::env::current_exe().context("this program's path")?;
        let setup = ChildSetup {
            stdin: Stdio::Pipe,
            stdout: Stdio::Pipe,
            ..ChildSetup::default()
        };
        let mut child = launch::spawn(&exe, &["probe-loop".to_string()], setup)?;
        let input = child.stdin.take().context("the loop process's stdin")?;
        let answers = BufReader::new(child.stdout.take().context("its stdout")?);
        let mut process = LoopProcess {
            child,
            input,
            answers,
        };
        process.expect_ready()?;
        Ok(process)
    }

    fn pid(&self) -> u32 {
        self.child.pid
    }

    fn answer(&mut self) -> Result<String> {
        let mut line = String::new();
        if self.answers.read_line(&mut line)? == 0 {
            bail!("the loop process ended");
        }
        Ok(line.trim().to_string())
    }

    fn expect_ready(&mut self) -> Result<()> {
        let line = self.answer()?;
        if line != READY {
            bail!("the loop process said {line:?}, not {READY}");
        }
        Ok(())
    }

    fn exec(&mut self) -> Result<()> {
        writeln!(self.input, "exec")?;
        self.expect_ready()
    }

    fn run(&mut self, l: Loop, iterations: u64, chill: Chill) -> Result<u64> {
        writeln!(self.input, "run {} {iterations} {}", l.name(), chill.word())?;
        let line = self.answer()?;
        line.parse()
            .with_context(|| format!("the loop process answered {line:?}"))
    }

    /// Closes its stdin (it ends) and reaps it.
    fn end(self) {
        let pid = self.child.pid;
        drop(self.input);
        drop(self.answers);
        drop(self.child);
        let _ = launch::wait(pid);
    }
}
