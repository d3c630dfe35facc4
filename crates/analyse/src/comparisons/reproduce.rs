//! A published study's table beside our runs (`Reproduce`, rendered by render/comparisons/compare.rs), and what
//! every study's rows are made of: medians of repeats, whether a command's tasks coexisted, the
//! slope over N. The studies themselves (their published figures and how rows are matched) are
//! in studies/, one file each.

use serde::{Deserialize, Serialize};

use crate::comparisons::regression::fit;
use crate::comparisons::run_point::RunPoint;
use units::{bytes, count};

/// The reproduction table: columns of figures, rows by figure.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reproduce {
    /// What is reproduced: "Hansen 2023" (also where it is missing: recorded before it) or
    /// "async-runtimes-benchmarks 2024".
    #[serde(default = "hansen_title")]
    pub title: String,
    pub source: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
    pub caveats: Vec<String>,
}

impl Reproduce {
    /// The same table with "here" (the machine the reproduction ran on, as the terminal says it)
    /// replaced by that machine's name, for pages read elsewhere: "here: max RSS" becomes
    /// "M1: max RSS", "skipped here: …" "skipped on M1: …", "go-sleepers here: …" "go-sleepers
    /// on M1: …". Only those label forms are touched; the figures are not.
    pub fn on_machine(&self, name: &str) -> Reproduce {
        let label = |s: &str| match s.strip_prefix("here: ") {
            Some(rest) => format!("{name}: {rest}"),
            None => s.to_string(),
        };
        let words = |s: &str| {
            label(s)
                .replace("skipped here: ", &format!("skipped on {name}: "))
                .replace(" here: ", &format!(" on {name}: "))
        };
        Reproduce {
            title: self.title.clone(),
            source: self.source.clone(),
            columns: self.columns.iter().map(|c| label(c)).collect(),
            rows: self
                .rows
                .iter()
                .map(|(l, values)| (label(l), values.iter().map(|v| words(v)).collect()))
                .collect(),
            caveats: self.caveats.iter().map(|c| words(c)).collect(),
        }
    }
}

pub fn hansen_title() -> String {
    "Hansen 2023".into()
}

/// KiB as the article's "MB" (max RSS in KiB / 1024, as `/usr/bin/time`'s KiB would give).
pub fn mb(kib: f64) -> String {
    format!("{:.1}", kib / 1024.0)
}

/// What one more task costs a program: the slope over N of its memory in all (RSS + kernel, at
/// the moment measured, against the tasks alive then) and of its max RSS (against N), fitted
/// over every measured run (as compare-fits.csv fits `memory_total_kb`). None with fewer than
/// two N.
pub fn slope_over_n(runs: &[RunPoint], label: &str) -> Option<String> {
    let mine: Vec<&RunPoint> = runs
        .iter()
        .filter(|r| r.measured && r.runtime.as_deref() == Some(label))
        .collect();
    let total: Vec<(f64, f64)> = mine
        .iter()
        .filter_map(|r| {
            Some((
                r.alive_at_peak? as f64,
                r.memory_total(|m| Some(m.total_kb))?,
            ))
        })
        .collect();
    let rss: Vec<(f64, f64)> = mine
        .iter()
        .filter_map(|r| Some((r.n? as f64, r.maxrss_kb as f64)))
        .collect();
    let line = fit(&total)?;
    let ns: Vec<f64> = total.iter().map(|p| p.0).collect();
    let (lo, hi) = ns
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let kib = |v: f64| bytes(v * 1024.0);
    Some(format!(
        "{label}: what a task itself costs, the slope over N ({} to {} tasks, {} runs): {} in all (RSS + kernel; fixed part {}, r² {:.3}){}",
        count(lo as u64),
        count(hi as u64),
        line.points,
        kib(line.slope),
        kib(line.intercept),
        line.r2,
        fit(&rss).map_or(String::new(), |l| format!(", {} of max RSS", kib(l.slope)))
    ))
}

/// "all 10,000 (at 1.2 s)", or why that is not shown; repeats that disagree are counted.
pub fn alive_when_measured(runs: &[&RunPoint], n: u64) -> String {
    let shown = runs
        .iter()
        .filter(|r| r.all_alive_when_measured() == Some(true))
        .count();
    let at = |r: &RunPoint| r.measured_at_s.map_or("?".into(), |t| format!("{t:.2} s"));
    match (shown, runs) {
        (1, [one]) => format!("all {} (at {})", count(n), at(one)),
        (0, [one]) => match one.all_alive_window() {
            Some((from, to)) => format!(
                "not shown: measured at {}, all alive only {from:.2}–{to:.2} s",
                at(one)
            ),
            None => format!("not shown: measured at {}", at(one)),
        },
        (k, all) => format!("all {} in {k} of {} runs", count(n), all.len()),
    }
}

/// "yes, 1.2–10.0 s", or why that is not shown; repeats that disagree are counted.
pub fn coexisted(runs: &[&RunPoint]) -> String {
    let windows: Vec<Option<(f64, f64)>> = runs.iter().map(|r| r.all_alive_window()).collect();
    let shown = windows.iter().filter(|w| w.is_some()).count();
    match (windows.as_slice(), runs) {
        ([Some((from, to))], _) => format!("yes, {from:.2}–{to:.2} s"),
        ([None], [one]) => match one.task_lifetime_s {
            Some(life) => format!(
                "not shown: the last may have started {:.2} s in, after the first could end ({life:.0} s)",
                one.wall_s - life
            ),
            None => "not known (no task lifetime declared)".into(),
        },
        _ => format!("yes in {shown} of {} runs", runs.len()),
    }
}

pub fn outcomes(runs: &[&RunPoint]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for r in runs {
        let o = r.outcome.split(':').next().unwrap_or("").to_string();
        if !seen.contains(&o) {
            seen.push(o);
        }
    }
    seen.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn here_becomes_the_machines_name_in_labels_and_notes_only() {
        let rep = Reproduce {
            title: "An article".into(),
            source: "where: here".into(),
            columns: vec!["article: MB".into(), "here: max RSS, MB".into()],
            rows: vec![
                ("here: goroutines".into(), vec!["3.5".into(), "8.1".into()]),
                (
                    "C#".into(),
                    vec!["3.6".into(), "skipped here: no dotnet SDK".into()],
                ),
            ],
            caveats: vec!["go-sleepers here: go build".into(), "fits here".into()],
        };
        let named = rep.on_machine("M1");
        assert_eq!(named.columns, ["article: MB", "M1: max RSS, MB"]);
        assert_eq!(
            named.rows[0],
            ("M1: goroutines".into(), vec!["3.5".into(), "8.1".into()])
        );
        assert_eq!(named.rows[1].1[1], "skipped on M1: no dotnet SDK");
        assert_eq!(named.caveats, ["go-sleepers on M1: go build", "fits here"]);
        assert_eq!(named.source, "where: here");
    }
}
