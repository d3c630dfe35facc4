//! Cross-checks: a tracer is only as good as its agreement with the kernel's own accounting, so
//! every summary compares the counts with the workload's getrusage(RUSAGE_SELF).
//!
//! Both sides are made to cover the same span: the kernel side keeps apart what was counted
//! up to the workload's last getrusage call (its `result` event), and what the task's rusage
//! already held at exec (the fork child's work before exec, execve's own faults) is taken off.
//! getrusage sums the threads' counters while they run, so its figures can only be pinned
//! between the counts at the call's entry and at its return: `observed..=observed_max`. When no
//! other thread runs meanwhile the two are equal and the check is an equality.

use serde::{Deserialize, Serialize};

use crate::launch::Rusage;
use crate::model::{Attach, CutCounts, CutWindow, Report};

/// Signals delivered to the target: the bound on faults entered twice.
const SIGNAL_PROBE: &str = "signal:signal_deliver";

#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// A probe it needs is missing, or the target never exec'd.
    NotMeasured,
}

/// One comparison: pass when `observed - tolerance <= expected <= observed_max + tolerance`.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub name: String,
    /// From the kernel's accounting (rusage), less what it held before exec.
    pub expected: u64,
    /// From the probes, up to the entry of the workload's getrusage call ...
    pub observed: u64,
    /// ... and up to its return.
    pub observed_max: u64,
    pub tolerance: u64,
    pub verdict: Verdict,
    /// How the two numbers were made, and anything that weakens the comparison.
    pub basis: String,
}

impl CrossCheck {
    pub fn pass(&self) -> bool {
        self.verdict == Verdict::Pass
    }

    /// How far the probes' count lies from the kernel's: 0 inside the window, else observed
    /// minus expected at the nearer end.
    pub fn difference(&self) -> i64 {
        if self.expected < self.observed {
            self.observed as i64 - self.expected as i64
        } else if self.expected > self.observed_max {
            self.observed_max as i64 - self.expected as i64
        } else {
            0
        }
    }
}

impl Report {
    /// The cross-checks against the kernel's own accounting, given the workload's rusage (the
    /// `rusage` object of its `result` event: only minflt, majflt, nvcsw and nivcsw are compared)
    /// and the OS threads it created besides its main thread (threads: `spawned`; goroutines: the Go
    /// runtime's threads created less one).
    ///
    /// - page faults (user- and kernel-mode, on user addresses) vs minflt + majflt, within 1 % +
    ///   majflt + the signals delivered to the target up to getrusage's return (a fault a signal
    ///   interrupts is entered again after the delivery; without the signal probe, 1 % + majflt);
    /// - involuntary switches vs nivcsw, exactly;
    /// - voluntary switches vs nvcsw, exactly once each exited thread's final switch (which no
    ///   rusage sees) is left out; the classic tracepoint cannot tell that switch apart, so there
    ///   the tolerance is one per exited thread;
    /// - both switch checks: the group leader's switches after its parent claimed it in wait4
    ///   (command mode, where wait4 gives the rusage) are summed by the reaper or not, by a race,
    ///   so the window opens by that many at its lower end;
    /// - threads created (task_newtask with CLONE_THREAD) vs `threads.0`, exactly; `threads.1`
    ///   says where that count comes from. None: the tasks are not threads and nobody said how
    ///   many threads to expect, so there is no such check.
    pub fn cross_checks(&self, rusage: &Rusage, threads: Option<(u64, &str)>) -> Vec<CrossCheck> {
        self.cross_checks_against(rusage, threads, RusageFrom::LastGetrusage)
    }

    /// The same checks against the rusage wait4 returned for the launched process once it
    /// exited: every task of the run that it or its descendants reaped, over the whole run — so
    /// the counts compared are the run's totals, never a cut at the launched process's own last
    /// getrusage (a command that calls getrusage, the threads workload run as a command, would
    /// otherwise leave out everything after that call: its threads' exits).
    pub fn cross_checks_of_wait4(
        &self,
        rusage: &Rusage,
        threads: Option<(u64, &str)>,
    ) -> Vec<CrossCheck> {
        self.cross_checks_against(rusage, threads, RusageFrom::Wait4)
    }

    fn cross_checks_against(
        &self,
        rusage: &Rusage,
        threads: Option<(u64, &str)>,
        from: RusageFrom,
    ) -> Vec<CrossCheck> {
        let mut notes = Vec::new();
        let cut = match from {
            RusageFrom::LastGetrusage => self.rusage_basis.at_last_getrusage.as_ref(),
            RusageFrom::Wait4 => {
                notes.push(
                    "rusage from wait4 (the launched process and every descendant it reaped): \
                     compared with the whole run's counts"
                        .to_string(),
                );
                None
            }
        };
        let window = match cut {
            Some(window) => window.clone(),
            None if from == RusageFrom::Wait4 => CutWindow {
                entered: self.rusage_basis.total.clone(),
                returned: self.rusage_basis.total.clone(),
            },
            None => {
                notes.push(format!(
                    "counts are totals: {} getrusage calls and {} returns seen, no cut at the last",
                    self.rusage_basis.getrusage_calls, self.rusage_basis.getrusage_returns
                ));
                CutWindow {
                    entered: self.rusage_basis.total.clone(),
                    returned: self.rusage_basis.total.clone(),
                }
            }
        };
        let unfollowed = self.diagnostics.processes_not_followed;
        if unfollowed > 0 {
            notes.push(format!(
                "{unfollowed} processes of the run not followed (the map of its processes was \
                 full): their tasks were not counted"
            ));
        }
        let pre = self.rusage_basis.pre_exec.clone();
        match &pre {
            None => notes.push("the task's counters at exec are unknown".into()),
            Some(p) if p.source != "task_struct at exec" => {
                notes.push(format!("counters at exec: {}", p.source))
            }
            Some(_) => {}
        }
        let pre_faults = pre.as_ref().map_or(0, |p| p.minflt + p.majflt);
        let pre_nvcsw = pre.as_ref().map_or(0, |p| p.nvcsw);
        let pre_nivcsw = pre.as_ref().map_or(0, |p| p.nivcsw);
        let common = notes.join("; ");
        let with_common = |basis: String| {
            if common.is_empty() {
                basis
            } else {
                format!("{basis}; {common}")
            }
        };
        let switch_attach = self.attach_of("sched:sched_switch");
        let untracked = self.diagnostics.nv_untracked;
        let switch_basis = |counts: &CutCounts, voluntary: bool, pre: u64, attach| {
            let basis = switch_basis(counts, voluntary, pre, attach);
            if untracked > 0 {
                format!(
                    "{basis}; {untracked} switches told by prev_state (the thread's nvcsw unknown)"
                )
            } else {
                basis
            }
        };
        let (lo, hi) = (&window.entered, &window.returned);

        let expected = (rusage.minflt + rusage.majflt).saturating_sub(pre_faults);
        // A fault that waits (a major fault's I/O, the mmap lock dropped) and finds a signal
        // pending returns to user space unfinished; the signal is delivered (Go's preemption
        // signals, say) and the task faults again: the tracepoint counts both entries, rusage
        // the one fault completed. Each extra entry needs a signal delivered to that thread in
        // between, so the signals delivered to the target up to getrusage's return bound them.
        // Where they were not counted, each major fault may be taken again once (and 1 % and
        // majflt still carry what no delivery shows: a thread caught in another's group stop).
        let one_percent_and_majflt = expected.div_ceil(100) + rusage.majflt;
        let (tolerance, why) = match self.attach_of(SIGNAL_PROBE) {
            Some(_) => (
                one_percent_and_majflt + hi.signals_delivered,
                format!(
                    "tolerance 1 % + majflt + {} signals delivered to the target up to getrusage \
                     (a fault a signal interrupts is taken again after its delivery: each extra \
                     entry needs one)",
                    hi.signals_delivered
                ),
            ),
            None if self.probes.iter().any(|p| p.probe == SIGNAL_PROBE) => (
                one_percent_and_majflt,
                format!(
                    "tolerance 1 % + majflt (a major fault a signal interrupts is taken again; \
                     {SIGNAL_PROBE} not attached: the signals delivered are not counted)"
                ),
            ),
            // Files from before the signals were counted: judged as they were then.
            None => (
                one_percent_and_majflt,
                "tolerance 1 % + majflt (a major fault a signal interrupts is taken again)".into(),
            ),
        };
        // Kernel-mode faults taken with page faults disabled (perf's call-chain walks) are in no
        // rusage and not in `faults`; an atomic futex op's such fault is retried through
        // fixup_user_fault, which rusage counts with no exception: at most that many more.
        let unhandled = hi.faults_unhandled;
        let unhandled_said = if unhandled > 0 {
            format!(
                "; {unhandled} kernel-mode faults taken with page faults disabled left out (perf's \
                 user call-chain walks from NMI, atomic user accesses: fixed up unhandled, in no \
                 rusage; one a futex op retries through fixup_user_fault is in rusage: the window's \
                 upper end)"
            )
        } else {
            String::new()
        };
        let faults = self.check(
            "page faults vs rusage minflt+majflt",
            expected,
            (lo.faults, hi.faults + unhandled),
            tolerance,
            &["exceptions:page_fault_user", "exceptions:page_fault_kernel"],
            with_common(format!(
                "expected = minflt {} + majflt {} - {pre_faults} at exec; observed = user-mode + \
                 kernel-mode faults on user addresses; {why}{unhandled_said}",
                rusage.minflt, rusage.majflt
            )),
        );

        // The leader's switches while its parent reaps it may or may not be in wait4's rusage:
        // the window opens by them at its lower end.
        let invol = |c: &CutCounts| {
            c.switches_involuntary
                .saturating_sub(c.switches_involuntary_after_exit)
        };
        let involuntary = self.check(
            "involuntary switches vs rusage nivcsw",
            rusage.nivcsw.saturating_sub(pre_nivcsw),
            (
                invol(lo).saturating_sub(lo.switches_involuntary_while_reaped),
                invol(hi),
            ),
            0,
            &["sched:sched_switch"],
            with_common(switch_basis(hi, false, pre_nivcsw, switch_attach)),
        );

        let vol = |c: &CutCounts| {
            c.switches_voluntary
                .saturating_sub(c.switches_voluntary_after_exit)
        };
        let classic = switch_attach == Some(Attach::Tracepoint);
        let voluntary = self.check(
            "voluntary switches vs rusage nvcsw",
            rusage.nvcsw.saturating_sub(pre_nvcsw),
            (
                vol(lo).saturating_sub(lo.switches_voluntary_while_reaped),
                vol(hi),
            ),
            if classic {
                self.total("thread_exits")
            } else {
                0
            },
            &["sched:sched_switch"],
            with_common(switch_basis(hi, true, pre_nvcsw, switch_attach)),
        );

        let mut checks = vec![faults, involuntary, voluntary];
        if let Some((expected, from)) = threads {
            checks.push(self.check(
                "threads created vs spawned",
                expected,
                (lo.new_threads, hi.new_threads),
                0,
                &["task:task_newtask"],
                with_common(format!(
                    "observed = task_newtask with CLONE_THREAD by the run's tasks; expected = {from}"
                )),
            ));
        }
        checks
    }

    /// Processes created by the run's tasks (task_newtask without CLONE_THREAD) vs `expected`
    /// (`from` says whose count that is: a workload of one process per task forks each), over
    /// the whole run: the processes runtime's own check beside the rusage ones.
    pub fn processes_created_check(&self, expected: u64, from: &str) -> CrossCheck {
        let forked = self.total("new_processes");
        self.check(
            "processes created vs forked",
            expected,
            (forked, forked),
            0,
            &["task:task_newtask"],
            format!(
                "observed = task_newtask without CLONE_THREAD by the run's tasks, over the whole \
                 run; expected = {from}"
            ),
        )
    }

    pub(crate) fn attach_of(&self, probe: &str) -> Option<Attach> {
        self.probes
            .iter()
            .find(|p| p.probe == probe)
            .and_then(|p| p.attach)
    }

    fn check(
        &self,
        name: &str,
        expected: u64,
        (observed, observed_max): (u64, u64),
        tolerance: u64,
        needs: &[&str],
        basis: String,
    ) -> CrossCheck {
        let missing: Vec<&str> = needs
            .iter()
            .copied()
            .filter(|p| self.attach_of(p).is_none())
            .collect();
        let inside = expected + tolerance >= observed && expected <= observed_max + tolerance;
        let verdict = match (self.exec_seen && missing.is_empty(), inside) {
            (false, _) => Verdict::NotMeasured,
            (true, true) => Verdict::Pass,
            (true, false) => Verdict::Fail,
        };
        let basis = if missing.is_empty() {
            basis
        } else {
            format!("missing probe {}; {basis}", missing.join(", "))
        };
        CrossCheck {
            name: name.into(),
            expected,
            observed,
            observed_max,
            tolerance,
            verdict,
            basis,
        }
    }
}

/// Which rusage the counts are held against.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RusageFrom {
    /// The workload's own getrusage(RUSAGE_SELF), in its result event: the counts cut at its
    /// last call.
    LastGetrusage,
    /// wait4's, when the launched process has exited: the whole run.
    Wait4,
}

fn switch_basis(counts: &CutCounts, voluntary: bool, pre: u64, attach: Option<Attach>) -> String {
    let (all, after, reaped, field) = if voluntary {
        (
            counts.switches_voluntary,
            counts.switches_voluntary_after_exit,
            counts.switches_voluntary_while_reaped,
            "nvcsw",
        )
    } else {
        (
            counts.switches_involuntary,
            counts.switches_involuntary_after_exit,
            counts.switches_involuntary_while_reaped,
            "nivcsw",
        )
    };
    let reaped = if reaped > 0 {
        format!(
            "; {reaped} of the leader's after its parent began reaping it, in wait4's rusage or \
             not (a race), so observed can be that many fewer"
        )
    } else {
        String::new()
    };
    let how = match attach {
        Some(Attach::TpBtf) => "classified by which of the task's own counters moved",
        Some(Attach::Tracepoint) => {
            "classified by prev_state (classic tracepoint: a switch while a signal is pending \
             counts as involuntary here, voluntary in the kernel)"
        }
        None => "not measured",
    };
    format!(
        "expected = {field} - {pre} at exec; observed = switches less those after the thread's \
         exit was accounted (at getrusage's return: {all} - {after}){reaped}; {how}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Diagnostics, FaultKinds, PreExec, ProbeStatus, Report, RusageBasis, REPORT_SCHEMA,
    };

    fn report(attach: Option<Attach>, at_last: Option<CutCounts>) -> Report {
        let at_last = at_last.map(|c| CutWindow {
            entered: c.clone(),
            returned: c,
        });
        let probes = [
            "exceptions:page_fault_user",
            "exceptions:page_fault_kernel",
            "sched:sched_switch",
            "task:task_newtask",
            SIGNAL_PROBE,
        ]
        .iter()
        .map(|p| ProbeStatus {
            probe: p.to_string(),
            attach,
            note: None,
        })
        .collect();
        Report {
            schema: REPORT_SCHEMA,
            tgid: 1,
            exec_seen: true,
            t0_ns: 0,
            finished_ns: 0,
            bucket_ns: 1,
            probes,
            phases: Vec::new(),
            metrics: Vec::new(),
            histograms: Vec::new(),
            series: Vec::new(),
            clone_failures: Vec::new(),
            rusage_basis: RusageBasis {
                getrusage_calls: 1,
                getrusage_returns: 1,
                last_getrusage_ns: 0,
                pre_exec: Some(PreExec {
                    minflt: 30,
                    majflt: 0,
                    nvcsw: 1,
                    nivcsw: 0,
                    source: "task_struct at exec".into(),
                }),
                at_last_getrusage: at_last,
                total: CutCounts {
                    faults: 999_999,
                    ..CutCounts::default()
                },
            },
            diagnostics: Diagnostics {
                tasks_map_entries: 0,
                tasks_map_full: 0,
                threads_left_in_map: 0,
                nr_buckets: 0,
                late_events: 0,
                fault_kinds: FaultKinds::StackHeap,
                per_thread: true,
                nv_untracked: 0,
                task_storage: false,
                net_syscalls: false,
                vma_lookups_busy: 0,
                run_selected_by: None,
                processes_followed: 0,
                processes_not_followed: 0,
                execs: 1,
                read_errors: Vec::new(),
            },
            program_costs: Vec::new(),
            program_costs_note: None,
            program_stats_on_ms: None,
            program_stats_of_ms: None,
            program_rates_from: None,
            waits: None,
            trace: None,
        }
    }

    fn counts(faults: u64) -> CutCounts {
        CutCounts {
            faults,
            switches_voluntary: 2_105,
            switches_involuntary: 40,
            switches_voluntary_after_exit: 2_000,
            switches_involuntary_after_exit: 2,
            new_threads: 2_000,
            ..CutCounts::default()
        }
    }

    const RUSAGE: Rusage = Rusage {
        user_us: 0,
        sys_us: 0,
        maxrss_kb: 0,
        minflt: 10_030,
        majflt: 0,
        nvcsw: 106,
        nivcsw: 38,
    };

    #[test]
    fn faults_agree_within_one_percent_after_the_pre_exec_faults() {
        // expected = 10030 - 30 = 10000, tolerance 100.
        let r = report(Some(Attach::TpBtf), Some(counts(10_100)));
        let checks = r.cross_checks(&RUSAGE, Some((2_000, "spawned")));
        assert_eq!((checks[0].expected, checks[0].tolerance), (10_000, 100));
        assert!(checks[0].pass(), "{:?}", checks[0]);
        let r = report(Some(Attach::TpBtf), Some(counts(10_101)));
        assert_eq!(
            r.cross_checks(&RUSAGE, Some((2_000, "spawned")))[0].verdict,
            Verdict::Fail
        );
        let r = report(Some(Attach::TpBtf), Some(counts(9_899)));
        assert_eq!(
            r.cross_checks(&RUSAGE, Some((2_000, "spawned")))[0].difference(),
            -101
        );
    }

    #[test]
    fn faults_with_page_faults_disabled_are_left_out_and_open_the_window_above() {
        // expected 10,000 (tolerance 100); 3,000 perf call-chain faults counted apart.
        let with = |faults, unhandled| {
            report(
                Some(Attach::TpBtf),
                Some(CutCounts {
                    faults_unhandled: unhandled,
                    ..counts(faults)
                }),
            )
        };
        let check = |r: &Report| r.cross_checks(&RUSAGE, None)[0].clone();
        let c = check(&with(10_000, 3_000));
        assert!(c.pass(), "{c:?}");
        assert_eq!((c.observed, c.observed_max), (10_000, 13_000));
        assert!(
            c.basis
                .contains("3000 kernel-mode faults taken with page faults disabled left out"),
            "{}",
            c.basis
        );
        // A futex op's retry: rusage counts it, the faults do not; the window's upper end
        // carries up to that many.
        let c = check(&with(9_500, 500));
        assert!(c.pass(), "{c:?}");
        // Below the window's upper end by more than 1 %: a miss no unhandled fault explains.
        let c = check(&with(9_500, 399));
        assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
        // Without any, the basis is worded as before.
        assert!(!check(&with(10_000, 0))
            .basis
            .contains("page faults disabled"));
    }

    #[test]
    fn faults_taken_again_after_a_signal_are_bounded_by_the_signals_delivered() {
        // expected = 10030 - 30 = 10000: 1 % is 100, majflt 0; 500 signals delivered up to the
        // getrusage call.
        let with = |faults, signals| {
            report(
                Some(Attach::TpBtf),
                Some(CutCounts {
                    signals_delivered: signals,
                    ..counts(faults)
                }),
            )
        };
        let faults = |r: &Report, rusage: &Rusage| r.cross_checks(rusage, None)[0].clone();
        // 600 entries more than completed faults: at most one per signal, plus 1 %.
        let c = faults(&with(10_600, 500), &RUSAGE);
        assert_eq!((c.expected, c.tolerance), (10_000, 600));
        assert!(c.pass(), "{c:?}");
        assert!(
            c.basis
                .contains("tolerance 1 % + majflt + 500 signals delivered to the target"),
            "{}",
            c.basis
        );
        // One more than signals + 1 % + majflt: no signal explains it.
        let c = faults(&with(10_601, 500), &RUSAGE);
        assert_eq!((c.verdict, c.difference()), (Verdict::Fail, 601));
        // The major faults still count: 50 of the 10,000 give 50 more.
        let major = Rusage {
            minflt: 9_980,
            majflt: 50,
            ..RUSAGE
        };
        assert!(faults(&with(10_650, 500), &major).pass());
        assert_eq!(faults(&with(10_651, 500), &major).verdict, Verdict::Fail);
        // Signals bound faults counted up to getrusage's return, where the window ends.
        let mut r = with(10_600, 0);
        r.rusage_basis
            .at_last_getrusage
            .as_mut()
            .unwrap()
            .returned
            .signals_delivered = 500;
        assert!(faults(&r, &RUSAGE).pass());
        // Without the probe on this kernel the signals are not known: today's tolerance, said.
        let mut r = with(10_600, 500);
        r.probes
            .iter_mut()
            .find(|p| p.probe == SIGNAL_PROBE)
            .unwrap()
            .attach = None;
        let c = faults(&r, &RUSAGE);
        assert_eq!((c.tolerance, c.verdict), (100, Verdict::Fail));
        assert!(
            c.basis.contains("signal:signal_deliver not attached"),
            "{}",
            c.basis
        );
        // Records from before it was counted read as they did.
        r.probes.retain(|p| p.probe != SIGNAL_PROBE);
        let c = faults(&r, &RUSAGE);
        assert_eq!(c.tolerance, 100);
        assert!(
            c.basis.ends_with(
                "tolerance 1 % + majflt (a major fault a signal interrupts is taken again)"
            ),
            "{}",
            c.basis
        );
    }

    #[test]
    fn switches_leave_out_what_no_rusage_can_see() {
        let r = report(Some(Attach::TpBtf), Some(counts(10_000)));
        let checks = r.cross_checks(&RUSAGE, Some((2_000, "spawned")));
        // involuntary: 40 - 2 after exit = 38 = nivcsw - 0.
        assert_eq!((checks[1].observed, checks[1].expected), (38, 38));
        assert!(checks[1].pass());
        // voluntary: 2105 - 2000 final switches = 105 = nvcsw 106 - 1 at exec (the pre_exec read).
        assert_eq!(
            (checks[2].observed, checks[2].expected, checks[2].tolerance),
            (105, 105, 0)
        );
        assert!(checks[2].pass());
        assert!(checks[3].pass());
        assert!(!r.cross_checks(&RUSAGE, Some((1_999, "spawned")))[3].pass());
        // One switch off is a failure: these are exact.
        let r = report(
            Some(Attach::TpBtf),
            Some(CutCounts {
                switches_involuntary: 41,
                ..counts(10_000)
            }),
        );
        assert_eq!(
            r.cross_checks(&RUSAGE, Some((2_000, "spawned")))[1].verdict,
            Verdict::Fail
        );
    }

    #[test]
    fn without_a_thread_count_there_is_no_threads_check() {
        let r = report(Some(Attach::TpBtf), Some(counts(10_000)));
        let with = r.cross_checks(&RUSAGE, Some((2_000, "the command's --tasks")));
        assert_eq!(with.len(), 4);
        assert!(with[3].basis.ends_with("expected = the command's --tasks"));
        let without = r.cross_checks(&RUSAGE, None);
        assert_eq!(without.len(), 3);
        assert!(without
            .iter()
            .all(|c| c.name != "threads created vs spawned"));
    }

    #[test]
    fn rusage_inside_the_entry_to_return_window_passes_and_outside_fails() {
        let mut r = report(Some(Attach::TpBtf), Some(counts(10_000)));
        let window = r.rusage_basis.at_last_getrusage.as_mut().unwrap();
        // Four voluntary switches by other threads while getrusage was summing.
        window.returned.switches_voluntary += 4;
        let vol = |r: &Report, nvcsw| {
            let rusage = Rusage { nvcsw, ..RUSAGE };
            r.cross_checks(&rusage, Some((2_000, "spawned")))[2].clone()
        };
        for nvcsw in 106..=110 {
            let c = vol(&r, nvcsw);
            assert!(c.pass() && c.difference() == 0, "{c:?}");
        }
        assert_eq!(
            (vol(&r, 105).verdict, vol(&r, 105).difference()),
            (Verdict::Fail, 1)
        );
        assert_eq!(
            (vol(&r, 111).verdict, vol(&r, 111).difference()),
            (Verdict::Fail, -1)
        );
    }

    #[test]
    fn the_leaders_switches_while_reaped_may_be_in_wait4s_rusage_or_not() {
        // Command mode: no cut at a getrusage of its own, so the totals meet wait4's rusage.
        let mut r = report(Some(Attach::TpBtf), None);
        r.rusage_basis.total = CutCounts {
            switches_voluntary_while_reaped: 1,
            switches_involuntary_while_reaped: 1,
            ..counts(10_000)
        };
        let checks = |r: &Report, nvcsw, nivcsw| {
            let rusage = Rusage {
                nvcsw,
                nivcsw,
                ..RUSAGE
            };
            r.cross_checks(&rusage, None)
        };
        // The reaper summed the leader's counters before its last switch (one fewer), or after.
        for (nvcsw, nivcsw) in [(105, 37), (106, 38)] {
            let c = checks(&r, nvcsw, nivcsw);
            assert!(c[1].pass() && c[2].pass(), "{c:?}");
        }
        let c = checks(&r, 106, 38);
        assert_eq!((c[2].observed, c[2].observed_max), (104, 105));
        assert!(c[2]
            .basis
            .contains("1 of the leader's after its parent began reaping it"));
        // Only that one: two fewer, or one more, is still a failure.
        let c = checks(&r, 104, 36);
        assert_eq!((c[1].verdict, c[2].verdict), (Verdict::Fail, Verdict::Fail));
        let c = checks(&r, 107, 39);
        assert_eq!((c[1].verdict, c[2].verdict), (Verdict::Fail, Verdict::Fail));
        // Without such switches the check stays exact.
        r.rusage_basis.total = counts(10_000);
        let c = checks(&r, 105, 38);
        assert_eq!(c[2].verdict, Verdict::Fail);
        assert!(!c[2].basis.contains("reaping"));
    }

    #[test]
    fn missing_probes_and_missing_cuts_are_said_not_hidden() {
        let r = report(None, Some(counts(10_000)));
        let checks = r.cross_checks(&RUSAGE, Some((2_000, "spawned")));
        assert!(checks.iter().all(|c| c.verdict == Verdict::NotMeasured));
        assert!(checks[0]
            .basis
            .starts_with("missing probe exceptions:page_fault_user"));
        let r = report(Some(Attach::TpBtf), None);
        let checks = r.cross_checks(&RUSAGE, Some((2_000, "spawned")));
        assert_eq!(checks[0].observed, 999_999);
        assert!(
            checks[0].basis.contains("counts are totals"),
            "{}",
            checks[0].basis
        );
    }
}
