//! How processes are spawned, counted and reaped: fork with the task's work in the child, which
//! then `_exit`s; the parent counts it alive until it reaps it.
//!
//! Fork safety: the parent forks only while it has its one thread (serve starts its stdin watcher
//! after its forks), so no lock is held by a thread the child lacks; even so a child allocates
//! nothing and keeps to system calls (os.rs) and atomics in shared memory.

use std::cell::Cell;
use std::os::raw::c_int;

use workload::cli::Config;
use workload::harness::{Harness, Tasks};
use workload::json::Obj;
use workload::sys;

use crate::os::{self, Forked};

/// The runtime of the `processes` binary: the kernel's processes, each task one forked child.
#[derive(Default)]
pub struct Processes {
    forked: Cell<u64>,
    reaped: Cell<u64>,
}

impl Processes {
    /// Reaps the children that have ended, without waiting.
    fn reap_ended(&self) {
        while os::reap_one(false).is_some() {
            self.reaped.set(self.reaped.get() + 1);
        }
    }

    /// Waits for every child to end, reaping each (their rusage joins RUSAGE_CHILDREN).
    pub fn reap_all(&self) {
        while os::reap_one(true).is_some() {
            self.reaped.set(self.reaped.get() + 1);
        }
    }
}

impl Tasks for Processes {
    /// Children forked and not ended: the ended ones are reaped first, so that one that has
    /// exited and waits to be reaped (a zombie: its kernel task and PID, its memory gone) does
    /// not count.
    fn alive(&self) -> u64 {
        self.reap_ended();
        self.forked.get() - self.reaped.get()
    }

    /// Processes forked and reaped (all of them by the end of a run that completed).
    fn stats(&self, _cfg: &Config) -> Obj {
        Obj::new()
            .with("processes_forked", self.forked.get())
            .with("processes_reaped", self.reaped.get())
    }

    /// The parent's own and its reaped children's: the tasks' work is done in the children.
    fn rusage(&self) -> Obj {
        sys::rusage_with_children()
    }
}

pub type ProcessHarness = Harness<Processes>;

/// Forks one task, counting it: the child closes `parents_only` (the ends of pipes it must not
/// hold), writes its own stack page, runs `task` and exits. Returns the child's PID; None (the
/// failure recorded) when fork failed.
pub fn spawn(h: &mut ProcessHarness, parents_only: &[c_int], task: impl FnOnce()) -> Option<c_int> {
    match os::fork_process() {
        Ok(Forked::Child) => {
            for &fd in parents_only {
                os::close_fd(fd);
            }
            os::write_own_stack_page();
            task();
            os::exit_now(0)
        }
        Ok(Forked::Parent(pid)) => {
            h.spawned += 1;
            h.tasks.forked.set(h.tasks.forked.get() + 1);
            Some(pid)
        }
        Err(err) => {
            h.spawn_failed(&err);
            None
        }
    }
}

/// Reads one record from each of `want` children on `fd` (a started or finished latch, a
/// receiver's count), calling `tick` about every 100 ms while it waits, and returns their sum;
/// stops early at end of file (every child holding the write end has ended).
pub fn collect(h: &mut ProcessHarness, fd: c_int, want: u64) -> u64 {
    let mut fds = [os::PollFd {
        fd,
        events: os::POLLIN,
        revents: 0,
    }];
    let (mut got, mut sum) = (0, 0u64);
    while got < want {
        if os::poll_fds(&mut fds, 100) == 0 {
            h.tick();
            continue;
        }
        match os::read_record(fd) {
            Some(value) => {
                got += 1;
                sum += value;
            }
            None => break,
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_stats_say_forked_and_reaped() {
        // alive() is not called: its waitpid(-1) would reap another test's child.
        let tasks = Processes::default();
        tasks.forked.set(5);
        tasks.reaped.set(2);
        let stats = tasks.stats(&config()).to_line();
        assert_eq!(stats, r#"{"processes_forked":5,"processes_reaped":2}"#);
    }

    fn config() -> Config {
        let program = workload::Program {
            name: "test",
            runtime: "processes",
            runtime_version: "test",
            about: "",
            channels: "",
            stack_size: workload::RuntimeFlag::Refuses(""),
            workers: workload::RuntimeFlag::Refuses(""),
            gomaxprocs_refusal: "",
            tokio_trace: workload::RuntimeFlag::Refuses(""),
        };
        match workload::cli::parse(&program, &["hold".to_string()]) {
            Ok(workload::cli::Command::Run(cfg)) => cfg,
            _ => panic!("hold is a run"),
        }
    }
}
