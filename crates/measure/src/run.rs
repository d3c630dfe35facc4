//! One run, start to finish: validate, calibrate and refuse what cannot fit (changing nothing),
//! raise sysctls, make the cgroup, start the workload gated, follow its events and snapshot the
//! machine at each phase and at the peak, reap it, put everything back, write the raw records,
//! then compute and print what one task cost.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{anyhow, Result};

use crate::execute::workload_toolchains;
use crate::execute::{measure, RuntimeTracer, StageClock};
use crate::leash::{self};
use crate::loadgen::{self};
use crate::options::RunOptions;
use crate::probes::ProbeTimes;
use crate::serve_setup::{serve_backlog, serve_connections, with_serve_defaults};
use crate::{go_trace, perf, preflight, tokio_trace, trace_cap};
use host::cgroup::{self, RunCgroup};
use host::limits::can_raise_hard_limits;
use host::privileges::is_root;
use host::signals::Interrupts;
use host::sysctl::{self, RaisedGuard, SysctlStore};
use host::{binary, cpu_order, limits, machine, procfs};
use record::process::signal_name;
use record::{self, AliveCount, Estimate, PeakMoment, ResultsDir, RunRecord, SysctlRecord, Target};
use runtime::{Runtime, TaskKind};

/// Why a run did not happen or did not finish, by exit code.
#[derive(Debug)]
pub enum RunError {
    /// Bad arguments: exit 2, nothing changed.
    Usage(String),
    /// Refused by the preflight: exit 3, nothing changed.
    Refused(String),
    /// Something failed: exit 1 (whatever was changed has been put back).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for RunError {
    fn from(err: anyhow::Error) -> Self {
        RunError::Failed(err)
    }
}

/// A run whose raw records are written: where, and whether a signal stopped it.
pub struct Outcome {
    pub dir: PathBuf,
    pub interrupted_by: Option<i32>,
    /// The results root did not exist before this run made it (it goes to the user who ran sudo
    /// too).
    pub made_out_root: bool,
}

/// Puts back what a conductor that was SIGKILLed left behind: raised sysctls and its cgroup (and
/// the workload in it). Every invocation does this first.
pub fn recover_interrupted_runs() -> Result<()> {
    if !is_root() {
        return Ok(());
    }
    for entry in SysctlStore::system().recover_stale()? {
        eprintln!(
            "spawnscope: restored {}={} left raised by an interrupted run",
            entry.key, entry.original
        );
    }
    perf::remove_stale_fifo_dirs();
    for dir in cgroup::remove_stale() {
        eprintln!(
            "spawnscope: removed the cgroup of an interrupted run: {}",
            dir.display()
        );
    }
    Ok(())
}

fn read_managed(store: &SysctlStore) -> BTreeMap<String, u64> {
    sysctl::MANAGED
        .iter()
        .filter_map(|k| Some((k.to_string(), store.read(k).ok()?)))
        .collect()
}

pub fn run(opts: RunOptions, interrupts: &Interrupts) -> Result<Outcome, RunError> {
    let mut clock = StageClock::start();
    let root = is_root();
    let store = SysctlStore::system();
    let mut left_out: Vec<String> = Vec::new();
    // The listeners the user asked for, before the defaults add theirs: a smaller run suggested
    // below gets its own.
    let addresses_given: Option<u64> = match &opts.target {
        Target::Workload(inv) => inv.flag("--addrs").and_then(|v| v.parse().ok()),
        Target::Command { .. } => None,
    };
    let opts = with_serve_defaults(opts);
    let cpus = opts
        .cpus
        .as_deref()
        .map(|text| limits::cpus_to_pin(text, &limits::usable_cpus()?))
        .transpose()
        .map_err(|e| {
            RunError::Usage(format!(
                "--cpus {}: {e:#}",
                opts.cpus.as_deref().unwrap_or("")
            ))
        })?;
    // --cpu-count K: its K CPUs chosen now, so that a K past what is usable is bad input before
    // anything is written.
    let counted_cpus = match (opts.cpu_count, &cpus) {
        (Some(_), Some(_)) => {
            return Err(RunError::Usage(
                "--cpus and --cpu-count: give one (--cpu-count picks its CPUs itself)".into(),
            ))
        }
        (Some(k), None) => Some(
            cpu_order::cpus_for_count(k as usize)
                .map_err(|e| RunError::Usage(format!("--cpu-count {k}: {e:#}")))?,
        ),
        (None, _) => None,
    };
    let serving = serve_connections(&opts.target);
    if serving.is_some() {
        loadgen::wrk().map_err(RunError::Usage)?;
    }

    // What to start, validated before anything changes.
    let (binary, args, params) = match &opts.target {
        Target::Workload(inv) => {
            let binary = inv
                .runtime
                .binary()
                .map_err(|e| RunError::Usage(e.to_string()))?;
            let params = inv.validate(&binary).map_err(RunError::Usage)?;
            (binary, inv.gated_args(), Some(params))
        }
        Target::Command { argv, .. } => {
            let program = argv
                .first()
                .ok_or_else(|| RunError::Usage("no command after --".into()))?;
            let binary = binary::resolve_program(program)
                .ok_or_else(|| RunError::Usage(format!("command not found: {program}")))?;
            (binary, argv[1..].to_vec(), None)
        }
    };
    // --runtime-trace: the workload's flag for it and what records the runtime (Go: the reducer
    // after the run; tokio: the hooks build in the default binary's place; a command is told
    // through its environment, `measure`, and reduced as Go), or a refusal naming why.
    let runtime_trace = match (&opts.target, opts.runtime_trace) {
        (_, false) => None,
        (Target::Workload(inv), true) => {
            let flag = inv
                .runtime
                .runtime_trace_flag()
                .map_err(|why| RunError::Usage(format!("--runtime-trace: {why}")))?;
            if inv.runtime == Runtime::Tokio {
                let hooks = tokio_trace::hooks_binary().map_err(RunError::Usage)?;
                tokio_trace::validate(inv, flag, &hooks).map_err(RunError::Usage)?;
                Some(RuntimeTracer::TokioHooks { flag, hooks })
            } else {
                let reducer = go_trace::reducer().map_err(RunError::Usage)?;
                // The workload checks the flag itself (a binary built before it refuses it).
                go_trace::validate(inv, flag, &binary).map_err(RunError::Usage)?;
                Some(RuntimeTracer::GoReduced {
                    flag: Some(flag),
                    reducer,
                })
            }
        }
        (Target::Command { .. }, true) => Some(RuntimeTracer::GoReduced {
            flag: None,
            reducer: go_trace::reducer().map_err(RunError::Usage)?,
        }),
    };
    // The trace's cap, from the results filesystem's free room now: too little is refused here,
    // before anything changes.
    let trace_cap = if opts.perfetto && root && opts.probes.is_some() {
        Some(
            trace_cap::for_results(&opts.out_root, opts.trace_max_bytes)
                .map_err(RunError::Refused)?,
        )
    } else {
        None
    };
    let threads_needed = match &opts.target {
        // A process takes a kernel task and a PID as a thread does.
        Target::Workload(inv) if inv.runtime.describe().kernel_task_each() => {
            Some(inv.workload.tasks(inv.n))
        }
        Target::Command {
            tasks,
            task_kind: TaskKind::Thread,
            ..
        } => *tasks,
        _ => None,
    };
    let tasks_on_host = procfs::tasks_on_host().unwrap_or(0);
    let mut needs = match threads_needed {
        Some(threads) => sysctl::needs_for_threads(threads, tasks_on_host)
            .map_err(|e| RunError::Usage(e.to_string()))?,
        None => Vec::new(),
    };
    if let Some((connections, addresses)) = serving {
        // One descriptor per connection in one process each: past what a child of ours can be
        // given, the run would measure EMFILE, not the server. --force does not pass it: the
        // server could not accept them.
        let reachable = limits::open_files_reachable(can_raise_hard_limits(), root);
        loadgen::open_files_check(&opts.load.plan(connections), addresses, &reachable).map_err(
            |why| {
                let most =
                    loadgen::most_connections(connections, &opts.load, addresses_given, &reachable);
                RunError::Refused(format!(
                    "{why}: at most {} connections here (nothing was changed)",
                    units::count(most)
                ))
            },
        )?;
        needs.extend(sysctl::needs_for_connections(
            connections,
            addresses,
            serve_backlog(&opts.target),
            procfs::files_open().unwrap_or(0),
        ));
    }
    let changes = store.plan(&needs).map_err(RunError::Failed)?;
    if opts.perf.is_some() {
        if !root {
            return Err(RunError::Usage(
                "--perf needs root (it samples the run's cgroup on every CPU, kernel stacks included)".into(),
            ));
        }
        if !perf::available() {
            return Err(RunError::Usage(
                "--perf needs perf: sudo apt-get install linux-perf (Debian) or linux-tools-$(uname -r) (Ubuntu)".into(),
            ));
        }
    }

    if opts.pids_limit.is_some() && !root {
        return Err(RunError::Usage(
            "--pids-limit needs root (it is the pids.max of the run's cgroup)".into(),
        ));
    }
    let headroom = store
        .read("kernel.pid_max")
        .ok()
        .zip(store.read("kernel.threads-max").ok())
        .map_or(0, |(pid_max, threads_max)| {
            pid_max.min(threads_max).saturating_sub(tasks_on_host)
        });
    let pids_limit = leash::pids_limit(&opts.target, opts.pids_limit, headroom);

    // Preflight: calibrate, estimate, refuse what cannot fit.
    let budget = match opts.memory_limit {
        Some(limit) => limit,
        None => preflight::default_budget()?,
    };
    let mut estimate: Option<Estimate> = None;
    if let (Target::Workload(inv), Some(params)) = (&opts.target, &params) {
        let calibration = match opts.calibration.clone() {
            Some(cal) => Ok(cal),
            None => {
                eprintln!(
                    "spawnscope: calibrating: two short hold runs of {} to estimate the memory of N",
                    inv.runtime.name()
                );
                preflight::calibrate(&binary, inv, interrupts)
            }
        };
        match calibration {
            Ok(cal) => {
                let mut est = preflight::estimate(inv, cal, params, budget);
                if !est.fits && !opts.force {
                    return Err(RunError::Refused(preflight::refusal(inv, &est)));
                }
                if let (true, Some(detail), ProbeTimes::Calibrated) =
                    (root, opts.probes, opts.probe_times)
                {
                    if let Err(failed) = preflight::calibrate_probes(
                        &binary,
                        inv,
                        &mut est.calibration,
                        detail,
                        opts.perfetto,
                        interrupts,
                    ) {
                        left_out.push(failed);
                    }
                }
                estimate = Some(est);
            }
            Err(err) if root || opts.force => {
                left_out.push(format!("memory preflight: calibration failed ({err:#}); the cgroup limit alone protects the host"));
            }
            Err(err) => return Err(RunError::Refused(format!("calibration failed and, without root, no cgroup limit would protect the host: {err:#} (--force runs anyway)"))),
        }
    } else if let (Target::Command { tasks: Some(n), .. }, Some(cal)) =
        (&opts.target, opts.calibration.clone())
    {
        // A command swept by compare, calibrated at two sizes of its own N beforehand.
        let est = preflight::estimate_command(*n, cal, budget);
        if !est.fits && !opts.force {
            return Err(RunError::Refused(preflight::command_refusal(
                &opts.target.label(),
                *n,
                &est,
            )));
        }
        estimate = Some(est);
    } else {
        left_out.push("memory preflight: an arbitrary command cannot be calibrated; the cgroup limit protects the host".into());
    }
    if let Some(sig) = interrupts.received() {
        return Err(RunError::Refused(format!(
            "{} received before the run started; nothing was changed",
            signal_name(sig)
        )));
    }

    let perf_plan = opts.perf.as_ref().map(|o| {
        let rate = estimate.as_ref().map(|e| e.calibration.spawn_per_second);
        perf::plan(&opts.target, rate, o)
    });

    clock.end("preflight");
    // From here on the machine changes: every path below puts it back.
    let started = chrono::Utc::now();
    let root_existed = opts.out_root.exists();
    let dir = ResultsDir::create(&opts.out_root, &opts.target, opts.cpu_count, &started)?;
    // The runtime's trace goes into the run directory, raw, as the workload writes it.
    let mut args = args;
    let mut binary = binary;
    match &runtime_trace {
        Some(RuntimeTracer::GoReduced {
            flag: Some(flag), ..
        }) => args.extend(go_trace::workload_args(flag, &dir.path)),
        Some(RuntimeTracer::TokioHooks { flag, hooks }) => {
            args.extend(tokio_trace::workload_args(flag, &dir.path));
            binary = hooks.clone();
        }
        _ => {}
    }
    let mut sysctl_record = SysctlRecord {
        before: read_managed(&store),
        changes: changes.clone(),
        ..Default::default()
    };
    let owner = sysctl::this_run();
    let raised = if root {
        store.apply(&changes, &owner)?;
        Some(RaisedGuard::new(&store, owner))
    } else {
        if !changes.is_empty() {
            let list: Vec<String> = changes
                .iter()
                .map(|c| format!("{} {} (needs {})", c.key, c.from, c.to))
                .collect();
            left_out.push(format!(
                "sysctls not raised (not root): {}; spawning may stop early",
                list.join(", ")
            ));
        }
        None
    };
    dir.write_json(record::SYSCTL, &sysctl_record)?;
    let mut cgroup = if root {
        match RunCgroup::create(Some(budget)) {
            Ok(c) => Some(c),
            Err(err) => {
                left_out.push(format!(
                    "no cgroup ({err:#}): no memory limit, no per-cgroup accounting"
                ));
                None
            }
        }
    } else {
        left_out.push("no cgroup (not root): no memory limit, no per-cgroup accounting".into());
        None
    };
    if !root {
        left_out.push("eBPF probes and perf need root".into());
    }
    // --cpu-count: the run's cpuset, else the workload's affinity (pinned in `measure`).
    let mut confinement = counted_cpus.as_ref().map(|chosen| {
        let how = match cgroup.as_mut().map(|cg| cg.confine_cpus(chosen)) {
            Some(Ok(version)) => match version {
                record::CgroupVersion::V1 => "cpuset v1",
                record::CgroupVersion::V2 => "cpuset v2",
            },
            Some(Err(err)) => {
                left_out.push(format!(
                    "no cpuset ({err:#}): the run is held to its CPUs by the workload's affinity, which a process it starts may widen"
                ));
                "affinity"
            }
            None => "affinity",
        };
        record::CpuConfinement {
            count: chosen.len() as u32,
            cpus: limits::cpu_list(chosen),
            policy: cpu_order::POLICY.into(),
            how: how.into(),
            seen: None,
        }
    });
    let pin: Option<Vec<usize>> = match &confinement {
        Some(c) if c.how == "affinity" => counted_cpus.clone(),
        _ => cpus.clone(),
    };
    // A server's socket buffers, counted from before its first connection.
    if let (Some(cg), Some(_)) = (cgroup.as_mut(), serving) {
        if let Err(err) = cg.count_sockets() {
            left_out.push(format!("socket memory not counted in the cgroup: {err:#}"));
        }
    }
    // The leash's pids.max (a command's by default, see measure/leash.rs).
    let pids_limit = match (&cgroup, pids_limit) {
        (Some(cg), Some(limit)) => match cg.set_pids_max(limit.max) {
            Ok(true) => Some(limit),
            Ok(false) => {
                left_out.push(format!(
                    "pids limit {} not set: this host has no pids cgroup controller",
                    limit.max
                ));
                None
            }
            Err(err) => {
                left_out.push(format!("pids limit {} not set: {err:#}", limit.max));
                None
            }
        },
        _ => None,
    };
    // perf samples the run's cgroup (see perf.rs), else the workload's process.
    let perf_scope = perf_plan.as_ref().map(|_| match cgroup.as_mut() {
        Some(cg) => match cg.add_perf_event() {
            Ok(name) => Some(name),
            Err(err) => {
                left_out.push(format!(
                    "perf: no perf_event cgroup ({err:#}): recorded per process"
                ));
                None
            }
        },
        None => None,
    });
    let perf = perf_plan.as_ref().zip(perf_scope);

    let result = measure(
        &opts,
        &dir,
        &binary,
        &args,
        cgroup.as_ref(),
        interrupts,
        root,
        perf,
        pids_limit.as_ref().map(|l| l.max),
        pin.as_deref(),
        counted_cpus.as_deref().or(cpus.as_deref()),
        estimate
            .as_ref()
            .and_then(|e| e.calibration.probes.as_ref())
            .filter(|_| opts.probe_times == ProbeTimes::Calibrated),
        trace_cap.as_ref(),
        &mut clock,
    );

    // Put the machine back before looking at any figure.
    let cgroup_final = cgroup.as_ref().map(RunCgroup::stats);
    if let Some(cg) = cgroup {
        if let Err(err) = cg.remove() {
            eprintln!("spawnscope: {err:#}");
        }
    }
    if let Some(guard) = raised {
        match guard.restore() {
            Ok(restored) => sysctl_record.restored = restored,
            Err(err) => sysctl_record.restore_error = Some(format!("{err:#}")),
        }
    }
    sysctl_record.after = read_managed(&store);
    dir.write_json(record::SYSCTL, &sysctl_record)?;

    let mut measured = result?;
    clock.end("restore");
    if let Some(c) = confinement.as_mut() {
        c.seen = measured.cpus_seen.take();
    }
    measured.memory.cgroup_final = cgroup_final.clone();
    let oom_killed = cgroup_final.as_ref().is_some_and(|c| c.oom_kills > 0);
    let interrupted_by = interrupts.received();
    left_out.extend(measured.left_out);
    match &runtime_trace {
        Some(RuntimeTracer::TokioHooks { .. }) => {
            if let Err(why) = tokio_trace::written(&dir.path) {
                left_out.push(format!("--runtime-trace: {why}"));
            }
        }
        // A command need not be a Go program that starts the tracer: said, not an error.
        Some(RuntimeTracer::GoReduced { flag: None, .. })
            if !dir.path.join(record::GO_TRACE).exists() =>
        {
            eprintln!("spawnscope: {}", go_trace::NO_TRACE_FROM_COMMAND);
            left_out.push(go_trace::NO_TRACE_FROM_COMMAND.into())
        }
        Some(RuntimeTracer::GoReduced { reducer, .. }) => {
            eprintln!(
                "spawnscope: reducing the Go execution trace ({})",
                record::GO_TRACE
            );
            if let Err(why) = go_trace::reduce(reducer, &dir.path) {
                left_out.push(format!(
                    "--runtime-trace: {why}; {} is kept",
                    record::GO_TRACE
                ));
            }
        }
        None => {}
    }
    // A command's tasks taken as a runtime's (command_moment): recorded as such, so that the
    // analysis divides by them and sets no "threads created" check against them.
    let mut target = opts.target.clone();
    if let (
        Target::Command { task_kind, .. },
        Some(PeakMoment {
            counted: AliveCount::AssumedTasks { .. },
            ..
        }),
    ) = (&mut target, &measured.memory.peak_moment)
    {
        *task_kind = TaskKind::Task;
    }
    let record = RunRecord {
        schema: 1,
        target,
        argv: std::env::args().collect(),
        started_utc: started.to_rfc3339(),
        root,
        pid: measured.pid,
        wall_ns: measured.wall_ns,
        released_t_ns: measured.released_t_ns,
        reaped_t_ns: measured.reaped_t_ns,
        exit: measured.exit,
        rusage: measured.rusage,
        interrupted_by: interrupted_by.map(|s| signal_name(s).to_string()),
        oom_killed,
        memory_limit_bytes: cgroup_final.as_ref().and_then(|c| c.memory_limit_bytes),
        estimate,
        contract_violations: measured.violations,
        timeout_ns: opts.timeout.map(|t| t.as_nanos() as u64),
        pids_limit,
        stopped_by: measured.stopped_by,
        cpus: opts.cpus.clone(),
        cpu_count: confinement,
        open_files_limit: measured.open_files_limit,
        left_out,
        stages: clock.stages,
        runtime_traced: runtime_trace.is_some(),
    };
    dir.write_json(record::MEMORY, &measured.memory)?;
    dir.write_json(record::RUN, &record)?;
    if !dir.file(record::MACHINE).exists() {
        dir.write_json(
            record::MACHINE,
            &machine::fingerprint(&workload_toolchains(&opts.target, None)),
        )?;
    }
    if let Some(err) = sysctl_record.restore_error {
        return Err(RunError::Failed(anyhow!(
            "sysctls could not be restored: {err} — run `spawnscope sysctl restore`"
        )));
    }

    Ok(Outcome {
        dir: dir.path,
        interrupted_by,
        made_out_root: !root_existed,
    })
}
