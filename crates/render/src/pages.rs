//! The figures of README.md and the manual, rendered from the results sets committed under
//! `docs/` (`spawnscope docs render`), so that a page cannot say one thing and its results set
//! another. A figure is a marked block in a Markdown page:
//!
//! ```text
//! <!-- figure: KIND SET [WORKLOAD] -->
//! … what `docs render` writes here …
//! <!-- /figure -->
//! ```
//!
//! SET is a results set's directory under docs/ (its compare.json); KIND is one of [`KINDS`].
//! Everything between the two marks is the command's: a hand edit there is undone by the next
//! render, and `docs render --check` fails on it.

use std::fmt::Write as _;

use crate::comparisons::compare::{
    fits_table, machine_line_with_id, per_task_cell, reproduce_markdown, runs_table, times_line,
};
use analyse::comparisons::compare::{ordered_runtimes, Cell, Comparison};
use analyse::comparisons::headline::{Headline, Side};
use runtime::DESCRIPTORS;
use units::count;

pub const OPEN: &str = "<!-- figure:";
pub const CLOSE: &str = "<!-- /figure -->";

/// The kinds of figure, and what each renders.
pub const KINDS: [(&str, &str); 9] = [
    (
        "machine",
        "the set's machine, date and command, in one line",
    ),
    (
        "headline",
        "the result in one line per workload (compare.json's headlines)",
    ),
    (
        "pertask",
        "WORKLOAD: what one more task costs, by regression over N, one column per runtime",
    ),
    (
        "runs",
        "WORKLOAD: the runs table, median (min … max) over repeats",
    ),
    ("fits", "WORKLOAD: the regression table"),
    (
        "repeats",
        "the time figures over repeats: median (min … max) of all runs and of the trustworthy ones, their max / min",
    ),
    ("reproduce", "the published figures beside ours"),
    (
        "mainjob",
        "how long the set took and the most memory its tasks held at once (trace.sh's main job)",
    ),
    (
        "cpus",
        "a CPU sweep (--cpu-counts): its headlines, rule and a table per runtime against K",
    ),
];

/// One figure's mark: what to render, from which set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub kind: String,
    pub set: String,
    pub workload: Option<String>,
}

/// A marked block in a page: its spec, the 1-based line of its opening mark, and the byte range
/// of what lies between the marks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub spec: Spec,
    pub line: usize,
    pub body: std::ops::Range<usize>,
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.set)?;
        if let Some(w) = &self.workload {
            write!(f, " {w}")?;
        }
        Ok(())
    }
}

fn parse_spec(words: &str, line: usize) -> Result<Spec, String> {
    let words: Vec<&str> = words.split_whitespace().collect();
    let known = || KINDS.map(|(k, _)| k).join(", ");
    let (kind, set, rest) = match words.as_slice() {
        [kind, set, rest @ ..] => (*kind, *set, rest),
        _ => {
            return Err(format!(
                "line {line}: a figure mark needs KIND SET ({})",
                known()
            ))
        }
    };
    if !KINDS.iter().any(|(k, _)| *k == kind) {
        return Err(format!(
            "line {line}: no figure kind '{kind}' (one of {})",
            known()
        ));
    }
    let needs_workload = matches!(kind, "pertask" | "runs" | "fits");
    let workload = match (rest, needs_workload) {
        ([], false) => None,
        ([w], true) => Some(w.to_string()),
        _ if needs_workload => return Err(format!("line {line}: {kind} needs SET WORKLOAD")),
        _ => return Err(format!("line {line}: {kind} takes SET only")),
    };
    Ok(Spec {
        kind: kind.into(),
        set: set.into(),
        workload,
    })
}

/// Every marked block of a page, in order. Err: a mark that does not parse or is not closed.
pub fn blocks(page: &str) -> Result<Vec<Block>, String> {
    let mut found = Vec::new();
    let mut open: Option<(Spec, usize, usize)> = None;
    let mut offset = 0;
    for (i, line) in page.split_inclusive('\n').enumerate() {
        let trimmed = line.trim();
        if let Some(words) = trimmed.strip_prefix(OPEN) {
            if open.is_some() {
                return Err(format!("line {}: a figure opened inside another", i + 1));
            }
            let words = words
                .strip_suffix("-->")
                .ok_or_else(|| format!("line {}: the figure mark does not end with -->", i + 1))?;
            open = Some((parse_spec(words, i + 1)?, i + 1, offset + line.len()));
        } else if trimmed == CLOSE {
            let (spec, at, start) = open
                .take()
                .ok_or_else(|| format!("line {}: {CLOSE} without its opening mark", i + 1))?;
            found.push(Block {
                spec,
                line: at,
                body: start..offset,
            });
        }
        offset += line.len();
    }
    match open {
        Some((spec, at, _)) => Err(format!(
            "line {at}: figure '{spec}' is never closed ({CLOSE})"
        )),
        None => Ok(found),
    }
}

/// The comparison with only one workload's cells, fits and runs.
fn only_workload(set: &Comparison, workload: &str) -> Result<Comparison, String> {
    let mut one = set.clone();
    one.cells.retain(|c| c.workload == workload);
    one.fits.retain(|f| f.workload == workload);
    one.runs.retain(|r| r.workload.as_deref() == Some(workload));
    if one.cells.is_empty() {
        return Err(format!("the set has no {workload} runs"));
    }
    Ok(one)
}

fn one_task(runtime: &str) -> String {
    DESCRIPTORS
        .iter()
        .find(|d| d.name == runtime)
        .map_or(runtime.to_string(), |d| format!("a {}", d.one_task))
}

/// How long a timed set took (its plan's `elapsed_s`) and the most memory its tasks held at once:
/// the largest MemAvailable drop at a run's peak (per task alive × tasks alive, medians).
fn main_job_figure(set: &Comparison) -> Result<String, String> {
    let plan = set.plan.as_ref().ok_or("the set has no plan.json")?;
    let elapsed = crate::comparisons::compare::elapsed_line(plan)
        .ok_or("the set's plan has no elapsed_s: not timed by its maker (trace.sh's main job)")?;
    let peak = set
        .cells
        .iter()
        .filter_map(|c| {
            let held_kib =
                c.mem_available_drop_kb.as_ref()?.median * c.alive_at_peak.as_ref()?.median;
            Some((held_kib, c))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or("the set has no run with its memory measured")?;
    let (kib, cell) = peak;
    let runs: usize = set.cells.iter().map(|c| c.measured_runs).sum();
    Ok(format!(
        "On {} (UTC) the main job {elapsed}, {runs} counted runs; the most memory its tasks held \
         at once: {} ({} {} {}: what MemAvailable lost at the peak, median over its runs).",
        set_date(set),
        units::bytes(kib * 1024.0),
        cell.runtime,
        cell.workload,
        count(cell.n)
    ))
}

/// The day the set was made (UTC): its plan's, else its first run's.
fn set_date(set: &Comparison) -> String {
    let started = set
        .plan
        .as_ref()
        .map(|p| p.created_utc.clone())
        .or_else(|| set.runs.iter().map(|r| r.started_utc.clone()).min())
        .unwrap_or_default();
    started
        .get(..10)
        .unwrap_or("an unrecorded date")
        .to_string()
}

/// The set's machines, when it was made and by which command, in one line.
fn machine_figure(set: &Comparison) -> String {
    let date = set_date(set);
    let command = match set.plan.as_ref().map(|p| p.argv.as_slice()) {
        // trace.sh's main job and the bench scripts write their own plan, named by the script.
        Some(argv @ [script, ..]) if script.ends_with(".sh") => {
            format!("`{}`", argv.join(" "))
        }
        Some([_, args @ ..]) => format!("`spawnscope {}`", args.join(" ")),
        _ => "runs gathered by hand, rendered with `spawnscope report`".into(),
    };
    let machines: Vec<String> = set.machines.iter().map(machine_line_with_id).collect();
    format!(
        "Measured on {date} (UTC) by {command}; machine {}.",
        machines.join("; machine ")
    )
}

/// A cell's figures as the headline takes them, for sets written before compare.json had
/// headlines: each runtime at its largest N, the cell's medians.
fn side_of(cell: &Cell) -> Option<Side> {
    Some(Side {
        runtime: cell.runtime.clone(),
        n: cell.n,
        runs: cell.measured_runs,
        memory_kib: Some(cell.memory_kb.as_ref()?.median),
        spawn_us: None,
        memory_unresolved: cell.memory_unresolved,
        counts_wrong_runs: cell.counts_wrong_runs,
        spawn_from_suspect_runs: 0,
    })
}

fn headlines_of(set: &Comparison) -> Vec<Headline> {
    if !set.headlines.is_empty() {
        return set.headlines.clone();
    }
    let mut workloads: Vec<&str> = Vec::new();
    for c in &set.cells {
        if !workloads.contains(&c.workload.as_str()) {
            workloads.push(&c.workload);
        }
    }
    workloads
        .into_iter()
        .filter_map(|w| {
            let sides: Vec<Side> = ordered_runtimes(set.cells.iter().map(|c| c.runtime.as_str()))
                .into_iter()
                .filter_map(|rt| {
                    set.cells
                        .iter()
                        .filter(|c| c.workload == w && c.runtime == rt && c.measured_runs > 0)
                        .max_by_key(|c| c.n)
                        .and_then(side_of)
                })
                .collect();
            // Sets this old had no spawn times in their sides to leave out.
            Headline::of_sides(None, w, sides, false)
        })
        .collect()
}

/// The figures a front page shows, in the order it shows them (compare.json's fit metrics).
const PER_TASK_ROWS: [&str; 11] = [
    "rss_kb",
    "kernel_stack_kb",
    "page_tables_kb",
    "slab_kb",
    "memory_total_kb",
    "mem_available_drop_kb",
    "cgroup_kb",
    "user_us",
    "sys_us",
    "minor_faults",
    "voluntary_switches",
];

/// What one more task costs, one column per runtime: the fits' slopes (or why a slope is not
/// resolved), and the N they were fitted over.
fn per_task_figure(set: &Comparison) -> String {
    let runtimes = ordered_runtimes(set.fits.iter().map(|f| f.runtime.as_str()));
    let mut t = crate::table::Table::new(
        std::iter::once("one more task (slope over N)".to_string())
            .chain(runtimes.iter().map(|r| one_task(r))),
    );
    for metric in PER_TASK_ROWS {
        let fits: Vec<_> = runtimes
            .iter()
            .map(|rt| {
                set.fits
                    .iter()
                    .find(|f| f.runtime == *rt && f.metric == metric)
            })
            .collect();
        let Some(label) = fits.iter().flatten().map(|f| f.label.clone()).next() else {
            continue;
        };
        t.row(
            std::iter::once(label).chain(
                fits.iter()
                    .map(|f| f.map_or_else(|| "—".to_string(), per_task_cell)),
            ),
        );
    }
    t.row(
        std::iter::once("N measured (runs)".to_string()).chain(runtimes.iter().map(|rt| {
            let cells: Vec<&Cell> = set.cells.iter().filter(|c| c.runtime == *rt).collect();
            let lo = cells.iter().map(|c| c.n).min().unwrap_or(0);
            let hi = cells.iter().map(|c| c.n).max().unwrap_or(0);
            let runs: usize = cells.iter().map(|c| c.measured_runs).sum();
            format!("{} … {} ({runs})", count(lo), count(hi))
        })),
    );
    t.markdown()
}

/// What goes between a figure's marks, from its results set.
pub fn figure(spec: &Spec, set: &Comparison) -> Result<String, String> {
    let scoped = match &spec.workload {
        Some(w) => only_workload(set, w)?,
        None => set.clone(),
    };
    let text = match spec.kind.as_str() {
        "machine" => format!("{}\n", machine_figure(set)),
        "headline" => {
            let mut lines: Vec<String> = headlines_of(set)
                .iter()
                .map(|h| format!("**{}**\n", h.line()))
                .collect();
            if lines.is_empty() {
                return Err("the set has no workload measured on two runtimes".into());
            }
            // Which runs the times are of, as compare.md says it (sets recorded before cells
            // said so have no such line).
            if let Some(line) = times_line(&set.cells) {
                lines.push(format!("{line}\n"));
            }
            lines.join("\n")
        }
        "mainjob" => format!("{}\n", main_job_figure(set)?),
        // A CPU sweep's section as compare.md has it (headlines, rule, a table per runtime).
        "cpus" => {
            let sweep = set
                .cpu_sweep
                .as_ref()
                .ok_or("the set is not a CPU sweep (compare.json has no cpu_sweep)")?;
            crate::comparisons::cpu_sweep::markdown(sweep)
                .trim_start()
                .trim_start_matches(&format!("## {}", crate::comparisons::cpu_sweep::TITLE))
                .trim_start()
                .to_string()
        }
        "pertask" => per_task_figure(&scoped),
        "runs" => runs_table(&scoped).markdown(),
        "fits" => fits_table(&scoped).markdown(),
        "repeats" => {
            if set.repeats.is_empty() {
                return Err("the set has no experiment run more than once".into());
            }
            crate::time::repeats::table(&set.repeats).markdown()
        }
        "reproduce" => {
            let rep = set
                .reproduce
                .as_ref()
                .ok_or("the set is not a reproduction (compare.json has no reproduce)")?;
            // A page is read away from the machine: "here" becomes the machine's name when
            // the set ran on one ("M1 (vm)" → "M1").
            let named = match set.machines.as_slice() {
                [one] => rep.on_machine(one.id.split(' ').next().unwrap_or(&one.id)),
                _ => rep.clone(),
            };
            reproduce_markdown(&named).trim_start().to_string()
        }
        other => return Err(format!("no figure kind '{other}'")),
    };
    let mut out = String::new();
    let _ = write!(out, "{}", text.trim_end());
    out.push('\n');
    Ok(out)
}

/// The page with every figure rendered from its set (`load` reads a set by name), and the specs
/// of the blocks whose text changed.
pub fn fill(
    page: &str,
    mut load: impl FnMut(&str) -> Result<Comparison, String>,
) -> Result<(String, Vec<(usize, Spec)>), String> {
    let mut out = String::with_capacity(page.len());
    let mut changed = Vec::new();
    let mut at = 0;
    for block in blocks(page)? {
        let set = load(&block.spec.set).map_err(|e| format!("line {}: {e}", block.line))?;
        let body = figure(&block.spec, &set)
            .map_err(|e| format!("line {}: figure '{}': {e}", block.line, block.spec))?;
        let rendered = format!("\n{body}\n");
        if page[block.body.clone()] != rendered {
            changed.push((block.line, block.spec.clone()));
        }
        out.push_str(&page[at..block.body.start]);
        out.push_str(&rendered);
        at = block.body.end;
    }
    out.push_str(&page[at..]);
    Ok((out, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Comparison {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/example-results/compare/compare.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn marks_parse_and_bad_marks_say_where() {
        let page = "a\n<!-- figure: pertask compare hold -->\nold\n<!-- /figure -->\nb\n";
        let b = blocks(page).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].line, 2);
        assert_eq!(&page[b[0].body.clone()], "old\n");
        assert_eq!(b[0].spec.workload.as_deref(), Some("hold"));
        assert!(
            blocks("<!-- figure: pertask compare -->\n<!-- /figure -->\n")
                .unwrap_err()
                .contains("needs SET WORKLOAD")
        );
        assert!(blocks("<!-- figure: chart compare -->\n")
            .unwrap_err()
            .contains("no figure kind"));
        assert!(blocks("<!-- figure: machine compare -->\nx\n")
            .unwrap_err()
            .contains("never closed"));
        assert!(blocks("<!-- /figure -->\n")
            .unwrap_err()
            .contains("without"));
    }

    #[test]
    fn a_figure_is_its_sets_and_a_hand_edit_is_found_and_undone() {
        let set = example();
        let page = "# t\n<!-- figure: pertask example-results/compare hold -->\n<!-- /figure -->\n";
        let (filled, changed) = fill(page, |_| Ok(set.clone())).unwrap();
        assert_eq!(changed.len(), 1, "an empty block is stale");
        let thread_total = set
            .fits
            .iter()
            .find(|f| f.runtime == "threads" && f.metric == "memory_total_kb")
            .unwrap();
        assert!(filled.contains(&per_task_cell(thread_total)), "{filled}");
        assert!(filled.contains("| one more task (slope over N) | a thread | a goroutine |"));
        let (again, none) = fill(&filled, |_| Ok(set.clone())).unwrap();
        assert!(none.is_empty(), "a rendered page is up to date");
        assert_eq!(again, filled);
        let edited = filled.replacen("36.", "35.", 1);
        assert_ne!(edited, filled, "the figure holds a 36.x KiB thread");
        let (restored, stale) = fill(&edited, |_| Ok(set.clone())).unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!(restored, filled);
    }

    #[test]
    fn the_machine_line_names_date_machine_and_command() {
        let line = figure(
            &Spec {
                kind: "machine".into(),
                set: "x".into(),
                workload: None,
            },
            &example(),
        )
        .unwrap();
        assert!(
            line.starts_with("Measured on 2026-11-23 (UTC) by `spawnscope compare --runtimes"),
            "{line}"
        );
        assert!(line.contains("M1") && line.contains("kernel"), "{line}");
    }

    #[test]
    fn the_repeats_figure_is_the_time_over_repeats_table_or_says_there_is_none() {
        let spec = Spec {
            kind: "repeats".into(),
            set: "x".into(),
            workload: None,
        };
        let set = example();
        assert!(!set.repeats.is_empty(), "the example set has repeats");
        let table = figure(&spec, &set).unwrap();
        assert_eq!(
            table.trim_end(),
            crate::time::repeats::table(&set.repeats)
                .markdown()
                .trim_end()
        );
        assert!(table.contains("| spawn time per task |"), "{table}");
        let mut once = set;
        once.repeats.clear();
        assert!(figure(&spec, &once).unwrap_err().contains("more than once"));
    }

    #[test]
    fn the_headline_says_which_runs_the_times_are_of_where_the_set_records_it() {
        use analyse::time::times_from::{TimeRuns, TimesFrom};
        let spec = Spec {
            kind: "headline".into(),
            set: "x".into(),
            workload: None,
        };
        // The committed set predates it: its headline as rendered before.
        let mut set = example();
        let before = figure(&spec, &set).unwrap();
        assert!(!before.contains("Times "), "{before}");
        for c in &mut set.cells {
            c.times_from = Some(TimesFrom {
                runs: TimeRuns::Untraced,
                untraced_runs: 3,
                traced_runs: 1,
            });
        }
        let after = figure(&spec, &set).unwrap();
        assert_eq!(
            after,
            format!(
                "{before}\nTimes from 3 untraced runs per experiment; counts and waits from 1 traced run per experiment (its times, probes included, are not in the medians).\n"
            )
        );
    }

    #[test]
    fn headlines_come_from_the_cells_when_the_set_predates_them() {
        let mut set = example();
        let recorded = set.headlines.clone();
        assert!(!recorded.is_empty());
        set.headlines.clear();
        let rebuilt = headlines_of(&set);
        assert_eq!(rebuilt.len(), 1);
        assert_eq!(rebuilt[0].dearer.runtime, "threads");
        assert_eq!(rebuilt[0].cheaper.runtime, "goroutines");
        assert_eq!(rebuilt[0].dearer.memory_kib, recorded[0].dearer.memory_kib);
    }

    #[test]
    fn the_main_job_figure_says_its_time_and_its_peak_or_why_not() {
        let spec = Spec {
            kind: "mainjob".into(),
            set: "x".into(),
            workload: None,
        };
        let mut set = example();
        // A set without a timed plan cannot say how long it took.
        let mut untimed = set.clone();
        untimed.plan.as_mut().unwrap().elapsed_s = None;
        assert!(figure(&spec, &untimed).unwrap_err().contains("elapsed_s"));
        let plan = set.plan.as_mut().unwrap();
        plan.argv = vec!["./scripts/trace.sh".into()];
        plan.elapsed_s = Some(73.6);
        plan.warmup_runs = Some(2);
        let line = figure(&spec, &set).unwrap();
        assert!(
            line.starts_with("On 2026-11-23 (UTC) the main job took 74 s from its first run to the end of its last, 2 warm-up runs (not counted) included, 8 counted runs"),
            "{line}"
        );
        // The peak is the threads' 3,000 at about 37 KiB each: a hundred-odd MiB, not KiB.
        assert!(line.contains("MiB (threads hold 3,000"), "{line}");
        // A set warmed up by writing memory says how much, in place of warm-up runs.
        set.plan.as_mut().unwrap().warmup_touched_bytes = Some(9 << 29);
        let line = figure(&spec, &set).unwrap();
        assert!(
            line.contains("end of its last, its warm-up (4.5 GiB of memory written a page at a time, not counted) included, 8 counted runs"),
            "{line}"
        );
        let machine = figure(
            &Spec {
                kind: "machine".into(),
                ..spec
            },
            &set,
        )
        .unwrap();
        assert!(machine.contains("by `./scripts/trace.sh`;"), "{machine}");
    }
}
