//! What a summary shows of a report: the metrics in order, each with what it counts in words, and
//! per-phase rows the conductor prints and divides per task.

use serde::{Deserialize, Serialize};

use crate::model::{Attach, FaultKinds, Metric, Report};

/// One line of a summary table: a metric, its total and its split over phases.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRow {
    pub metric: String,
    pub unit: String,
    pub total: u64,
    pub before_first_phase: u64,
    pub per_phase: Vec<u64>,
}

/// The metrics a summary shows, in order, with what each counts in words; `faults` and `clones`
/// are sums of two counters.
const SUMMARY: &[(&str, &str)] = &[
    ("faults", "page faults"),
    ("fault_stack", "… near the thread's stack pointer"),
    ("fault_heap", "… on the brk heap"),
    ("fault_anon", "… on other anonymous memory"),
    ("fault_file", "… on file-backed memory"),
    ("fault_other", "… elsewhere (mmapped memory)"),
    ("clones", "clone + clone3 calls"),
    ("clone_calls", "clone calls (Go)"),
    ("clone3_calls", "clone3 calls (glibc)"),
    ("new_threads", "tasks created (task_newtask)"),
    ("thread_exits", "tasks exited"),
    ("switches_voluntary", "voluntary switches (blocked)"),
    ("switches_involuntary", "involuntary switches (preempted)"),
    ("oncpu_ns", "on-CPU time"),
    ("runq_ns", "run-queue wait, summed over tasks"),
    ("migrations", "CPU migrations"),
    ("futex_waits", "futex waits"),
    ("futex_wait_ns", "futex wait time, summed over tasks"),
    ("mmap_calls", "mmap calls"),
    ("mmap_bytes", "bytes mmapped"),
    ("munmap_calls", "munmap calls"),
    ("munmap_bytes", "bytes munmapped"),
    ("mprotect_calls", "mprotect calls"),
    ("madvise_calls", "madvise calls"),
];

/// What a summary metric counts, in words (the metric's own name when it has none).
pub fn metric_label(name: &str) -> &str {
    SUMMARY
        .iter()
        .find(|(metric, _)| *metric == name)
        .map_or(name, |(_, label)| label)
}

impl Report {
    /// Whether a `fault_*` kind was told apart in this run (the others are always counted).
    fn fault_kind_counted(&self, name: &str) -> bool {
        match name {
            "fault_stack" | "fault_heap" | "fault_other" => {
                self.diagnostics.fault_kinds != FaultKinds::Off
            }
            "fault_anon" | "fault_file" => self.diagnostics.fault_kinds == FaultKinds::Vma,
            // Times summed per thread need the per-thread state: without it they are not
            // measured, not zero.
            "oncpu_ns" | "runq_ns" => self.diagnostics.per_thread,
            // Also timed from task storage (kernels with BTF) since it existed.
            "futex_wait_ns" => self.diagnostics.per_thread || self.diagnostics.task_storage,
            // The classic migrate program tells the target's threads by their per-thread entry.
            "migrations" => {
                self.diagnostics.per_thread
                    || self.attach_of("sched:sched_migrate_task") == Some(Attach::TpBtf)
            }
            _ => true,
        }
    }

    /// The rows of a summary table (metric, total, per phase), for the conductor to print and
    /// divide per task. `faults` = user + kernel-mode faults, `clones` = clone + clone3 calls.
    pub fn summary_rows(&self) -> Vec<SummaryRow> {
        SUMMARY
            .iter()
            .filter(|(name, _)| self.fault_kind_counted(name))
            .filter_map(|&(name, _)| {
                let parts: &[&str] = match name {
                    "faults" => &["faults_user", "faults_kernel"],
                    "clones" => &["clone_calls", "clone3_calls"],
                    _ => &[],
                };
                if parts.is_empty() {
                    let m = self.metric(name)?;
                    return Some(SummaryRow {
                        metric: m.name.clone(),
                        unit: m.unit.clone(),
                        total: m.total,
                        before_first_phase: m.before_first_phase,
                        per_phase: m.per_phase.clone(),
                    });
                }
                let ms: Vec<&Metric> = parts.iter().filter_map(|p| self.metric(p)).collect();
                let len = ms.iter().map(|m| m.per_phase.len()).max().unwrap_or(0);
                Some(SummaryRow {
                    metric: name.to_string(),
                    unit: "count".into(),
                    total: ms.iter().map(|m| m.total).sum(),
                    before_first_phase: ms.iter().map(|m| m.before_first_phase).sum(),
                    per_phase: (0..len)
                        .map(|i| {
                            ms.iter()
                                .map(|m| m.per_phase.get(i).copied().unwrap_or(0))
                                .sum()
                        })
                        .collect(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::{assemble, Meta};
    use crate::layout::counter;
    use crate::maps::Raw;

    fn report(raw: &Raw, fault_kinds: FaultKinds) -> Report {
        let meta = Meta {
            tgid: 42,
            bucket_ns: 100_000_000,
            finished_ns: 5_000_000_000,
            probes: Vec::new(),
            phases: Vec::new(),
            tasks_map_entries: 3024,
            nr_buckets: 12_000,
            fault_kinds,
            per_thread: true,
            errors: Vec::new(),
            held: None,
            support: Default::default(),
        };
        assemble(meta, raw)
    }

    #[test]
    fn clones_and_faults_are_sums_of_two_counters() {
        let mut raw = Raw::zeroed(1);
        raw.phase[0][counter::CLONE3_CALLS] = 1;
        raw.phase[1][counter::CLONE3_CALLS] = 2000;
        raw.phase[1][counter::CLONE_CALLS] = 4;
        raw.phase[1][counter::FAULTS_USER] = 10;
        raw.phase[2][counter::FAULTS_KERNEL] = 3;
        let rows = report(&raw, FaultKinds::StackHeap).summary_rows();
        assert_eq!(rows[0].metric, "faults");
        assert_eq!((rows[0].total, &rows[0].per_phase[..]), (13, &[10, 3][..]));
        let clones = rows.iter().find(|r| r.metric == "clones").unwrap();
        assert_eq!((clones.total, clones.before_first_phase), (2005, 1));
        assert_eq!(clones.per_phase, [2004, 0]);
    }

    #[test]
    fn fault_kinds_show_only_when_they_were_told_apart() {
        let mut raw = Raw::zeroed(1);
        raw.phase[1][counter::FAULT_STACK] = 7;
        let rows_with = |kinds| {
            report(&raw, kinds)
                .summary_rows()
                .into_iter()
                .map(|r| (r.metric, r.total))
                .filter(|(m, _)| m.starts_with("fault_"))
                .collect::<Vec<_>>()
        };
        assert!(rows_with(FaultKinds::Off).is_empty());
        assert_eq!(
            rows_with(FaultKinds::StackHeap),
            [
                ("fault_stack".to_string(), 7),
                ("fault_heap".to_string(), 0),
                ("fault_other".to_string(), 0)
            ]
        );
        assert_eq!(rows_with(FaultKinds::Vma).len(), 5);
        assert_eq!(
            metric_label("fault_stack"),
            "… near the thread's stack pointer"
        );
        assert_eq!(metric_label("no_such_metric"), "no_such_metric");
    }
}
