//! `spawnscope syscall-cost`'s terminal view: each state's median ns a getppid() call, and what
//! the differences say.

use std::fmt::Write;

use crate::analyse::syscall_cost::Figures;
use crate::measure::syscall_cost::{Measured, State};
use crate::units::count;

pub fn text(m: &Measured, f: &Figures) -> String {
    let rounds = m
        .rounds
        .iter()
        .filter(|r| r.state == State::StatisticsOn)
        .count();
    let calls = m.rounds.first().map_or(0, |r| r.calls);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "what the probes' raw_syscalls pair costs a syscall (kernel {}, {} CPUs): getppid(), {} rounds of {} calls with the statistics on and twice as many in the other states (before and after), median ns a call",
        m.kernel,
        m.cpus,
        rounds,
        count(calls)
    );
    let _ = writeln!(
        out,
        "  untraced:                                {:>7.1} ns",
        f.untraced_ns
    );
    let _ = writeln!(
        out,
        "  lean probes attached, statistics off:    {:>7.1} ns: {:+.1} ns a syscall (the tracing slow path, two tracepoint dispatches, two programs that return at their first test; in no program's time)",
        f.traced_ns, f.pair_ns_per_syscall
    );
    let _ = writeln!(
        out,
        "  the kernel's run-time statistics on:     {:>7.1} ns: {:+.1} ns a program run (two clock reads and a counter update)",
        f.statistics_on_ns, f.statistics_ns_per_run
    );
    let timed: Vec<String> = m
        .programs
        .iter()
        .filter_map(|p| {
            p.timed_ns_per_run
                .map(|ns| format!("{} {ns:.1} ns over {} runs", p.program, count(p.timed_runs)))
        })
        .collect();
    if !timed.is_empty() {
        let _ = writeln!(
            out,
            "  the statistics' own ns per run of the pair: {} (each spans the program and the statistics' second clock read)",
            timed.join(", ")
        );
    }
    out
}
