//! The run's processes at the moment memory was measured (analyse::memory::processes) as a table:
//! the largest rows, the rest folded into one, and the terminal's line on them.

use crate::memory::per_task::kb;
use crate::table::Table;
use analyse::memory::processes::{ProcessRow, Processes};
use analyse::run::summary::Summary;
use std::fmt::Write;
use units::count;

/// Rows of the processes' table shown in summary.md and on the terminal: a processes run holds
/// one process per task (summary.json keeps every row).
pub(crate) const TREE_ROWS_MD: usize = 20;

pub(crate) const TREE_ROWS_TERMINAL: usize = 6;

/// The rows shown when there are more than `most`: the launchers, then the processes holding the
/// most (PSS, else RSS), in PID order; the others summed in one last row.
fn shown_rows(p: &Processes, most: usize) -> (Vec<&ProcessRow>, Vec<&ProcessRow>) {
    if p.rows.len() <= most {
        return (p.rows.iter().collect(), Vec::new());
    }
    let mut by_weight: Vec<&ProcessRow> = p.rows.iter().collect();
    by_weight.sort_by_key(|r| {
        (
            !r.launcher,
            std::cmp::Reverse(r.pss_kb.or(r.rss_kb).unwrap_or(0)),
            r.pid,
        )
    });
    let rest = by_weight.split_off(most.saturating_sub(1).max(1));
    by_weight.sort_by_key(|r| r.pid);
    (by_weight, rest)
}

/// The run's processes at the moment measured, one row each — at most `most` rows, the rest
/// summed in the last ("N more processes").
pub fn processes_table(p: &Processes, most: usize) -> Table {
    let opt_kb = |v: Option<u64>| v.map_or("—".into(), |v| kb(v as f64));
    let opt_fkb = |v: Option<f64>| v.map_or("—".into(), kb);
    let mut t = Table::new([
        "PID",
        "command",
        "threads",
        "CPU",
        "RSS",
        "PSS",
        "USS",
        "kernel stacks",
        "page tables",
        "task and mm structs (est.)",
        "holds",
    ])
    .right_aligned([0, 2, 3, 4, 5, 6, 7, 8, 9]);
    let (shown, rest) = shown_rows(p, most);
    for r in shown {
        t.row([
            r.pid.to_string(),
            r.command.clone(),
            count(r.threads),
            r.cpu_s.map_or("—".into(), |c| format!("{c:.2} s")),
            opt_kb(r.rss_kb),
            opt_kb(r.pss_kb),
            opt_kb(r.uss_kb),
            opt_fkb(r.kernel_stack_kb),
            opt_kb(r.page_tables_kb),
            opt_fkb(r.task_slab_kb),
            if r.launcher { "launcher" } else { "tasks" }.to_string(),
        ]);
    }
    if !rest.is_empty() {
        // A sum where every row has the figure, else "—": a partial sum would read as the whole.
        let sum_u = |f: fn(&ProcessRow) -> Option<u64>| {
            rest.iter()
                .map(|r| f(r))
                .sum::<Option<u64>>()
                .map_or("—".into(), |v| kb(v as f64))
        };
        let sum_f =
            |f: fn(&ProcessRow) -> Option<f64>| rest.iter().map(|r| f(r)).sum::<Option<f64>>();
        let launchers = rest.iter().filter(|r| r.launcher).count();
        t.row([
            "…".into(),
            format!("{} more processes, summed", count(rest.len() as u64)),
            count(rest.iter().map(|r| r.threads).sum()),
            sum_f(|r| r.cpu_s).map_or("—".into(), |c| format!("{c:.2} s")),
            // RSS summed counts a shared page once per process: said as such, never the tree's.
            format!("{} (summed)", sum_u(|r| r.rss_kb)),
            sum_u(|r| r.pss_kb),
            sum_u(|r| r.uss_kb),
            sum_f(|r| r.kernel_stack_kb).map_or("—".into(), kb),
            sum_u(|r| r.page_tables_kb),
            sum_f(|r| r.task_slab_kb).map_or("—".into(), kb),
            if launchers > 0 {
                format!("tasks ({launchers} launchers)")
            } else {
                "tasks".into()
            },
        ]);
    }
    t
}

/// Under the processes' table: the tree summed by PSS, how the kernel parts were read, and the
/// launchers with their memory beside the per-task figure.
pub(crate) fn processes_line(s: &Summary, p: &Processes) -> String {
    let mut line = match p.pss_kb {
        Some(pss) => format!(
            "Summed by PSS, the {} held {} (each page once, however many of them map it; RSS is not summed: it counts a shared page once per process).",
            if p.rows.len() == 1 { "process".to_string() } else { format!("{} processes", count(p.rows.len() as u64)) },
            kb(pss as f64)
        ),
        None => "Not summed: smaps_rollup was not read for every process at this moment (RSS is not summed in its place: it counts a shared page once per process).".into(),
    };
    let _ = write!(
        line,
        " Kernel stacks: threads × {} (the host's KernelStack over its tasks); task and mm structs: {}.",
        p.kernel_stack_size_kb.map_or("?".into(), kb),
        p.task_slab_estimate
    );
    let launchers: Vec<String> = p
        .rows
        .iter()
        .filter(|r| r.launcher)
        .map(|r| format!("PID {} {}", r.pid, r.command))
        .collect();
    if !launchers.is_empty() {
        let held = match (
            s.memory_per_task.as_ref().and_then(|m| m.launchers_kb),
            s.alive_at_peak,
        ) {
            (Some(per), Some(alive)) => format!(
                ": {} in all ({} per task), said beside the per-task figure, not in it",
                kb(per * alive as f64),
                kb(per)
            ),
            _ => String::new(),
        };
        let _ = write!(
            line,
            " Launchers (processes that hold none of the tasks: one that started another process of the run and runs no more threads than it has children there, or fewer than a process below it): {}{held}.",
            launchers.join(", ")
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_of_a_thousand_processes_shows_its_launcher_and_heaviest_and_sums_the_rest() {
        let row = |pid: u32, pss: u64, launcher: bool| ProcessRow {
            pid,
            command: format!("p{pid}"),
            threads: 1,
            rss_kb: Some(500),
            pss_kb: Some(pss),
            uss_kb: Some(40),
            launcher,
            ..ProcessRow::default()
        };
        let mut rows = vec![row(1, 700, true)];
        rows.extend((2..=1001).map(|pid| row(pid, if pid == 500 { 90 } else { 45 }, false)));
        let p = Processes {
            rows,
            ..Processes::default()
        };
        let t = processes_table(&p, 6);
        assert_eq!(t.rows.len(), 6);
        let first: Vec<&str> = t.rows.iter().map(|r| r[0].text()).collect();
        assert_eq!(first[0], "1", "the launcher first: {first:?}");
        assert!(first.contains(&"500"), "the heaviest: {first:?}");
        let last: Vec<&str> = t.rows[5].iter().map(|c| c.text()).collect();
        assert_eq!(last[1], "996 more processes, summed");
        assert_eq!(last[2], "996");
        assert_eq!(last[5], kb(996.0 * 45.0));
        // A small tree is shown whole.
        let small = Processes {
            rows: p.rows[..3].to_vec(),
            ..Processes::default()
        };
        assert_eq!(processes_table(&small, 6).rows.len(), 3);
    }
}
