//! `spawnscope syscall-cost`'s terminal view: each state's median ns a getppid() call, and what
//! the differences say.

use std::fmt::Write;

use crate::analyse::syscall_cost::Figures;
use crate::record::syscall_cost::{Measured, State};
use crate::units::count;

pub fn text(m: &Measured, f: &Figures) -> String {
    let cycles = m
        .rounds
        .iter()
        .filter(|r| r.state == State::StatisticsOn)
        .count();
    let calls = m.rounds.first().map_or(0, |r| r.calls);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "what the probes' raw_syscalls pair costs a syscall (kernel {}, {} CPUs): getppid(), {} cycles of a round of {} calls untraced, traced, with the statistics on and traced again (one more untraced round at the end), median ns a call",
        m.kernel,
        m.cpus,
        cycles,
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
    if !f.timed.is_empty() {
        let timed: Vec<String> = f
            .timed
            .iter()
            .map(|p| format!("{} {:.1} ns", p.program, p.ns_per_run))
            .collect();
        let _ = writeln!(
            out,
            "  the pair's ns per run as the statistics time it: {} (each from their first clock read to their second)",
            timed.join(", ")
        );
    }
    out
}
