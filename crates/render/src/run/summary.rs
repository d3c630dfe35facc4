//! One run's summary as people read it: summary.md, the terminal table in the vocabulary of
//! `/usr/bin/time -v`, and several runs side by side.

use std::fmt::Write;
use std::path::Path;

use crate::memory::per_task::{
    adds_up_line, huge_pages_line, measured_at_line, per_task_rows, per_task_table, stages_line,
};
use crate::memory::processes::{processes_line, processes_table, TREE_ROWS_MD, TREE_ROWS_TERMINAL};
use crate::probes::counts::{cost_line, probe_highlights, probes_markdown, KEY_PROBES};
use crate::table::{Cell, Table};
use crate::{
    probes::waits, serving, time::attribution, time::sentinels, time::verdict, traces::sched_trace,
};
use analyse::comparisons::headline;
use analyse::run::summary::{ExitPath, Summary};
use record::Fingerprint;
use units::{count, in_unit};

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

/// The `/usr/bin/time -v` table: its labels and values under a blank header.
pub fn time_v_table(s: &Summary) -> Table {
    let mut t = Table::new([Cell::Blank, Cell::Blank]);
    for (label, value) in time_v_rows(s) {
        t.row([label.to_string(), value]);
    }
    t
}

/// Wall, user and system time of each phase the workload marked.
pub fn phases_table(s: &Summary) -> Table {
    let ms = |v: Option<f64>| v.map_or("?".into(), |v| format!("{v:.0} ms"));
    let mut t = Table::new(["phase", "wall", "user", "system"]);
    for p in &s.phases {
        t.row([
            p.name.clone(),
            format!("{:.0} ms", p.wall_ms),
            ms(p.user_ms),
            ms(p.sys_ms),
        ]);
    }
    t
}

/// Which way the threads ended: each that returns before the process exits frees its stack
/// (glibc's madvise, with a TLB shootdown on every other CPU the process ran on); the rest end
/// with the process. Which way is a race, so the line names the mode a run's exit time carries.
fn exit_path_line(s: &Summary) -> Option<String> {
    let (path, freed, tasks) = ExitPath::of(s)?;
    Some(format!(
        "Exit path: {} ({} madvise calls after release for {} threads, {:.0} %; glibc frees a returning thread's stack itself). Which way each goes is a race with the process's exit: the system time after release follows it.",
        path.words(),
        count(freed),
        count(tasks),
        freed as f64 / tasks as f64 * 100.0
    ))
}

pub fn markdown(s: &Summary, machine: &Fingerprint) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# {}\n", s.label);
    let _ = writeln!(md, "- Outcome: {}", headline::of_run(s));
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
    if s.runtime_trace.is_some() {
        let _ = writeln!(
            md,
            "- Runtime-traced: {}",
            crate::runtimes::go_sched::RUNTIME_TRACED
        );
    }
    if s.tokio_trace.is_some() {
        let _ = writeln!(
            md,
            "- Runtime-traced: {}",
            crate::runtimes::tokio_sched::RUNTIME_TRACED
        );
    }
    if let Some(v) = &s.verdict {
        let _ = writeln!(md, "- Time figures: {}", v.line());
    }
    if let Some(v) = &s.counts_verdict {
        let _ = writeln!(md, "- Counts: {}", v.line());
    }
    let _ = writeln!(md, "- Machine: {}", machine.describe());
    if let Some(details) = machine.describe_details() {
        let _ = writeln!(md, "- Fingerprint: {details}");
    }
    for gap in &s.known_gaps {
        let _ = writeln!(md, "- Known gap of this kernel: {gap}");
    }
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
    if let Some(c) = &s.cpu_count {
        let _ = writeln!(md, "- CPUs: {}", c.line());
    }
    let _ = writeln!(md, "\n## As `/usr/bin/time -v` would say\n");
    md.push_str(&time_v_table(s).markdown());
    let per_task = per_task_table(s);
    if !per_task.is_empty() {
        let divisor = match (s.alive_at_peak, s.tasks) {
            (Some(a), Some(t)) if a != t => format!(
                "time per task spawned ({}), memory per task alive ({})",
                count(t),
                count(a)
            ),
            (_, Some(t)) => format!("{} tasks", count(t)),
            _ => String::new(),
        };
        let _ = writeln!(md, "\n## Per task ({divisor})\n");
        md.push_str(&per_task.markdown());
        if let Some(line) = adds_up_line(s) {
            let _ = writeln!(md, "\n{line}");
        }
        if let Some(line) = huge_pages_line(s) {
            let _ = writeln!(md, "\n{line}");
        }
        if let Some(line) = measured_at_line(s) {
            let _ = writeln!(md, "\n{line}");
        }
        if let Some(line) = exit_path_line(s) {
            let _ = writeln!(md, "\n{line}");
        }
    }
    if let Some(p) = &s.processes {
        let _ = writeln!(md, "\n## The run's processes at the moment measured\n");
        md.push_str(&processes_table(p, TREE_ROWS_MD).markdown());
        let _ = writeln!(md, "\n{}", processes_line(s, p));
    }
    if let Some(line) = stages_line(s) {
        let _ = writeln!(md, "\n{line}");
    }
    if let Some(f) = &s.serve {
        serving::markdown(&mut md, f);
    }
    if let Some(v) = &s.verdict {
        md.push_str(&verdict::markdown(v));
    }
    if !s.phases.is_empty() {
        let _ = writeln!(md, "\n## Phases\n");
        md.push_str(&phases_table(s).markdown());
    }
    if let Some(f) = &s.sentinels {
        md.push_str(&sentinels::markdown(f));
    }
    if let Some(p) = &s.probes {
        probes_markdown(&mut md, p);
    }
    if let Some(w) = &s.waits {
        waits::markdown(&mut md, w);
    }
    if let Some(f) = &s.scheduler_trace {
        sched_trace::markdown(&mut md, f);
    }
    if let Some(w) = &s.swimlane {
        md.push_str(&crate::traces::swimlane::markdown(w));
    }
    if let Some(f) = &s.runtime_trace {
        crate::runtimes::go_sched::markdown(&mut md, f, s.scheduler_trace.as_ref());
    }
    if let Some(f) = &s.go_procs {
        crate::runtimes::go_procs::markdown(&mut md, f);
    }
    if let Some(f) = &s.tokio_trace {
        crate::runtimes::tokio_sched::markdown(&mut md, f, s.scheduler_trace.as_ref());
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

/// The terminal view of one run.
pub fn terminal(s: &Summary, dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{}\n  {}", s.label, headline::of_run(s));
    if let Some(c) = &s.cpu_count {
        let _ = writeln!(out, "  {}", c.line());
    }
    for row in &time_v_table(s).rows {
        let _ = writeln!(out, "\t{}: {}", row[0].text(), row[1].text());
    }
    let per_task = per_task_table(s);
    if !per_task.is_empty() {
        let _ = writeln!(out, "  per task:");
        for row in &per_task.rows {
            let _ = writeln!(out, "\t{:<44} {}", row[0].text(), row[1].text());
        }
    }
    if let Some(line) = adds_up_line(s) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = huge_pages_line(s) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = measured_at_line(s) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = exit_path_line(s) {
        let _ = writeln!(out, "  {line}");
    }
    // A tree of processes: each on a line, and the sum.
    if let Some(p) = s.processes.as_ref().filter(|p| p.rows.len() > 1) {
        let _ = writeln!(out, "  the run's processes at the moment measured:");
        let table = processes_table(p, TREE_ROWS_TERMINAL);
        for row in &table.rows {
            let cells: Vec<&str> = row.iter().map(Cell::text).collect();
            let _ = writeln!(
                out,
                "\t{} {} — {} threads, CPU {}, RSS {}, PSS {}, USS {} ({})",
                cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[10]
            );
        }
        let _ = writeln!(out, "  {}", processes_line(s, p));
    }
    if let Some(line) = stages_line(s) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(f) = &s.serve {
        serving::terminal(&mut out, f);
    }
    if let Some(v) = &s.verdict {
        out.push_str(&verdict::terminal(v));
    }
    if let Some(v) = &s.counts_verdict {
        let _ = writeln!(out, "  counts: {}", v.line());
    }
    if let Some(p) = &s.probes {
        let _ = writeln!(out, "  eBPF probes, per task: {}", probe_highlights(p));
        if let Some(cost) = &p.cost {
            let _ = writeln!(out, "  the probes' own cost: {}", cost_line(cost));
        }
        for c in &p.cross_checks {
            let _ = writeln!(
                out,
                "\t{:<44} {:?} (expected {}, probes counted {})",
                c.name, c.verdict, c.expected, c.observed
            );
        }
    }
    if let Some(line) = s
        .scheduler_trace
        .as_ref()
        .and_then(sched_trace::terminal_line)
    {
        let _ = writeln!(out, "  {line}");
        // Where to look at it: the trace for ui.perfetto.dev, the swimlane for any browser.
        let _ = writeln!(
            out,
            "  Perfetto trace: {} (open it in https://ui.perfetto.dev)",
            dir.join(record::PERFETTO_TRACE).display()
        );
        if let Some(cut) = s
            .scheduler_trace
            .as_ref()
            .and_then(|f| f.too_big_for_the_ui.as_ref())
        {
            let _ = writeln!(out, "  {cut}");
        }
        if s.swimlane.is_some() {
            let _ = writeln!(out, "  swimlane: {}", dir.join(record::SWIMLANE).display());
        }
    }
    if let Some(f) = &s.runtime_trace {
        let _ = writeln!(out, "  {}", crate::runtimes::go_sched::terminal_line(f));
        if let Some(p) = &s.go_procs {
            let _ = writeln!(out, "  {}", crate::runtimes::go_procs::terminal_line(p));
        }
        let _ = writeln!(out, "  {}", crate::runtimes::go_sched::RUNTIME_TRACED);
    }
    if let Some(f) = &s.tokio_trace {
        let _ = writeln!(out, "  {}", crate::runtimes::tokio_sched::terminal_line(f));
        let _ = writeln!(out, "  {}", crate::runtimes::tokio_sched::RUNTIME_TRACED);
    }
    if let Some(w) = &s.waits {
        waits::terminal(&mut out, w);
    }
    if let Some(a) = &s.attribution {
        out.push_str(&attribution::terminal(a));
        if let Some(f) = &a.flame_graph {
            let _ = writeln!(out, "  flame graph: {}", dir.join(f).display());
        }
    }
    // The results directory alone on the last line, for scripts (`| tail -1`).
    let _ = writeln!(out, "  results:\n{}", dir.display());
    out
}

/// Several runs' per-task figures in columns, with their machines.
pub fn side_by_side(runs: &[(Summary, Fingerprint)]) -> String {
    side_by_side_table(runs).markdown()
}

/// The table behind `side_by_side`: one row per figure, one column per run.
pub fn side_by_side_table(runs: &[(Summary, Fingerprint)]) -> Table {
    let mut t =
        Table::new(std::iter::once("per task").chain(runs.iter().map(|(s, _)| s.label.as_str())));
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
                .filter(|r| KEY_PROBES.iter().any(|(m, _)| *m == r.metric))
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
        let values = runs.iter().map(|(s, m)| match label {
            "outcome" => s.outcome.split(':').next().unwrap_or("").to_string(),
            "tasks alive at peak" => s.alive_at_peak.map_or("?".into(), count),
            "wall time" => format!("{:.1} s", s.wall_s),
            "machine" => format!("{}, {} cores, {}", m.hostname, m.cores, m.kernel),
            _ => per_task_rows(s)
                .into_iter()
                .find(|(l, _)| *l == label)
                .map_or("—".into(), |(_, v)| v),
        });
        t.row(std::iter::once(label.to_string()).chain(values));
    }
    for metric in &probe_labels {
        let values = runs.iter().map(|(s, _)| {
            s.probes
                .as_ref()
                .and_then(|p| p.rows.iter().find(|r| &r.metric == metric))
                .and_then(|r| Some(in_unit(r.per_task?, &r.unit)))
                .unwrap_or_else(|| "—".into())
        });
        let label = format!("eBPF: {}", spawnscope_collector::metric_label(metric));
        t.row(std::iter::once(label).chain(values));
    }
    let verdicts = runs.iter().map(|(s, _)| {
        s.probes.as_ref().map_or("not measured", |p| {
            if p.cross_checks_pass {
                "all pass"
            } else {
                "NOT all pass"
            }
        })
    });
    t.row(std::iter::once("eBPF cross-checks").chain(verdicts));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::per_task::*;
    use analyse::memory::per_task::MemoryPerTask;
    use analyse::run::summary::TimePerTask;
    use record::{StopAt, WorkloadStop};

    fn summary(label: &str, memory: bool) -> Summary {
        Summary {
            label: label.into(),
            outcome: "completed: all 1000 alive".into(),
            tasks: Some(1000),
            alive_at_peak: Some(1000),
            wall_s: 1.25,
            time_per_task: Some(TimePerTask {
                spawn_us: Some(40.0),
                user_us: 1.5,
                sys_us: 100.25,
                minor_faults: 2.5,
                voluntary_switches: 3.0,
                involuntary_switches: 0.125,
            }),
            memory_per_task: memory.then(|| MemoryPerTask {
                rss_kb: 8.0,
                kernel_stack_kb: 16.0,
                page_tables_kb: 4.0,
                slab_kb: 6.0,
                total_kb: 34.0,
                mem_available_drop_kb: 35.0,
                cgroup_kb: Some(34.5),
                difference_percent: Some(-2.9),
                adds_up: true,
                kernel_source: "slabinfo".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn machine(host: &str, cores: usize) -> Fingerprint {
        Fingerprint {
            hostname: host.into(),
            cores,
            kernel: "6.1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn per_task_table_has_time_then_memory_rows() {
        let md = per_task_table(&summary("t", true)).markdown();
        assert_eq!(
            md,
            "| figure | per task |\n|---|---|\n\
             | spawn time | 40.00 µs |\n\
             | user time | 1.50 µs |\n\
             | system time | 100.25 µs |\n\
             | minor page faults | 2.50 |\n\
             | context switches (voluntary / involuntary) | 3.00 / 0.125 |\n\
             | RSS | 8.0 KiB |\n\
             | kernel stack | 16.0 KiB |\n\
             | page tables | 4.0 KiB |\n\
             | slab | 6.0 KiB |\n\
             | total (RSS + kernel) | 34.0 KiB |\n\
             | MemAvailable drop | 35.0 KiB |\n\
             | charged to the run's cgroup | 34.5 KiB |\n"
        );
        let mut s = summary("t", false);
        s.time_per_task = None;
        assert!(per_task_table(&s).is_empty());
        assert!(!markdown(&s, &machine("h", 2)).contains("## Per task"));
    }

    #[test]
    fn a_base_that_held_tasks_is_said_instead_of_something_outside_the_run() {
        let mut s = summary("threads hold --n 1000", true);
        let m = s.memory_per_task.as_mut().unwrap();
        (m.adds_up, m.difference_percent) = (false, Some(-16.0));
        m.charge_difference_percent = Some(-0.3);
        let clean = adds_up_line(&s).unwrap();
        assert!(
            clean.ends_with(
                "the parts match (-0.3 %): something outside the run moved MemAvailable."
            ),
            "{clean}"
        );
        s.base_held_tasks = Some(
            "165 threads at the base, where the threads workload has 1 before its first task: 164 had started".into(),
        );
        let held = adds_up_line(&s).unwrap();
        assert!(
            held.ends_with(" The base held tasks of the run already (165 threads at the base, where the threads workload has 1 before its first task: 164 had started): the parts miss some of what they held, the MemAvailable drop does not."),
            "{held}"
        );
        assert!(!held.contains("something outside"), "{held}");
    }

    #[test]
    fn the_start_gates_wait_is_said_and_left_out() {
        let gate = |at_once, rcu_barrier| WorkloadStop {
            from_t_ns: 1_000_000_000,
            to_t_ns: 1_003_000_000,
            at: StopAt::StartGate,
            rcu_barrier,
            at_once,
        };
        assert_eq!(
            stops_sentence(&[gate(true, false)]),
            " The base was read with the workload waiting at its start gate (3.0 ms), before its first phase: nothing of the run had started. Wall times, spawn time and throughput leave the stops out."
        );
        assert!(stops_sentence(&[gate(false, true)]).contains(
            "nothing of the run had started; RCU's deferred frees ran and free memory held still first."
        ));
    }

    #[test]
    fn huge_pages_are_a_row_of_rss_and_a_line_that_says_where_they_land() {
        let mut s = summary("threads hold --n 1000", true);
        assert!(huge_pages_line(&s).is_none(), "no huge pages, no line");
        s.runtime = Some("threads".into());
        let m = s.memory_per_task.as_mut().unwrap();
        m.huge_pages_kb = Some(4.096);
        let line = huge_pages_line(&s).unwrap();
        assert!(
            line.contains("4.1 KiB per task of RSS (51 %, 2 huge pages of 2 MiB)")
                && line.contains("thread stacks"),
            "{line}"
        );
        assert!(per_task_table(&s)
            .markdown()
            .contains("| of which transparent huge pages | 4.1 KiB |"));
        s.runtime = Some("goroutines".into());
        assert!(!huge_pages_line(&s).unwrap().contains("stacks"));
    }

    #[test]
    fn the_conductors_stages_and_the_exit_path_are_said_in_one_line_each() {
        let mut s = summary("threads hold --n 100000", true);
        assert_eq!(stages_line(&s), None, "older records kept no stages");
        s.stages = [
            ("preflight", 900),
            ("settle_before", 6_200),
            ("workload", 13_000),
        ]
        .map(|(name, ms)| record::Stage {
            name: name.into(),
            ns: ms * 1_000_000,
        })
        .to_vec();
        assert_eq!(
            stages_line(&s).unwrap(),
            "The run took 20.1 s until its records were written: preflight 0.9 s, settle before 6.2 s, workload 13.0 s."
        );
        s.spawned = Some(100_000);
        s.stacks_freed_by_threads = Some(99_990);
        assert!(exit_path_line(&s)
            .unwrap()
            .starts_with("Exit path: nearly every thread returned"));
        s.stacks_freed_by_threads = Some(1_921);
        assert!(exit_path_line(&s)
            .unwrap()
            .contains("most threads ended with the process"));
        s.stacks_freed_by_threads = Some(26_000);
        assert!(exit_path_line(&s)
            .unwrap()
            .contains("raced (26,000 madvise calls"));
    }

    #[test]
    fn summary_md_puts_each_table_under_its_heading() {
        let s = summary("threads hold --n 1000", true);
        let md = markdown(&s, &machine("h", 2));
        assert!(md.contains(
            "## As `/usr/bin/time -v` would say\n\n| | |\n|---|---|\n| Command being timed | \"threads hold --n 1000\" |\n"
        ));
        assert!(md.contains(
            "## Per task (1,000 tasks)\n\n| figure | per task |\n|---|---|\n| spawn time | 40.00 µs |\n"
        ));
        assert!(md.contains("| charged to the run's cgroup | 34.5 KiB |\n\nMemory adds up"));
        // The terminal shows the same rows.
        let text = terminal(&s, Path::new("/r"));
        assert!(text.contains("\tCommand being timed: \"threads hold --n 1000\"\n"));
        assert!(text.contains(&format!("\t{:<44} 8.0 KiB\n", "RSS")));
    }

    #[test]
    fn side_by_side_lines_up_the_runs() {
        let runs = [
            (summary("threads hold", true), machine("a", 2)),
            (summary("goroutines hold", false), machine("b", 64)),
        ];
        let t = side_by_side_table(&runs);
        assert_eq!(t.header.len(), 3);
        assert!(t.rows.iter().all(|r| r.len() == 3), "{t:?}");
        let md = side_by_side(&runs);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "| per task | threads hold | goroutines hold |");
        assert_eq!(lines[1], "|---|---|---|");
        assert_eq!(lines[2], "| outcome | completed | completed |");
        assert!(lines.contains(&"| spawn time | 40.00 µs | 40.00 µs |"));
        // A figure one run lacks is a dash, not a shifted column.
        assert!(lines.contains(&"| RSS | 8.0 KiB | — |"));
        assert!(lines.contains(&"| machine | a, 2 cores, 6.1 | b, 64 cores, 6.1 |"));
        assert_eq!(
            lines.last(),
            Some(&"| eBPF cross-checks | not measured | not measured |")
        );
        assert!(lines
            .iter()
            .enumerate()
            .all(|(i, l)| i == 1 || l.matches(" | ").count() == 2));
    }

    /// summary.md as the binary from before the tables were one model wrote it.
    #[test]
    fn recorded_summaries_render_byte_for_byte() {
        let runs = [
            (
                include_str!("../../../../spawnscope/tests/fixtures/before-house/single/20261123T050350Z-threads-sleep-1000/summary.json"),
                include_str!("../../../../spawnscope/tests/fixtures/before-house/single/20261123T050350Z-threads-sleep-1000/machine.json"),
                include_str!("../../../../spawnscope/tests/fixtures/before-house/single/20261123T050350Z-threads-sleep-1000/summary.md"),
            ),
            (
                include_str!("../../../../spawnscope/tests/fixtures/before-house/single/20261123T050354Z-cmd-sleep-4/summary.json"),
                include_str!("../../../../spawnscope/tests/fixtures/before-house/single/20261123T050354Z-cmd-sleep-4/machine.json"),
                include_str!("../../../../spawnscope/tests/fixtures/before-house/single/20261123T050354Z-cmd-sleep-4/summary.md"),
            ),
            (
                include_str!("../../../../spawnscope/tests/fixtures/before-house/compare/20261123T050343Z-threads-sleep-3000/summary.json"),
                include_str!("../../../../spawnscope/tests/fixtures/before-house/compare/20261123T050343Z-threads-sleep-3000/machine.json"),
                include_str!("../../../../spawnscope/tests/fixtures/before-house/compare/20261123T050343Z-threads-sleep-3000/summary.md"),
            ),
        ];
        for (summary, machine, md) in runs {
            let summary: Summary = serde_json::from_str(summary).unwrap();
            let machine: Fingerprint = serde_json::from_str(machine).unwrap();
            assert_eq!(markdown(&summary, &machine), md);
        }
    }
}
