//! A CPU sweep (analyse/comparisons/cpu_sweep.rs) as people read it: one table per runtime of its figures per
//! task against K, for compare.md and report.html, and the section's words.

use std::fmt::Write;

use crate::table::Table;
use analyse::comparisons::cpu_sweep::{ns_text, CpuSeries, CpuSweep};
use analyse::time::times_from::TimeRuns;
use units::count;

pub const TITLE: &str = "Per task against CPUs";

/// "threads on 1 CPU": a runtime's name in a table where K is a cell dimension.
pub fn runtime_label(runtime: &str, cpu_count: Option<u32>) -> String {
    match cpu_count {
        Some(k) => format!("{runtime} on {k} CPU{}", if k == 1 { "" } else { "s" }),
        None => runtime.to_string(),
    }
}

fn wait(v: Option<f64>) -> String {
    v.map_or("—".into(), ns_text)
}

fn figure(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |v| format!("{v:.digits$}"))
}

/// The runtimes of the sweep, in the order of its series.
fn runtimes(sweep: &CpuSweep) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for s in &sweep.series {
        if !out.contains(&s.runtime.as_str()) {
            out.push(&s.runtime);
        }
    }
    out
}

/// One runtime's table: a row per workload × N × K.
pub fn table(sweep: &CpuSweep, runtime: &str) -> Table {
    let several_machines = sweep
        .series
        .iter()
        .any(|s| sweep.series.first().is_some_and(|f| f.machine != s.machine));
    let mut header = vec![
        "workload",
        "N",
        "CPUs",
        "runs",
        "spawn µs/task",
        "system µs/task",
        "wall µs/task",
        "throughput /s",
        "mmap_lock wait/task",
        "futex wait/task",
        "run-queue wait/task",
        "scales",
    ];
    if several_machines {
        header.insert(0, "machine");
    }
    let first_figure = if several_machines { 2 } else { 1 };
    let mut t = Table::new(header.clone()).right_aligned(first_figure..header.len() - 1);
    for s in sweep.series.iter().filter(|s| s.runtime == runtime) {
        for p in &s.points {
            let traced_times = p.times_from.is_some_and(|f| f.runs == TimeRuns::Traced);
            let mut row = vec![
                s.workload.clone(),
                count(s.n),
                p.cpu_count.to_string(),
                format!("{}{}", p.runs, if traced_times { " (traced)" } else { "" }),
                figure(p.spawn_us, 2),
                figure(p.sys_us, 2),
                figure(p.wall_us, 2),
                p.throughput_per_s
                    .map_or("—".into(), |v| count(v.round() as u64)),
                wait(p.mmap_lock_wait_ns),
                wait(p.futex_wait_ns),
                wait(p.runq_wait_ns),
                scales_cell(s, p.cpu_count),
            ];
            if several_machines {
                row.insert(0, s.machine.clone());
            }
            t.row(row);
        }
    }
    t
}

/// Where the series stands at K: the step past the bend says so and names the wait.
fn scales_cell(s: &CpuSeries, k: u32) -> String {
    match s.stops_scaling_past {
        Some(bend) if k == bend => match &s.grew {
            Some(g) => format!("stops past here ({} waits {} next)", g.wait, g.how()),
            None => "stops past here".into(),
        },
        Some(bend) if k > bend => "no".into(),
        _ if s.points.first().is_some_and(|p| p.cpu_count == k) => String::new(),
        _ => "yes".into(),
    }
}

/// compare.md's section (report.html has the same tables).
pub fn markdown(sweep: &CpuSweep) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "\n## {TITLE}\n");
    let _ = writeln!(md, "{}\n", note(sweep));
    for line in &sweep.headlines {
        let _ = writeln!(md, "- {line}");
    }
    for runtime in runtimes(sweep) {
        let _ = writeln!(md, "\n### {runtime}\n");
        md.push_str(&table(sweep, runtime).markdown());
    }
    md
}

/// What the tables are of.
pub fn note(sweep: &CpuSweep) -> String {
    format!(
        "Each run held to K CPUs (`--cpu-count`: its cgroup's cpuset, else its affinity; one CPU per physical core first). Times are medians of the untraced runs where a point has any (else of the traced ones, marked, the probes' cost included); waits per task of the traced runs (run-queue with `--probes full` only); — where not measured. Judged: {}.",
        sweep.rule
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::comparisons::cpu_sweep::CpuPoint;

    #[test]
    fn a_table_per_runtime_marks_where_it_stops_scaling() {
        let point = |k, wall| CpuPoint {
            cpu_count: k,
            runs: 3,
            wall_us: Some(wall),
            mmap_lock_wait_ns: Some(100.0 * k as f64),
            ..CpuPoint::default()
        };
        let sweep = CpuSweep {
            rule: "r".into(),
            series: vec![CpuSeries {
                machine: "M1".into(),
                runtime: "threads".into(),
                workload: "hold".into(),
                n: 1000,
                points: vec![point(1, 20.0), point(2, 19.0), point(4, 18.0)],
                stops_scaling_past: Some(1),
                grew: Some(analyse::comparisons::cpu_sweep::GrownWait {
                    wait: "mmap_lock".into(),
                    from_ns: 100.0,
                    to_ns: 200.0,
                }),
            }],
            headlines: vec!["hold 1,000: threads stop scaling past 1 CPU".into()],
        };
        let md = markdown(&sweep);
        assert!(md.contains("## Per task against CPUs"));
        assert!(md.contains("- hold 1,000: threads stop scaling past 1 CPU"));
        assert!(md.contains("### threads"));
        assert!(md.contains(
            "| hold | 1,000 | 1 | 3 | — | — | 20.00 | — | 100 ns | — | — | stops past here (mmap_lock waits grow 2.0× next) |"
        ), "{md}");
        assert!(md.contains("| hold | 1,000 | 4 | 3 | — | — | 18.00 | — | 400 ns | — | — | no |"));
        assert_eq!(runtime_label("tokio", Some(2)), "tokio on 2 CPUs");
        assert_eq!(runtime_label("tokio", None), "tokio");
    }
}
