//! The leash on what a run starts, above all a foreign command (`run -- CMD`, code nobody here
//! wrote): `--timeout`, and a pids.max on the run's cgroup so a runaway or fork-bombing command
//! stops at its own limit while the host can still start processes. A watcher thread looks every
//! 50 ms; when the time is up, or pids.max has refused a command a fork, it kills the whole cgroup
//! (the command and everything it started) and says why in run.json (`stopped_by`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::launch;
use host::cgroup::RunCgroup;
use host::signals::Interrupts;
use record::{PidsLimit, StoppedBy, Target};
use runtime::TaskKind;

/// How often the watcher looks: it bounds how late a time-out lands, and a fork bomb held at
/// pids.max can only retry meanwhile.
const POLL: Duration = Duration::from_millis(50);

/// PIDs a command may use beside its `--tasks` threads (its main thread, a shell, helpers): at
/// least this many, or a tenth more.
const SPARE_PIDS: u64 = 64;

/// `--pids-limit`: a number of tasks, or `max` (no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidsLimitArg {
    Max,
    Tasks(u64),
}

pub fn parse_pids_limit(text: &str) -> Result<PidsLimitArg, String> {
    match text {
        "max" => Ok(PidsLimitArg::Max),
        _ => match text.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(PidsLimitArg::Tasks(n)),
            _ => Err(format!(
                "'{text}' is not a number of tasks of at least 1, or max"
            )),
        },
    }
}

/// `--timeout`: a duration with units, like 30s, 5m or 1h30m.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "'{text}' is not a duration above zero with a unit, like 30s, 5m or 1h30m"
        )),
    }
}

/// The pids.max a run's cgroup gets. A command's default: its `--tasks` threads plus
/// max(64, a tenth) when they are threads; otherwise (a runtime's tasks, or no `--tasks`) half
/// the PIDs the host has left (`host_headroom`), so the host keeps the other half. Our own
/// workloads get no limit unless asked: they count and stop their spawning themselves.
pub fn pids_limit(
    target: &Target,
    given: Option<PidsLimitArg>,
    host_headroom: u64,
) -> Option<PidsLimit> {
    match (given, target) {
        (Some(PidsLimitArg::Max), _) => None,
        (Some(PidsLimitArg::Tasks(max)), _) => Some(PidsLimit {
            max,
            basis: "--pids-limit".into(),
        }),
        (None, Target::Workload(_)) => None,
        (
            None,
            Target::Command {
                tasks: Some(tasks),
                task_kind: TaskKind::Thread,
                ..
            },
        ) => {
            let spare = SPARE_PIDS.max(tasks / 10);
            Some(PidsLimit {
                max: tasks + spare,
                basis: format!("--tasks {tasks} threads + {spare} spare"),
            })
        }
        (None, Target::Command { .. }) => Some(PidsLimit {
            max: (host_headroom / 2).max(SPARE_PIDS),
            basis: format!(
                "half of the {host_headroom} PIDs the host had left (--tasks does not count threads here)"
            ),
        }),
    }
}

/// The watcher thread; [`Watcher::finish`] stops it and tells what it did.
pub struct Watcher {
    done: Arc<AtomicBool>,
    thread: JoinHandle<Option<StoppedBy>>,
}

/// Starts watching the run released just now: `timeout` from now; `pids_limit` (a command's:
/// our workloads report pids.max themselves, as where their spawning stopped) by the cgroup's
/// pids.events. None when there is nothing to watch.
pub fn watch(
    pid: u32,
    cgroup: Option<RunCgroup>,
    timeout: Option<Duration>,
    pids_limit: Option<u64>,
) -> Option<Watcher> {
    let pids_limit = pids_limit.filter(|_| cgroup.is_some());
    if timeout.is_none() && pids_limit.is_none() {
        return None;
    }
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let started = Instant::now();
    let thread = std::thread::Builder::new()
        .name("leash".into())
        .spawn(move || loop {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            if let Some(timeout) = timeout.filter(|&t| started.elapsed() >= t) {
                eprintln!(
                    "\nspawnscope: --timeout {} reached: killing the run",
                    humantime::format_duration(timeout)
                );
                kill(pid, cgroup.as_ref());
                return Some(StoppedBy::Timeout {
                    timeout_ns: timeout.as_nanos() as u64,
                    whole_cgroup: cgroup.is_some(),
                });
            }
            if let (Some(limit), Some(cg)) = (pids_limit, &cgroup) {
                if cg.pids_max_refusals() > 0 {
                    eprintln!(
                        "\nspawnscope: the command reached its pids.max ({limit}): killing its cgroup"
                    );
                    kill(pid, Some(cg));
                    return Some(StoppedBy::PidsMax {
                        limit,
                        refused: cg.pids_max_refusals(),
                    });
                }
            }
            std::thread::sleep(POLL);
        })
        .ok()?;
    Some(Watcher { done, thread })
}

impl Watcher {
    pub fn finish(self) -> Option<StoppedBy> {
        self.done.store(true, Ordering::SeqCst);
        self.thread.join().ok().flatten()
    }
}

/// Everything in the run's cgroup, else the started process alone.
fn kill(pid: u32, cgroup: Option<&RunCgroup>) {
    match cgroup {
        Some(cg) => {
            if let Err(err) = cg.kill_all() {
                eprintln!("spawnscope: {err:#}");
            }
        }
        None => launch::kill(pid),
    }
}

/// A command counts as its whole cgroup: once its first process is reaped, waits for the
/// processes it left behind (daemons, background jobs), saying so after a second. The leash
/// still holds meanwhile; a signal (Ctrl-C) kills them.
pub fn wait_for_leftovers(cgroup: &RunCgroup, interrupts: &Interrupts) {
    let since = Instant::now();
    let mut said = false;
    loop {
        let left = cgroup.processes();
        if left.is_empty() {
            return;
        }
        if interrupts.received().is_some() {
            if let Err(err) = cgroup.kill_all() {
                eprintln!("spawnscope: {err:#}");
                return;
            }
            continue;
        }
        if !said && since.elapsed() >= Duration::from_secs(1) {
            eprintln!(
                "spawnscope: the command exited; waiting for the {} process(es) it left in its cgroup (first: PID {}); Ctrl-C or --timeout stops them",
                left.len(),
                left[0]
            );
            said = true;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::{Invocation, Runtime, WorkloadKind};

    fn command(tasks: Option<u64>, task_kind: TaskKind) -> Target {
        Target::Command {
            argv: vec!["prog".into()],
            tasks,
            task_kind,
            peak_when: None,
            label: None,
            task_lifetime_ns: None,
        }
    }

    #[test]
    fn commands_get_a_pids_limit_from_what_they_declare() {
        let threads = pids_limit(&command(Some(100_000), TaskKind::Thread), None, 50_000);
        assert_eq!(threads.map(|l| l.max), Some(110_000));
        let few = pids_limit(&command(Some(10), TaskKind::Thread), None, 50_000);
        assert_eq!(few.map(|l| l.max), Some(74));
        // A runtime's tasks are not PIDs: half of what the host has left.
        let tasks = pids_limit(&command(Some(1_000_000), TaskKind::Task), None, 50_000);
        assert_eq!(tasks.map(|l| l.max), Some(25_000));
        let undeclared = pids_limit(&command(None, TaskKind::Thread), None, 50_000);
        assert_eq!(undeclared.map(|l| l.max), Some(25_000));
    }

    #[test]
    fn the_user_overrides_and_workloads_go_unlimited() {
        let cmd = command(Some(100), TaskKind::Thread);
        assert_eq!(pids_limit(&cmd, Some(PidsLimitArg::Max), 50_000), None);
        let given = pids_limit(&cmd, Some(PidsLimitArg::Tasks(7)), 50_000).unwrap();
        assert_eq!((given.max, given.basis.as_str()), (7, "--pids-limit"));
        let workload = Target::Workload(Invocation {
            runtime: Runtime::Threads,
            workload: WorkloadKind::Hold,
            n: 1000,
            flags: vec![],
        });
        assert_eq!(pids_limit(&workload, None, 50_000), None);
        assert_eq!(
            pids_limit(&workload, Some(PidsLimitArg::Tasks(2000)), 50_000).map(|l| l.max),
            Some(2000)
        );
    }

    #[test]
    fn parses_the_flags() {
        assert_eq!(parse_pids_limit("max"), Ok(PidsLimitArg::Max));
        assert_eq!(parse_pids_limit("500"), Ok(PidsLimitArg::Tasks(500)));
        assert!(parse_pids_limit("0").is_err());
        assert!(parse_pids_limit("-3").is_err());
        assert!(parse_pids_limit("lots").is_err());
        assert_eq!(parse_timeout("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_timeout("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_timeout("0s").is_err());
        assert!(parse_timeout("5").is_err());
        assert!(parse_timeout("soon").is_err());
    }
}
