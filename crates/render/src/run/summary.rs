//! One run's summary as people read it: summary.md, the terminal table in the vocabulary of
//! `/usr/bin/time -v`, and several runs side by side.

use std::fmt::Write;
use std::path::Path;

use analyse::comparisons::headline;
use analyse::probes::counts::{CostFormula, ProbeCost, ProbeSummary};
use analyse::memory::processes::{ProcessRow, Processes};
use analyse::run::summary::{memory_unresolved, ExitPath, Summary, ADDS_UP_PERCENT};
use record::{AliveCount, Fingerprint, PeakChoice, StopAt, WorkloadStop};
use crate::table::{Cell, Table};
use crate::{time::attribution, traces::sched_trace, time::sentinels, serving, time::verdict, probes::waits};
use units::{bytes, count, in_unit};

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
    if memory_unresolved(s.memory_per_task.as_ref()) {
        rows.push(("memory", "not resolved (below)".into()));
    } else if let Some(m) = &s.memory_per_task {
        rows.push(("RSS", kb(m.rss_kb)));
        if let Some(huge) = m.huge_pages_kb {
            rows.push(("of which transparent huge pages", kb(huge)));
        }
        rows.push(("kernel stack", kb(m.kernel_stack_kb)));
        rows.push(("page tables", kb(m.page_tables_kb)));
        rows.push(("slab", kb(m.slab_kb)));
        if let Some(uncharged) = m.slab_uncharged_kb {
            rows.push(("of which no cgroup is charged for", kb(uncharged)));
        }
        rows.push(("total (RSS + kernel)", kb(m.total_kb)));
        if let Some(summed) = m.rss_summed_kb {
            rows.push((
                "RSS summed over the processes (beside PSS; not in the total)",
                kb(summed),
            ));
        }
        if let Some(launchers) = m.launchers_kb {
            rows.push(("+ launchers, apart (not in the total)", kb(launchers)));
        }
        rows.push(("MemAvailable drop", kb(m.mem_available_drop_kb)));
        if let Some(room) = m.slab_room_used_kb {
            rows.push(("+ slab objects in old slabs' room", kb(room)));
        }
        if let Some(stacks) = m.stacks_awaiting_free_kb {
            rows.push(("− exited threads' stacks not yet freed", kb(stacks)));
        }
        if let Some(split) = m.huge_pages_awaiting_split_kb {
            rows.push((
                "− exited threads' huge pages awaiting their split",
                kb(split),
            ));
        }
        if let Some(charged) = m.cgroup_kb {
            rows.push(("charged to the run's cgroup", kb(charged)));
        }
    }
    rows
}

/// The per-task table; no rows when neither time nor memory was measured per task.
pub fn per_task_table(s: &Summary) -> Table {
    let mut t = Table::new(["figure", "per task"]);
    for (label, value) in per_task_rows(s) {
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

/// A parts-vs-drop difference, or why there is none.
pub fn percent_or_no_drop(difference: Option<f64>) -> String {
    difference.map_or("no drop to compare with".into(), |d| format!("{d:+.1} %"))
}

fn adds_up_line(s: &Summary) -> Option<String> {
    let m = s.memory_per_task.as_ref()?;
    // A server's MemAvailable drop holds the load generator too (wrk and its sockets, outside
    // the run's cgroup): its parts are checked against what the run alone was charged.
    if let (Some(_), Some(charge)) = (&s.serve, m.charge_difference_percent) {
        return Some(format!(
            "Memory {} the server's own charge: parts {} per connection ({charge:+.1} % of what its cgroup was charged, less page cache). MemAvailable fell by {} per connection: wrk and its sockets' half of each connection run outside the cgroup.",
            if charge.abs() <= ADDS_UP_PERCENT {
                "adds up against"
            } else {
                "does NOT add up against"
            },
            kb(m.total_kb),
            kb(m.mem_available_drop_kb)
        ));
    }
    // Too little held to resolve: the note and the raw comparison, no figure to quote.
    if !m.resolution.resolved {
        return Some(format!(
            "Memory per task {} (recorded in summary.json: parts {} vs MemAvailable drop {} per task, {}).",
            m.resolution.resolution_note,
            kb(m.total_kb),
            kb(m.mem_available_drop_kb),
            percent_or_no_drop(m.difference_percent)
        ));
    }
    let corrections = m.slab_room_used_kb.is_some()
        || m.stacks_awaiting_free_kb.is_some()
        || m.huge_pages_awaiting_split_kb.is_some();
    let mut line = format!(
        "Memory {}: parts {} vs MemAvailable drop {} per task ({}; kernel parts from {}).",
        if m.adds_up {
            "adds up".to_string()
        } else {
            format!("does NOT add up within ±{ADDS_UP_PERCENT:.0} %")
        },
        kb(m.total_kb),
        if corrections {
            format!(
                "{}, with the slab room used and less the stacks not yet freed{}",
                kb(m.drop_compared_kb()),
                if m.huge_pages_awaiting_split_kb.is_some() {
                    " and the huge pages awaiting their split"
                } else {
                    ""
                }
            )
        } else {
            kb(m.mem_available_drop_kb)
        },
        percent_or_no_drop(m.difference_percent),
        match (&m.rss_counted, &m.rss_source) {
            (Some(rss), Some(read)) => format!("{}; RSS: {rss}, {read}", m.kernel_source),
            (Some(rss), None) | (None, Some(rss)) => format!("{}; RSS: {rss}", m.kernel_source),
            (None, None) => m.kernel_source.clone(),
        }
    );
    // Memory used for the first time since boot is in the drop (it was free), and it is why the
    // first big run after boot is slow: say how much.
    if let Some(first) = m.first_used_kb.filter(|&f| f > 0.0) {
        let _ = write!(
            line,
            " Of the drop, {} per task was memory the kernel initialized for the first time since boot (free before the run; slow on first use: see the time verdict).",
            kb(first)
        );
    }
    // A base that held tasks of the run: its parts (read after MemAvailable, the cgroup's charge
    // last) miss some of what they held, the drop does not. Said whether or not it adds up.
    if let Some(why) = &s.base_held_tasks {
        let _ = write!(
            line,
            " The base held tasks of the run already ({why}): the parts miss some of what they held, the MemAvailable drop does not."
        );
    }
    // When MemAvailable disagrees but the run's own charge agrees, and the base was clean, the
    // difference came from outside the run: say so.
    if let (false, Some(charge), None) =
        (m.adds_up, m.charge_difference_percent, &s.base_held_tasks)
    {
        if charge.abs() <= ADDS_UP_PERCENT {
            let _ = write!(
                line,
                " What the run's cgroup was charged (less page cache) the parts match ({charge:+.1} %): something outside the run moved MemAvailable."
            );
        }
    }
    Some(line)
}

/// Transparent huge pages in the run's RSS, where there were any: what they mean for the figure.
/// Where in the address space they are smaps_rollup does not say: with OS threads, the kernels
/// that map thread stacks without VM_NOHUGEPAGE put them on stacks.
fn huge_pages_line(s: &Summary) -> Option<String> {
    let m = s.memory_per_task.as_ref()?;
    let huge = m.huge_pages_kb?;
    let share = huge / m.rss_kb.max(f64::MIN_POSITIVE) * 100.0;
    let pages = s
        .alive_at_peak
        .map(|alive| {
            format!(
                ", {} huge pages of 2 MiB",
                count((huge * alive as f64 / 2048.0).round() as u64)
            )
        })
        .unwrap_or_default();
    // Tasks that are OS threads: the runtime's descriptor says so (a command's label is no
    // runtime's name).
    let threads = runtime::Runtime::ALL
        .iter()
        .any(|r| Some(r.name()) == s.runtime.as_deref() && r.describe().tasks_are_threads);
    let where_ = if threads {
        " With OS threads they land on thread stacks where the kernel maps stacks without VM_NOHUGEPAGE (before 6.8) and THP is `always`: every stack that starts on a 2 MiB boundary gets a whole 2 MiB page."
    } else {
        ""
    };
    Some(format!(
        "Transparent huge pages: {} per task of RSS ({share:.0} %{pages}).{where_} How many varies from run to run, and so does RSS; for a stable figure: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled.",
        kb(huge)
    ))
}

/// Where the conductor's own time went: what a run costs besides the workload (calibration,
/// probes, waiting for free memory to hold still), to see what a sweep or the main job waits on.
fn stages_line(s: &Summary) -> Option<String> {
    if s.stages.is_empty() {
        return None;
    }
    let secs = |ns: u64| format!("{:.1} s", ns as f64 / 1e9);
    let total: u64 = s.stages.iter().map(|st| st.ns).sum();
    let parts: Vec<String> = s
        .stages
        .iter()
        .map(|st| format!("{} {}", st.name.replace('_', " "), secs(st.ns)))
        .collect();
    Some(format!(
        "The run took {} until its records were written: {}.",
        secs(total),
        parts.join(", ")
    ))
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

/// When memory was measured and how the tasks alive then were counted (runs that recorded it).
fn measured_at_line(s: &Summary) -> Option<String> {
    let m = s.peak_moment.as_ref()?;
    let chosen = match &m.chosen {
        PeakChoice::PeakEvent => "the workload's peak event (every task alive, parked)".into(),
        PeakChoice::MostAlive { samples } => format!(
            "the moment the most tasks were alive (the most of {} snapshots)",
            count(*samples)
        ),
        PeakChoice::Stopped { samples } => format!(
            "a moment with nearly the most tasks alive (of {} snapshots), the workload stopped for the reading",
            count(*samples)
        ),
        PeakChoice::MostMemory => "the moment of most memory in use (sampled every 100 ms)".into(),
        PeakChoice::Matched { line } => {
            format!(
                "the first stdout line matching --peak-when, \"{}\"",
                line.trim()
            )
        }
    };
    let counted = match &m.counted {
        AliveCount::PeakEvent => "counted by the workload".into(),
        AliveCount::ThreadsInSnapshot { before } if s.runtime.is_none() => format!(
            "OS threads in the same /proc/PID/status reading as RSS, less {before} main thread"
        ),
        AliveCount::ThreadsInSnapshot { before } => format!(
            "OS threads in the same /proc/PID/status reading as RSS, less the {before} there when \
             memory counting began"
        ),
        AliveCount::ThreadsInTree {
            processes,
            launchers,
        } => format!(
            "OS threads of the run's {} processes in the same readings as their memory, less \
             each one's main thread{}",
            count(*processes),
            match launchers {
                0 => String::new(),
                1 => " and the launcher's (a process that holds none of the tasks)".into(),
                n => format!(" and the {n} launchers' (processes that hold none of the tasks)"),
            }
        ),
        AliveCount::Progress { lag_ns } => format!(
            "the workload's live count in its progress event {} before",
            in_unit(*lag_ns as f64, "ns")
        ),
        AliveCount::ResultEvent => "the workload's live count as that phase began".into(),
        AliveCount::AssumedTasks { os_threads } => format!(
            "--tasks, taken as a runtime's tasks (--task-kind task): the command ran {} OS \
             threads at that moment, far fewer than --tasks; give --task-kind to say which",
            count(*os_threads)
        ),
        AliveCount::Declared => {
            "--tasks: the command's word, its tasks not being OS threads".into()
        }
    };
    let averaged = match s.memory_per_task.as_ref().and_then(|m| m.moments.as_ref()) {
        Some(moments) => format!(
            " Averaged with the {} other moments with nearly as many alive ({}–{}), weighted by tasks alive.",
            moments.count - 1,
            count(moments.alive_min),
            count(moments.alive_max)
        ),
        None => String::new(),
    };
    let stopped = stops_sentence(&s.stops);
    Some(match m.alive {
        Some(alive) => format!(
            "Memory measured at {chosen}: {} tasks alive ({counted}).{averaged}{stopped}",
            count(alive)
        ),
        None => format!("Memory measured at {chosen}; tasks alive unknown (no --tasks)."),
    })
}

/// What the stops for memory readings did, and that the times leave them out.
fn stops_sentence(stops: &[WorkloadStop]) -> String {
    let ms = |stop: &WorkloadStop| in_unit(stop.span_ns() as f64, "ns");
    let mut line = String::new();
    if let Some(gate) = stops.iter().find(|st| st.at == StopAt::StartGate) {
        let _ = write!(
            line,
            " The base was read with the workload waiting at its start gate ({}), before its first phase: nothing of the run had started{}.",
            ms(gate),
            match (gate.at_once, gate.rcu_barrier) {
                (true, _) => "",
                (false, true) => "; RCU's deferred frees ran and free memory held still first",
                (false, false) => {
                    "; free memory held still first (no rcu_barrier without root)"
                }
            }
        );
    }
    if let Some(base) = stops.iter().find(|st| st.at == StopAt::FirstPhase) {
        let _ = write!(
            line,
            " The base was read with the workload stopped (SIGSTOP, {}), the threads it had already started and their memory at one moment.",
            ms(base)
        );
    }
    if let Some(reading) = stops
        .iter()
        .find(|st| !matches!(st.at, StopAt::StartGate | StopAt::FirstPhase))
    {
        let _ = write!(
            line,
            " For the reading it was stopped {} for {}: no task started or exited while {} and free memory held still; then it went on.",
            match reading.at {
                StopAt::AfterSpawning => "as spawning ended",
                _ => "once tasks were exiting as fast as others started",
            },
            ms(reading),
            if reading.rcu_barrier {
                "RCU's deferred frees (exited threads' stacks and task structs) ran"
            } else {
                "the kernel's deferred frees were waited on (no rcu_barrier without root)"
            }
        );
    }
    if !stops.is_empty() {
        line += " Wall times, spawn time and throughput leave the stops out.";
    }
    line
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
        let _ = writeln!(md, "- Runtime-traced: {}", crate::runtimes::go_sched::RUNTIME_TRACED);
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

/// Rows of the processes' table shown in summary.md and on the terminal: a processes run holds
/// one process per task (summary.json keeps every row).
const TREE_ROWS_MD: usize = 20;
const TREE_ROWS_TERMINAL: usize = 6;

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
fn processes_line(s: &Summary, p: &Processes) -> String {
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

/// The probes' counts: total, per task and per phase.
pub fn probes_table(p: &ProbeSummary) -> Table {
    let mut t = Table::new(
        ["metric", "total", "per task"]
            .map(String::from)
            .into_iter()
            .chain(p.phases.iter().cloned()),
    );
    for row in &p.rows {
        let mut cells = vec![
            spawnscope_collector::metric_label(&row.metric).to_string(),
            in_unit(row.total as f64, &row.unit),
            row.per_task.map_or("—".into(), |v| in_unit(v, &row.unit)),
        ];
        cells.extend(row.per_phase.iter().map(|v| in_unit(*v as f64, &row.unit)));
        t.row(cells);
    }
    t
}

/// The probes' latency histograms: samples and upper bounds of the median and 99th percentile.
pub fn latencies_table(p: &ProbeSummary) -> Table {
    let q = |v: Option<u64>| v.map_or("?".into(), |v| in_unit(v as f64, "ns"));
    let mut t = Table::new(["latency (log2 buckets)", "samples", "p50 ≤", "p99 ≤"]);
    for l in &p.latencies {
        t.row([l.name.clone(), count(l.count), q(l.p50_ns), q(l.p99_ns)]);
    }
    t
}

/// The probes' counts against the kernel's own accounting.
pub fn cross_checks_table(p: &ProbeSummary) -> Table {
    let mut t = Table::new([
        "check",
        "expected (kernel's count, or the tasks said)",
        "counted by the probes",
        "tolerance",
        "verdict",
    ]);
    for c in &p.cross_checks {
        let observed = if c.observed == c.observed_max {
            count(c.observed)
        } else {
            format!("{}..{}", count(c.observed), count(c.observed_max))
        };
        t.row([
            c.name.clone(),
            count(c.expected),
            observed,
            count(c.tolerance),
            format!("{:?}", c.verdict),
        ]);
    }
    t
}

fn probes_markdown(md: &mut String, p: &ProbeSummary) {
    let _ = writeln!(
        md,
        "\n## eBPF probes (in-kernel counts for the workload's tasks)\n"
    );
    md.push_str(&probes_table(p).markdown());
    if !p.latencies.is_empty() {
        md.push('\n');
        md.push_str(&latencies_table(p).markdown());
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
    md.push_str(&cross_checks_table(p).markdown());
    if !p.not_loaded.is_empty() {
        let _ = writeln!(md, "\nProbes not loaded: {}", p.not_loaded.join("; "));
    }
    if let Some(cost) = &p.cost {
        let _ = writeln!(md, "\n### What the probes cost: {}\n", cost_line(cost));
        md.push_str(&probe_cost_table(cost).markdown());
    }
}

/// The probes' cost in one line: time in BPF programs, and its share of the workload's CPU time.
pub fn cost_line(cost: &ProbeCost) -> String {
    let share = cost.share_of_cpu.map_or(String::new(), |s| {
        format!(", {:.1} % of the workload's CPU time", s * 100.0)
    });
    let basis = match (&cost.rates_from, cost.sampled_share) {
        (Some(from), _) => format!(
            "each program's runs at its ns per run in the probes' calibration run ({from}); the kernel's run-time statistics off in this run"
        ),
        // Recorded with the statistics on for the whole run: what they measured.
        (None, None) => "the kernel's run-time statistics".to_string(),
        (None, Some(on)) if on >= 0.999 => {
            "the kernel's run-time statistics, on for the whole run".into()
        }
        (None, Some(on)) => format!(
            "each program's runs at its ns per run while the kernel's run-time statistics were on, {:.0} % of the run",
            on * 100.0
        ),
    };
    // The statistics time a run from their first clock read to their second: each run's time
    // holds one of their own reads (measure/probe_cost.rs measures how much that is).
    let own_read = if cost.total_ns > 0 {
        "; each run's time holds one of the statistics' own clock reads"
    } else {
        ""
    };
    let not_in_it = "not in it: the tracepoints' dispatch and the syscall-tracing slow path around the run's own events (docs/manual/probe-cost.md)";
    let Some(f) = &cost.formula else {
        // Recorded before the pair counted what it filtered out: every run at its program's ns.
        return format!(
            "{} in BPF programs over {} runs{share} ({basis}{own_read}); {not_in_it}",
            in_unit(cost.total_ns as f64, "ns"),
            count(cost.events)
        );
    };
    format!(
        "{}; {not_in_it}; every time figure of this run includes the programs' part ({basis}{own_read})",
        formula_text(f)
    )
}

/// The formula with its parts: "total = Σ program events × ns (= programs) + the host's share
/// (filtered-out syscalls × the pair's floor) = total, share of the workload's CPU time".
pub fn formula_text(f: &CostFormula) -> String {
    let terms = if f.terms.is_empty() {
        "no event of the run's own".to_string()
    } else {
        f.terms
            .iter()
            .map(|t| {
                if t.ns_per_event > 0.0 {
                    format!(
                        "{} {} × {:.0} ns",
                        t.program,
                        count(t.events),
                        t.ns_per_event
                    )
                } else {
                    // A program the calibration never ran: no time, not a guess.
                    format!("{} {} × not timed", t.program, count(t.events))
                }
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let host = match &f.host {
        None => " + the host's share: no syscall of another process seen".to_string(),
        Some(h) => {
            let parts: Vec<String> = h
                .hooks
                .iter()
                .map(|t| match t.floor_ns {
                    Some(floor) => format!("{} × {:.0} ns", count(t.filtered_out), floor),
                    None => format!("{} × its floor (not timed)", count(t.filtered_out)),
                })
                .collect();
            let value = h.ns.map_or_else(
                || "not counted: the calibration timed no floor".to_string(),
                |ns| in_unit(ns, "ns"),
            );
            format!(
                " + the host's share, the syscalls of other processes the raw_syscalls pair filtered out × the pair's floor: {} (= {value}, paid by those processes)",
                parts.join(" + ")
            )
        }
    };
    let share = f.share_of_cpu.map_or(String::new(), |s| {
        format!(", {:.2} % of the workload's CPU time", s * 100.0)
    });
    format!(
        "{} = Σ the run's own events × each program's ns: {terms} (= {}){host}{share}",
        in_unit(f.total_ns, "ns"),
        in_unit(f.programs_ns, "ns"),
    )
}

/// Per program: how often it ran, for how long, per run.
pub fn probe_cost_table(cost: &ProbeCost) -> Table {
    let mut t = Table::new(["program", "tracepoint", "runs", "total", "per run", "share"])
        .right_aligned([2, 3, 4, 5]);
    for p in &cost.programs {
        t.row([
            p.program.clone(),
            p.tracepoint.clone(),
            count(p.events),
            in_unit(p.total_ns as f64, "ns"),
            format!("{:.0} ns", p.ns_per_event),
            format!(
                "{:.1} %",
                p.total_ns as f64 * 100.0 / cost.total_ns.max(1) as f64
            ),
        ]);
    }
    t
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
            let _ = writeln!(
                out,
                "  swimlane: {}",
                dir.join(record::SWIMLANE).display()
            );
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

/// The probe figures a terminal line has room for.
fn probe_highlights(p: &ProbeSummary) -> String {
    KEY_PROBES
        .iter()
        .filter(|(_, on_terminal)| *on_terminal)
        .map(|(name, _)| name)
        .filter_map(|name| {
            let row = p.rows.iter().find(|r| r.metric == *name)?;
            Some(format!("{name} {}", in_unit(row.per_task?, &row.unit)))
        })
        .collect::<Vec<_>>()
        .join(", ")
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

/// The probe figures shown beyond summary.md's full table, per task: in `report`'s side-by-side
/// view, and (those marked) on the terminal's one line.
const KEY_PROBES: &[(&str, bool)] = &[
    ("faults", true),
    ("clones", true),
    ("switches_voluntary", true),
    ("switches_involuntary", true),
    ("oncpu_ns", true),
    ("runq_ns", true),
    ("futex_waits", true),
    ("mmap_calls", true),
    ("munmap_calls", false),
];

#[cfg(test)]
mod tests {
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

    use super::*;
    use analyse::run::summary::{MemoryPerTask, TimePerTask};

    #[test]
    fn the_cost_line_is_the_formula_with_its_parts() {
        use analyse::probes::counts::{cost_formula, ProgramCostRow};
        use record::FloorRate;
        let programs = vec![
            ProgramCostRow {
                program: "btf_sys_enter".into(),
                tracepoint: "raw_syscalls:sys_enter".into(),
                events: 1_500,
                filtered_out: 500,
                total_ns: 90_000,
                ns_per_event: 60.0,
            },
            ProgramCostRow {
                program: "btf_sys_exit".into(),
                tracepoint: "raw_syscalls:sys_exit".into(),
                events: 1_400,
                filtered_out: 400,
                total_ns: 70_000,
                ns_per_event: 50.0,
            },
            ProgramCostRow {
                program: "btf_sched_switch".into(),
                tracepoint: "sched:sched_switch".into(),
                events: 2_000,
                filtered_out: 0,
                total_ns: 160_000,
                ns_per_event: 80.0,
            },
        ];
        let floors = vec![
            FloorRate {
                hook: "raw_syscalls:sys_enter".into(),
                runs: 10,
                ns: 500,
            },
            FloorRate {
                hook: "raw_syscalls:sys_exit".into(),
                runs: 10,
                ns: 400,
            },
        ];
        // 2 ms of the workload's CPU.
        let f = cost_formula(&programs, &floors, Some(2_000));
        // Every run at its ns: 1,500 × 60 + 1,400 × 50 + 2,000 × 80 = 320 µs; the host's: 500 × 50
        // + 400 × 40 = 41 µs at the floors; the run's own the rest: 65 + 54 + 160 = 279 µs (its
        // own events dearer than the average, which the cheap filtered-out runs pull down).
        assert_eq!(f.programs_ns, 279_000.0);
        assert_eq!(f.host.as_ref().unwrap().ns, Some(41_000.0));
        assert_eq!(f.total_ns, 320_000.0);
        let cost = ProbeCost {
            events: 4_900,
            total_ns: 320_000,
            rates_from: Some("threads hold --n 2500, lean probes, 2026-11-28T04:00:00Z".into()),
            formula: Some(f.clone()),
            programs,
            ..Default::default()
        };
        assert_eq!(
            cost_line(&cost),
            "320.0 µs = Σ the run's own events × each program's ns: btf_sched_switch 2,000 × 80 ns + btf_sys_enter 1,000 × 65 ns + btf_sys_exit 1,000 × 54 ns (= 279.0 µs) + the host's share, the syscalls of other processes the raw_syscalls pair filtered out × the pair's floor: 500 × 50 ns + 400 × 40 ns (= 41.0 µs, paid by those processes), 16.00 % of the workload's CPU time; not in it: the tracepoints' dispatch and the syscall-tracing slow path around the run's own events (docs/manual/probe-cost.md); every time figure of this run includes the programs' part (each program's runs at its ns per run in the probes' calibration run (threads hold --n 2500, lean probes, 2026-11-28T04:00:00Z); the kernel's run-time statistics off in this run; each run's time holds one of the statistics' own clock reads)"
        );
        // No floor timed: the host's runs said, not turned into a figure (their time stays in the programs').
        let unfloored = cost_formula(&cost.programs, &[], None);
        assert_eq!(unfloored.total_ns, 320_000.0);
        assert!(formula_text(&unfloored).contains(
            "500 × its floor (not timed) + 400 × its floor (not timed) (= not counted: the calibration timed no floor"
        ), "{}", formula_text(&unfloored));
        // A record from before the pair counted its filtered runs: the programs' time alone.
        let old = ProbeCost {
            formula: None,
            sampled_share: Some(1.0),
            share_of_cpu: Some(0.16),
            ..cost
        };
        assert_eq!(
            cost_line(&old),
            "320.0 µs in BPF programs over 4,900 runs, 16.0 % of the workload's CPU time (each program's runs at its ns per run in the probes' calibration run (threads hold --n 2500, lean probes, 2026-11-28T04:00:00Z); the kernel's run-time statistics off in this run; each run's time holds one of the statistics' own clock reads); not in it: the tracepoints' dispatch and the syscall-tracing slow path around the run's own events (docs/manual/probe-cost.md)"
        );
    }

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
