//! The kernel's waits beyond their counters: which wait figures this host can give (a figure
//! whose probes or kernel support are missing is left out, never shown as 0), and the target's
//! futex hash as the kernel side followed it.

use crate::layout::{faddr, fbucket, state, FUTEX_ADDRS};
use crate::maps::Raw;
use crate::model::{Attach, FutexAddress, FutexBucket, FutexHash, ProbeStatus, Unavailable, Waits};

/// What the kernel offers the wait figures (found by attach before loading).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Support {
    pub task_storage: bool,
    pub futex_phash: bool,
    pub tlb_func_known: bool,
    pub per_thread: bool,
}

/// What a figure needs besides its probes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Needs {
    Nothing,
    /// Task local storage: the start of each wait, per task.
    TaskStorage,
    /// Per-thread state or task storage (the futex op's start).
    PerThreadOrStorage,
    /// Task storage and the process's own futex hash (6.16+).
    FutexHash,
    /// flush_tlb_func's address, to tell TLB shootdown IPIs from others.
    TlbFunc,
}

struct Figure {
    figure: &'static str,
    metrics: &'static [&'static str],
    probes: &'static [&'static str],
    needs: Needs,
}

const FUTEX_PROBES: &[&str] = &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"];

/// Each wait figure: its counters (enum sc_counter) and the probes that must all be attached.
const FIGURES: &[Figure] = &[
    Figure {
        figure: "mmap_lock waits",
        metrics: &[
            "mmap_lock_read_waits",
            "mmap_lock_read_wait_ns",
            "mmap_lock_write_waits",
            "mmap_lock_write_wait_ns",
            "mmap_lock_failed",
        ],
        // The waits on the process's own mmap_lock among the contended rw_semaphores.
        probes: &["lock:contention_begin", "lock:contention_end"],
        needs: Needs::TaskStorage,
    },
    Figure {
        figure: "kernel lock contention",
        metrics: &[
            "lock_spin_waits",
            "lock_spin_wait_ns",
            "lock_rwlock_waits",
            "lock_rwlock_wait_ns",
            "lock_rwsem_read_waits",
            "lock_rwsem_read_wait_ns",
            "lock_rwsem_write_waits",
            "lock_rwsem_write_wait_ns",
            "lock_mutex_waits",
            "lock_mutex_wait_ns",
            "lock_rtmutex_waits",
            "lock_rtmutex_wait_ns",
            "lock_percpu_rwsem_waits",
            "lock_percpu_rwsem_wait_ns",
            "lock_other_waits",
            "lock_other_wait_ns",
        ],
        probes: &["lock:contention_begin", "lock:contention_end"],
        needs: Needs::TaskStorage,
    },
    Figure {
        figure: "TLB flushes",
        metrics: &[
            "tlb_flush_task_switch",
            "tlb_remote_shootdown",
            "tlb_local_shootdown",
            "tlb_local_mm_shootdown",
            "tlb_remote_send_ipi",
            "tlb_remote_wrong_cpu",
        ],
        probes: &["tlb:tlb_flush"],
        needs: Needs::Nothing,
    },
    Figure {
        figure: "IPIs sent",
        metrics: &["ipi_sends", "ipi_targets"],
        probes: &["ipi:ipi_send_cpu", "ipi:ipi_send_cpumask"],
        needs: Needs::Nothing,
    },
    Figure {
        figure: "function calls queued to other CPUs",
        metrics: &["csd_queued"],
        probes: &["csd:csd_queue_cpu"],
        needs: Needs::Nothing,
    },
    Figure {
        figure: "TLB shootdowns asked of other CPUs",
        metrics: &["csd_tlb_queued"],
        probes: &["csd:csd_queue_cpu"],
        needs: Needs::TlbFunc,
    },
    Figure {
        figure: "futex wait and wake times",
        metrics: &["futex_wait_ns", "futex_wake_ns"],
        probes: FUTEX_PROBES,
        needs: Needs::PerThreadOrStorage,
    },
    Figure {
        figure: "shared futex ops",
        metrics: &["futex_shared_ops"],
        probes: FUTEX_PROBES,
        needs: Needs::TaskStorage,
    },
    Figure {
        figure: "futex hash walks",
        metrics: &[
            "futex_private_waits",
            "futex_private_wakes",
            "futex_wake_walked",
            "futex_wake_walks_1000",
            "futex_wake_walked_others",
        ],
        probes: FUTEX_PROBES,
        needs: Needs::FutexHash,
    },
    Figure {
        figure: "cgroup reclaim (machine)",
        metrics: &[
            "machine_cgroup_reclaims",
            "machine_cgroup_reclaim_ns",
            "machine_cgroup_reclaimed_pages",
        ],
        probes: &[
            "vmscan:mm_vmscan_memcg_reclaim_begin",
            "vmscan:mm_vmscan_memcg_reclaim_end",
        ],
        needs: Needs::TaskStorage,
    },
    Figure {
        figure: "direct reclaim (machine)",
        metrics: &[
            "machine_direct_reclaims",
            "machine_direct_reclaim_ns",
            "machine_direct_reclaimed_pages",
        ],
        probes: &[
            "vmscan:mm_vmscan_direct_reclaim_begin",
            "vmscan:mm_vmscan_direct_reclaim_end",
        ],
        needs: Needs::TaskStorage,
    },
    Figure {
        figure: "compaction (machine)",
        metrics: &["machine_compactions", "machine_compaction_ns"],
        probes: &[
            "compaction:mm_compaction_begin",
            "compaction:mm_compaction_end",
        ],
        needs: Needs::TaskStorage,
    },
    Figure {
        figure: "direct compaction stalls (machine)",
        metrics: &["machine_direct_compactions"],
        probes: &["compaction:mm_compaction_try_to_compact_pages"],
        needs: Needs::Nothing,
    },
    Figure {
        figure: "THP collapses (machine)",
        metrics: &["machine_thp_collapses"],
        probes: &["huge_memory:mm_collapse_huge_page"],
        needs: Needs::Nothing,
    },
    Figure {
        figure: "CPU time outside the run (machine)",
        metrics: &["outside_oncpu_ns", "outside_kthread_oncpu_ns"],
        probes: &["sched:sched_switch"],
        needs: Needs::Nothing,
    },
];

/// The figures this host cannot give, each with why.
pub(crate) fn unavailable(probes: &[ProbeStatus], support: Support) -> Vec<Unavailable> {
    let attached = |id: &str| probes.iter().any(|p| p.probe == id && p.attach.is_some());
    FIGURES
        .iter()
        .filter_map(|f| {
            let missing: Vec<&str> = f.probes.iter().copied().filter(|p| !attached(p)).collect();
            let why = if !missing.is_empty() {
                format!("probes not attached: {}", missing.join(", "))
            } else {
                let storage = "no task local storage (the kernel has no BTF, or classic tracepoints were asked for)";
                match f.needs {
                    Needs::TaskStorage if !support.task_storage => storage.to_string(),
                    Needs::PerThreadOrStorage if !support.task_storage && !support.per_thread => {
                        format!("{storage}, and per-thread state is off")
                    }
                    Needs::FutexHash if !support.task_storage => storage.to_string(),
                    Needs::FutexHash if !support.futex_phash => {
                        "the kernel has no per-process futex hash (Linux 6.16+)".to_string()
                    }
                    Needs::TlbFunc if !support.tlb_func_known => {
                        "flush_tlb_func's address is not in /proc/kallsyms".to_string()
                    }
                    _ => return None,
                }
            };
            Some(Unavailable {
                figure: f.figure.to_string(),
                metrics: f.metrics.iter().map(|m| m.to_string()).collect(),
                why,
            })
        })
        .collect()
}

/// Futex addresses and buckets a report lists.
const TOP: usize = 8;

/// The waits section: what is unavailable, and the futex hash when its figures are available.
pub(crate) fn waits(raw: &Raw, probes: &[ProbeStatus], support: Support) -> Waits {
    let unavailable = unavailable(probes, support);
    let hash_known = !unavailable.iter().any(|u| u.figure == "futex hash walks");
    let mut notes = vec![
        "waits are wall time from a wait's start to its end, mostly asleep; only spinning \
         (lock_spin, lock_rwlock, a mutex's optimistic spin) burns CPU"
            .to_string(),
        "mmap_lock waits are the contended waits on the process's own mmap_lock (read or write), \
         counted apart from other rw_semaphores; a writer's optimistic spinning before it queues \
         is CPU time, not counted here (perf shows it)"
            .to_string(),
    ];
    let attach_of = |id: &str| probes.iter().find(|p| p.probe == id).and_then(|p| p.attach);
    if attach_of("huge_memory:mm_khugepaged_collapse_file").is_none() {
        notes
            .push("THP collapses of files are not counted (no mm_khugepaged_collapse_file)".into());
    }
    notes.push("THP splits are not counted: no tracepoint reports them".into());
    if attach_of("sched:sched_switch") == Some(Attach::Tracepoint) {
        notes.push("outside_oncpu_ns from the classic sched_switch (prev is current)".into());
    }
    notes.push(
        "runnable time of tasks outside the run is not measured: it needs a wakeup time per \
         task of the whole machine"
            .into(),
    );
    let lost = raw.state[state::WAITS_LOST];
    if lost > 0 {
        notes.push(format!(
            "{lost} waits not timed: their task's slot in the wait table held another task's wait"
        ));
    }
    let futex_hash = hash_known.then(|| futex_hash(raw));
    if futex_hash
        .as_ref()
        .is_some_and(|h| h.addresses_untracked > 0)
    {
        notes.push(format!(
            "the table of {FUTEX_ADDRS} futex addresses was full: later addresses are not named"
        ));
    }
    if futex_hash.as_ref().is_some_and(|h| h.resized) {
        notes.push(
            "the futex hash was resized during the run: per-bucket waiter counts are approximate"
                .into(),
        );
    }
    Waits {
        unavailable,
        futex_hash,
        notes,
    }
}

fn futex_hash(raw: &Raw) -> FutexHash {
    let st = &raw.state;
    let mut top_futexes: Vec<FutexAddress> = raw
        .futex_addrs
        .iter()
        .map(|(addr, w)| FutexAddress {
            address: format!("{addr:#x}"),
            bucket: w[faddr::BUCKET],
            waits: w[faddr::WAITS],
            wakes: w[faddr::WAKES],
            walked: w[faddr::WALKED],
            max_walk: w[faddr::MAX_WALK],
        })
        .collect();
    top_futexes.sort_by(|a, b| {
        (b.walked, b.waits, b.wakes)
            .cmp(&(a.walked, a.waits, a.wakes))
            .then(a.address.cmp(&b.address))
    });
    top_futexes.truncate(TOP);
    let mut busiest_buckets: Vec<FutexBucket> = raw
        .futex_buckets
        .iter()
        .map(|(bucket, w)| FutexBucket {
            bucket: *bucket as u64,
            peak_waiters: w[fbucket::PEAK],
            wakes: w[fbucket::WAKES],
            walked: w[fbucket::WALKED],
        })
        .collect();
    busiest_buckets.sort_by(|a, b| {
        (b.peak_waiters, b.walked)
            .cmp(&(a.peak_waiters, a.walked))
            .then(a.bucket.cmp(&b.bucket))
    });
    busiest_buckets.truncate(TOP);
    let slots = st[state::FUTEX_HASH_SLOTS];
    FutexHash {
        slots: (slots > 0).then_some(slots),
        resizes: st[state::FUTEX_HASH_RESIZES],
        resized: st[state::FUTEX_HASH_RESIZES] > 0,
        walk_max: st[state::FUTEX_WALK_MAX],
        global_hash_ops: st[state::FUTEX_GLOBAL_HASH],
        too_big_ops: st[state::FUTEX_HASH_TOO_BIG],
        addresses_untracked: st[state::FUTEX_ADDRS_FULL],
        top_futexes,
        busiest_buckets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::counter;

    fn attached(except: &[&str]) -> Vec<ProbeStatus> {
        crate::probes::tracepoints()
            .into_iter()
            .map(|p| ProbeStatus {
                probe: p.to_string(),
                attach: (!except.contains(&p)).then_some(Attach::TpBtf),
                note: except
                    .contains(&p)
                    .then(|| "no tracepoint here".to_string()),
            })
            .collect()
    }

    const ALL: Support = Support {
        task_storage: true,
        futex_phash: true,
        tlb_func_known: true,
        per_thread: false,
    };

    #[test]
    fn every_figure_names_real_counters_and_probes() {
        let tracepoints = crate::probes::tracepoints();
        for f in FIGURES {
            for m in f.metrics {
                assert!(counter::NAMES.contains(m), "{m}");
            }
            for p in f.probes {
                assert!(tracepoints.contains(p), "{p}");
            }
        }
        assert!(unavailable(&attached(&[]), ALL).is_empty());
    }

    #[test]
    fn a_missing_probe_or_kernel_feature_makes_its_figure_unavailable() {
        let gone = unavailable(&attached(&["vmscan:mm_vmscan_direct_reclaim_end"]), ALL);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].figure, "direct reclaim (machine)");
        assert!(
            gone[0].why.contains("mm_vmscan_direct_reclaim_end"),
            "{gone:?}"
        );
        assert!(gone[0]
            .metrics
            .contains(&"machine_direct_reclaim_ns".to_string()));

        let no_storage = Support {
            task_storage: false,
            ..ALL
        };
        let figures: Vec<String> = unavailable(&attached(&[]), no_storage)
            .into_iter()
            .map(|u| u.figure)
            .collect();
        for f in [
            "mmap_lock waits",
            "kernel lock contention",
            "futex wait and wake times",
            "futex hash walks",
            "direct reclaim (machine)",
        ] {
            assert!(figures.iter().any(|g| g == f), "{f} in {figures:?}");
        }
        // Counters that need no start time stay.
        assert!(!figures
            .iter()
            .any(|g| g == "TLB flushes" || g.starts_with("CPU time")));
        // Per-thread state times futex ops without task storage.
        let per_thread = Support {
            per_thread: true,
            ..no_storage
        };
        assert!(!unavailable(&attached(&[]), per_thread)
            .iter()
            .any(|u| u.figure == "futex wait and wake times"));
        let old_kernel = Support {
            futex_phash: false,
            ..ALL
        };
        let gone = unavailable(&attached(&[]), old_kernel);
        assert_eq!(gone.len(), 1);
        assert!(gone[0].why.contains("6.16"), "{gone:?}");
    }

    #[test]
    fn the_futex_hash_names_the_busiest_addresses_and_buckets() {
        let mut raw = Raw::zeroed(0);
        raw.state[state::FUTEX_HASH_SLOTS] = 16;
        raw.state[state::FUTEX_WALK_MAX] = 2000;
        let mut w = vec![0; faddr::NR];
        w[faddr::WAKES] = 200;
        w[faddr::WALKED] = 400_000;
        w[faddr::BUCKET] = 5;
        raw.futex_addrs.push((0x7f00_0000_1040, w.clone()));
        w[faddr::WALKED] = 0;
        w[faddr::BUCKET] = 6;
        raw.futex_addrs.push((0x7f00_0000_2040, w));
        let mut b = vec![0; fbucket::NR];
        b[fbucket::PEAK] = 2000;
        raw.futex_buckets.push((5, b));
        let hash = waits(&raw, &attached(&[]), ALL).futex_hash.unwrap();
        assert_eq!(hash.slots, Some(16));
        assert!(!hash.resized);
        assert_eq!(hash.top_futexes[0].address, "0x7f0000001040");
        assert_eq!(hash.top_futexes[0].bucket, 5);
        assert_eq!(hash.busiest_buckets[0].peak_waiters, 2000);
        // Not available: no section, not an empty one.
        let none = Support {
            futex_phash: false,
            ..ALL
        };
        assert_eq!(waits(&raw, &attached(&[]), none).futex_hash, None);
    }
}
