//! One run's summary as people read it: summary.md, the terminal table in the vocabulary of
//! `/usr/bin/time -v`, and several runs side by side.

use std::fmt::Write;
use std::path::Path;

use crate::analyse::probes::ProbeSummary;
use crate::analyse::summary::Summary;
use crate::record::Fingerprint;
use crate::render::attribution;
use crate::units::{bytes, count};

fn secs_to_clock(s: f64) -> String {
    let minutes = (s / 60.0).floor();
    format!("{}:{:05.2}", minutes, s - minutes * 60.0)
}

/// `/usr/bin/time -v` lines: (label, value).
fn time_v_rows(s: &Summary) -> Vec<(&'static str, String)> {
    vec![
        ("Command being timed", format!("\"{}\"", s.label)),
        ("User time (seconds)", format!("{:.2}", s.user_s)),
        ("System time (seconds)", format!("{:.2}", s.sys_s)),
        (
            "Percent of CPU this job got",
            format!("{:.0}%", s.cpu_percent),
        ),
        (
            "Elapsed (wall clock) time (h:mm:ss or m:ss)",
            secs_to_clock(s.wall_s),
        ),
        (
            "Maximum resident set size (kbytes)",
            s.maxrss_kb.to_string(),
        ),
        (
            "Major (requiring I/O) page faults",
            s.major_faults.to_string(),
        ),
        (
            "Minor (reclaiming a frame) page faults",
            s.minor_faults.to_string(),
        ),
        (
            "Voluntary context switches",
            s.voluntary_switches.to_string(),
        ),
        (
            "Involuntary context switches",
            s.involuntary_switches.to_string(),
        ),
        ("Exit status", s.exit.clone()),
    ]
}

fn kb(v: f64) -> String {
    bytes(v * 1024.0)
}

/// Per-task rows: (figure, value). Memory rows only when a peak was measured.
fn per_task_rows(s: &Summary) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(t) = &s.time_per_task {
        if let Some(spawn) = t.spawn_us {
            rows.push(("spawn time", format!("{spawn:.2} µs")));
        }
        rows.push(("user time", format!("{:.2} µs", t.user_us)));
        rows.push(("system time", format!("{:.2} µs", t.sys_us)));
        rows.push(("minor page faults", format!("{:.2}", t.minor_faults)));
        rows.push((
            "context switches (voluntary / involuntary)",
            format!(
                "{:.2} / {:.3}",
                t.voluntary_switches, t.involuntary_switches
            ),
        ));
    }
    if let Some(m) = &s.memory_per_task {
        rows.push(("RSS", kb(m.rss_kb)));
        rows.push(("kernel stack", kb(m.kernel_stack_kb)));
        rows.push(("page tables", kb(m.page_tables_kb)));
        rows.push(("slab", kb(m.slab_kb)));
        rows.push(("total (RSS + kernel)", kb(m.total_kb)));
        rows.push(("MemAvailable drop", kb(m.mem_available_drop_kb)));
        if let Some(charged) = m.cgroup_kb {
            rows.push(("charged to the run's cgroup", kb(charged)));
        }
    }
    rows
}

fn adds_up_line(s: &Summary) -> Option<String> {
    let m = s.memory_per_task.as_ref()?;
    Some(format!(
        "Memory {}: parts {} vs MemAvailable drop {} per task ({:+.1} %; kernel parts from {}).",
        if m.adds_up {
            "adds up"
        } else {
            "does NOT add up within ±10 %"
        },
        kb(m.total_kb),
        kb(m.mem_available_drop_kb),
        m.difference_percent,
        m.kernel_source
    ))
}

pub fn markdown(s: &Summary, machine: &Fingerprint) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", s.label);
    let _ = writeln!(md, "- Outcome: {}", s.outcome);
    if let (Some(spawned), Some(alive)) = (s.spawned, s.alive_at_peak) {
        let _ = writeln!(
            md,
            "- Tasks: {} spawned, {} alive at the peak",
            count(spawned),
            count(alive)
        );
    }
    if let Some(t) = &s.throughput {
        let _ = writeln!(
            md,
            "- Throughput: {:.0} {}",
            t["value"].as_f64().unwrap_or(0.0),
            t["unit"].as_str().unwrap_or("")
        );
    }
    let _ = writeln!(md, "- Machine: {}", machine.describe());
    if s.sysctls_changed.is_empty() {
        let _ = writeln!(md, "- Sysctls: none needed raising");
    } else {
        let _ = writeln!(
            md,
            "- Sysctls raised for the run: {}; restored afterwards: {}",
            s.sysctls_changed.join(", "),
            if s.sysctls_restored {
                "yes, equal to before"
            } else {
                "NO — see sysctl.json"
            }
        );
    }
    if let Some(c) = &s.cgroup {
        let _ = writeln!(md, "- Cgroup {c}");
    }
    let _ = writeln!(
        md,
        "\n## As `/usr/bin/time -v` would say\n\n| | |\n|---|---|"
    );
    for (label, value) in time_v_rows(s) {
        let _ = writeln!(md, "| {label} | {value} |");
    }
    let rows = per_task_rows(s);
    if !rows.is_empty() {
        let divisor = match (s.alive_at_peak, s.tasks) {
            (Some(a), Some(t)) if a != t => format!(
                "time per task spawned ({}), memory per task alive ({})",
                count(t),
                count(a)
            ),
            (_, Some(t)) => format!("{} tasks", count(t)),
            _ => String::new(),
        };
        let _ = writeln!(
            md,
            "\n## Per task ({divisor})\n\n| figure | per task |\n|---|---|"
        );
        for (label, value) in rows {
            let _ = writeln!(md, "| {label} | {value} |");
        }
        if let Some(line) = adds_up_line(s) {
            let _ = writeln!(md, "\n{line}");
        }
    }
    if !s.phases.is_empty() {
        let _ = writeln!(
            md,
            "\n## Phases\n\n| phase | wall | user | system |\n|---|---|---|---|"
        );
        for p in &s.phases {
            let ms = |v: Option<f64>| v.map_or("?".into(), |v| format!("{v:.0} ms"));
            let _ = writeln!(
                md,
                "| {} | {:.0} ms | {} | {} |",
                p.name,
                p.wall_ms,
                ms(p.user_ms),
                ms(p.sys_ms)
            );
        }
    }
    if let Some(p) = &s.probes {
        probes_markdown(&mut md, p);
    }
    if let Some(a) = &s.attribution {
        md.push_str(&attribution::markdown(a));
    }
    if !s.left_out.is_empty() {
        let _ = writeln!(md, "\n## Left out\n");
        for item in &s.left_out {
            let _ = writeln!(md, "- {item}");
        }
    }
    md
}

/// A probe figure in its unit: counts as numbers, ns as time, bytes in binary units.
fn in_unit(value: f64, unit: &str) -> String {
    match unit {
        "ns" if value >= 1e9 => format!("{:.2} s", value / 1e9),
        "ns" if value >= 1e6 => format!("{:.1} ms", value / 1e6),
        "ns" if value >= 1e3 => format!("{:.1} µs", value / 1e3),
        "ns" => format!("{value:.0} ns"),
        "bytes" => bytes(value),
        _ if value.fract() == 0.0 => count(value as u64),
        _ => format!("{value:.2}"),
    }
}

fn probes_markdown(md: &mut String, p: &ProbeSummary) {
    let _ = writeln!(
        md,
        "\n## eBPF probes (in-kernel counts for the workload's tasks)\n"
    );
    let _ = write!(md, "| metric | total | per task |");
    for phase in &p.phases {
        let _ = write!(md, " {phase} |");
    }
    let _ = writeln!(md, "\n|---|---|---|{}", "---|".repeat(p.phases.len()));
    for row in &p.rows {
        let per_task = row.per_task.map_or("—".into(), |v| in_unit(v, &row.unit));
        let _ = write!(
            md,
            "| {} | {} | {per_task} |",
            spawnscope_collector::metric_label(&row.metric),
            in_unit(row.total as f64, &row.unit)
        );
        for v in &row.per_phase {
            let _ = write!(md, " {} |", in_unit(*v as f64, &row.unit));
        }
        md.push('\n');
    }
    if !p.latencies.is_empty() {
        let _ = writeln!(
            md,
            "\n| latency (log2 buckets) | samples | p50 ≤ | p99 ≤ |\n|---|---|---|---|"
        );
        for l in &p.latencies {
            let q = |v: Option<u64>| v.map_or("?".into(), |v| in_unit(v as f64, "ns"));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                l.name,
                count(l.count),
                q(l.p50_ns),
                q(l.p99_ns)
            );
        }
    }
    let _ = writeln!(
        md,
        "\n### Cross-checks against the kernel's own accounting: {}\n",
        if p.cross_checks_pass {
            "all pass"
        } else {
            "NOT all pass"
        }
    );
    let _ = writeln!(
        md,
        "| check | kernel | probes | tolerance | verdict |\n|---|---|---|---|---|"
    );
    for c in &p.cross_checks {
        let observed = if c.observed == c.observed_max {
            count(c.observed)
        } else {
            format!("{}..{}", count(c.observed), count(c.observed_max))
        };
        let _ = writeln!(
            md,
            "| {} | {} | {observed} | {} | {:?} |",
            c.name,
            count(c.expected),
            count(c.tolerance),
            c.verdict
        );
    }
    if !p.not_loaded.is_empty() {
        let _ = writeln!(md, "\nProbes not loaded: {}", p.not_loaded.join("; "));
    }
}

/// The terminal view of one run.
pub fn terminal(s: &Summary, dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{}\n  {}", s.label, s.outcome);
    for (label, value) in time_v_rows(s) {
        let _ = writeln!(out, "\t{label}: {value}");
    }
    let rows = per_task_rows(s);
    if !rows.is_empty() {
        let _ = writeln!(out, "  per task:");
        for (label, value) in rows {
            let _ = writeln!(out, "\t{label:<44} {value}");
        }
    }
    if let Some(line) = adds_up_line(s) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(p) = &s.probes {
        let _ = writeln!(out, "  eBPF probes, per task: {}", probe_highlights(p));
        for c in &p.cross_checks {
            let _ = writeln!(
                out,
                "\t{:<44} {:?} (kernel {}, probes {})",
                c.name, c.verdict, c.expected, c.observed
            );
        }
    }
    if let Some(a) = &s.attribution {
        out.push_str(&attribution::terminal(a));
        if let Some(f) = &a.flame_graph {
            let _ = writeln!(out, "  flame graph: {}", dir.join(f).display());
        }
    }
    let _ = writeln!(out, "  results: {}", dir.display());
    out
}

/// The probe figures a terminal line has room for.
fn probe_highlights(p: &ProbeSummary) -> String {
    [
        "faults",
        "clones",
        "switches_voluntary",
        "switches_involuntary",
        "oncpu_ns",
        "runq_ns",
        "futex_waits",
        "mmap_calls",
    ]
    .iter()
    .filter_map(|name| {
        let row = p.rows.iter().find(|r| r.metric == *name)?;
        Some(format!("{name} {}", in_unit(row.per_task?, &row.unit)))
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// Several runs' per-task figures in columns, with their machines.
pub fn side_by_side(runs: &[(Summary, Fingerprint)]) -> String {
    let mut md = String::from("| per task |");
    for (s, _) in runs {
        let _ = write!(md, " {} |", s.label);
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(runs.len()));
    md.push('\n');
    let mut labels: Vec<&'static str> = vec!["outcome", "tasks alive at peak"];
    for (s, _) in runs {
        for (label, _) in per_task_rows(s) {
            if !labels.contains(&label) {
                labels.push(label);
            }
        }
    }
    let probe_labels: Vec<String> = runs
        .iter()
        .filter_map(|(s, _)| s.probes.as_ref())
        .flat_map(|p| {
            p.rows
                .iter()
                .filter(|r| SIDE_BY_SIDE_PROBES.contains(&r.metric.as_str()))
                .map(|r| r.metric.clone())
        })
        .fold(Vec::new(), |mut v, m| {
            if !v.contains(&m) {
                v.push(m);
            }
            v
        });
    labels.extend(["wall time", "machine"]);
    for label in labels {
        let _ = write!(md, "| {label} |");
        for (s, m) in runs {
            let value = match label {
                "outcome" => s.outcome.split(':').next().unwrap_or("").to_string(),
                "tasks alive at peak" => s.alive_at_peak.map_or("?".into(), count),
                "wall time" => format!("{:.1} s", s.wall_s),
                "machine" => format!("{}, {} cores, {}", m.hostname, m.cores, m.kernel),
                _ => per_task_rows(s)
                    .into_iter()
                    .find(|(l, _)| *l == label)
                    .map_or("—".into(), |(_, v)| v),
            };
            let _ = write!(md, " {value} |");
        }
        md.push('\n');
    }
    for metric in &probe_labels {
        let _ = write!(
            md,
            "| eBPF: {} |",
            spawnscope_collector::metric_label(metric)
        );
        for (s, _) in runs {
            let row = s
                .probes
                .as_ref()
                .and_then(|p| p.rows.iter().find(|r| &r.metric == metric));
            let value = row
                .and_then(|r| Some(in_unit(r.per_task?, &r.unit)))
                .unwrap_or_else(|| "—".into());
            let _ = write!(md, " {value} |");
        }
        md.push('\n');
    }
    let _ = write!(md, "| eBPF cross-checks |");
    for (s, _) in runs {
        let verdict = s.probes.as_ref().map_or("not measured", |p| {
            if p.cross_checks_pass {
                "all pass"
            } else {
                "NOT all pass"
            }
        });
        let _ = write!(md, " {verdict} |");
    }
    md.push('\n');
    md
}

/// The probe figures compared across runs, per task.
const SIDE_BY_SIDE_PROBES: &[&str] = &[
    "faults",
    "clones",
    "switches_voluntary",
    "switches_involuntary",
    "oncpu_ns",
    "runq_ns",
    "futex_waits",
    "mmap_calls",
    "munmap_calls",
];
