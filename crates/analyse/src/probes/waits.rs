//! Where the system time goes, exactly: the collector's wait counters (mmap_lock, kernel lock
//! contention by kind, futex waits and wakes with the waiters each wake walks, TLB shootdowns and
//! IPIs) and the machine-wide noise during the run, as rows a summary shows. Counted from the
//! kernel's tracepoints, not sampled.
//!
//! What a wait's time means: from its start to its end, summed over tasks — wall time, mostly
//! asleep. Only spinning (spin locks, rwlocks, a mutex's optimistic spin) is CPU time, so only
//! those rows are set against the run's system time; the others are given as time waited.

use serde::{Deserialize, Serialize};

use spawnscope_collector::Report as CollectorReport;

use record::perf::Profile;

/// Whether a wait burns CPU while it lasts.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// Spins on a CPU: its time is system CPU time.
    Spinning,
    /// Sleeps (or spins a little, then sleeps): wall time, not CPU time.
    Sleeping,
}

/// One kind of wait: how often, how long (summed over tasks), per phase.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WaitRow {
    /// The collector's counter of the waits (its `_ns` twin holds their time).
    pub metric: String,
    pub label: String,
    pub kind: Option<WaitKind>,
    pub count: u64,
    pub total_ns: u64,
    /// Time waited per task of the run (summed over tasks / tasks).
    pub ns_per_task: Option<f64>,
    /// Spinning waits only: their time over the run's system time.
    pub share_of_system: Option<f64>,
    /// Time waited per phase, aligned with `Waits::phases`.
    pub per_phase_ns: Vec<u64>,
}

/// What the futex hash cost the wakes.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FutexFigures {
    pub waits: u64,
    pub wait_ns: u64,
    pub wakes: u64,
    pub wake_ns: u64,
    /// Wakes hashed into the process's own futex hash, the waiters queued in their buckets in
    /// all, and per wake (None when no wake was hashed).
    pub hashed_wakes: Option<u64>,
    pub walked: Option<u64>,
    pub walked_per_wake: Option<f64>,
    /// Of those, waiters on other addresses: what each wake walks past without waking, the cost
    /// of sharing a bucket (absent in runs recorded before it was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walked_past_per_wake: Option<f64>,
    pub walk_max: Option<u64>,
    pub wakes_walking_1000: Option<u64>,
    pub hash_slots: Option<u64>,
    pub hash_resized: bool,
    /// Ops on shared futexes (the global hash: their walks are not known).
    pub shared_ops: Option<u64>,
    /// "futex 0x… in bucket 11 of 16: 200 wakes walking 2,000 waiters each".
    pub top: Vec<String>,
}

/// TLB shootdowns and IPIs the workload's tasks caused.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TlbFigures {
    /// Flushes that had to reach other CPUs (tlb_flush reason "remote IPI send").
    pub remote_flushes: Option<u64>,
    /// TLB flushes asked of another CPU (one per CPU), and per task.
    pub shootdowns: Option<u64>,
    pub shootdowns_per_task: Option<f64>,
    /// IPIs sent and the CPUs they reached.
    pub ipis: Option<u64>,
    pub ipi_targets: Option<u64>,
}

/// The machine while the run ran, all tasks (for judging whether the run was disturbed).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MachineNoise {
    pub direct_reclaims: Option<u64>,
    pub direct_reclaim_ns: Option<u64>,
    pub direct_reclaimed_pages: Option<u64>,
    /// Reclaim of cgroups at their memory limit (absent in runs recorded before it was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_reclaims: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_reclaim_ns: Option<u64>,
    pub compactions: Option<u64>,
    pub compaction_ns: Option<u64>,
    pub direct_compactions: Option<u64>,
    pub thp_collapses: Option<u64>,
    /// On-CPU time of tasks neither the workload's nor the measuring's, and per phase.
    pub outside_oncpu_ns: Option<u64>,
    pub outside_per_phase_ns: Vec<u64>,
    /// Of it, kernel threads' (kworkers, RCU, kswapd): absent where not told apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_kthread_oncpu_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_kthread_per_phase_ns: Vec<u64>,
}

/// The section "Where the system time goes (exact, from the kernel's tracepoints)".
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Waits {
    pub phases: Vec<String>,
    /// The run's system time (rusage), what spinning waits are set against.
    pub system_s: f64,
    pub rows: Vec<WaitRow>,
    pub futex: Option<FutexFigures>,
    pub tlb: TlbFigures,
    pub machine: MachineNoise,
    /// "figure: why", for each figure this host could not give.
    pub not_available: Vec<String>,
    pub notes: Vec<String>,
    /// perf's sampled view of the same spinning, when the run was recorded with --perf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<PerfBeside>,
}

/// perf's kernel samples inside a spin-lock slow path, set beside the spinning counted exactly.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PerfBeside {
    pub kernel_samples: u64,
    /// Kernel samples with a spin-lock or rwlock slow path on their stack.
    pub spin_samples: u64,
    /// Their share of the kernel samples scaled to the run's system time.
    pub spin_s: f64,
    /// Spinning counted exactly: contended spinlocks and rwlocks, from contention_begin to end.
    pub exact_spin_s: f64,
    /// The samples perf should have caught if the exact figure is right, and the binomial
    /// standard error of that count (sqrt(n p (1 - p)), p = exact spin / system time).
    pub expected_samples: f64,
    pub expected_se: f64,
    /// The samples lie within two standard errors of the expected count (and 2 samples, for runs
    /// with few).
    pub agree: bool,
}

/// The slow paths a contended spinlock or rwlock spins in (native and paravirt).
const SPIN_FRAMES: &[&str] = &[
    "queued_spin_lock_slowpath",
    "queued_read_lock_slowpath",
    "queued_write_lock_slowpath",
];

/// perf's share of kernel samples spinning on locks, beside the exact spin time; None without
/// kernel samples or without the exact figures.
pub fn perf_beside(w: &Waits, profile: &Profile) -> Option<PerfBeside> {
    let exact_ns: u64 = w
        .rows
        .iter()
        .filter(|r| r.kind == Some(WaitKind::Spinning))
        .map(|r| r.total_ns)
        .sum();
    let exact_known = w
        .not_available
        .iter()
        .all(|n| !n.starts_with("kernel lock contention"));
    let kernel: Vec<_> = profile.stacks.iter().filter(|s| s.kernel_mode()).collect();
    let kernel_samples: u64 = kernel.iter().map(|s| s.count).sum();
    if !exact_known || kernel_samples == 0 || w.system_s <= 0.0 {
        return None;
    }
    let spin_samples: u64 = kernel
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|f| SPIN_FRAMES.iter().any(|spin| f.contains(spin)))
        })
        .map(|s| s.count)
        .sum();
    let n = kernel_samples as f64;
    let exact_spin_s = exact_ns as f64 / 1e9;
    let p_exact = (exact_spin_s / w.system_s).clamp(0.0, 1.0);
    let expected_samples = p_exact * n;
    let expected_se = (n * p_exact * (1.0 - p_exact)).sqrt();
    Some(PerfBeside {
        kernel_samples,
        spin_samples,
        spin_s: spin_samples as f64 / n * w.system_s,
        exact_spin_s,
        expected_samples,
        expected_se,
        agree: (spin_samples as f64 - expected_samples).abs() <= 2.0 * expected_se + 2.0,
    })
}

/// (counter of the waits, words, kind). The `_ns` counter is the same name less `s` plus `_ns`.
const WAIT_ROWS: &[(&str, &str, WaitKind)] = &[
    (
        "mmap_lock_read_waits",
        "waiting for mmap_lock (read)",
        WaitKind::Sleeping,
    ),
    (
        "mmap_lock_write_waits",
        "waiting for mmap_lock (write)",
        WaitKind::Sleeping,
    ),
    ("lock_spin_waits", "contended spinlocks", WaitKind::Spinning),
    (
        "lock_rwlock_waits",
        "contended rwlocks (spinning)",
        WaitKind::Spinning,
    ),
    (
        "lock_rwsem_read_waits",
        "contended rw_semaphores, read (other than mmap_lock)",
        WaitKind::Sleeping,
    ),
    (
        "lock_rwsem_write_waits",
        "contended rw_semaphores, write (other than mmap_lock)",
        WaitKind::Sleeping,
    ),
    (
        "lock_mutex_waits",
        "contended mutexes (spin, then sleep)",
        WaitKind::Sleeping,
    ),
    (
        "lock_rtmutex_waits",
        "contended rt-mutexes",
        WaitKind::Sleeping,
    ),
    (
        "lock_percpu_rwsem_waits",
        "contended per-CPU rw_semaphores",
        WaitKind::Sleeping,
    ),
    (
        "lock_other_waits",
        "other contended locks (semaphores)",
        WaitKind::Sleeping,
    ),
];

fn ns_metric(waits_metric: &str) -> String {
    format!("{}_ns", waits_metric.trim_end_matches('s'))
}

/// The section, or None for a run recorded before the collector counted waits.
pub fn waits(
    report: &CollectorReport,
    phases: &[String],
    system_s: f64,
    tasks: Option<u64>,
) -> Option<Waits> {
    let section = report.waits.as_ref()?;
    let tasks = tasks.filter(|&t| t > 0);
    let per_phase = |name: &str| -> Vec<u64> {
        report.metric(name).map_or_else(Vec::new, |m| {
            let mut v = vec![m.before_first_phase];
            v.extend(m.per_phase.iter().copied());
            v.resize(phases.len(), 0);
            v
        })
    };
    let total = |name: &str| report.metric(name).map(|m| m.total);
    let rows = WAIT_ROWS
        .iter()
        .filter_map(|&(metric, label, kind)| {
            let count = total(metric)?;
            let total_ns = total(&ns_metric(metric))?;
            // Kinds that never happened are left out; mmap_lock always shows (it is asked for).
            if count == 0 && !metric.starts_with("mmap_lock") {
                return None;
            }
            Some(WaitRow {
                metric: metric.to_string(),
                label: label.to_string(),
                kind: Some(kind),
                count,
                total_ns,
                ns_per_task: tasks.map(|t| total_ns as f64 / t as f64),
                share_of_system: (kind == WaitKind::Spinning && system_s > 0.0)
                    .then(|| total_ns as f64 / (system_s * 1e9)),
                per_phase_ns: per_phase(&ns_metric(metric)),
            })
        })
        .collect();
    let futex = total("futex_wait_ns").map(|wait_ns| {
        let hash = section.futex_hash.as_ref();
        let hashed_wakes = total("futex_private_wakes");
        let walked = total("futex_wake_walked");
        let slots = hash.and_then(|h| h.slots);
        FutexFigures {
            waits: total("futex_waits").unwrap_or(0),
            wait_ns,
            wakes: total("futex_wakes").unwrap_or(0),
            wake_ns: total("futex_wake_ns").unwrap_or(0),
            hashed_wakes,
            walked,
            walked_per_wake: hashed_wakes
                .zip(walked)
                .filter(|&(w, _)| w > 0)
                .map(|(w, n)| n as f64 / w as f64),
            walked_past_per_wake: hashed_wakes
                .zip(total("futex_wake_walked_others"))
                .filter(|&(w, _)| w > 0)
                .map(|(w, n)| n as f64 / w as f64),
            walk_max: hash.map(|h| h.walk_max),
            wakes_walking_1000: total("futex_wake_walks_1000"),
            hash_slots: slots,
            hash_resized: hash.is_some_and(|h| h.resized),
            shared_ops: total("futex_shared_ops"),
            top: hash.map_or_else(Vec::new, |h| {
                h.top_futexes
                    .iter()
                    .filter(|f| f.walked > 0)
                    .take(3)
                    .map(|f| {
                        format!(
                            "futex {} in bucket {} of {}: {} wakes walking {:.0} waiters each (most {}), {} waits on it",
                            f.address,
                            f.bucket,
                            slots.map_or("?".into(), |s| s.to_string()),
                            f.wakes,
                            f.walked as f64 / f.wakes.max(1) as f64,
                            f.max_walk,
                            f.waits
                        )
                    })
                    .chain(h.busiest_buckets.first().filter(|b| b.peak_waiters > 1).map(|b| {
                        format!(
                            "bucket {} held the most waiters at once: {}",
                            b.bucket, b.peak_waiters
                        )
                    }))
                    .collect()
            }),
        }
    });
    let shootdowns = total("csd_tlb_queued");
    let tlb = TlbFigures {
        remote_flushes: total("tlb_remote_send_ipi"),
        shootdowns,
        shootdowns_per_task: shootdowns.zip(tasks).map(|(s, t)| s as f64 / t as f64),
        ipis: total("ipi_sends"),
        ipi_targets: total("ipi_targets"),
    };
    let machine = MachineNoise {
        direct_reclaims: total("machine_direct_reclaims"),
        direct_reclaim_ns: total("machine_direct_reclaim_ns"),
        direct_reclaimed_pages: total("machine_direct_reclaimed_pages"),
        cgroup_reclaims: total("machine_cgroup_reclaims"),
        cgroup_reclaim_ns: total("machine_cgroup_reclaim_ns"),
        compactions: total("machine_compactions"),
        compaction_ns: total("machine_compaction_ns"),
        direct_compactions: total("machine_direct_compactions"),
        thp_collapses: total("machine_thp_collapses"),
        outside_oncpu_ns: total("outside_oncpu_ns"),
        outside_per_phase_ns: per_phase("outside_oncpu_ns"),
        outside_kthread_oncpu_ns: total("outside_kthread_oncpu_ns"),
        outside_kthread_per_phase_ns: per_phase("outside_kthread_oncpu_ns"),
    };
    Some(Waits {
        phases: phases.to_vec(),
        system_s,
        rows,
        futex,
        tlb,
        machine,
        not_available: section
            .unavailable
            .iter()
            .map(|u| format!("{}: {}", u.figure, u.why))
            .collect(),
        notes: section.notes.clone(),
        perf: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spawnscope_collector::{FutexAddress, FutexHash, Metric, Unavailable, Waits as Section};

    fn metric(name: &str, per_phase: &[u64]) -> Metric {
        crate::test_support::metric(name, 0, per_phase)
    }

    fn report(metrics: Vec<Metric>, section: Option<Section>) -> CollectorReport {
        let mut r = crate::test_support::collector_report(metrics);
        r.waits = section;
        r
    }

    #[test]
    fn a_run_recorded_before_waits_were_counted_has_no_section() {
        assert_eq!(waits(&report(vec![], None), &[], 1.0, Some(10)), None);
    }

    #[test]
    fn spinning_waits_are_a_share_of_system_time_and_sleeping_ones_are_not() {
        let section = Section {
            futex_hash: Some(FutexHash {
                slots: Some(16),
                walk_max: 2000,
                top_futexes: vec![FutexAddress {
                    address: "0x7f00".into(),
                    bucket: 11,
                    waits: 0,
                    wakes: 200,
                    walked: 400_000,
                    max_walk: 2000,
                }],
                ..FutexHash::default()
            }),
            unavailable: vec![Unavailable {
                figure: "direct reclaim (machine)".into(),
                metrics: vec![],
                why: "probes not attached: vmscan:x".into(),
            }],
            notes: vec![],
        };
        let r = report(
            vec![
                metric("mmap_lock_read_waits", &[10, 0]),
                metric("mmap_lock_read_wait_ns", &[2_000_000_000, 0]),
                metric("mmap_lock_write_waits", &[0, 0]),
                metric("mmap_lock_write_wait_ns", &[0, 0]),
                metric("lock_spin_waits", &[5, 5]),
                metric("lock_spin_wait_ns", &[250_000_000, 250_000_000]),
                metric("lock_mutex_waits", &[0, 0]),
                metric("lock_mutex_wait_ns", &[0, 0]),
                metric("futex_waits", &[2000, 0]),
                metric("futex_wait_ns", &[1, 0]),
                metric("futex_wakes", &[200, 0]),
                metric("futex_wake_ns", &[1, 0]),
                metric("futex_private_wakes", &[200, 0]),
                metric("futex_wake_walked", &[400_000, 0]),
                metric("csd_tlb_queued", &[19, 0]),
                metric("outside_oncpu_ns", &[3, 4]),
            ],
            Some(section),
        );
        let phases = ["startup".to_string(), "spawn".into(), "exit".into()];
        let w = waits(&r, &phases, 2.0, Some(10)).unwrap();
        let labels: Vec<&str> = w.rows.iter().map(|r| r.metric.as_str()).collect();
        // Kinds that never happened are left out, mmap_lock is not.
        assert_eq!(
            labels,
            [
                "mmap_lock_read_waits",
                "mmap_lock_write_waits",
                "lock_spin_waits"
            ]
        );
        assert_eq!(w.rows[0].share_of_system, None);
        assert_eq!(w.rows[0].ns_per_task, Some(2e8));
        assert_eq!(w.rows[2].share_of_system, Some(0.25));
        assert_eq!(w.rows[2].per_phase_ns, [0, 250_000_000, 250_000_000]);
        let f = w.futex.unwrap();
        assert_eq!(f.walked_per_wake, Some(2000.0));
        assert_eq!(f.hash_slots, Some(16));
        assert!(f.top[0].contains("bucket 11 of 16"), "{:?}", f.top);
        assert_eq!(w.tlb.shootdowns_per_task, Some(1.9));
        // Not available is None with a reason, never 0.
        assert_eq!(w.machine.direct_reclaims, None);
        assert_eq!(w.machine.outside_oncpu_ns, Some(7));
        assert_eq!(
            w.not_available,
            ["direct reclaim (machine): probes not attached: vmscan:x"]
        );
    }
}
