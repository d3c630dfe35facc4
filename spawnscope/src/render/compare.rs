//! A comparison (analyse::compare) as people and spreadsheets read it: compare.md, compare.csv
//! (one row per cell), compare-fits.csv (one row per fitted line), and the machines' lines.

use std::fmt::Write;

use crate::analyse::compare::{Cell, CompareReport, Fit, Machine, Over};
use crate::analyse::regression::Spread;
use crate::analyse::reproduce::Reproduce;
use crate::record::Fingerprint;
use crate::units::{bytes, count};

fn spread_cell(s: &Option<Spread>, digits: usize) -> String {
    match s {
        Some(s) if s.min == s.max => format!("{:.*}", digits, s.median),
        Some(s) => format!(
            "{:.*} ({:.*} … {:.*})",
            digits, s.median, digits, s.min, digits, s.max
        ),
        None => "—".into(),
    }
}

fn kb_spread(s: &Option<Spread>) -> String {
    match s {
        Some(s) if s.min == s.max => bytes(s.median * 1024.0),
        Some(s) => format!(
            "{} ({} … {})",
            bytes(s.median * 1024.0),
            bytes(s.min * 1024.0),
            bytes(s.max * 1024.0)
        ),
        None => "—".into(),
    }
}

/// The slope and intercept in the metric's unit, readable.
pub fn fit_figures(f: &Fit) -> (String, String) {
    let l = &f.line;
    let se = |scale: &dyn Fn(f64) -> String| {
        l.slope_stderr
            .map_or(String::new(), |e| format!(" ± {}", scale(e)))
    };
    match f.unit.as_str() {
        "kB" => {
            let b = |v: f64| bytes(v * 1024.0);
            (format!("{}{}", b(l.slope), se(&b)), b(l.intercept))
        }
        "µs" => {
            let us = |v: f64| format!("{v:.2} µs");
            let fixed = if l.intercept.abs() >= 1e6 {
                format!("{:.2} s", l.intercept / 1e6)
            } else {
                format!("{:.1} ms", l.intercept / 1e3)
            };
            (format!("{}{}", us(l.slope), se(&us)), fixed)
        }
        _ => {
            let c = |v: f64| format!("{v:.3}");
            (
                format!("{}{}", c(l.slope), se(&c)),
                format!("{:.0}", l.intercept),
            )
        }
    }
}

pub fn machine_line(m: &Fingerprint) -> String {
    let host = if m.hostname.is_empty() {
        "?"
    } else {
        &m.hostname
    };
    format!("{host}: {}; cgroup {}", m.describe(), m.cgroup)
}

/// compare.md: hyperfine-like tables.
pub fn markdown(r: &CompareReport) -> String {
    let mut md = String::from("# spawnscope compare\n\n");
    for m in &r.machines {
        let _ = writeln!(md, "- Machine {}", machine_line_with_id(m));
    }
    if let Some(plan) = &r.plan {
        let _ = writeln!(
            md,
            "- Repeats: {}{}",
            plan.repeats,
            plan.reproduce
                .as_ref()
                .map_or(String::new(), |p| format!("; reproducing {p}"))
        );
        for c in plan.cells.iter().filter(|c| c.note.is_some()) {
            let _ = writeln!(md, "- {}", c.note.as_deref().unwrap_or(""));
        }
        if let Some(why) = &plan.stopped {
            let _ = writeln!(md, "- Stopped early: {why}");
        }
    }
    let multi = r.machines.len() > 1;
    let _ = writeln!(
        md,
        "\n## Runs: median (min … max) over repeats\n\n{}| runtime | workload | N | runs complete / measured / all | alive at peak | wall [s] | user [s] | system [s] | memory / task alive | RSS / task | kernel stack / task | page tables / task | slab / task |\n{}|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        if multi { "| machine " } else { "" },
        if multi { "|---" } else { "" }
    );
    for c in &r.cells {
        let _ = writeln!(
            md,
            "{}| {} | {} | {} | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            if multi {
                format!("| {} ", c.machine)
            } else {
                String::new()
            },
            c.runtime,
            c.workload,
            count(c.n),
            c.ok_runs,
            c.measured_runs,
            c.runs,
            c.alive_at_peak
                .map_or("—".into(), |s| count(s.median as u64)),
            spread_cell(&c.wall_s, 2),
            spread_cell(&c.user_s, 2),
            spread_cell(&c.sys_s, 2),
            kb_spread(&c.memory_kb),
            kb_spread(&c.rss_kb),
            kb_spread(&c.kernel_stack_kb),
            kb_spread(&c.page_tables_kb),
            kb_spread(&c.slab_kb),
        );
    }
    let _ = writeln!(
        md,
        "\n## Per task by regression over N\n\nslope = what one more task costs; intercept = the fixed cost; memory over tasks alive at the peak, time and counts over tasks spawned; every completed repeat is a point.\n\n{}| runtime | workload | figure | per task (slope ± s.e.) | fixed (intercept) | R² | points (N values) |\n{}|---|---|---|---:|---:|---:|---:|",
        if multi { "| machine " } else { "" },
        if multi { "|---" } else { "" }
    );
    if r.fits.is_empty() {
        let _ = writeln!(
            md,
            "\nNo line: a fit needs completed runs at two N values or more."
        );
    }
    for f in &r.fits {
        let (slope, fixed) = fit_figures(f);
        let _ = writeln!(
            md,
            "{}| {} | {} | {} | {} | {} | {:.4} | {} ({}) |",
            if multi {
                format!("| {} ", f.machine)
            } else {
                String::new()
            },
            f.runtime,
            f.workload,
            f.label,
            slope,
            fixed,
            f.line.r2,
            f.line.points,
            f.line.distinct_x
        );
    }
    if let Some(rep) = &r.reproduce {
        md.push_str(&reproduce_markdown(rep));
    }
    if !r.stopped_at_limit.is_empty() {
        let _ = writeln!(
            md,
            "\n## Runs that stopped at a limit (kept: every task they had was alive and measured at the peak)\n"
        );
        for e in &r.stopped_at_limit {
            let _ = writeln!(md, "- {e}");
        }
    }
    if !r.excluded.is_empty() {
        let _ = writeln!(
            md,
            "\n## Runs with nothing measured (left out of the tables and fits)\n"
        );
        for e in &r.excluded {
            let _ = writeln!(md, "- {e}");
        }
    }
    md
}

pub fn machine_line_with_id(m: &Machine) -> String {
    format!(
        "{}, {} runs — {}",
        m.id,
        m.runs,
        machine_line(&m.fingerprint)
    )
}

pub fn reproduce_markdown(rep: &Reproduce) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## Hansen 2023, reproduced\n\nArticle figures: {}.\n",
        rep.source
    );
    let _ = writeln!(md, "| | {} |", rep.columns.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(rep.columns.len()));
    for (label, values) in &rep.rows {
        let _ = writeln!(md, "| {label} | {} |", values.join(" | "));
    }
    if !rep.caveats.is_empty() {
        md.push('\n');
        for c in &rep.caveats {
            let _ = writeln!(md, "- {c}");
        }
    }
    md
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// compare.csv: one row per cell (min / median / max of each figure).
pub fn cells_csv(r: &CompareReport) -> String {
    type Get = fn(&Cell) -> &Option<Spread>;
    let spreads: [(&str, Get); 15] = [
        ("alive_at_peak", |c| &c.alive_at_peak),
        ("wall_s", |c| &c.wall_s),
        ("user_s", |c| &c.user_s),
        ("sys_s", |c| &c.sys_s),
        ("maxrss_kb", |c| &c.maxrss_kb),
        ("memory_kb_per_task", |c| &c.memory_kb),
        ("rss_kb_per_task", |c| &c.rss_kb),
        ("kernel_stack_kb_per_task", |c| &c.kernel_stack_kb),
        ("page_tables_kb_per_task", |c| &c.page_tables_kb),
        ("slab_kb_per_task", |c| &c.slab_kb),
        ("mem_available_drop_kb_per_task", |c| {
            &c.mem_available_drop_kb
        }),
        ("wall_us_per_task", |c| &c.wall_us),
        ("user_us_per_task", |c| &c.user_us),
        ("sys_us_per_task", |c| &c.sys_us),
        ("minor_faults_per_task", |c| &c.minor_faults),
    ];
    let mut out = String::from("machine,runtime,workload,n,runs,ok_runs,measured_runs");
    for (name, _) in &spreads {
        let _ = write!(out, ",{name}_min,{name}_median,{name}_max");
    }
    out.push('\n');
    for c in &r.cells {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{}",
            csv_field(&c.machine),
            c.runtime,
            c.workload,
            c.n,
            c.runs,
            c.ok_runs,
            c.measured_runs
        );
        for (_, get) in &spreads {
            match get(c) {
                Some(s) => {
                    let _ = write!(out, ",{},{},{}", s.min, s.median, s.max);
                }
                None => out.push_str(",,,"),
            }
        }
        out.push('\n');
    }
    out
}

/// compare-fits.csv: one row per fitted line.
pub fn fits_csv(r: &CompareReport) -> String {
    let mut out = String::from(
        "machine,runtime,workload,metric,unit,over,points,distinct_n,slope,slope_stderr,intercept,r2\n",
    );
    for f in &r.fits {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&f.machine),
            f.runtime,
            f.workload,
            f.metric,
            f.unit,
            match f.over {
                Over::AliveAtPeak => "alive_at_peak",
                Over::Spawned => "spawned",
            },
            f.line.points,
            f.line.distinct_x,
            f.line.slope,
            f.line.slope_stderr.map_or(String::new(), |v| v.to_string()),
            f.line.intercept,
            f.line.r2
        );
    }
    out
}

/// Writes compare.json, compare.csv, compare-fits.csv and compare.md into `out`.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("M1 (vm)"), "M1 (vm)");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\", y"), "\"say \"\"x\"\", y\"");
    }
}
