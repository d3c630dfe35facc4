//! A comparison (analyse::comparisons::compare) as people and spreadsheets read it: compare.md, compare.csv
//! (one row per cell), compare-fits.csv (one row per fitted line), and the machines' lines.

use std::fmt::Write;

use crate::columns::{figure, label, raw_table, shown_table, Column, Raw};
use crate::comparisons::cpu_sweep::{self, runtime_label};
use crate::table::{self, Table};
use crate::time::repeats;
use analyse::comparisons::compare::{Cell, Comparison, Fit, Machine, Over};
use analyse::comparisons::regression::Spread;
use analyse::comparisons::reproduce::Reproduce;
use analyse::memory::resolution;
use analyse::time::times_from::TimesFrom;
use record::{Fingerprint, Plan};
use units::{bytes, count};

/// The cells' columns: compare.md's and report.html's runs table, and compare.csv. A new column
/// is one entry here, where it should stand in both.
const CELL_COLUMNS: &[Column<Cell>] = &[
    Column {
        shown: label("machine", |c| c.machine.clone()),
        raw: Raw::One("machine", |c| c.machine.clone()),
        several_machines: true,
    },
    Column {
        shown: label("runtime", |c| runtime_label(&c.runtime, c.cpu_count)),
        raw: Raw::One("runtime", |c| runtime_label(&c.runtime, c.cpu_count)),
        several_machines: false,
    },
    Column {
        shown: label("workload", |c| c.workload.clone()),
        raw: Raw::One("workload", |c| c.workload.clone()),
        several_machines: false,
    },
    Column {
        shown: figure("N", |c| count(c.n)),
        raw: Raw::One("n", |c| c.n.to_string()),
        several_machines: false,
    },
    Column {
        shown: figure("runs complete / measured / all", |c| {
            let runs = format!("{} / {} / {}", c.ok_runs, c.measured_runs, c.runs);
            if c.counts_wrong_runs > 0 {
                format!("{runs} {COUNTS_WRONG_MARK}")
            } else {
                runs
            }
        }),
        raw: Raw::Several(&["runs", "ok_runs", "measured_runs"], |c| {
            vec![
                c.runs.to_string(),
                c.ok_runs.to_string(),
                c.measured_runs.to_string(),
            ]
        }),
        several_machines: false,
    },
    Column {
        shown: figure("alive at peak", |c| {
            c.alive_at_peak
                .map_or("—".into(), |s| count(s.median as u64))
        }),
        raw: Raw::Spread("alive_at_peak", |c| &c.alive_at_peak),
        several_machines: false,
    },
    Column {
        shown: figure("wall [s]", |c| time_cell(c, &c.wall_s)),
        raw: Raw::Spread("wall_s", |c| &c.wall_s),
        several_machines: false,
    },
    Column {
        shown: figure("user [s]", |c| time_cell(c, &c.user_s)),
        raw: Raw::Spread("user_s", |c| &c.user_s),
        several_machines: false,
    },
    Column {
        shown: figure("system [s]", |c| time_cell(c, &c.sys_s)),
        raw: Raw::Spread("sys_s", |c| &c.sys_s),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Spread("maxrss_kib", |c| &c.maxrss_kb),
        several_machines: false,
    },
    Column {
        shown: figure("memory / task alive", |c| memory_cell(c, &c.memory_kb)),
        raw: Raw::Spread("memory_kib_per_task", |c| &c.memory_kb),
        several_machines: false,
    },
    Column {
        shown: figure("RSS / task", rss_cell),
        raw: Raw::Spread("rss_kib_per_task", |c| &c.rss_kb),
        several_machines: false,
    },
    Column {
        shown: figure("kernel stack / task", |c| {
            memory_cell(c, &c.kernel_stack_kb)
        }),
        raw: Raw::Spread("kernel_stack_kib_per_task", |c| &c.kernel_stack_kb),
        several_machines: false,
    },
    Column {
        shown: figure("page tables / task", |c| memory_cell(c, &c.page_tables_kb)),
        raw: Raw::Spread("page_tables_kib_per_task", |c| &c.page_tables_kb),
        several_machines: false,
    },
    Column {
        shown: figure("slab / task", |c| memory_cell(c, &c.slab_kb)),
        raw: Raw::Spread("slab_kib_per_task", |c| &c.slab_kb),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Spread("mem_available_drop_kib_per_task", |c| {
            &c.mem_available_drop_kb
        }),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Spread("wall_us_per_task", |c| &c.wall_us),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Spread("user_us_per_task", |c| &c.user_us),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Spread("sys_us_per_task", |c| &c.sys_us),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Spread("minor_faults_per_task", |c| &c.minor_faults),
        several_machines: false,
    },
];

/// The fitted lines' columns: compare.md's and report.html's regression table, and
/// compare-fits.csv. (compare.md shows the points last, in one column; the CSV has them as two
/// fields before the slope.)
const FIT_COLUMNS: &[Column<Fit>] = &[
    Column {
        shown: label("machine", |f| f.machine.clone()),
        raw: Raw::One("machine", |f| f.machine.clone()),
        several_machines: true,
    },
    Column {
        shown: label("runtime", |f| runtime_label(&f.runtime, f.cpu_count)),
        raw: Raw::One("runtime", |f| runtime_label(&f.runtime, f.cpu_count)),
        several_machines: false,
    },
    Column {
        shown: label("workload", |f| f.workload.clone()),
        raw: Raw::One("workload", |f| f.workload.clone()),
        several_machines: false,
    },
    Column {
        shown: label("figure", |f| f.label.clone()),
        raw: Raw::One("metric", |f| kib_named(&f.metric)),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::One("unit", |f| kib_named(&f.unit)),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::One("over", |f| {
            match f.over {
                Over::AliveAtPeak => "alive_at_peak",
                Over::Spawned => "spawned",
            }
            .to_string()
        }),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Several(&["points", "distinct_n"], |f| {
            vec![f.line.points.to_string(), f.line.distinct_x.to_string()]
        }),
        several_machines: false,
    },
    Column {
        shown: figure("per task (slope ± s.e.)", per_task_cell),
        raw: Raw::Several(&["slope", "slope_stderr"], |f| {
            vec![
                f.line.slope.to_string(),
                f.line.slope_stderr.map_or(String::new(), |v| v.to_string()),
            ]
        }),
        several_machines: false,
    },
    Column {
        shown: figure("fixed (intercept)", |f| fit_figures(f).1),
        raw: Raw::One("intercept", |f| f.line.intercept.to_string()),
        several_machines: false,
    },
    Column {
        shown: figure("R²", |f| format!("{:.4}", f.line.r2)),
        raw: Raw::One("r2", |f| f.line.r2.to_string()),
        several_machines: false,
    },
    Column {
        shown: None,
        raw: Raw::Several(&["resolved", "resolve_at_n", "resolution_note"], |f| {
            let r = &f.resolution;
            vec![
                r.resolved.to_string(),
                r.resolve_at_n.map_or(String::new(), |n| n.to_string()),
                r.resolution_note.clone(),
            ]
        }),
        several_machines: false,
    },
    Column {
        shown: figure("points (N values)", |f| {
            format!("{} ({})", f.line.points, f.line.distinct_x)
        }),
        raw: Raw::None,
        several_machines: false,
    },
];

/// A metric or unit as the CSV names it: compare.json keeps /proc's "kB" (`rss_kb`), which is
/// KiB, and a spreadsheet reader should not have to know that.
fn kib_named(name: &str) -> String {
    match name {
        "kB" => "KiB".into(),
        _ => match name.strip_suffix("_kb") {
            Some(stem) => format!("{stem}_kib"),
            None => name.into(),
        },
    }
}

/// The runs table of compare.md and report.html: one row per cell.
pub fn runs_table(r: &Comparison) -> Table {
    shown_table(CELL_COLUMNS, &r.cells, r.machines.len() > 1)
}

/// The regression table of compare.md and report.html: one row per fitted line.
pub fn fits_table(r: &Comparison) -> Table {
    shown_table(FIT_COLUMNS, &r.fits, r.machines.len() > 1)
}

/// What marks a time measured on an emulated CPU, and the note under a table that has one.
pub const EMULATED_MARK: &str = "†";
pub const EMULATED_NOTE: &str = "† the CPU was emulated (QEMU's TCG): these times are the emulator's, not the kernel's; memory and counts are real.";

/// What marks memory per task that a run of the cell held too little of to resolve, and the note
/// under a table that has one.
pub const UNRESOLVED_MARK: &str = "‡";
pub fn unresolved_note() -> String {
    format!(
        "‡ not resolved: the tasks alive at the moment measured held less than {} in all, within what free memory moves by without them (each run's summary names the N that would resolve it).",
        units::bytes(analyse::memory::resolution::MIN_HELD_KB * 1024.0)
    )
}

/// What marks a cell with a run whose counts are wrong (a cross-check failed), and the note
/// under a table that has one.
pub const COUNTS_WRONG_MARK: &str = "§";
pub const COUNTS_WRONG_NOTE: &str = "§ counts WRONG in a run of the cell: the probes' counts disagree with the kernel's own accounting (a cross-check failed; each run's summary says which, expected against counted), so the counts and waits of that run are not to be trusted.";

/// What marks a time figure every run of which is suspect, and the note under a table that has
/// one.
pub const SUSPECT_MARK: &str = analyse::comparisons::headline::SUSPECT_MARK;
pub const SUSPECT_NOTE: &str = "¶ from suspect runs only: the time verdict of every run these times are of found a sentinel past its rule (steal, CPU outside the run with who took it, memory used for the first time, memory handed back to the host…; each run's summary says which), so no trustworthy run stands behind them; memory and counts are not affected.";

/// A figure's cell with `mark` after it when `on` and there is a figure to mark.
fn marked(cell: String, s: &Option<Spread>, on: bool, mark: &str) -> String {
    if on && s.is_some() {
        format!("{cell} {mark}")
    } else {
        cell
    }
}

/// Memory per task, marked when a run of the cell held too little to resolve it.
fn memory_cell(c: &Cell, s: &Option<Spread>) -> String {
    marked(kb_spread(s), s, c.memory_unresolved, UNRESOLVED_MARK)
}

/// RSS per task; for a process tree, by PSS with its RSS summed beside it (a page the processes
/// share is in the RSS sum once per process, in PSS once).
fn rss_cell(c: &Cell) -> String {
    let rss = memory_cell(c, &c.rss_kb);
    match &c.rss_summed_kb {
        Some(_) => format!("{rss} by PSS; RSS summed {}", kb_spread(&c.rss_summed_kb)),
        None => rss,
    }
}

/// A time in seconds, marked when the cell's machine emulated its CPU.
fn time_cell(c: &Cell, s: &Option<Spread>) -> String {
    let cell = marked(spread_cell(s, 2), s, c.cpu_emulated, EMULATED_MARK);
    marked(cell, s, c.times_from_suspect_runs > 0, SUSPECT_MARK)
}

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

/// The per-task figure as people read it: the slope ± its s.e. when resolved at the N measured;
/// otherwise the verdict first and the fit after it, so that it cannot be read as a measured
/// figure.
pub fn per_task_cell(f: &Fit) -> String {
    let figures = fit_figures(f).0;
    if f.resolution.resolved {
        figures
    } else {
        format!("{}; fit: {figures}", f.resolution.resolution_note)
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

/// How long the set took, where its maker timed it: "took 74 s from its first run to the end of
/// its last, 2 warm-up runs (not counted) included".
pub fn elapsed_line(plan: &Plan) -> Option<String> {
    let s = plan.elapsed_s?;
    let warmup = match (plan.warmup_touched_bytes, plan.warmup_runs) {
        (Some(b), _) => format!(
            ", its warm-up ({} of memory written a page at a time, not counted) included",
            units::bytes(b as f64)
        ),
        (None, Some(0) | None) => String::new(),
        (None, Some(1)) => ", 1 warm-up run (not counted) included".into(),
        (None, Some(w)) => format!(", {w} warm-up runs (not counted) included"),
    };
    Some(format!(
        "took {s:.0} s from its first run to the end of its last{warmup}"
    ))
}

/// "1" or "2–3": how many runs, over several experiments.
fn runs_range(counts: impl Iterator<Item = usize> + Clone) -> (String, bool) {
    let lo = counts.clone().min().unwrap_or(0);
    let hi = counts.max().unwrap_or(0);
    let text = if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    };
    (text, hi > 1)
}

/// Where the set's time figures come from, in one line: from the untraced runs where an
/// experiment has them, counts and waits from its traced ones (analyse::time::times_from); or that the
/// times include the probes' cost. None for a set recorded before cells said so, and for one
/// whose runs were all untraced (nothing in its times is the probes', and it has no counts).
pub fn times_line(cells: &[Cell]) -> Option<String> {
    use analyse::time::times_from::TimeRuns;
    let known: Vec<(&Cell, TimesFrom)> = cells
        .iter()
        .filter_map(|c| Some((c, c.times_from?)))
        .collect();
    let mixed: Vec<TimesFrom> = known
        .iter()
        .map(|(_, t)| *t)
        .filter(|t| t.traced_left_out() > 0)
        .collect();
    let traced: Vec<&Cell> = known
        .iter()
        .filter(|(_, t)| t.runs == TimeRuns::Traced)
        .map(|(c, _)| *c)
        .collect();
    let mut said = Vec::new();
    if !mixed.is_empty() {
        let per = if mixed.len() > 1 {
            " per experiment"
        } else {
            ""
        };
        let (untraced, s) = runs_range(mixed.iter().map(|t| t.untraced_runs));
        let (counted, several) = runs_range(mixed.iter().map(|t| t.traced_runs));
        said.push(format!(
            "Times from {untraced} untraced run{}{per}; counts and waits from {counted} traced run{}{per} ({} times, probes included, are not in the medians).",
            if s { "s" } else { "" },
            if several { "s" } else { "" },
            if several { "their" } else { "its" },
        ));
    }
    if traced.len() == known.len() && !traced.is_empty() {
        said.push("Times include the probes' cost: every run was traced.".into());
    } else if !traced.is_empty() {
        let mut named: Vec<String> = Vec::new();
        for c in &traced {
            let name = format!("{} {} {}", c.runtime, c.workload, count(c.n));
            if !named.contains(&name) {
                named.push(name);
            }
        }
        said.push(format!(
            "Times of {} include the probes' cost: traced runs only.",
            named.join(", ")
        ));
    }
    (!said.is_empty()).then(|| said.join(" "))
}

/// compare.md: hyperfine-like tables.
pub fn markdown(r: &Comparison) -> String {
    let mut md = String::from("# spawnscope compare\n\n");
    for h in &r.headlines {
        let _ = writeln!(md, "**{}**\n", h.line());
    }
    for line in r.cpu_sweep.iter().flat_map(|s| &s.headlines) {
        let _ = writeln!(md, "**{line}**\n");
    }
    if let Some(line) = times_line(&r.cells) {
        let _ = writeln!(md, "{line}\n");
    }
    for m in &r.machines {
        let _ = writeln!(md, "- Machine {}", machine_line_with_id(m));
    }
    if let Some(plan) = &r.plan {
        // trace.sh's main job: `repeats` untraced runs time each cell, the traced ones count.
        let repeats = match plan.traced_runs {
            Some(t) => format!(
                "{} untraced (timed) and {t} traced (counts and waits) per experiment",
                plan.repeats
            ),
            None => plan.repeats.to_string(),
        };
        let _ = writeln!(
            md,
            "- Repeats: {repeats}{}",
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
        if let Some(line) = elapsed_line(plan) {
            let _ = writeln!(md, "- The set {line}");
        }
    }
    let _ = writeln!(md, "\n## Runs: median (min … max) over repeats\n");
    md.push_str(&runs_table(r).markdown());
    if r.cells.iter().any(|c| c.cpu_emulated) {
        let _ = writeln!(md, "\n{EMULATED_NOTE}");
    }
    if r.cells.iter().any(|c| c.memory_unresolved) {
        let _ = writeln!(md, "\n{}", unresolved_note());
    }
    if r.cells.iter().any(|c| c.counts_wrong_runs > 0) {
        let _ = writeln!(md, "\n{COUNTS_WRONG_NOTE}");
    }
    if r.cells.iter().any(|c| c.times_from_suspect_runs > 0) {
        let _ = writeln!(md, "\n{SUSPECT_NOTE}");
    }
    md.push_str(&repeats::markdown(&r.repeats));
    if let Some(sweep) = &r.cpu_sweep {
        md.push_str(&cpu_sweep::markdown(sweep));
    }
    let _ = writeln!(
        md,
        "\n## Per task by regression over N\n\nslope = what one more task costs; intercept = the fixed cost; memory over tasks alive at the peak, time and counts over tasks spawned; every completed repeat is a point.\n"
    );
    if r.fits.iter().any(|f| !f.resolution.resolved) {
        let _ = writeln!(md, "{}\n", resolution::RULE);
    }
    md.push_str(&fits_table(r).markdown());
    if r.fits.is_empty() {
        let _ = writeln!(
            md,
            "\nNo line: a fit needs completed runs at two N values or more."
        );
    }
    if let Some(rep) = &r.reproduce {
        md.push_str(&reproduce_markdown(rep));
    }
    let serving = crate::serving::sweep_table(&r.runs);
    if !serving.is_empty() {
        let _ = writeln!(md, "\n## {SERVING_TITLE}\n\n{SERVING_NOTE}\n");
        md.push_str(&serving.markdown());
    }
    if let Some(table) = scheduler_table(r) {
        let _ = writeln!(md, "\n## {SCHEDULER_TITLE}\n\n{SCHEDULER_NOTE}\n");
        md.push_str(&table.markdown());
    }
    md.push_str(&crate::traces::runtime_latency::markdown(r));
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

/// The runs recorded with `--perfetto`: wake-to-run and preempted-to-run over each whole run.
pub const SCHEDULER_TITLE: &str = "Wake-to-run and preempted-to-run (runs with a scheduler trace)";
pub const SCHEDULER_NOTE: &str = "From each run's raw trace records (`--perfetto`): a wakeup of one of the run's threads, or its switch out still runnable, to its next switch-in; over the whole run (each run's summary.md has them per phase); p50 and p99 within 1 % (HDR histogram), samples and max exact.";

/// The table of runs with a scheduler trace; None when no run has one.
pub fn scheduler_table(r: &Comparison) -> Option<crate::table::Table> {
    let traced: Vec<&analyse::comparisons::run_point::RunPoint> = r
        .runs
        .iter()
        .filter(|p| p.wake_to_run.is_some() || p.preempted_to_run.is_some())
        .collect();
    // A runtime-traced run is said so where it is listed: its own kind, not a repeat.
    let names: Vec<String> = traced
        .iter()
        .map(|p| {
            if p.runtime_traced {
                format!("{} (runtime-traced)", p.dir)
            } else {
                p.dir.clone()
            }
        })
        .collect();
    let runs: Vec<crate::traces::sched_trace::RunLatency> = traced
        .iter()
        .zip(&names)
        .map(|(p, name)| crate::traces::sched_trace::RunLatency {
            run: name,
            wake: p.wake_to_run.as_ref(),
            preempted: p.preempted_to_run.as_ref(),
        })
        .collect();
    (!runs.is_empty()).then(|| crate::traces::sched_trace::runs_table(&runs))
}

/// The serve runs' section: its title and what its columns are.
pub const SERVING_TITLE: &str = "Serving: the load, one connection and one request, by run";
pub const SERVING_NOTE: &str = "wrk's requests/s and latency; memory with every connection open, over the connections (socket buffers apart: the kernel's TCP buffers, outside RSS); CPU time and voluntary switches in the load phase, over the requests answered in it; what happened, named.";

pub fn machine_line_with_id(m: &Machine) -> String {
    format!(
        "{}, {} runs — {}",
        m.id,
        m.runs,
        machine_line(&m.fingerprint)
    )
}

/// The reproduction: the article's figures and ours, by figure.
pub fn reproduce_table(rep: &Reproduce) -> Table {
    let mut t = Table::new(
        std::iter::once(table::Cell::Blank).chain(rep.columns.iter().map(table::Cell::from)),
    )
    .right_aligned(1..=rep.columns.len());
    for (label, values) in &rep.rows {
        t.row(std::iter::once(label).chain(values));
    }
    t
}

pub fn reproduce_markdown(rep: &Reproduce) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## {}, reproduced\n\nArticle figures: {}.\n",
        rep.title, rep.source
    );
    md.push_str(&reproduce_table(rep).markdown());
    if !rep.caveats.is_empty() {
        md.push('\n');
        for c in &rep.caveats {
            let _ = writeln!(md, "- {c}");
        }
    }
    md
}

/// compare.csv: one row per cell (min / median / max of each figure).
pub fn cells_csv(r: &Comparison) -> String {
    raw_table(CELL_COLUMNS, &r.cells).csv()
}

/// compare-fits.csv: one row per fitted line.
pub fn fits_csv(r: &Comparison) -> String {
    raw_table(FIT_COLUMNS, &r.fits).csv()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Cell as TableCell;

    fn recorded() -> Comparison {
        serde_json::from_str(include_str!(
            "../../../../spawnscope/tests/fixtures/before-house/compare/compare.json"
        ))
        .unwrap()
    }

    /// The same report with its goroutine runs on a second machine.
    fn two_machines() -> Comparison {
        let mut r = recorded();
        let mut m2 = r.machines[0].clone();
        m2.id = "M2 (b,c)".into();
        m2.fingerprint.hostname = "b,c".into();
        r.machines.push(m2);
        for c in r.cells.iter_mut().filter(|c| c.runtime == "goroutines") {
            c.machine = "M2 (b,c)".into();
        }
        for f in r.fits.iter_mut().filter(|f| f.runtime == "goroutines") {
            f.machine = "M2 (b,c)".into();
        }
        r
    }

    fn md_cells(line: &str) -> Vec<String> {
        line.trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect()
    }

    fn html_headers(html: &str) -> Vec<String> {
        let head = &html[html.find("<thead>").unwrap()..html.find("</thead>").unwrap()];
        head.split("<th>")
            .skip(1)
            .map(|h| h[..h.find("</th>").unwrap()].to_string())
            .collect()
    }

    /// compare.md, compare.csv and compare-fits.csv as the binary from before the tables were one
    /// model wrote them.
    #[test]
    fn recorded_comparison_renders_byte_for_byte() {
        let r = recorded();
        assert_eq!(
            markdown(&r),
            include_str!("../../../../spawnscope/tests/fixtures/before-house/compare/compare.md")
        );
        assert_eq!(
            cells_csv(&r),
            include_str!("../../../../spawnscope/tests/fixtures/before-house/compare/compare.csv")
        );
        assert_eq!(
            fits_csv(&r),
            include_str!(
                "../../../../spawnscope/tests/fixtures/before-house/compare/compare-fits.csv"
            )
        );
    }

    #[test]
    fn runs_table_has_one_column_per_defined_column_in_every_format() {
        for (r, machines) in [(recorded(), 1), (two_machines(), 2)] {
            let shown: Vec<&str> = CELL_COLUMNS
                .iter()
                .filter(|c| machines > 1 || !c.several_machines)
                .filter_map(|c| c.shown.as_ref().map(|s| s.header))
                .collect();
            let t = runs_table(&r);
            assert_eq!(t.header.len(), shown.len());
            assert_eq!(t.header.len(), if machines > 1 { 14 } else { 13 });
            assert_eq!(t.rows.len(), r.cells.len());
            assert!(t.rows.iter().all(|row| row.len() == shown.len()));
            let headers: Vec<&str> = t.header.iter().map(TableCell::text).collect();
            assert_eq!(headers, shown);
            // Markdown and HTML show the same headers; figures are right-aligned.
            let md = t.markdown();
            let lines: Vec<&str> = md.lines().collect();
            assert_eq!(md_cells(lines[0]), shown);
            assert_eq!(lines.len(), 2 + r.cells.len());
            let rule = if machines > 1 {
                "|---|---|---|"
            } else {
                "|---|---|"
            };
            assert!(
                lines[1].starts_with(&format!("{rule}---:|")),
                "{}",
                lines[1]
            );
            assert_eq!(html_headers(&t.html("cells")), shown);
            // The CSV: every column's raw fields, the same count on every line.
            let csv = cells_csv(&r);
            let names: Vec<String> = CELL_COLUMNS.iter().flat_map(|c| c.raw.names()).collect();
            assert_eq!(names.len(), 7 + 15 * 3);
            assert_eq!(csv.lines().next().unwrap(), names.join(","));
            assert_eq!(csv.lines().count(), 1 + r.cells.len());
            // A column in no format would be a column nobody sees.
            assert!(CELL_COLUMNS
                .iter()
                .all(|c| c.shown.is_some() || !matches!(c.raw, Raw::None)));
        }
    }

    /// compare.json keeps /proc's `kB` names; what a spreadsheet reads says KiB.
    #[test]
    fn csv_names_kibibytes_so() {
        let r = recorded();
        let (cells, fits) = (cells_csv(&r), fits_csv(&r));
        let header = cells.lines().next().unwrap();
        assert!(!header.contains("_kb"), "{header}");
        assert!(header.contains("maxrss_kib_max,memory_kib_per_task_min"));
        assert!(!fits.contains("_kb,") && !fits.contains(",kB,"), "{fits}");
        assert!(fits.contains(",threads,hold,memory_total_kib,KiB,"));
        assert_eq!(kib_named("wall_us"), "wall_us");
        assert_eq!(kib_named("µs"), "µs");
    }

    #[test]
    fn a_second_machine_adds_the_machine_column_and_quotes_it_in_csv() {
        let r = two_machines();
        let md = markdown(&r);
        assert!(md.contains("| machine | runtime | workload | N |"));
        assert!(md.contains("| M2 (b,c) | goroutines | hold | 1,000 | 1 / 1 / 1 |"));
        assert!(md.contains("| machine | runtime | workload | figure | per task (slope ± s.e.) |"));
        assert!(cells_csv(&r).contains("\n\"M2 (b,c)\",goroutines,hold,1000,1,1,1,"));
        assert!(
            fits_csv(&r).contains("\n\"M2 (b,c)\",goroutines,hold,rss_kib,KiB,alive_at_peak,2,2,")
        );
        // Per line, the CSV and the Markdown have as many fields as their headers.
        let csv = cells_csv(&r);
        let width = csv.lines().next().unwrap().split(',').count();
        assert!(csv
            .lines()
            .all(|l| l.replace("\"M2 (b,c)\"", "M2").split(',').count() == width));
        let fits = fits_table(&r);
        assert_eq!(
            html_headers(&fits.html("fits")),
            md_cells(fits.markdown().lines().next().unwrap())
        );
    }

    #[test]
    fn times_from_an_emulated_cpu_are_marked_and_the_note_says_why_memory_is_not() {
        let mut r = two_machines();
        let plain = markdown(&r);
        assert!(!plain.contains(EMULATED_MARK));
        for c in r.cells.iter_mut().filter(|c| c.machine == "M2 (b,c)") {
            c.cpu_emulated = true;
        }
        let md = markdown(&r);
        assert!(md.contains(EMULATED_NOTE));
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| M2 (b,c) | goroutines | hold |"))
            .collect();
        assert!(!rows.is_empty());
        for row in rows.iter().filter(|l| l.contains(" / ")) {
            // wall, user and system: three marks; memory columns: none.
            assert_eq!(row.matches(EMULATED_MARK).count(), 3, "{row}");
        }
        assert!(md
            .lines()
            .filter(|l| l.starts_with("| M1"))
            .all(|l| !l.contains(EMULATED_MARK)));
    }

    #[test]
    fn times_from_suspect_runs_only_are_marked_with_their_legend() {
        let mut r = two_machines();
        let plain = markdown(&r);
        assert!(!plain.contains(SUSPECT_MARK) && !plain.contains(SUSPECT_NOTE));
        for c in r.cells.iter_mut().filter(|c| c.machine == "M2 (b,c)") {
            c.times_from_suspect_runs = 3;
        }
        let md = markdown(&r);
        assert!(md.contains(&format!("\n{SUSPECT_NOTE}\n")), "{md}");
        for row in md
            .lines()
            .filter(|l| l.starts_with("| M2 (b,c) | goroutines | hold |") && l.contains(" / "))
        {
            assert_eq!(
                row.matches(SUSPECT_MARK).count(),
                3,
                "wall, user, system: {row}"
            );
        }
        assert!(md
            .lines()
            .filter(|l| l.starts_with("| M1"))
            .all(|l| !l.contains(SUSPECT_MARK)));
    }

    #[test]
    fn a_cell_with_a_run_whose_counts_are_wrong_is_marked_with_its_legend() {
        let mut r = two_machines();
        let plain = markdown(&r);
        assert!(!plain.contains(COUNTS_WRONG_MARK) && !plain.contains(COUNTS_WRONG_NOTE));
        let csv = cells_csv(&r);
        for c in r.cells.iter_mut().filter(|c| c.machine == "M2 (b,c)") {
            c.counts_wrong_runs = 1;
        }
        let md = markdown(&r);
        assert!(md.contains(&format!("\n{COUNTS_WRONG_NOTE}\n")), "{md}");
        assert!(
            md.contains("| M2 (b,c) | goroutines | hold | 1,000 | 1 / 1 / 1 § |"),
            "{md}"
        );
        assert!(md
            .lines()
            .filter(|l| l.starts_with("| M1"))
            .all(|l| !l.contains(COUNTS_WRONG_MARK)));
        // compare.csv keeps its columns: the count is in compare.json.
        assert_eq!(cells_csv(&r), csv);
    }

    #[test]
    fn a_tree_cell_shows_pss_with_the_rss_summed_beside_it_and_the_csv_keeps_its_columns() {
        let mut r = two_machines();
        let csv = cells_csv(&r);
        let plain = markdown(&r);
        assert!(!plain.contains("RSS summed"));
        let c = &mut r.cells[0];
        c.rss_summed_kb = Some(Spread {
            median: 223.0,
            min: 218.0,
            max: 224.0,
        });
        let shown = rss_cell(c);
        assert!(
            shown.ends_with("by PSS; RSS summed 223 KiB (218 KiB … 224 KiB)"),
            "{shown}"
        );
        assert!(markdown(&r).contains("by PSS; RSS summed 223 KiB"));
        assert_eq!(cells_csv(&r), csv);
    }

    /// The recorded set's first two fits (threads, hold: RSS and kernel stack, N = 1,000–3,000),
    /// given a standard error of `shares` of their slopes and judged again.
    fn with_standard_errors(shares: [f64; 2]) -> Comparison {
        let mut r = recorded();
        r.fits.truncate(2);
        for (f, share) in r.fits.iter_mut().zip(shares) {
            assert!(f.line.slope > 0.0, "{f:?}");
            f.line.slope_stderr = Some(f.line.slope * share);
            f.resolution = resolution::judge(&f.line, 1_000.0, 3_000.0);
        }
        r
    }

    fn fit_row<'a>(md: &'a str, label: &str) -> &'a str {
        md.lines()
            .find(|l| l.starts_with(&format!("| threads | hold | {label} |")))
            .unwrap_or_else(|| panic!("no {label} row in {md}"))
    }

    /// What the terminal shows is compare.md (compare prints it): one check covers both.
    #[test]
    fn an_unresolved_slope_is_said_so_and_a_resolved_one_is_shown_as_a_figure() {
        let r = with_standard_errors([0.01, 0.9]);
        let (resolved, unresolved) = (&r.fits[0], &r.fits[1]);
        assert!(resolved.resolution.resolved && !unresolved.resolution.resolved);
        let md = markdown(&r);
        let row = fit_row(&md, &resolved.label);
        assert!(!row.contains("not resolved"), "{row}");
        assert!(
            row.contains(&format!("| {} |", fit_figures(resolved).0)),
            "{row}"
        );
        let row = fit_row(&md, &unresolved.label);
        let at = count(unresolved.resolution.resolve_at_n.unwrap());
        assert!(
            row.contains(&format!(
                "| not resolved at N = 1,000–3,000: s.e. 90 % of the slope; needs ≈ N = {at} (an estimate); fit: {} |",
                fit_figures(unresolved).0
            )),
            "{row}"
        );
        assert!(
            md.contains(resolution::RULE),
            "the rule is stated under the heading"
        );
        let html = crate::html::page(&r, &[], &Default::default(), &Default::default());
        assert!(html.contains("<td>not resolved at N = 1,000–3,000: s.e. 90 % of the slope"));
        assert!(html.contains(&table::escape(resolution::RULE)));
        // The CSV keeps the raw numbers and adds the verdict.
        let csv = fits_csv(&r);
        assert!(csv
            .lines()
            .next()
            .unwrap()
            .ends_with(",r2,resolved,resolve_at_n,resolution_note"));
        let line = csv.lines().nth(2).unwrap();
        assert!(
            line.contains(&format!(",{},", unresolved.line.slope)),
            "{line}"
        );
        assert!(
            line.contains(&format!(
                ",false,{},\"not resolved at N = 1,000–3,000",
                unresolved.resolution.resolve_at_n.unwrap()
            )),
            "{line}"
        );
        assert!(csv.lines().nth(1).unwrap().ends_with(",true,,"));
        // All resolved (the fits, and the runs' memory, which the recorded goroutines' is
        // not: 2–8 MiB held): no verdict and no rule.
        let mut r = with_standard_errors([0.01, 0.2]);
        for c in &mut r.cells {
            c.memory_unresolved = false;
        }
        for h in &mut r.headlines {
            h.dearer.memory_unresolved = false;
            h.cheaper.memory_unresolved = false;
        }
        let md = markdown(&r);
        assert!(
            !md.contains("not resolved") && !md.contains(resolution::RULE),
            "{md}"
        );
    }

    /// Two points (the recorded set: one run at each of two N) give no standard error: every
    /// line says so rather than standing as a figure.
    #[test]
    fn lines_through_two_points_say_they_have_no_standard_error() {
        let r = recorded();
        let t = fits_table(&r);
        let at = t
            .header
            .iter()
            .position(|h| h.text() == "per task (slope ± s.e.)")
            .unwrap();
        assert_eq!(t.rows.len(), r.fits.len());
        assert!(!r.fits.is_empty());
        for (f, row) in r.fits.iter().zip(&t.rows) {
            assert_eq!(f.line.points, 2);
            assert_eq!(
                f.resolution.unresolved,
                Some(resolution::Unresolved::NoStandardError),
                "{f:?}"
            );
            let cell = row[at].text();
            assert!(
                cell.starts_with("not resolved at N = ")
                    && cell.contains(" (2 points: no s.e.; one more N or repeat needed); fit: ")
                    && cell.ends_with(&fit_figures(f).0),
                "{cell}"
            );
        }
    }

    #[test]
    fn the_times_line_says_which_runs_the_times_are_of() {
        use analyse::time::times_from::TimeRuns;
        let from = |runs, untraced_runs, traced_runs| {
            Some(TimesFrom {
                runs,
                untraced_runs,
                traced_runs,
            })
        };
        let mut r = recorded();
        // The recorded set: every run traced.
        assert!(r
            .cells
            .iter()
            .all(|c| c.times_from == from(TimeRuns::Traced, 0, 1)));
        let line = "Times include the probes' cost: every run was traced.";
        assert_eq!(times_line(&r.cells).as_deref(), Some(line));
        // A set written before cells said so (the committed sets under docs/): no line, as
        // before.
        for c in &mut r.cells {
            c.times_from = None;
        }
        assert_eq!(times_line(&r.cells), None);
        // trace.sh's main job: three untraced runs and one traced per experiment.
        for c in &mut r.cells {
            c.times_from = from(TimeRuns::Untraced, 3, 1);
        }
        let line = "Times from 3 untraced runs per experiment; counts and waits from 1 traced run per experiment (its times, probes included, are not in the medians).";
        assert_eq!(times_line(&r.cells).as_deref(), Some(line));
        assert_eq!(
            times_line(&r.cells[..1]).as_deref(),
            Some("Times from 3 untraced runs; counts and waits from 1 traced run (its times, probes included, are not in the medians).")
        );
        // Under the headlines, before the machine.
        let md = markdown(&r);
        let at = md.find(line).unwrap();
        assert!(md[..at].ends_with("**\n\n") && md[at..].contains("\n\n- Machine "));
        // A compare sweep: traced runs only.
        for c in &mut r.cells {
            c.times_from = from(TimeRuns::Traced, 0, 1);
        }
        assert_eq!(
            times_line(&r.cells).as_deref(),
            Some("Times include the probes' cost: every run was traced.")
        );
        // Some of each, and cells with untraced runs only (nothing to say of those).
        r.cells[0].times_from = from(TimeRuns::Untraced, 2, 2);
        r.cells[1].times_from = from(TimeRuns::Untraced, 3, 1);
        r.cells[2].times_from = from(TimeRuns::Untraced, 3, 0);
        let line = times_line(&r.cells).unwrap();
        assert!(
            line.starts_with("Times from 2–3 untraced runs per experiment; counts and waits from 1–2 traced runs per experiment (their times, probes included, are not in the medians). Times of "),
            "{line}"
        );
        assert!(
            line.ends_with(" include the probes' cost: traced runs only."),
            "{line}"
        );
        let c = &r.cells[3];
        assert!(line.contains(&format!("{} {} {}", c.runtime, c.workload, count(c.n))));
        let c = &r.cells[2];
        assert!(!line.contains(&format!("{} {} {}", c.runtime, c.workload, count(c.n))));
        // All untraced: nothing to say.
        for c in &mut r.cells {
            c.times_from = from(TimeRuns::Untraced, 3, 0);
        }
        assert_eq!(times_line(&r.cells), None);
    }

    #[test]
    fn reproduce_table_has_a_blank_corner_and_right_aligned_figures() {
        let rep = Reproduce {
            title: "An article".into(),
            source: "an article".into(),
            columns: vec!["article".into(), "here".into()],
            rows: vec![("tasks".into(), vec!["1,000,000".into(), "3,000".into()])],
            caveats: vec!["one run".into()],
        };
        assert_eq!(
            reproduce_table(&rep).markdown(),
            "| | article | here |\n|---|---:|---:|\n| tasks | 1,000,000 | 3,000 |\n"
        );
        assert!(reproduce_markdown(&rep).ends_with("| tasks | 1,000,000 | 3,000 |\n\n- one run\n"));
        assert!(reproduce_markdown(&rep).starts_with("\n## An article, reproduced\n"));
        assert!(reproduce_table(&rep)
            .html("reproduce")
            .starts_with("<table class=\"reproduce\"><thead><tr><th></th><th>article</th>"));
    }
}
