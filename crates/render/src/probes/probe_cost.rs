//! `spawnscope probe-cost`'s terminal view: one row per hook, the lean program against its floor
//! (from the loop's time and from the kernel's statistics), then the states listed, not judged.

use std::fmt::Write;

use analyse::probes::probe_cost::{Figures, StateFigures, WITHIN_FLOOR_TIMES};
use record::probe_cost::NOT_LOOPED;
use record::probe_cost::{Measured, State};
use units::count;

fn ns(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "–".into()
    }
}

fn times(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}×")
    } else {
        "–".into()
    }
}

pub fn text(m: &Measured, f: &Figures) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "what each lean probe program costs an event of its hook, against the floor of that hook (one per-CPU array increment); kernel {}, {} CPUs, load {:.2} before and {:.2} after; {} cycles, each hook's loop timed untraced, then with each program attached, the statistics off and on; medians",
        m.kernel, m.cpus, m.load_before, m.load_after, m.cycles
    );
    let _ = writeln!(
        out,
        "\n| hook | loop | events an iteration | ours ns/run (statistics) | floor | ours − floor | ours / floor | ours ns/event (loop) | floor | ours / floor |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for h in &f.hooks {
        let events = h
            .states
            .iter()
            .find(|s| s.state == State::Lean)
            .map_or(f64::NAN, |s| s.events_per_iteration);
        let lp = h.loop_does.split(':').next().unwrap_or("");
        match &h.judged {
            Some(j) => {
                let _ = writeln!(
                    out,
                    "| {} | {lp} | {:.2} | {} | {} | {} | {}{} | {} | {} | {} |",
                    h.hook,
                    events,
                    ns(j.ours_ns),
                    ns(j.floor_ns),
                    ns(j.over_floor_ns),
                    times(j.times_floor),
                    if j.within { "" } else { " ⚠" },
                    ns(j.ours_loop_ns),
                    ns(j.floor_loop_ns),
                    times(j.loop_times_floor),
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "| {} | {lp} | {events:.2} | not timed against its floor | | | | | | |",
                    h.hook
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "\n⚠: over {WITHIN_FLOOR_TIMES}× its floor by the statistics (judged: the program alone, from their first clock read to their second, what a cut changes). The loop's figure is what the workload paid an event (dispatch, program, caches): where an iteration takes microseconds (spawn, f_pos_lock) it is within the loop's noise."
    );
    let _ = writeln!(
        out,
        "\nlisted, not judged: ns an event from the loop (the statistics' ns a run)"
    );
    let _ = writeln!(
        out,
        "| hook | filtered out (another run's) | full probes | with the trace (--perfetto) | the statistics add a run |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for h in &f.hooks {
        let cell = |state: State| {
            h.states.iter().find(|s| s.state == state).map_or(
                "–".to_string(),
                |s: &StateFigures| {
                    format!(
                        "{} ({})",
                        ns(s.loop_ns_per_event),
                        ns(s.statistics_ns_per_run)
                    )
                },
            )
        };
        let added = h
            .states
            .iter()
            .find(|s| s.state == State::Lean)
            .map_or("–".to_string(), |s| ns(s.statistics_add_ns_per_run));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {added} |",
            h.hook,
            cell(State::Filtered),
            cell(State::Full),
            cell(State::Trace)
        );
    }
    let _ = writeln!(
        out,
        "\ncold: the statistics' ns a run with the CPU's own caches emptied before each event (the lean program's maps sized for a run of 100,000 threads), against the warm figure above; coldest: every cache emptied"
    );
    let _ = writeln!(
        out,
        "| hook | events an iteration | ours cold | floor cold | ours − floor | ours cold / warm | ours coldest |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for h in &f.hooks {
        match &h.cold {
            Some(c) => {
                let _ = writeln!(
                    out,
                    "| {} | {:.2} | {} | {} | {} | {} | {} |",
                    h.hook,
                    c.events_per_iteration,
                    ns(c.ours_ns),
                    ns(c.floor_ns),
                    ns(c.over_floor_ns),
                    times(c.times_warm),
                    ns(c.coldest_ns.unwrap_or(f64::NAN))
                );
            }
            None => {
                let _ = writeln!(out, "| {} | not timed cold | | | | | |", h.hook);
            }
        }
    }
    let _ = writeln!(out, "\nloops (iterations a round, and a cold round):");
    for l in &m.loops {
        let _ = writeln!(
            out,
            "  {}: {} × {}; cold {} × and coldest {} × ({})",
            l.hook,
            count(l.iterations),
            l.loop_does,
            count(l.cold_iterations),
            count(l.coldest_iterations),
            l.cold_does
        );
    }
    for why in &m.left_out {
        let _ = writeln!(out, "not timed: {why}");
    }
    for (hook, why) in NOT_LOOPED {
        let _ = writeln!(out, "no loop: {hook}: {why}");
    }
    out
}
