//! Memory per task (analyse::memory::per_task) as people read it: its parts' rows, whether they add
//! up against what memory fell by, the huge pages, and where and when memory was measured.

use crate::table::Table;
use analyse::memory::per_task::{memory_unresolved, ADDS_UP_PERCENT};
use analyse::run::summary::Summary;
use record::{AliveCount, PeakChoice, StopAt, WorkloadStop};
use std::fmt::Write;
use units::{bytes, count, in_unit};

pub(crate) fn kb(v: f64) -> String {
    bytes(v * 1024.0)
}

/// Per-task rows: (figure, value). Memory rows only when a peak was measured.
pub(crate) fn per_task_rows(s: &Summary) -> Vec<(&'static str, String)> {
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

/// A parts-vs-drop difference, or why there is none.
pub fn percent_or_no_drop(difference: Option<f64>) -> String {
    difference.map_or("no drop to compare with".into(), |d| format!("{d:+.1} %"))
}

pub(crate) fn adds_up_line(s: &Summary) -> Option<String> {
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
pub(crate) fn huge_pages_line(s: &Summary) -> Option<String> {
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
pub(crate) fn stages_line(s: &Summary) -> Option<String> {
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

/// When memory was measured and how the tasks alive then were counted (runs that recorded it).
pub(crate) fn measured_at_line(s: &Summary) -> Option<String> {
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
pub(crate) fn stops_sentence(stops: &[WorkloadStop]) -> String {
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
