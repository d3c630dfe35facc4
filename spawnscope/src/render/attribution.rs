//! Where the CPU time went (analyse::attribution), as summary.md's section and the terminal's lines.

use std::fmt::Write;

use crate::analyse::attribution::{Attribution, Mode, Row};
use crate::units::count;

fn secs(v: f64) -> String {
    if v >= 9.95 {
        format!("{v:.1} s")
    } else {
        format!("{v:.2} s")
    }
}

fn percent(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// The attribution table for summary.md.
pub fn markdown(a: &Attribution) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "\n## Where the CPU time went (perf samples)\n");
    let _ = writeln!(
        md,
        "{} samples ({} kernel, {} user){}{}. **{} of kernel samples fall in named categories**; {} of samples have a frame perf could not name. Seconds are each row's share of the run's rusage — system time for kernel rows ({}), user time for user rows ({}).{}",
        count(a.samples),
        count(a.kernel_samples),
        count(a.user_samples),
        a.freq_hz.map_or(String::new(), |hz| format!(", cpu-clock at {hz} Hz")),
        a.call_graph.as_ref().map_or(String::new(), |c| format!(", call graph {c}")),
        percent(a.named_kernel_share),
        percent(a.unresolved_share),
        secs(a.rusage_sys_s),
        secs(a.rusage_user_s),
        a.flame_graph.as_ref().map_or(String::new(), |f| format!(" Flame graph: [{f}]({f}).")),
    );
    let show_phases = a.phases.len() > 1;
    let _ = write!(md, "\n| category | samples | share | seconds |");
    if show_phases {
        for p in &a.phases {
            let _ = write!(md, " {p} |");
        }
    }
    let _ = writeln!(md, " mostly in | entered from |");
    let _ = write!(md, "|---|---:|---:|---:|");
    if show_phases {
        md.push_str(&"---:|".repeat(a.phases.len()));
    }
    md.push_str("---|---|\n");
    for mode in [Mode::Kernel, Mode::User] {
        let rows: Vec<&Row> = a.rows.iter().filter(|r| r.mode == mode).collect();
        let total: u64 = rows.iter().map(|r| r.samples).sum();
        let seconds: f64 = rows.iter().map(|r| r.seconds).sum();
        let name = match mode {
            Mode::Kernel => "**kernel (system time)**",
            Mode::User => "**user**",
        };
        let _ = write!(
            md,
            "| {name} | {} | | **{}** |",
            count(total),
            secs(seconds)
        );
        if show_phases {
            for i in 0..a.phases.len() {
                let s: f64 = rows.iter().map(|r| r.phase_seconds[i]).sum();
                let _ = write!(md, " {} |", secs(s));
            }
        }
        md.push_str(" | |\n");
        for r in rows.iter().filter(|r| r.samples > 0) {
            let _ = write!(
                md,
                "| {} | {} | {} | {} |",
                r.label,
                count(r.samples),
                percent(r.share),
                secs(r.seconds)
            );
            if show_phases {
                for s in &r.phase_seconds {
                    let _ = write!(md, " {} |", secs(*s));
                }
            }
            let first = |v: &[(String, u64)]| {
                v.first().map_or(String::new(), |(p, _)| {
                    format!("`{}`", p.replace('|', "\\|"))
                })
            };
            let _ = writeln!(md, " {} | {} |", first(&r.top_paths), first(&r.top_callers));
        }
    }
    for note in &a.notes {
        let _ = writeln!(md, "\n- {note}");
    }
    md
}

/// The same, compact, for the terminal.
pub fn terminal(a: &Attribution) -> String {
    let mut out = format!(
        "  where the CPU time went ({} perf samples; {} of kernel samples named):\n",
        count(a.samples),
        percent(a.named_kernel_share)
    );
    for r in a.rows.iter().filter(|r| r.samples > 0) {
        let mode = match r.mode {
            Mode::Kernel => "sys ",
            Mode::User => "user",
        };
        let _ = writeln!(
            out,
            "\t{mode} {:<52} {:>6} {:>9}",
            r.label,
            percent(r.share),
            secs(r.seconds)
        );
    }
    out
}
