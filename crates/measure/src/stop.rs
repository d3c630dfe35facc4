//! One reading of a workload's memory with the workload stopped. While tasks start and exit by the
//! thousand a second (sleep with short sleeps, churn), a few hundred tasks alive hold a few
//! megabytes, and a reading taken on the run is moved by as much again: exited threads' task
//! structs and kernel stacks wait a grace period or two for RCU to free them, slabs and the
//! per-CPU lists take and give back pages. Stopped (SIGSTOP: every thread, new ones included),
//! nothing starts or exits; once RCU's callbacks have run and free memory holds still, the reading
//! is as exact as `hold`'s. Then the workload goes on (SIGCONT), and the times leave the stop out.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::sampler::{available_now_kb, settle_within, snapshot};
use host::cgroup::RunCgroup;
use host::clock::monotonic_ns;
use host::rcu;
use record::{Snapshot, StopAt, WorkloadStop};

/// How long every thread may take to stop (each has to be woken to see the signal).
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Free memory holds still within this once nothing of the run moves it.
const STILL_KB: u64 = 128;
/// Snapshots taken at most, each after free memory held still, until free memory stayed within
/// STILL_KB across one. Each waits up to settle_within's 5 s, so a workload stays stopped 15 s
/// at most where free memory never holds still.
const SNAPSHOT_TRIES: usize = 3;

/// Sends SIGCONT when dropped: a workload is never left stopped, whatever fails in between.
struct ContinueOnDrop(u32);

impl Drop for ContinueOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// Stops the workload `pid`, waits for RCU's callbacks and for free memory to hold still, takes
/// the snapshot, and lets the workload go on.
pub fn read_stopped(
    pid: u32,
    cgroup: Option<&RunCgroup>,
    at: StopAt,
) -> Result<(Snapshot, WorkloadStop)> {
    read_halted(pid, cgroup, at, halt(pid)?)
}

/// Sends SIGSTOP (every thread stops at its next return to user space, a thread being created
/// too) and says when, CLOCK_MONOTONIC. `read_halted` must follow: it lets the workload go on.
pub fn halt(pid: u32) -> Result<u64> {
    let from_t_ns = monotonic_ns();
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid as i32, libc::SIGSTOP) } != 0 {
        bail!("SIGSTOP: {}", std::io::Error::last_os_error());
    }
    Ok(from_t_ns)
}

/// The rest of `read_stopped`, for a workload halted at `from_t_ns`.
pub fn read_halted(
    pid: u32,
    cgroup: Option<&RunCgroup>,
    at: StopAt,
    from_t_ns: u64,
) -> Result<(Snapshot, WorkloadStop)> {
    let resume = ContinueOnDrop(pid);
    wait_until_stopped(pid)?;
    // Twice: a task struct's callback queues its stack's.
    let rcu_barrier = rcu::barrier(2);
    let snapshot = still_snapshot(pid, cgroup);
    drop(resume);
    Ok((
        snapshot,
        WorkloadStop {
            from_t_ns,
            to_t_ns: monotonic_ns(),
            at,
            rcu_barrier,
            at_once: false,
        },
    ))
}

/// The base of a workload waiting at its start gate (`--wait-to-start`: after its `start`
/// event, before its first phase). It is waiting on its stdin, so nothing of the run moves and no
/// signal is needed. `still`: read as a stopped reading is (RCU's callbacks run, free memory
/// still), for a workload whose peak is read so too (sleep, churn: both readings still); else at
/// once, as its peak will be. The stop's span runs from `from_t_ns` (its `start` event read) to
/// now: the caller sets `to_t_ns` again just before it writes the line that opens the gate.
pub fn read_at_gate(
    pid: u32,
    cgroup: Option<&RunCgroup>,
    from_t_ns: u64,
    still: bool,
) -> (Snapshot, WorkloadStop) {
    let (snapshot, rcu_barrier) = if still {
        let rcu_barrier = rcu::barrier(2);
        (still_snapshot(pid, cgroup), rcu_barrier)
    } else {
        (snapshot(Some(pid), cgroup, false), false)
    };
    (
        snapshot,
        WorkloadStop {
            from_t_ns,
            to_t_ns: monotonic_ns(),
            at: StopAt::StartGate,
            rcu_barrier,
            at_once: !still,
        },
    )
}

/// A snapshot with free memory still across it. Holding still over three readings 100 ms apart
/// is not enough alone: after a big run frees gigabytes, free page reporting takes 64 MiB at a
/// time off the free lists to hand to the host and puts them back 20–100 ms later (measured
/// here: every 2 s or so, for seconds), which a snapshot inside that window would count as the
/// workload's. Free memory is read again after the snapshot, and one that moved is taken again.
fn still_snapshot(pid: u32, cgroup: Option<&RunCgroup>) -> Snapshot {
    taken_while_still(
        || settle_within(STILL_KB),
        available_now_kb,
        || snapshot(Some(pid), cgroup, true),
        Snapshot::available_kb,
    )
}

/// `take` after `settle` (which returns free memory once still), until the free memory it
/// recorded (`free_in`, else the settled figure) is within STILL_KB of the settled figure and of
/// free memory read right after (`available`), or SNAPSHOT_TRIES were taken.
fn taken_while_still<T>(
    mut settle: impl FnMut() -> u64,
    mut available: impl FnMut() -> u64,
    mut take: impl FnMut() -> T,
    free_in: impl Fn(&T) -> Option<u64>,
) -> T {
    let mut tries = 0;
    loop {
        let before = settle();
        let taken = take();
        tries += 1;
        let recorded = free_in(&taken).unwrap_or(before);
        let after = available();
        let still = recorded.abs_diff(before) <= STILL_KB && after.abs_diff(recorded) <= STILL_KB;
        if still || tries == SNAPSHOT_TRIES {
            return taken;
        }
    }
}

/// Waits for the group stop to complete: every thread stopped, which the parent (the conductor)
/// is told through waitid. The report is consumed here; the reap (wait4) does not ask for it.
fn wait_until_stopped(pid: u32) -> Result<()> {
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        // SAFETY: a zeroed siginfo_t is valid, and waitid writes only into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WSTOPPED | libc::WNOHANG,
            )
        };
        if r != 0 {
            // A zombie is no child to a wait for stops (ECHILD).
            let err = std::io::Error::last_os_error();
            if !running(pid) {
                bail!("it exited before every thread had stopped");
            }
            bail!("waiting for it to stop: {err}");
        }
        // SAFETY: waitid filled `info` (si_pid 0: nothing to report yet).
        if unsafe { info.si_pid() } == pid as i32 {
            return Ok(());
        }
        if !running(pid) {
            bail!("it exited before every thread had stopped");
        }
        if Instant::now() >= deadline {
            bail!("not every thread had stopped after {STOP_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// The process exists and is not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(") ").unwrap().1.chars().next().unwrap()
    }

    #[test]
    fn the_workload_makes_no_progress_while_read_and_goes_on_after() {
        // A shell printing the time as fast as it can: its output has a gap exactly where it
        // was stopped, and it prints again once continued.
        let child = Command::new("sh")
            .args(["-c", "while :; do date +%s%N; done"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(200));
        let (snapshot, stop) = read_stopped(pid, None, StopAt::Levelled).unwrap();
        assert_eq!(
            snapshot.status.get("Threads"),
            Some(&1),
            "{:?}",
            snapshot.status
        );
        assert!(stop.from_t_ns < snapshot.t_ns && snapshot.t_ns < stop.to_t_ns);
        // Free memory is waited on for three readings 100 ms apart at least.
        assert!(stop.span_ns() >= 300_000_000, "{stop:?}");
        assert_ne!(state(pid), 'T', "still stopped");
        std::thread::sleep(Duration::from_millis(200));
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let out = child.wait_with_output().unwrap();
        let times: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect();
        let longest_gap = times.windows(2).map(|w| w[1].saturating_sub(w[0])).max();
        assert!(
            longest_gap.is_some_and(|gap| gap as f64 >= stop.span_ns() as f64 * 0.8),
            "longest gap {longest_gap:?} ns, stopped {} ns",
            stop.span_ns()
        );
        assert!(
            times
                .last()
                .is_some_and(|&t| t > *times.first().unwrap() + stop.span_ns()),
            "it printed after the stop"
        );
    }

    #[test]
    fn a_process_that_is_gone_is_an_error_and_nothing_waits() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not reaped: a zombie, which no signal stops.
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let err = read_stopped(pid, None, StopAt::AfterSpawning).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1), "{err:#}");
        assert!(format!("{err:#}").contains("exited"), "{err:#}");
        child.wait().unwrap();
    }

    #[test]
    fn a_snapshot_that_free_memory_moved_across_is_taken_again_at_most_three_times() {
        const SETTLED: u64 = 1_000_000;
        // (free memory the snapshot recorded, free memory read after it), per snapshot taken.
        let taken = |readings: Vec<(u64, u64)>| {
            let recorded: Vec<u64> = readings.iter().map(|r| r.0).collect();
            let mut after = readings.iter().map(|r| r.1);
            let mut snapshots = 0;
            let last = taken_while_still(
                || SETTLED,
                || after.next().unwrap(),
                || {
                    snapshots += 1;
                    snapshots
                },
                |&n: &usize| Some(recorded[n - 1]),
            );
            (last, snapshots)
        };
        let page_reporting = SETTLED - 65_536;
        // Page reporting took 64 MiB while the first was read: the second stands.
        assert_eq!(
            taken(vec![(page_reporting, SETTLED), (SETTLED, SETTLED)]),
            (2, 2)
        );
        // ... or just after it: the figure it recorded may already be off.
        assert_eq!(
            taken(vec![(SETTLED, page_reporting), (SETTLED, SETTLED)]),
            (2, 2)
        );
        // Within STILL_KB is still.
        assert_eq!(taken(vec![(SETTLED + STILL_KB, SETTLED)]), (1, 1));
        assert_eq!(
            taken(vec![(SETTLED + STILL_KB + 1, SETTLED), (SETTLED, SETTLED)]),
            (2, 2)
        );
        // Never still: the third is kept, and nothing waits longer.
        assert_eq!(taken(vec![(0, 0), (0, 0), (0, 0)]), (3, 3));
    }
}
