//! Assembling the report: the maps' raw numbers (see [`crate::maps::Raw`]) and what user space
//! noted (probes, phases, the held child's counters) into [`Report`].

use crate::layout::{counter, cut, hist, rss, series, state, sys};
use crate::layout::{CUT_EPOCHS, ERRNO_SLOTS, PHASE_SLOTS};
use crate::maps::Raw;
use crate::model::{
    CutCounts, CutWindow, Diagnostics, ErrnoCount, FaultKinds, HistBucket, Histogram, Metric,
    PhaseMark, PreExec, ProbeStatus, Report, RusageBasis, Series, REPORT_SCHEMA,
};
use crate::net;
use crate::waits::{self, Support};

/// What the report is assembled from besides the maps.
pub(crate) struct Meta {
    pub tgid: u32,
    pub bucket_ns: u64,
    pub finished_ns: u64,
    pub probes: Vec<ProbeStatus>,
    pub phases: Vec<PhaseMark>,
    pub tasks_map_entries: u32,
    pub nr_buckets: u32,
    pub fault_kinds: FaultKinds,
    pub per_thread: bool,
    /// Whether the syscalls that serve requests were asked for (Config::net_syscalls).
    pub net_syscalls: bool,
    /// Whether the run's cgroup selected its tasks (else its process tree was followed).
    pub by_cgroup: bool,
    pub errors: Vec<String>,
    /// The held child's counters from /proc, read before the probes were attached.
    pub held: Option<PreExec>,
    /// What the kernel offered the wait figures.
    pub support: Support,
}

/// The report from the maps' contents and `meta`.
pub(crate) fn assemble(meta: Meta, raw: &Raw) -> Report {
    let phases = merge_phases(&meta.phases, raw);
    let marked = phases.iter().map(|p| p.index as usize + 1).max();
    let used = (1..PHASE_SLOTS)
        .rev()
        .find(|&s| raw.phase[s].iter().any(|&v| v > 0))
        .unwrap_or(0);
    let nr_phases = marked.unwrap_or(0).min(PHASE_SLOTS - 1).max(used);
    // A wait figure this host cannot give is left out (listed in waits.unavailable), not 0.
    let support = Support {
        per_thread: meta.per_thread,
        ..meta.support
    };
    let waits = waits::waits(raw, &meta.probes, support);
    // So are the serving syscalls' counters when they were not asked for or not attached.
    let net_left_out = net::not_measured(meta.net_syscalls, &meta.probes);
    let metrics = counter::NAMES
        .iter()
        .enumerate()
        .filter(|(_, name)| {
            !net_left_out.contains(name)
                && !waits
                    .unavailable
                    .iter()
                    .any(|u| u.metrics.iter().any(|m| m == *name))
        })
        .map(|(c, name)| {
            let per_phase: Vec<u64> = (1..=nr_phases).map(|s| raw.phase[s][c]).collect();
            let before = raw.phase[0][c];
            Metric {
                name: name.to_string(),
                unit: unit_of(name).into(),
                total: before + per_phase.iter().sum::<u64>(),
                before_first_phase: before,
                per_phase,
            }
        })
        .collect();
    let mut histograms: Vec<Histogram> = hist::NAMES
        .iter()
        .zip(&raw.hists)
        .map(|(name, slots)| histogram(name, slots))
        .collect();
    // The run-queue wait as one histogram, as before the kernel side split it by what began the
    // wait: the two are disjoint, so their slots add.
    let runq: Vec<u64> = raw.hists[hist::WAKE_TO_RUN_NS]
        .iter()
        .zip(&raw.hists[hist::PREEMPTED_TO_RUN_NS])
        .map(|(w, p)| w + p)
        .collect();
    histograms.push(histogram("runq_ns", &runq));
    let mut all_series: Vec<Series> = series::NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.to_string(),
            unit: unit_of(name).into(),
            values: raw.series.iter().map(|row| row[i]).collect(),
        })
        .collect();
    for (i, member) in rss::NAMES.iter().enumerate() {
        let mut last = 0;
        let values = raw
            .rss
            .iter()
            .map(|row| {
                if row[i] > 0 {
                    last = row[i] - 1;
                }
                last
            })
            .collect();
        all_series.push(Series {
            name: format!("rss_{member}_bytes"),
            unit: "bytes".into(),
            values,
        });
    }
    let st = &raw.state;
    Report {
        schema: REPORT_SCHEMA,
        tgid: meta.tgid,
        exec_seen: st[state::ARMED] != 0,
        t0_ns: st[state::T0_NS],
        finished_ns: meta.finished_ns,
        bucket_ns: meta.bucket_ns,
        probes: meta.probes,
        phases,
        metrics,
        histograms,
        series: all_series,
        clone_failures: clone_failures(&raw.errnos),
        rusage_basis: rusage_basis(raw, meta.held.as_ref()),
        diagnostics: Diagnostics {
            tasks_map_entries: meta.tasks_map_entries,
            tasks_map_full: st[state::TASKS_FULL],
            threads_left_in_map: raw.tasks_left,
            nr_buckets: meta.nr_buckets,
            late_events: st[state::LATE_EVENTS],
            fault_kinds: meta.fault_kinds,
            per_thread: meta.per_thread,
            net_syscalls: meta.net_syscalls,
            nv_untracked: st[state::NV_UNTRACKED],
            task_storage: support.task_storage,
            vma_lookups_busy: st[state::VMA_BUSY],
            run_selected_by: Some(
                if meta.by_cgroup {
                    "cgroup"
                } else {
                    "process tree"
                }
                .into(),
            ),
            processes_followed: st[state::RUN_PROCESSES],
            processes_not_followed: st[state::RUN_FULL],
            execs: st[state::EXECS],
            read_errors: meta.errors,
        },
        program_costs: Vec::new(),
        program_costs_note: None,
        program_stats_on_ms: None,
        program_stats_of_ms: None,
        program_rates_from: None,
        waits: Some(waits),
        trace: None,
    }
}

/// A log2 histogram from the kernel's slots, listing the buckets from the first to the last
/// non-empty one.
fn histogram(name: &str, slots: &[u64]) -> Histogram {
    let first = slots.iter().position(|&c| c > 0);
    let last = slots.iter().rposition(|&c| c > 0);
    let buckets = match (first, last) {
        (Some(first), Some(last)) => (first..=last)
            .map(|i| {
                let (lo, hi) = log2_bounds(i);
                HistBucket {
                    lo,
                    hi,
                    count: slots[i],
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    Histogram {
        name: name.to_string(),
        unit: "ns".into(),
        count: slots.iter().sum(),
        buckets,
    }
}

/// Bounds [lo, hi) of log2 slot i, as the kernel side fills them (slot 0 also takes 0).
pub(crate) fn log2_bounds(i: usize) -> (u64, u64) {
    let lo = if i == 0 { 0 } else { 1u64 << i };
    let hi = if i >= 63 { u64::MAX } else { 1u64 << (i + 1) };
    (lo, hi)
}

/// The phases set from user space, with the times the kernel saw their events written.
fn merge_phases(set: &[PhaseMark], raw: &Raw) -> Vec<PhaseMark> {
    let seen = (raw.state[state::PHASE_EVENTS] as usize).min(PHASE_SLOTS);
    let count = set
        .iter()
        .map(|p| p.index as usize + 1)
        .max()
        .unwrap_or(0)
        .max(seen);
    (0..count)
        .map(|i| {
            let from_user = set.iter().find(|p| p.index as usize == i);
            let t_ns = from_user.map_or(0, |p| p.t_ns);
            let set_ns = from_user.and_then(|p| p.set_ns);
            let seen_ns = (i < seen).then(|| raw.phase_seen_ns[i]);
            let start = match (seen_ns, set_ns) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).unwrap_or(0),
            };
            PhaseMark {
                index: i as u32,
                t_ns,
                set_ns,
                seen_ns,
                lag_ns: if t_ns > 0 {
                    start.saturating_sub(t_ns)
                } else {
                    0
                },
            }
        })
        .collect()
}

fn unit_of(name: &str) -> &'static str {
    if name.ends_with("_ns") {
        "ns"
    } else if name.ends_with("_bytes") {
        "bytes"
    } else {
        "count"
    }
}

fn cut_counts(words: &[u64]) -> CutCounts {
    CutCounts {
        faults: words[cut::FAULTS],
        switches_voluntary: words[cut::SWITCHES_VOLUNTARY],
        switches_involuntary: words[cut::SWITCHES_INVOLUNTARY],
        switches_voluntary_after_exit: words[cut::SWITCHES_VOLUNTARY_AFTER_EXIT],
        switches_involuntary_after_exit: words[cut::SWITCHES_INVOLUNTARY_AFTER_EXIT],
        switches_voluntary_while_reaped: words[cut::SWITCHES_VOLUNTARY_WHILE_REAPED],
        switches_involuntary_while_reaped: words[cut::SWITCHES_INVOLUNTARY_WHILE_REAPED],
        new_threads: words[cut::NEW_THREADS],
        signals_delivered: words[cut::SIGNALS_DELIVERED],
        faults_unhandled: words[cut::FAULTS_UNHANDLED],
    }
}

fn sum_rows(rows: &[Vec<u64>]) -> Vec<u64> {
    let mut sum = vec![0; cut::NR];
    for row in rows {
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
    }
    sum
}

/// The kernel side moves to the next epoch at each getrusage entry and return. For n calls that
/// each returned, the last entry ends epoch 2n-2 and the last return epoch 2n-1; without the
/// return probe only entries count, and the window closes to a point.
fn rusage_basis(raw: &Raw, held: Option<&PreExec>) -> RusageBasis {
    let st = &raw.state;
    let (calls, returns) = (st[state::GETRUSAGE_CALLS], st[state::GETRUSAGE_RETURNS]);
    let ends = match (calls, returns) {
        (0, _) => None,
        (n, r) if r == n => Some((2 * n - 1, 2 * n)),
        (n, 0) => Some((n, n)),
        _ => None,
    };
    let at_last = ends
        .filter(|&(_, returned)| returned < CUT_EPOCHS as u64)
        .map(|(entered, returned)| CutWindow {
            entered: cut_counts(&sum_rows(&raw.cut[..entered as usize])),
            returned: cut_counts(&sum_rows(&raw.cut[..returned as usize])),
        });
    RusageBasis {
        getrusage_calls: calls,
        getrusage_returns: returns,
        last_getrusage_ns: st[state::LAST_GETRUSAGE_NS],
        pre_exec: pre_exec(st, held),
        at_last_getrusage: at_last,
        total: cut_counts(&sum_rows(&raw.cut)),
    }
}

/// Read at exec from task_struct when the exec probe is tp_btf; else /proc at the hold plus what
/// the classic probes counted from then until exec.
fn pre_exec(st: &[u64], held: Option<&PreExec>) -> Option<PreExec> {
    if st[state::PRE_KNOWN] != 0 {
        return Some(PreExec {
            minflt: st[state::PRE_MINFLT],
            majflt: st[state::PRE_MAJFLT],
            nvcsw: st[state::PRE_NVCSW],
            nivcsw: st[state::PRE_NIVCSW],
            source: "task_struct at exec".into(),
        });
    }
    held.map(|h| PreExec {
        minflt: h.minflt + st[state::PREARM_FAULTS],
        majflt: h.majflt,
        nvcsw: h.nvcsw + st[state::PREARM_VOLUNTARY],
        nivcsw: h.nivcsw + st[state::PREARM_INVOLUNTARY],
        source: h.source.clone(),
    })
}

fn clone_failures(errnos: &[Vec<u64>]) -> Vec<ErrnoCount> {
    let mut out = Vec::new();
    for (kind, syscall) in [(sys::CLONE, "clone"), (sys::CLONE3, "clone3")] {
        for (errno, &count) in errnos[kind].iter().enumerate().take(ERRNO_SLOTS) {
            if count > 0 {
                out.push(ErrnoCount {
                    syscall: syscall.into(),
                    errno: errno as u32,
                    name: errno_name(errno as u32).into(),
                    count,
                });
            }
        }
    }
    out
}

/// Names of the errnos clone can return (x86_64 and arm64 share these numbers).
fn errno_name(errno: u32) -> &'static str {
    match errno {
        1 => "EPERM",
        4 => "EINTR",
        11 => "EAGAIN",
        12 => "ENOMEM",
        14 => "EFAULT",
        16 => "EBUSY",
        17 => "EEXIST",
        22 => "EINVAL",
        28 => "ENOSPC",
        38 => "ENOSYS",
        87 => "EUSERS",
        95 => "EOPNOTSUPP",
        e if e as usize == ERRNO_SLOTS - 1 => "(159 or more)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{state, HIST_SLOTS};

    fn meta(phases: &[u32]) -> Meta {
        Meta {
            tgid: 42,
            bucket_ns: 100_000_000,
            finished_ns: 5_000_000_000,
            probes: Vec::new(),
            phases: phases
                .iter()
                .map(|&index| PhaseMark {
                    index,
                    t_ns: 1_000 + index as u64,
                    set_ns: Some(5_000),
                    seen_ns: None,
                    lag_ns: 0,
                })
                .collect(),
            tasks_map_entries: 3024,
            nr_buckets: 12_000,
            fault_kinds: FaultKinds::StackHeap,
            per_thread: true,
            net_syscalls: false,
            by_cgroup: true,
            errors: Vec::new(),
            held: None,
            support: Support::default(),
        }
    }

    #[test]
    fn log2_buckets_have_explicit_bounds_matching_the_kernel_slots() {
        assert_eq!(log2_bounds(0), (0, 2));
        assert_eq!(log2_bounds(1), (2, 4));
        assert_eq!(log2_bounds(10), (1024, 2048));
        assert_eq!(log2_bounds(63), (1 << 63, u64::MAX));
        let mut slots = vec![0u64; HIST_SLOTS];
        slots[3] = 5;
        slots[5] = 1;
        let h = histogram("x_ns", &slots);
        assert_eq!(h.count, 6);
        let bounds: Vec<(u64, u64, u64)> =
            h.buckets.iter().map(|b| (b.lo, b.hi, b.count)).collect();
        assert_eq!(bounds, [(8, 16, 5), (16, 32, 0), (32, 64, 1)]);
        assert_eq!(h.quantile_upper(0.5), Some(16));
        assert_eq!(h.quantile_upper(1.0), Some(64));
        assert_eq!(histogram("y", &[0; 4]).quantile_upper(0.5), None);
    }

    #[test]
    fn metrics_split_by_phase_and_sum_to_the_total() {
        let mut raw = Raw::zeroed(3);
        raw.phase[0][counter::CLONE3_CALLS] = 1; // before the first phase
        raw.phase[1][counter::CLONE3_CALLS] = 2000; // phase 0
        raw.phase[3][counter::CLONE3_CALLS] = 4; // phase 2
        raw.state[state::ARMED] = 1;
        let report = assemble(meta(&[0, 1, 2, 3]), &raw);
        let m = report.metric("clone3_calls").unwrap();
        assert_eq!(m.before_first_phase, 1);
        assert_eq!(m.per_phase, [2000, 0, 4, 0]);
        assert_eq!(m.total, 2005);
        assert_eq!(m.unit, "count");
        assert_eq!(report.metric("oncpu_ns").unwrap().unit, "ns");
        assert_eq!(report.metric("mmap_bytes").unwrap().unit, "bytes");
        // Counts in a phase nobody announced still show up.
        let report = assemble(meta(&[]), &raw);
        assert_eq!(
            report.metric("clone3_calls").unwrap().per_phase,
            [2000, 0, 4]
        );
    }

    #[test]
    fn phases_take_the_earlier_of_the_kernel_seeing_them_and_set_phase() {
        let mut raw = Raw::zeroed(0);
        raw.state[state::PHASE_EVENTS] = 3;
        raw.phase_seen_ns[..3].copy_from_slice(&[1_010, 9_000, 2_000]);
        let report = assemble(meta(&[0, 1]), &raw);
        let lags: Vec<(u64, Option<u64>, u64)> = report
            .phases
            .iter()
            .map(|p| (p.t_ns, p.seen_ns, p.lag_ns))
            .collect();
        // phase 0: seen 10 ns after t_ns; phase 1: set_phase (5000) came first; phase 2: only the
        // kernel saw it, its t_ns is unknown.
        assert_eq!(
            lags,
            [
                (1_000, Some(1_010), 10),
                (1_001, Some(9_000), 3_999),
                (0, Some(2_000), 0)
            ]
        );
    }

    #[test]
    fn rss_gauges_carry_forward_and_counters_do_not() {
        let mut raw = Raw::zeroed(4);
        raw.rss[1][rss::ANON] = 4096 + 1;
        raw.rss[3][rss::ANON] = 1; // shrank to 0
        raw.series[2][series::FAULTS] = 7;
        let report = assemble(meta(&[]), &raw);
        assert_eq!(
            report.series("rss_anon_bytes").unwrap().values,
            [0, 4096, 4096, 0]
        );
        assert_eq!(
            report.series("rss_file_bytes").unwrap().values,
            [0, 0, 0, 0]
        );
        assert_eq!(report.series("faults").unwrap().values, [0, 0, 7, 0]);
    }

    #[test]
    fn the_rusage_window_spans_the_last_call_from_entry_to_return() {
        let mut raw = Raw::zeroed(0);
        // Two calls: epochs 0 | 1 (inside call 1) | 2 | 3 (inside call 2) | 4 (after).
        for (epoch, faults) in [1000, 100, 10, 1, 7].iter().enumerate() {
            raw.cut[epoch][cut::FAULTS] = *faults;
        }
        raw.state[state::GETRUSAGE_CALLS] = 2;
        raw.state[state::GETRUSAGE_RETURNS] = 2;
        let basis = rusage_basis(&raw, None);
        let window = basis.at_last_getrusage.unwrap();
        assert_eq!(
            (window.entered.faults, window.returned.faults),
            (1110, 1111)
        );
        assert_eq!(basis.total.faults, 1118);
        assert_eq!(basis.pre_exec, None);
        // Without the exec probe's reading, /proc at the hold plus the switches counted since.
        let held = PreExec {
            minflt: 25,
            majflt: 0,
            nvcsw: 1,
            nivcsw: 0,
            source: "proc".into(),
        };
        raw.state[state::PREARM_VOLUNTARY] = 1;
        raw.state[state::PREARM_INVOLUNTARY] = 2;
        raw.state[state::PREARM_FAULTS] = 4;
        let pre = rusage_basis(&raw, Some(&held)).pre_exec.unwrap();
        assert_eq!((pre.minflt, pre.nvcsw, pre.nivcsw), (29, 2, 2));
        raw.state[state::PRE_KNOWN] = 1;
        raw.state[state::PRE_NVCSW] = 7;
        let pre = rusage_basis(&raw, Some(&held)).pre_exec.unwrap();
        assert_eq!((pre.nvcsw, pre.source.as_str()), (7, "task_struct at exec"));
        raw.state[state::PRE_KNOWN] = 0;
        // No return probe: entries alone, the window is a point.
        raw.state[state::GETRUSAGE_RETURNS] = 0;
        let window = rusage_basis(&raw, None).at_last_getrusage.unwrap();
        assert_eq!(
            (window.entered.faults, window.returned.faults),
            (1100, 1100)
        );
        // No call, a call still inside, too many calls: no window.
        raw.state[state::GETRUSAGE_CALLS] = 0;
        assert_eq!(rusage_basis(&raw, None).at_last_getrusage, None);
        raw.state[state::GETRUSAGE_CALLS] = 3;
        raw.state[state::GETRUSAGE_RETURNS] = 2;
        assert_eq!(rusage_basis(&raw, None).at_last_getrusage, None);
        raw.state[state::GETRUSAGE_CALLS] = CUT_EPOCHS as u64 / 2;
        raw.state[state::GETRUSAGE_RETURNS] = CUT_EPOCHS as u64 / 2;
        assert_eq!(rusage_basis(&raw, None).at_last_getrusage, None);
    }

    #[test]
    fn clone_failures_list_each_errno_with_its_name() {
        let mut raw = Raw::zeroed(0);
        raw.errnos[sys::CLONE3][11] = 3;
        raw.errnos[sys::CLONE][ERRNO_SLOTS - 1] = 1;
        let failures = clone_failures(&raw.errnos);
        assert_eq!(failures.len(), 2);
        assert_eq!(
            (
                failures[0].syscall.as_str(),
                failures[0].errno,
                failures[0].name.as_str()
            ),
            ("clone", 159, "(159 or more)")
        );
        assert_eq!(
            (failures[1].name.as_str(), failures[1].count),
            ("EAGAIN", 3)
        );
    }

    #[test]
    fn the_report_reads_back_from_json() {
        let mut raw = Raw::zeroed(2);
        raw.hists[hist::WAKE_TO_RUN_NS][4] = 9;
        raw.hists[hist::PREEMPTED_TO_RUN_NS][4] = 2;
        raw.hists[hist::PREEMPTED_TO_RUN_NS][6] = 1;
        let report = assemble(meta(&[0]), &raw);
        // The run-queue wait is the two kinds' slots added.
        let runq = report.histogram("runq_ns").expect("runq_ns");
        assert_eq!(runq.count, 12);
        assert_eq!(
            runq.buckets.iter().map(|b| b.count).collect::<Vec<_>>(),
            [11, 0, 1]
        );
        assert_eq!(report.histogram("wake_to_run_ns").unwrap().count, 9);
        assert_eq!(report.histogram("preempted_to_run_ns").unwrap().count, 3);
        let text = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, report);
    }
}
