//! The noise sentinels as summary.md's "Noise sentinels" section: one row per phase, one column
//! per sentinel this host gives; what it cannot give is listed as "not available here", with why.

use std::fmt::Write;

use crate::table::Table;
use analyse::time::sentinels::{PhaseSentinels, SentinelFigures};
use units::{bytes, count};

fn ms(ns: u64) -> String {
    format!("{:.0} ms", ns as f64 / 1e6)
}

/// One column: its header, and the cell of a phase (None where the phase has no figure).
struct Column {
    header: &'static str,
    cell: fn(&PhaseSentinels) -> Option<String>,
}

fn pair(a: Option<u64>, a_name: &str, b: Option<u64>, b_name: &str) -> Option<String> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(format!(
            "{} {a_name}, {} {b_name}",
            a.map_or("?".into(), count),
            b.map_or("?".into(), count)
        )),
    }
}

/// Kernel threads' CPU and its largest families: "650 ms (kworker 420 ms, rcu 150 ms, …)".
fn kernel_threads_cell(p: &PhaseSentinels) -> Option<String> {
    let all = p.kernel_threads_cpu_ns?;
    let mut families: Vec<(&String, &u64)> = p.kernel_threads_by_family_ns.iter().collect();
    families.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = families
        .iter()
        .take(KERNEL_THREAD_FAMILIES_SHOWN)
        .map(|(f, ns)| format!("{f} {}", ms(**ns)))
        .collect();
    let more = if families.len() > KERNEL_THREAD_FAMILIES_SHOWN {
        ", …"
    } else {
        ""
    };
    Some(if shown.is_empty() {
        ms(all)
    } else {
        format!("{} ({}{more})", ms(all), shown.join(", "))
    })
}

/// The kernel threads' families named in a cell, largest first (the rest are in summary.json).
const KERNEL_THREAD_FAMILIES_SHOWN: usize = 3;

/// A signed CPU time: "−40 ms".
fn signed_ms(ns: i64) -> String {
    let ms = (ns as f64 / 1e6).round();
    if ms < 0.0 {
        format!("−{:.0} ms", -ms)
    } else {
        format!("{ms:.0} ms")
    }
}

/// CPU outside the run: where the marks read it as one, the signed balance and its
/// resolution ("−40 ms ± 50 ms"), else the floored figure; and in CPUs.
fn outside_cell(p: &PhaseSentinels) -> Option<String> {
    let outside = p.outside_cpu_ns?;
    let cpus = if p.wall_ns > 0 {
        outside as f64 / p.wall_ns as f64
    } else {
        0.0
    };
    Some(
        match (p.outside_cpu_balance_ns, p.outside_cpu_resolution_ns) {
            (Some(balance), Some(resolution)) => format!(
                "{} ± {} ({cpus:.2} CPUs)",
                signed_ms(balance),
                ms(resolution)
            ),
            _ => format!("{} ({cpus:.2} CPUs)", ms(outside)),
        },
    )
}

/// The processes outside the run that took the most, with their CPU: "stress-ng (PID 42)
/// 800 ms, bash (PID 7) 20 ms"; "none" where every process was read and none ran.
fn processes_cell(p: &PhaseSentinels) -> Option<String> {
    p.outside_processes_cpu_ns?;
    let shown: Vec<String> = p
        .outside_processes
        .iter()
        .take(PROCESSES_SHOWN)
        .map(|s| format!("{} {}", s.label(), ms(s.cpu_ns)))
        .collect();
    Some(if shown.is_empty() {
        "none".into()
    } else {
        shown.join(", ")
    })
}

/// The processes named in a cell, most CPU first (summary.json keeps five).
const PROCESSES_SHOWN: usize = 3;

const COLUMNS: [Column; 13] = [
    Column {
        header: "steal",
        cell: |p| p.steal_ns.map(ms),
    },
    Column {
        header: "spawnscope itself",
        cell: |p| p.spawnscope_cpu_ns.map(ms),
    },
    Column {
        header: "CPU outside the run",
        cell: outside_cell,
    },
    Column {
        header: "of it processes (most CPU)",
        cell: processes_cell,
    },
    Column {
        header: "of it kernel threads",
        cell: kernel_threads_cell,
    },
    Column {
        header: "first used since boot",
        cell: |p| p.first_used_bytes.map(|b| bytes(b as f64)),
    },
    Column {
        header: "reported free to host",
        cell: |p| p.reported_bytes.map(|b| bytes(b as f64)),
    },
    Column {
        header: "balloon",
        cell: |p| p.balloon_pages.map(|n| format!("{n:+} pages")),
    },
    Column {
        header: "direct reclaim",
        cell: |p| {
            pair(
                p.direct_reclaim_stalls,
                "stalls",
                p.direct_reclaim_scanned,
                "scanned",
            )
        },
    },
    Column {
        header: "compaction",
        cell: |p| {
            pair(
                p.compaction_stalls,
                "stalls",
                p.compaction_failures,
                "failed",
            )
        },
    },
    Column {
        header: "THP",
        cell: |p| {
            pair(
                p.thp_fault_alloc,
                "faults",
                p.thp_collapse_alloc,
                "collapses",
            )
        },
    },
    Column {
        header: "runnable outside (max, mean)",
        cell: |p| {
            Some(format!(
                "{:.0}, {:.1}",
                p.runnable_outside_max?, p.runnable_outside_mean?
            ))
        },
    },
    Column {
        header: "CPU MHz",
        cell: |p| match (p.freq_khz_min, p.freq_khz_max) {
            (Some(lo), Some(hi)) if lo == hi => Some(format!("{}", lo / 1000)),
            (Some(lo), Some(hi)) => Some(format!("{}–{}", lo / 1000, hi / 1000)),
            _ => None,
        },
    },
];

/// Per phase: wall, then every sentinel column some phase has a figure for.
pub fn table(f: &SentinelFigures) -> Table {
    let shown: Vec<&Column> = COLUMNS
        .iter()
        .filter(|c| f.per_phase.iter().any(|p| (c.cell)(p).is_some()))
        .collect();
    let header = ["phase", "wall"]
        .into_iter()
        .chain(shown.iter().map(|c| c.header));
    let mut t = Table::new(header).right_aligned(1..2 + shown.len());
    for p in &f.per_phase {
        let cells = [p.name.clone(), ms(p.wall_ns)]
            .into_iter()
            .chain(shown.iter().map(|c| (c.cell)(p).unwrap_or("—".into())));
        t.row(cells);
    }
    t
}

/// How CPU outside the run was read: from what the CPUs did not do, spawnscope's own apart,
/// where every mark read the CPU as one; else as records from before read it.
fn outside_definition(f: &SentinelFigures) -> String {
    let run = f.run_cpu_source.as_deref().unwrap_or("?");
    if f.per_phase
        .iter()
        .any(|p| p.outside_cpu_resolution_ns.is_some())
    {
        format!(
            "CPU outside the run: the CPUs' capacity (CPUs × wall) less idle, iowait and steal (/proc/stat, clocked exactly on a tickless kernel, where its busy columns are sampled at the tick) less the run's ({run}) less spawnscope's own (its every thread, CLOCK_PROCESS_CPUTIME_ID, and its children outside the run), read back to back at each mark; signed, ± what the reading may be off by (/proc/stat's 1/100 s units, a scheduler tick of the run's counter per CPU, the readings' span): a figure within it is rounding, not a finding. Of it processes: every process's utime+stime and its ended children's (/proc/PID/stat at each mark)."
        )
    } else {
        format!("CPU outside the run: the machine's busy time (user, nice, system, irq, softirq; /proc/stat, in 1/100 s ticks, coarse for short phases) less the run's ({run}).")
    }
}

/// The section, from its heading on.
pub fn markdown(f: &SentinelFigures) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "\n## Noise sentinels\n");
    let _ = writeln!(
        md,
        "What else the machine did in each phase (read only). {} Runnable outside: procs_running at each 100 ms tick less the sampler and the run's average concurrency, an estimate; — where no tick fell in the phase.{}\n",
        outside_definition(f),
        if f.per_phase.iter().any(|p| p.kernel_threads_cpu_ns.is_some()) {
            " Of it kernel threads: the growth of every kernel thread's utime+stime (/proc/PID/stat of kthreadd and its children, read at each mark; one that exited meanwhile is not counted), by family; the time verdict leaves it out of other programs' CPU where the collector did not count it."
        } else {
            ""
        }
    );
    md.push_str(&table(f).markdown());
    if !f.unavailable.is_empty() {
        md.push('\n');
        for u in &f.unavailable {
            let _ = writeln!(md, "- {}: not available here ({})", u.sentinel, u.reason);
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::time::sentinels::Unavailable;

    #[test]
    fn columns_for_what_was_measured_and_a_line_for_what_was_not() {
        let f = SentinelFigures {
            reported_at: None,
            run_cpu_source: Some("cgroup v1 cpuacct.usage".into()),
            per_phase: vec![PhaseSentinels {
                name: "spawn".into(),
                wall_ns: 2_000_000_000,
                steal_ns: Some(30_000_000),
                outside_cpu_ns: Some(1_000_000_000),
                balloon_pages: Some(0),
                direct_reclaim_stalls: Some(0),
                direct_reclaim_scanned: Some(0),
                runnable_outside_max: Some(2.0),
                runnable_outside_mean: Some(0.5),
                ..Default::default()
            }],
            unavailable: vec![Unavailable {
                sentinel: "cpu_frequency".into(),
                reason: "no cpufreq".into(),
            }],
        };
        let md = markdown(&f);
        assert!(md.contains(
            "| phase | wall | steal | CPU outside the run | balloon | direct reclaim | runnable outside (max, mean) |"
        ), "{md}");
        assert!(md.contains(
            "| spawn | 2000 ms | 30 ms | 1000 ms (0.50 CPUs) | +0 pages | 0 stalls, 0 scanned | 2, 0.5 |"
        ), "{md}");
        assert!(md.contains("- cpu_frequency: not available here (no cpufreq)"));
        assert!(md.contains("(cgroup v1 cpuacct.usage)"));
        assert!(
            !md.contains("of it kernel threads |") && !md.contains("Of it kernel threads"),
            "no column, no words without the figure"
        );
    }

    /// A phase read as one: spawnscope's own CPU, the signed balance with its resolution, and
    /// who took the CPU outside the run, with the words that say how it was read.
    #[test]
    fn spawnscope_apart_the_balance_signed_and_the_processes_named() {
        let share = |pid, comm: &str, ms: u64| analyse::time::outside_cpu::ProcessShare {
            pid,
            comm: comm.into(),
            cpu_ns: ms * 1_000_000,
        };
        let p = PhaseSentinels {
            name: "join".into(),
            wall_ns: 1_000_000_000,
            outside_cpu_ns: Some(0),
            outside_cpu_balance_ns: Some(-40_000_000),
            outside_cpu_resolution_ns: Some(50_200_000),
            spawnscope_cpu_ns: Some(180_000_000),
            outside_processes_cpu_ns: Some(30_000_000),
            outside_processes: vec![
                share(4321, "burner", 20),
                share(77, "bash", 10),
                share(12, "cron", 0),
                share(13, "sshd", 0),
            ],
            ..Default::default()
        };
        let f = SentinelFigures {
            per_phase: vec![p],
            ..Default::default()
        };
        let md = markdown(&f);
        assert!(
            md.contains("| phase | wall | spawnscope itself | CPU outside the run | of it processes (most CPU) |"),
            "{md}"
        );
        assert!(
            md.contains("| join | 1000 ms | 180 ms | −40 ms ± 50 ms (0.00 CPUs) | burner (PID 4321) 20 ms, bash (PID 77) 10 ms, cron (PID 12) 0 ms |"),
            "{md}"
        );
        assert!(md.contains("less spawnscope's own"), "{md}");
    }

    #[test]
    fn kernel_threads_with_their_largest_families() {
        let mut p = PhaseSentinels {
            name: "exit".into(),
            wall_ns: 2_000_000_000,
            outside_cpu_ns: Some(700_000_000),
            kernel_threads_cpu_ns: Some(650_000_000),
            kernel_threads_by_family_ns: [
                ("kworker", 420_000_000),
                ("rcu", 150_000_000),
                ("ksoftirqd", 60_000_000),
                ("kdamond", 20_000_000),
            ]
            .into_iter()
            .map(|(f, ns)| (f.to_string(), ns))
            .collect(),
            ..Default::default()
        };
        assert_eq!(
            kernel_threads_cell(&p).unwrap(),
            "650 ms (kworker 420 ms, rcu 150 ms, ksoftirqd 60 ms, …)"
        );
        let f = SentinelFigures {
            per_phase: vec![p.clone()],
            ..Default::default()
        };
        let md = markdown(&f);
        assert!(
            md.contains("| phase | wall | CPU outside the run | of it kernel threads |"),
            "{md}"
        );
        assert!(
            md.contains("/proc/PID/stat of kthreadd and its children"),
            "{md}"
        );
        p.kernel_threads_by_family_ns.clear();
        p.kernel_threads_cpu_ns = Some(0);
        assert_eq!(kernel_threads_cell(&p).unwrap(), "0 ms");
    }
}
