//! Where the CPU time went (analyse::time::attribution), as summary.md's section and the terminal's lines.

use std::fmt::Write;

use crate::table::{Cell, Table};
use analyse::time::attribution::{Attribution, Mode, Row};
use units::count;

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

/// The attribution table: a subtotal row for kernel, then its categories, then the same for
/// user; seconds per phase when the run marked more than one.
pub fn table(a: &Attribution) -> Table {
    let show_phases = a.phases.len() > 1;
    let phases: &[String] = if show_phases { &a.phases } else { &[] };
    let mut header: Vec<Cell> = ["category", "samples", "share", "seconds"]
        .map(Cell::from)
        .into();
    header.extend(phases.iter().map(Cell::from));
    header.extend(["mostly in", "entered from"].map(Cell::from));
    let mut t = Table::new(header).right_aligned(1..4 + phases.len());
    for mode in [Mode::Kernel, Mode::User] {
        let rows: Vec<&Row> = a.rows.iter().filter(|r| r.mode == mode).collect();
        let total: u64 = rows.iter().map(|r| r.samples).sum();
        let seconds: f64 = rows.iter().map(|r| r.seconds).sum();
        let name = match mode {
            Mode::Kernel => "**kernel (system time)**",
            Mode::User => "**user**",
        };
        let mut cells = vec![
            Cell::from(name),
            count(total).into(),
            Cell::Blank,
            format!("**{}**", secs(seconds)).into(),
        ];
        cells.extend((0..phases.len()).map(|i| {
            let s: f64 = rows.iter().map(|r| r.phase_seconds[i]).sum();
            Cell::from(secs(s))
        }));
        cells.extend([Cell::Blank, Cell::Blank]);
        t.row(cells);
        for r in rows.iter().filter(|r| r.samples > 0) {
            let first =
                |v: &[(String, u64)]| v.first().map_or(String::new(), |(p, _)| format!("`{p}`"));
            let mut cells = vec![
                r.label.clone(),
                count(r.samples),
                percent(r.share),
                secs(r.seconds),
            ];
            if show_phases {
                cells.extend(r.phase_seconds.iter().map(|s| secs(*s)));
            }
            cells.extend([first(&r.top_paths), first(&r.top_callers)]);
            t.row(cells);
        }
    }
    t
}

/// The attribution section of summary.md.
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
    md.push('\n');
    md.push_str(&table(a).markdown());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: Mode, label: &str, samples: u64, path: &str, caller: &str) -> Row {
        Row {
            category: label.into(),
            label: label.into(),
            mode,
            samples,
            share: 0.5,
            seconds: 0.25,
            phase_seconds: vec![0.05, 0.2],
            top_paths: vec![(path.into(), samples)],
            top_callers: if caller.is_empty() {
                Vec::new()
            } else {
                vec![(caller.into(), samples)]
            },
        }
    }

    #[test]
    fn subtotals_then_categories_with_phases() {
        let a = Attribution {
            samples: 30,
            kernel_samples: 20,
            user_samples: 10,
            phases: vec!["spawn".into(), "join".into()],
            rows: vec![
                row(Mode::Kernel, "page faults", 20, "exc_page_fault", "a|b"),
                row(Mode::Kernel, "idle", 0, "x", "y"),
                row(Mode::User, "user, unclassified", 10, "main", ""),
            ],
            ..Default::default()
        };
        let md = table(&a).markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines,
            [
                "| category | samples | share | seconds | spawn | join | mostly in | entered from |",
                "|---|---:|---:|---:|---:|---:|---|---|",
                "| **kernel (system time)** | 20 | | **0.50 s** | 0.10 s | 0.40 s | | |",
                "| page faults | 20 | 50.0 % | 0.25 s | 0.05 s | 0.20 s | `exc_page_fault` | `a\\|b` |",
                "| **user** | 10 | | **0.25 s** | 0.05 s | 0.20 s | | |",
                "| user, unclassified | 10 | 50.0 % | 0.25 s | 0.05 s | 0.20 s | `main` |  |",
            ]
        );
        // One phase: no phase columns.
        let one = Attribution {
            phases: vec!["all".into()],
            ..a
        };
        assert!(table(&one)
            .markdown()
            .starts_with("| category | samples | share | seconds | mostly in | entered from |\n|---|---:|---:|---:|---|---|\n"));
    }
}
