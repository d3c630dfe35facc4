//! The Go runtime's Ps and Ms as people read them (summary.md's "Go Ps" section, the terminal's
//! line): per P, time held by an M and idle as shares of the window, handoffs and steals; per M,
//! time holding a P and without one.

use std::fmt::Write;

use crate::table::Table;
use analyse::runtimes::go_procs::GoProcsFigures;
use units::{count, in_unit};

/// The Ms listed in summary.md, most holding first; the rest are summed in a line.
const MS_LISTED: usize = 24;

fn ns(v: u64) -> String {
    in_unit(v as f64, "ns")
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "–".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

/// summary.md's section.
pub fn markdown(md: &mut String, f: &GoProcsFigures) {
    let _ = writeln!(
        md,
        "\n## Go Ps (the runtime's processors and the Ms that held them)\n"
    );
    let w = f.window_ns;
    let _ = writeln!(
        md,
        "{} Ps over {} (the first P record to the trace's last event); {} handoffs (a P taken by another M than its last), {} steals (a P taken from an M in a syscall{}). In the Perfetto trace: a \"Go Ps\" group with a track per P (a slice `M <tid>` while that M holds it, an instant `steal`), and a \"P\" track under each M's thread.\n",
        f.ps.len(),
        ns(w),
        count(f.handoffs),
        count(f.steals),
        if f.steals_holder_unknown > 0 {
            format!("; {} of them from an M the parser had lost", count(f.steals_holder_unknown))
        } else {
            String::new()
        },
    );
    let mut t = Table::new([
        "P", "held", "share", "idle", "share", "unknown", "holds", "Ms", "handoffs", "steals",
    ])
    .right_aligned([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for p in &f.ps {
        t.row([
            p.proc.to_string(),
            ns(p.held_ns),
            share(p.held_ns, w),
            ns(p.idle_ns),
            share(p.idle_ns, w),
            ns(p.unknown_ns),
            count(p.holds),
            count(p.ms),
            count(p.handoffs),
            count(p.steals),
        ]);
    }
    md.push_str(&t.markdown());
    let mut ms: Vec<_> = f.ms.iter().collect();
    ms.sort_by(|a, b| b.holding_ns.cmp(&a.holding_ns).then(a.tid.cmp(&b.tid)));
    let mut t = Table::new([
        "M (TID)",
        "holding a P",
        "share",
        "without a P",
        "share",
        "Ps held",
        "holds",
        "stolen from it",
        "stole",
    ])
    .right_aligned([1, 2, 3, 4, 6, 7, 8]);
    for m in ms.iter().take(MS_LISTED) {
        t.row([
            m.tid.to_string(),
            ns(m.holding_ns),
            share(m.holding_ns, w),
            ns(m.without_p_ns),
            share(m.without_p_ns, w),
            m.ps.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            count(m.holds),
            count(m.stolen_from),
            count(m.stole),
        ]);
    }
    md.push('\n');
    md.push_str(&t.markdown());
    if ms.len() > MS_LISTED {
        let rest = &ms[MS_LISTED..];
        let _ = writeln!(
            md,
            "\n{} more Ms, holding a P {} in all.",
            rest.len(),
            ns(rest.iter().map(|m| m.holding_ns).sum())
        );
    }
    let _ = writeln!(
        md,
        "\nShares are of the window; an M's time without a P is between its first and last P event (a blocked syscall, spinning, parked; sysmon holds none). Method: {}.",
        f.method
    );
    for note in &f.notes {
        let _ = writeln!(md, "- {note}");
    }
}

/// The terminal's line.
pub fn terminal_line(f: &GoProcsFigures) -> String {
    let held: u64 = f.ps.iter().map(|p| p.held_ns).sum();
    let possible = f.window_ns * f.ps.len() as u64;
    format!(
        "Go Ps: {} Ps held {} of their time by {} Ms; {} handoffs, {} steals",
        f.ps.len(),
        share(held, possible),
        f.ms.iter().filter(|m| m.holds > 0).count(),
        count(f.handoffs),
        count(f.steals)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::runtimes::go_procs::{MRow, ProcRow};

    #[test]
    fn the_section_shows_each_p_and_m_with_its_share() {
        let f = GoProcsFigures {
            method: "m".into(),
            records: 4,
            window_ns: 4_000,
            ps: vec![ProcRow {
                proc: 0,
                held_ns: 3_000,
                idle_ns: 1_000,
                unknown_ns: 0,
                holds: 2,
                ms: 2,
                handoffs: 1,
                steals: 1,
            }],
            ms: vec![MRow {
                tid: 77,
                holding_ns: 1_000,
                without_p_ns: 500,
                span_ns: 1_500,
                ps: vec![0],
                holds: 1,
                stolen_from: 1,
                stole: 0,
            }],
            steals: 1,
            steals_holder_unknown: 0,
            handoffs: 1,
            notes: vec![],
        };
        let mut md = String::new();
        markdown(&mut md, &f);
        assert!(md.contains("## Go Ps"), "{md}");
        assert!(md.contains("75.0 %") && md.contains("25.0 %"), "{md}");
        assert!(md.contains("| 77 "), "{md}");
        assert!(terminal_line(&f).contains("75.0 %"));
    }
}
