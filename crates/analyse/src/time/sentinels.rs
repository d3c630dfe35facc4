//! The noise sentinels per phase, from sentinels.json: how much else the machine did while each
//! phase was measured. Figures only, no verdict: a time figure is trustworthy when these are
//! small next to the phase's wall time (another rule, elsewhere, may judge that).
//!
//! Definitions:
//! - steal: /proc/stat's steal column, the vCPUs' time taken by the hypervisor for others.
//! - CPU outside the run: the machine's busy time less the run's own CPU time (its cgroup's
//!   counter, else its process's utime+stime) less spawnscope's (the conductor's every thread,
//!   and its children outside the run). Where a mark read the three as one (`cpu_read`), busy is
//!   CPUs × wall less idle, iowait and steal, the difference is kept signed with its resolution,
//!   and the processes that took it are named (analyse::time::outside_cpu); in older records
//!   busy is user + nice + system + irq + softirq of /proc/stat (tick-sampled) and spawnscope's
//!   own work is in it. Floored at 0.
//! - kernel threads' CPU: the growth of each kernel thread's utime+stime (/proc/PID/stat of
//!   kthreadd and its children, read at every mark) between the two marks, summed, and by family
//!   (kworker, rcu, ksoftirqd…). Machine-wide: a run held to K CPUs gets none (its CPU outside
//!   the run is read over those CPUs alone, and a kernel thread's /proc times do not say where it
//!   ran). A thread that exited before the second mark took its time with it: that time stays
//!   with other programs.
//! - memory used for the first time: MemTotal less the zones' managed pages fell (pages the
//!   kernel initialized only now: deferred page init, lazy on some VMs).
//! - memory handed back: the page_reporting module's reported_kib counter (kernels that publish
//!   one), the balloon's inflate less deflate (pages), and /proc/vmstat deltas for direct reclaim,
//!   compaction and THP work.
//! - runnable outside the run, per ~100 ms tick: procs_running less the sampler itself (running
//!   while it reads) less the run's average CPU concurrency over the tick (its CPU time over the
//!   tick's wall). An estimate: procs_running is an instant, the run's share an average.
//! - frequency: the lowest and highest scaling_cur_freq over the CPUs and the phase's ticks.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::run::phases::shown_name;
use crate::time::outside_cpu::{self, ProcessShare};
use record::sentinels::{
    BALLOON, FREQUENCY, KERNEL_THREADS, OUTSIDE_CPU, PAGE_REPORTING, RUNNABLE, STEAL, VMSTAT,
};
use record::{KernelThreads, SentinelMark, SentinelTick, SentinelsRecord};

/// One phase's sentinels. None: not available here (see `SentinelFigures::unavailable`) or not
/// read at one of the phase's edges.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseSentinels {
    pub name: String,
    /// Between the two sentinel marks (what the deltas cover).
    pub wall_ns: u64,
    pub steal_ns: Option<u64>,
    /// The machine's busy CPU time and the run's, and their difference.
    pub machine_busy_ns: Option<u64>,
    pub run_cpu_ns: Option<u64>,
    pub outside_cpu_ns: Option<u64>,
    /// spawnscope's own CPU time in the phase: its conductor (every thread, exact) and its
    /// children outside the run, ns. Inside `machine_busy_ns`, never in `outside_cpu_ns`. None
    /// in records from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawnscope_cpu_ns: Option<u64>,
    /// Busy less the run less spawnscope, signed: below zero by less than
    /// `outside_cpu_resolution_ns` is the reading's rounding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_cpu_balance_ns: Option<i64>,
    /// What `outside_cpu_ns` may be off by, ns: a figure below it is not a finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_cpu_resolution_ns: Option<u64>,
    /// The processes outside the run that took the most CPU in the phase, most first (their own
    /// and their ended children's, clock-tick grained).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_processes: Vec<ProcessShare>,
    /// Every process outside the run together, ns (None: not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_processes_cpu_ns: Option<u64>,
    /// /proc/stat's softirq column in the phase, ns: sampled at the tick (an interrupt between
    /// two ticks is not in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_ns: Option<u64>,
    /// Kernel threads' CPU time in the phase (Σ utime+stime growth, /proc/PID/stat), ns: on a
    /// whole-machine run it is inside `machine_busy_ns` and so inside `outside_cpu_ns` (up to
    /// tick rounding). None: a run held to K CPUs, kernel threads not visible, or a record from
    /// before they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_threads_cpu_ns: Option<u64>,
    /// The same by family ("kworker", "rcu", "ksoftirqd"…: `kernel_thread_family`), the
    /// families that ran in the phase, ns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_threads_by_family_ns: BTreeMap<String, u64>,
    /// Free memory reported to the host (page_reporting reported_kib), bytes.
    pub reported_bytes: Option<u64>,
    /// Memory used for the first time since boot (the kernel initialized it in this phase),
    /// bytes. None in records from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_used_bytes: Option<u64>,
    /// Balloon inflated less deflated, pages (negative: memory given back to the guest).
    pub balloon_pages: Option<i64>,
    /// allocstall_* summed: allocations that entered direct reclaim.
    pub direct_reclaim_stalls: Option<u64>,
    pub direct_reclaim_scanned: Option<u64>,
    pub direct_reclaim_stolen: Option<u64>,
    pub compaction_stalls: Option<u64>,
    pub compaction_failures: Option<u64>,
    pub thp_fault_alloc: Option<u64>,
    pub thp_fault_fallback: Option<u64>,
    pub thp_collapse_alloc: Option<u64>,
    /// pgfault: page faults on the whole machine.
    pub page_faults: Option<u64>,
    pub runnable_outside_max: Option<f64>,
    pub runnable_outside_mean: Option<f64>,
    pub freq_khz_min: Option<u64>,
    pub freq_khz_max: Option<u64>,
    /// Pressure stall time (PSI "some": at least one non-idle task stalled on the resource; the
    /// machine's, the run's tasks included), ns. None without PSI or in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pressure_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_pressure_ns: Option<u64>,
}

/// A sentinel this host cannot give, and why.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Unavailable {
    pub sentinel: String,
    pub reason: String,
}

/// A run's sentinels, per phase (startup, the workload's phases, exit).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SentinelFigures {
    /// Where the run's own CPU time was read.
    pub run_cpu_source: Option<String>,
    pub per_phase: Vec<PhaseSentinels>,
    pub unavailable: Vec<Unavailable>,
    /// The page_reporting counter at the run's first and last marks: what the machine handed
    /// back to its host between two runs is the next one's first less this one's last
    /// (analyse::repeats). None without the counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_at: Option<ReportedAt>,
}

/// reported_kib at the run's first and last sentinel marks (CLOCK_MONOTONIC ns), and the boot
/// they were read in.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ReportedAt {
    pub first_t_ns: u64,
    pub first_kib: u64,
    pub last_t_ns: u64,
    pub last_kib: u64,
    /// The kernel's boot_id; None in records from before it was kept (never paired then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// The name of the phase a mark opens: `start` opens `startup`, `end` opens `exit`.
fn phase_opened_by(mark: &str) -> &str {
    if mark == "start" {
        "startup"
    } else {
        shown_name(mark)
    }
}

/// A PSI total's growth between two marks, ns.
fn pressure(m0: &SentinelMark, m1: &SentinelMark, key: &str) -> Option<u64> {
    let (a, b) = (m0.pressure_us.as_ref()?, m1.pressure_us.as_ref()?);
    Some(b.get(key)?.saturating_sub(*a.get(key)?) * 1000)
}

fn counter(m0: &SentinelMark, m1: &SentinelMark, key: &str) -> Option<u64> {
    Some(m1.vmstat.get(key)?.saturating_sub(*m0.vmstat.get(key)?))
}

/// The allocstall_* counters summed (one per zone type).
fn stalls(m0: &SentinelMark, m1: &SentinelMark) -> Option<u64> {
    let keys: Vec<&String> = m1
        .vmstat
        .keys()
        .filter(|k| k.starts_with("allocstall_"))
        .collect();
    if keys.is_empty() {
        return None;
    }
    keys.iter().map(|k| counter(m0, m1, k)).sum()
}

/// A kernel thread's family from its name: "kworker/u4:2-events_unbound" → kworker, "rcuop/1"
/// and "rcu_preempt" → rcu (RCU's threads, which run the callbacks that free exited tasks),
/// "ksoftirqd/0" → ksoftirqd, "kswapd0" → kswapd, "irq/24-virtio0" → irq.
pub fn kernel_thread_family(comm: &str) -> &str {
    if comm.starts_with("rcu") {
        return "rcu";
    }
    // A per-CPU or per-device thread names its family before the slash ("jbd2/vda1-8"); one
    // per node or instance ends in its number ("kswapd0", "kdamond.0").
    let family = match comm.split_once('/') {
        Some((head, _)) => head,
        None => comm.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '_'),
    };
    if family.is_empty() {
        comm
    } else {
        family
    }
}

/// Kernel threads' CPU time between two readings, ticks: in all and by family.
fn kernel_threads_ticks(a: &KernelThreads, b: &KernelThreads) -> (u64, BTreeMap<String, u64>) {
    let before: HashMap<(u32, u64), u64> = a
        .threads
        .iter()
        .map(|t| ((t.pid, t.start_ticks), t.cpu_ticks))
        .collect();
    let mut total = 0;
    let mut by_family = BTreeMap::new();
    for t in &b.threads {
        let grew = match before.get(&(t.pid, t.start_ticks)) {
            Some(&was) => t.cpu_ticks.saturating_sub(was),
            // Started after the first reading: all its time is the phase's.
            None if t.start_ticks >= a.boot_ticks => t.cpu_ticks,
            // There before but not listed then (kthreadd's children changing as they were
            // read): how much of its time is the phase's is unknown; it stays with other
            // programs.
            None => 0,
        };
        if grew > 0 {
            total += grew;
            *by_family
                .entry(kernel_thread_family(&t.comm).to_string())
                .or_insert(0) += grew;
        }
    }
    (total, by_family)
}

/// Runnable tasks outside the run at each tick, in order (see the module's definition).
fn runnable_outside(ticks: &[SentinelTick]) -> Vec<(u64, f64)> {
    let mut out = Vec::new();
    for (i, tick) in ticks.iter().enumerate() {
        let Some(running) = tick.procs_running else {
            continue;
        };
        // The run's average concurrency since the previous reading (none before the first).
        let run_share = i
            .checked_sub(1)
            .and_then(|p| {
                let prev = &ticks[p];
                let cpu = tick.run_cpu_ns?.checked_sub(prev.run_cpu_ns?)?;
                let wall = tick.t_ns.checked_sub(prev.t_ns).filter(|&w| w > 0)?;
                Some(cpu as f64 / wall as f64)
            })
            .unwrap_or(0.0);
        let sampler = 1.0;
        out.push((tick.t_ns, (running as f64 - sampler - run_share).max(0.0)));
    }
    out
}

pub fn figures(record: &SentinelsRecord) -> SentinelFigures {
    let gone = |name: &str| record.unavailable.contains_key(name);
    // Kernel threads' times are the whole machine's: not set against a reading of K CPUs.
    let held_to_cpus = record.cpus.is_some();
    let tick_ns = 1e9 / record.ticks_per_second.max(1) as f64;
    let ticks_ns = |t: u64| (t as f64 * tick_ns).round() as u64;
    // The first mark gives the first tick a reading of the run's CPU time to go from.
    let from_start: Vec<SentinelTick> = record
        .marks
        .first()
        .map(|m| SentinelTick {
            t_ns: m.t_ns,
            run_cpu_ns: m.run_cpu_ns,
            ..Default::default()
        })
        .into_iter()
        .chain(record.ticks.iter().cloned())
        .collect();
    let runnable = runnable_outside(&from_start);
    // Without phase marks (any command) the one window is the whole run.
    let whole_run = record.marks.len() == 2;
    let per_phase = record
        .marks
        .windows(2)
        .map(|w| {
            let (m0, m1) = (&w[0], &w[1]);
            let cpu = m0.machine_cpu.zip(m1.machine_cpu);
            let machine_busy_ns = cpu
                .filter(|_| !gone(OUTSIDE_CPU))
                .map(|(a, b)| ticks_ns(b.busy().saturating_sub(a.busy())));
            let run_cpu_ns = m0
                .run_cpu_ns
                .zip(m1.run_cpu_ns)
                .map(|(a, b)| b.saturating_sub(a));
            let balance = run_cpu_ns.filter(|_| !gone(OUTSIDE_CPU)).and_then(|run| {
                outside_cpu::balance(m0, m1, run, record.ticks_per_second, record.conductor_pid)
            });
            let machine_busy_ns = balance
                .as_ref()
                .map(|b| b.machine_busy_ns)
                .or(machine_busy_ns);
            let vm = |key: &str| counter(m0, m1, key).filter(|_| !gone(VMSTAT));
            let kernel_threads = m0
                .kernel_threads
                .as_ref()
                .zip(m1.kernel_threads.as_ref())
                .filter(|_| !held_to_cpus)
                .map(|(a, b)| kernel_threads_ticks(a, b));
            let in_phase = |t: u64| t >= m0.t_ns && t < m1.t_ns;
            let runnable: Vec<f64> = runnable
                .iter()
                .filter(|(t, _)| in_phase(*t))
                .map(|(_, r)| *r)
                .collect();
            let phase_ticks: Vec<&SentinelTick> =
                record.ticks.iter().filter(|t| in_phase(t.t_ns)).collect();
            let freq_min = phase_ticks.iter().filter_map(|t| t.freq_khz_min).min();
            let freq_max = phase_ticks.iter().filter_map(|t| t.freq_khz_max).max();
            PhaseSentinels {
                name: if whole_run {
                    "run".to_string()
                } else {
                    phase_opened_by(&m0.name).to_string()
                },
                wall_ns: m1.t_ns.saturating_sub(m0.t_ns),
                steal_ns: cpu
                    .filter(|_| !gone(STEAL))
                    .map(|(a, b)| ticks_ns(b.steal.saturating_sub(a.steal))),
                machine_busy_ns,
                run_cpu_ns,
                outside_cpu_ns: match &balance {
                    Some(b) => Some(b.outside_ns.max(0) as u64),
                    None => machine_busy_ns
                        .zip(run_cpu_ns)
                        .map(|(busy, run)| busy.saturating_sub(run)),
                },
                spawnscope_cpu_ns: balance.as_ref().map(|b| b.spawnscope_ns),
                outside_cpu_balance_ns: balance.as_ref().map(|b| b.outside_ns),
                outside_cpu_resolution_ns: balance.as_ref().map(|b| b.resolution_ns),
                // Processes' /proc times are the whole machine's, as kernel threads' are: not
                // set against a reading of K CPUs.
                outside_processes_cpu_ns: balance
                    .as_ref()
                    .and_then(|b| b.processes_ns)
                    .filter(|_| !held_to_cpus),
                softirq_ns: balance
                    .as_ref()
                    .and(cpu)
                    .map(|(a, b)| ticks_ns(b.softirq.saturating_sub(a.softirq))),
                outside_processes: balance
                    .map(|b| b.processes)
                    .filter(|_| !held_to_cpus)
                    .unwrap_or_default(),
                kernel_threads_cpu_ns: kernel_threads.as_ref().map(|(all, _)| ticks_ns(*all)),
                kernel_threads_by_family_ns: kernel_threads
                    .map(|(_, by)| by.into_iter().map(|(f, t)| (f, ticks_ns(t))).collect())
                    .unwrap_or_default(),
                reported_bytes: m0
                    .page_reporting
                    .as_ref()
                    .zip(m1.page_reporting.as_ref())
                    .filter(|_| !gone(PAGE_REPORTING))
                    .and_then(|(a, b)| {
                        let key = "reported_kib";
                        Some(b.get(key)?.saturating_sub(*a.get(key)?) * 1024)
                    }),
                first_used_bytes: m0
                    .uninitialized_kb
                    .zip(m1.uninitialized_kb)
                    .map(|(before, after)| before.saturating_sub(after) * 1024),
                balloon_pages: (!gone(BALLOON))
                    .then(|| {
                        let inflated = counter(m0, m1, "balloon_inflate")?;
                        let deflated = counter(m0, m1, "balloon_deflate")?;
                        Some(inflated as i64 - deflated as i64)
                    })
                    .flatten(),
                direct_reclaim_stalls: stalls(m0, m1).filter(|_| !gone(VMSTAT)),
                direct_reclaim_scanned: vm("pgscan_direct"),
                direct_reclaim_stolen: vm("pgsteal_direct"),
                compaction_stalls: vm("compact_stall"),
                compaction_failures: vm("compact_fail"),
                thp_fault_alloc: vm("thp_fault_alloc"),
                thp_fault_fallback: vm("thp_fault_fallback"),
                thp_collapse_alloc: vm("thp_collapse_alloc"),
                page_faults: vm("pgfault"),
                runnable_outside_max: (!gone(RUNNABLE))
                    .then(|| runnable.iter().copied().reduce(f64::max))
                    .flatten(),
                runnable_outside_mean: (!gone(RUNNABLE) && !runnable.is_empty())
                    .then(|| runnable.iter().sum::<f64>() / runnable.len() as f64),
                freq_khz_min: freq_min.filter(|_| !gone(FREQUENCY)),
                freq_khz_max: freq_max.filter(|_| !gone(FREQUENCY)),
                cpu_pressure_ns: pressure(m0, m1, "cpu_some_us"),
                memory_pressure_ns: pressure(m0, m1, "memory_some_us"),
                io_pressure_ns: pressure(m0, m1, "io_some_us"),
            }
        })
        .collect();
    let reported = |m: &SentinelMark| -> Option<u64> {
        m.page_reporting.as_ref()?.get("reported_kib").copied()
    };
    let reported_at = record
        .marks
        .first()
        .zip(record.marks.last())
        .filter(|_| !gone(PAGE_REPORTING))
        .and_then(|(first, last)| {
            Some(ReportedAt {
                first_t_ns: first.t_ns,
                first_kib: reported(first)?,
                last_t_ns: last.t_ns,
                last_kib: reported(last)?,
                boot_id: record.boot_id.clone(),
            })
        });
    let mut unavailable: Vec<Unavailable> = record
        .unavailable
        .iter()
        .map(|(sentinel, reason)| Unavailable {
            sentinel: sentinel.clone(),
            reason: reason.clone(),
        })
        .collect();
    if held_to_cpus && record.marks.iter().any(|m| m.kernel_threads.is_some()) {
        unavailable.push(Unavailable {
            sentinel: KERNEL_THREADS.to_string(),
            reason: "a run held to K CPUs: kernel threads' /proc times are the whole machine's and do not say on which CPUs they ran, so they are not set against the K CPUs' reading".into(),
        });
    }
    SentinelFigures {
        run_cpu_source: record.run_cpu_source.map(|s| s.describe().to_string()),
        reported_at,
        per_phase,
        unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{KernelThreadTime, MachineCpu, RunCpuSource};

    fn mark(name: &str, t_s: u64, busy_ticks: u64, steal: u64, run_s: u64) -> SentinelMark {
        SentinelMark {
            name: name.into(),
            t_ns: t_s * 1_000_000_000,
            machine_cpu: Some(MachineCpu {
                user: busy_ticks,
                steal,
                ..Default::default()
            }),
            run_cpu_ns: Some(run_s * 1_000_000_000),
            vmstat: [
                ("allocstall_normal", t_s),
                ("allocstall_movable", 2 * t_s),
                ("compact_stall", 0),
                ("balloon_inflate", 10 * t_s),
                ("balloon_deflate", 0),
                ("pgfault", 1000 * t_s),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            page_reporting: Some([("reported_kib".to_string(), 4 * t_s)].into()),
            // A lazily initializing kernel: 128 MiB sections taken as the seconds pass.
            uninitialized_kb: Some(20_000_000 - t_s * 131_072),
            // Memory stalls 10 ms a second, CPU 100 ms.
            pressure_us: Some(
                [
                    ("memory_some_us".to_string(), 10_000 * t_s),
                    ("cpu_some_us".to_string(), 100_000 * t_s),
                ]
                .into(),
            ),
            kernel_threads: None,
            conductor_cpu_ns: None,
            cpu_read: None,
            processes: None,
        }
    }

    fn tick(t_ms: u64, running: u64, run_ms: u64) -> SentinelTick {
        SentinelTick {
            t_ns: t_ms * 1_000_000,
            procs_running: Some(running),
            run_cpu_ns: Some(run_ms * 1_000_000),
            ..Default::default()
        }
    }

    #[test]
    fn per_phase_deltas_between_marks() {
        // 100 Hz ticks. startup 0–1 s; spawn 1–3 s, where the machine was busy 300 ticks (3 s)
        // and the run used 1 s: 2 s ran outside it. The `end` mark opens `exit`.
        let record = SentinelsRecord {
            schema: 1,
            ticks_per_second: 100,
            run_cpu_source: Some(RunCpuSource::CgroupV1Cpuacct),
            unavailable: [(FREQUENCY.to_string(), "no cpufreq".to_string())].into(),
            cpus: None,
            boot_id: None,
            conductor_pid: None,
            marks: vec![
                mark("start", 0, 0, 0, 0),
                mark("spawn", 1, 50, 1, 0),
                mark("end", 3, 350, 6, 1),
                mark("reaped", 4, 360, 6, 1),
            ],
            // At 0.5 s, 4 running while the run used 250 ms since the start mark (0.5 of a CPU).
            // At 1.0 s, 3 running, the run idle; at 1.1 s, 3 running, the run used 50 ms in
            // 100 ms (0.5 of a CPU).
            ticks: vec![
                tick(500, 4, 250),
                tick(1000, 3, 250),
                tick(1100, 3, 300),
                tick(3500, 1, 1000),
            ],
        };
        let f = figures(&record);
        let names: Vec<&str> = f.per_phase.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["startup", "spawn", "exit"]);
        let spawn = &f.per_phase[1];
        assert_eq!(spawn.wall_ns, 2_000_000_000);
        assert_eq!(spawn.steal_ns, Some(50_000_000));
        assert_eq!(spawn.machine_busy_ns, Some(3_000_000_000));
        assert_eq!(spawn.run_cpu_ns, Some(1_000_000_000));
        assert_eq!(spawn.outside_cpu_ns, Some(2_000_000_000));
        assert_eq!(spawn.reported_bytes, Some(8 * 1024));
        assert_eq!(
            spawn.first_used_bytes,
            Some(2 * (128 << 20)),
            "two sections"
        );
        assert_eq!(spawn.balloon_pages, Some(20));
        assert_eq!(spawn.memory_pressure_ns, Some(20_000_000));
        assert_eq!(spawn.cpu_pressure_ns, Some(200_000_000));
        assert_eq!(spawn.io_pressure_ns, None, "io never read: absent");
        // The counter at the run's first and last marks.
        assert_eq!(
            f.reported_at,
            Some(ReportedAt {
                first_t_ns: 0,
                first_kib: 0,
                last_t_ns: 4_000_000_000,
                last_kib: 16,
                boot_id: None,
            })
        );
        assert_eq!(spawn.direct_reclaim_stalls, Some(6), "both zones' stalls");
        assert_eq!(spawn.compaction_stalls, Some(0));
        assert_eq!(spawn.page_faults, Some(2000));
        assert_eq!(
            spawn.thp_fault_alloc, None,
            "a counter never read is absent"
        );
        // The first tick goes from the start mark: 4 less the sampler less the run's 0.5.
        assert_eq!(f.per_phase[0].runnable_outside_max, Some(2.5));
        // 3 running less the sampler: 2 at the first tick, 1.5 once the run's half CPU is out.
        assert_eq!(spawn.runnable_outside_max, Some(2.0));
        assert_eq!(spawn.runnable_outside_mean, Some(1.75));
        assert_eq!(spawn.freq_khz_max, None);
        assert_eq!(
            f.unavailable,
            [Unavailable {
                sentinel: FREQUENCY.into(),
                reason: "no cpufreq".into()
            }]
        );
        assert_eq!(f.run_cpu_source.as_deref(), Some("cgroup v1 cpuacct.usage"));
    }

    /// Marks that read their CPU as one give the phase from idle, spawnscope's own apart, the
    /// signed balance with its resolution, and who took the rest.
    #[test]
    fn a_phase_read_as_one_keeps_spawnscope_apart_and_names_the_processes() {
        let at = |t_s: u64, idle: u64, own_ms: u64, burner: u64| SentinelMark {
            conductor_cpu_ns: Some(own_ms * 1_000_000),
            cpu_read: Some(record::CpuRead {
                span_ns: 0,
                cpus: 2,
            }),
            machine_cpu: Some(MachineCpu {
                idle,
                ..Default::default()
            }),
            processes: Some(vec![record::ProcessCpu {
                pid: 4321,
                ppid: 1,
                start_ticks: 5,
                cpu_ticks: burner,
                children_ticks: 0,
                comm: "burner".into(),
            }]),
            ..mark("m", t_s, 0, 0, t_s)
        };
        let record = SentinelsRecord {
            ticks_per_second: 100,
            conductor_pid: Some(99),
            // 0–2 s: 4 CPU-s of capacity, 100 ticks idle, the run 2 s (its mark's run_s),
            // spawnscope 300 ms, the burner 60 ticks.
            marks: vec![at(0, 1000, 100, 40), at(2, 1100, 400, 100)],
            ..Default::default()
        };
        let p = &figures(&record).per_phase[0];
        assert_eq!(p.machine_busy_ns, Some(3_000_000_000));
        assert_eq!(p.spawnscope_cpu_ns, Some(300_000_000));
        assert_eq!(p.outside_cpu_balance_ns, Some(700_000_000));
        assert_eq!(p.outside_cpu_ns, Some(700_000_000));
        assert_eq!(p.outside_cpu_resolution_ns, Some(30_000_000 + 20_000_000));
        assert_eq!(p.outside_processes_cpu_ns, Some(600_000_000));
        assert_eq!(p.outside_processes[0].label(), "burner (PID 4321)");
    }

    #[test]
    fn unavailable_sentinels_are_none_not_zero() {
        let mut a = mark("start", 0, 0, 0, 0);
        let mut b = mark("reaped", 1, 100, 0, 1);
        a.page_reporting = None;
        b.page_reporting = None;
        a.vmstat = BTreeMap::new();
        b.vmstat = BTreeMap::new();
        let record = SentinelsRecord {
            ticks_per_second: 100,
            unavailable: [
                (PAGE_REPORTING.to_string(), "no page reporting".to_string()),
                (BALLOON.to_string(), "no balloon".to_string()),
                (RUNNABLE.to_string(), "no procs_running".to_string()),
            ]
            .into(),
            marks: vec![a, b],
            ..Default::default()
        };
        let p = &figures(&record).per_phase[0];
        assert_eq!(p.name, "run", "no phase marks: the whole run");
        assert_eq!(p.reported_bytes, None);
        assert_eq!(p.balloon_pages, None);
        assert_eq!(p.direct_reclaim_stalls, None);
        assert_eq!(p.runnable_outside_max, None);
        assert_eq!(p.outside_cpu_ns, Some(0), "busy 1 s, all the run's");
    }

    fn kthread(pid: u32, start_ticks: u64, cpu_ticks: u64, comm: &str) -> KernelThreadTime {
        KernelThreadTime {
            pid,
            start_ticks,
            cpu_ticks,
            comm: comm.into(),
        }
    }

    #[test]
    fn kernel_thread_families_from_their_names() {
        for (comm, family) in [
            ("kworker/u4:2-events_unbound", "kworker"),
            ("kworker/R-rcu_gp", "kworker"),
            ("kworker/1:1H-kblockd", "kworker"),
            ("rcuop/1", "rcu"),
            ("rcu_preempt", "rcu"),
            ("rcu_exp_gp_kthread_worker", "rcu"),
            ("ksoftirqd/0", "ksoftirqd"),
            ("kswapd0", "kswapd"),
            ("kdamond.0", "kdamond"),
            ("irq/24-virtio0", "irq"),
            ("scsi_eh_0", "scsi_eh"),
            ("khugepaged", "khugepaged"),
            ("jbd2/vda1-8", "jbd2"),
            ("0", "0"),
        ] {
            assert_eq!(kernel_thread_family(comm), family, "{comm}");
        }
    }

    /// A threads exit: kworkers and RCU free what the run's threads left.
    fn exit_record(cpus: Option<&str>) -> SentinelsRecord {
        let mut start = mark("start", 0, 0, 0, 0);
        let mut end = mark("end", 1, 10, 0, 0);
        let mut reaped = mark("reaped", 3, 150, 0, 0);
        start.kernel_threads = Some(KernelThreads {
            boot_ticks: 1000,
            read_us: 300,
            threads: vec![
                kthread(2, 0, 3, "kthreadd"),
                kthread(12, 30, 101, "kworker/u4:2-events_unbound"),
                kthread(14, 30, 34, "ksoftirqd/0"),
                kthread(15, 30, 104, "rcu_preempt"),
                // Exits during the exit: its time there is lost (stays outside).
                kthread(40, 500, 7, "kworker/0:2-mm_percpu_wq"),
            ],
        });
        end.kernel_threads = Some(KernelThreads {
            boot_ticks: 1100,
            read_us: 280,
            threads: vec![
                kthread(2, 0, 3, "kthreadd"),
                kthread(12, 30, 102, "kworker/u4:2-events_unbound"),
                kthread(14, 30, 34, "ksoftirqd/0"),
                kthread(15, 30, 104, "rcu_preempt"),
                kthread(40, 500, 9, "kworker/0:2-mm_percpu_wq"),
            ],
        });
        reaped.kernel_threads = Some(KernelThreads {
            boot_ticks: 1300,
            read_us: 310,
            threads: vec![
                kthread(2, 0, 3, "kthreadd"),
                kthread(12, 30, 152, "kworker/u4:2-events_unbound"),
                kthread(14, 30, 54, "ksoftirqd/0"),
                kthread(15, 30, 114, "rcu_preempt"),
                // Born in the phase, after the mark before: all its 30 ticks count.
                kthread(77, 1150, 30, "kworker/u4:0-events_unbound"),
                // PID 40 reused by a new kworker: its 5 ticks are the phase's, not 5 − 9.
                kthread(40, 1200, 5, "kworker/1:0-events"),
                // There before the end mark but not listed then: left out, not counted whole.
                kthread(90, 800, 400, "kworker/1:3-events"),
            ],
        });
        SentinelsRecord {
            ticks_per_second: 100,
            cpus: cpus.map(String::from),
            marks: vec![start, end, reaped],
            ..Default::default()
        }
    }

    #[test]
    fn kernel_threads_cpu_per_phase_from_their_proc_times() {
        let f = figures(&exit_record(None));
        let (run, exit) = (&f.per_phase[0], &f.per_phase[1]);
        assert_eq!((run.name.as_str(), exit.name.as_str()), ("startup", "exit"));
        // startup: kworker 1 tick + the one that exits later 2 ticks.
        assert_eq!(run.kernel_threads_cpu_ns, Some(30_000_000));
        assert_eq!(
            run.kernel_threads_by_family_ns,
            BTreeMap::from([("kworker".to_string(), 30_000_000)])
        );
        // exit: kworker 50 + 30 (new) + 5 (PID reused), ksoftirqd 20, rcu 10 = 115 ticks.
        assert_eq!(exit.kernel_threads_cpu_ns, Some(1_150_000_000));
        assert_eq!(
            exit.kernel_threads_by_family_ns,
            BTreeMap::from([
                ("kworker".to_string(), 850_000_000),
                ("ksoftirqd".to_string(), 200_000_000),
                ("rcu".to_string(), 100_000_000),
            ])
        );
        // Within the machine's busy time outside the run (1.4 s), as it should be.
        assert_eq!(exit.outside_cpu_ns, Some(1_400_000_000));
        assert!(f.unavailable.is_empty());
    }

    #[test]
    fn a_run_held_to_k_cpus_sets_no_machine_wide_kernel_threads_against_them() {
        let f = figures(&exit_record(Some("1")));
        assert!(
            f.per_phase
                .iter()
                .all(|p| p.kernel_threads_cpu_ns.is_none()
                    && p.kernel_threads_by_family_ns.is_empty())
        );
        assert_eq!(f.unavailable.len(), 1);
        assert_eq!(f.unavailable[0].sentinel, KERNEL_THREADS);
        assert!(f.unavailable[0].reason.contains("K CPUs"));
        // A record from before kernel threads were read: no figure, nothing said.
        let mut old = exit_record(None);
        for m in &mut old.marks {
            m.kernel_threads = None;
        }
        let f = figures(&old);
        assert!(f
            .per_phase
            .iter()
            .all(|p| p.kernel_threads_cpu_ns.is_none()));
        let json = serde_json::to_string(&f).unwrap();
        assert!(!json.contains("kernel_threads"), "{json}");
        assert!(f.unavailable.is_empty());
    }
}
