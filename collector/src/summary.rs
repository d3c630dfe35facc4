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

/// The metrics a summary shows, in order, with what each counts in words; `faults`, `clones` and
/// the serving syscalls' groups (`accepts`, `net_reads`, `net_writes`, `epoll_waits`, …) are sums
/// of counters (see [`parts`]).
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
    ("new_processes", "processes created (fork)"),
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
    // The syscalls that serve requests: only when counted (Config::net_syscalls), on any fd.
    ("accepts", "accept + accept4 calls"),
    ("accept_calls", "accept calls"),
    ("accept4_calls", "accept4 calls"),
    ("accepts_failed", "… that failed (EAGAIN included)"),
    (
        "accepts_eagain",
        "… that found no connection waiting (EAGAIN)",
    ),
    (
        "net_reads",
        "read + readv + recvfrom + recvmsg calls (any fd)",
    ),
    ("read_calls", "read calls"),
    ("readv_calls", "readv calls"),
    ("recvfrom_calls", "recvfrom calls (recv)"),
    ("recvmsg_calls", "recvmsg calls"),
    ("net_read_bytes", "bytes they read"),
    ("net_reads_eagain", "… that found nothing to read (EAGAIN)"),
    (
        "net_writes",
        "write + writev + sendto + sendmsg calls (any fd)",
    ),
    ("write_calls", "write calls"),
    ("writev_calls", "writev calls"),
    ("sendto_calls", "sendto calls (send)"),
    ("sendmsg_calls", "sendmsg calls"),
    ("net_write_bytes", "bytes they wrote"),
    ("net_writes_eagain", "… that found no room (EAGAIN)"),
    (
        "epoll_waits",
        "epoll_wait + epoll_pwait + epoll_pwait2 calls",
    ),
    ("epoll_wait_calls", "epoll_wait calls"),
    ("epoll_pwait_calls", "epoll_pwait calls"),
    ("epoll_pwait2_calls", "epoll_pwait2 calls"),
    ("epoll_waits_empty", "… that returned no event"),
    ("epoll_ctl_calls", "epoll_ctl calls"),
    ("poll_calls", "poll calls"),
    ("ppoll_calls", "ppoll calls"),
    ("close_calls", "close calls"),
    ("shutdown_calls", "shutdown calls"),
];

/// The counters a summary row sums; none for a row that is one counter. A sum is shown only when
/// every part was measured.
fn parts(name: &str) -> &'static [&'static str] {
    match name {
        "faults" => &["faults_user", "faults_kernel"],
        "clones" => &["clone_calls", "clone3_calls"],
        "accepts" => &["accept_calls", "accept4_calls"],
        "accepts_failed" => &["accept_failed", "accept4_failed"],
        "accepts_eagain" => &["accept_eagain", "accept4_eagain"],
        "net_reads" => &[
            "read_calls",
            "readv_calls",
            "recvfrom_calls",
            "recvmsg_calls",
        ],
        "net_read_bytes" => &[
            "read_bytes",
            "readv_bytes",
            "recvfrom_bytes",
            "recvmsg_bytes",
        ],
        "net_reads_eagain" => &[
            "read_eagain",
            "readv_eagain",
            "recvfrom_eagain",
            "recvmsg_eagain",
        ],
        "net_writes" => &[
            "write_calls",
            "writev_calls",
            "sendto_calls",
            "sendmsg_calls",
        ],
        "net_write_bytes" => &[
            "write_bytes",
            "writev_bytes",
            "sendto_bytes",
            "sendmsg_bytes",
        ],
        "net_writes_eagain" => &[
            "write_eagain",
            "writev_eagain",
            "sendto_eagain",
            "sendmsg_eagain",
        ],
        "epoll_waits" => &[
            "epoll_wait_calls",
            "epoll_pwait_calls",
            "epoll_pwait2_calls",
        ],
        "epoll_waits_empty" => &[
            "epoll_wait_empty",
            "epoll_pwait_empty",
            "epoll_pwait2_empty",
        ],
        _ => &[],
    }
}

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
            // Shown for a run that forked; a workload of threads or goroutines never does.
            .filter(|(name, _)| *name != "new_processes" || self.total(name) > 0)
            .filter_map(|&(name, _)| {
                let parts = parts(name);
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
                // A part not measured (its probe missing, or never asked for): no sum, not a
                // partial one.
                if ms.len() < parts.len() {
                    return None;
                }
                let len = ms.iter().map(|m| m.per_phase.len()).max().unwrap_or(0);
                Some(SummaryRow {
                    metric: name.to_string(),
                    unit: ms[0].unit.clone(),
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
            net_syscalls: false,
            by_cgroup: true,
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

    /// A report with the serving syscalls counted, every probe attached but `missing`.
    fn net_report(raw: &Raw, missing: &[&str]) -> Report {
        let probes = crate::probes::tracepoints()
            .into_iter()
            .map(|p| crate::model::ProbeStatus {
                probe: p.to_string(),
                attach: (!missing.contains(&p)).then_some(Attach::Tracepoint),
                note: None,
            })
            .collect();
        let meta = Meta {
            tgid: 42,
            bucket_ns: 100_000_000,
            finished_ns: 5_000_000_000,
            probes,
            phases: Vec::new(),
            tasks_map_entries: 3024,
            nr_buckets: 12_000,
            fault_kinds: FaultKinds::Off,
            per_thread: false,
            by_cgroup: true,
            net_syscalls: true,
            errors: Vec::new(),
            held: None,
            support: Default::default(),
        };
        assemble(meta, raw)
    }

    #[test]
    fn serving_syscalls_show_only_when_counted_and_their_groups_sum_each_syscall() {
        let mut raw = Raw::zeroed(1);
        raw.phase[1][counter::READ_CALLS] = 3;
        raw.phase[1][counter::RECVFROM_CALLS] = 100;
        raw.phase[2][counter::RECVFROM_CALLS] = 7;
        raw.phase[1][counter::RECVFROM_BYTES] = 4_000;
        raw.phase[1][counter::READ_BYTES] = 96;
        raw.phase[2][counter::RECVFROM_EAGAIN] = 5;
        raw.phase[1][counter::EPOLL_PWAIT_CALLS] = 9;
        raw.phase[1][counter::EPOLL_PWAIT_EMPTY] = 2;
        raw.phase[0][counter::ACCEPT4_CALLS] = 1;
        raw.phase[1][counter::ACCEPT4_CALLS] = 4;
        raw.phase[1][counter::ACCEPT4_FAILED] = 2;
        raw.phase[1][counter::ACCEPT4_EAGAIN] = 1;

        // Not asked for: no metric and no row, not zeros.
        let off = report(&raw, FaultKinds::StackHeap);
        assert!(!off.diagnostics.net_syscalls);
        assert!(off.metric("read_calls").is_none() && off.metric("shutdown_calls").is_none());
        let rows: Vec<String> = off.summary_rows().into_iter().map(|r| r.metric).collect();
        for name in [
            "net_reads",
            "read_calls",
            "accepts",
            "epoll_waits",
            "close_calls",
        ] {
            assert!(!rows.iter().any(|r| r == name), "{name} in {rows:?}");
        }
        assert_eq!(rows.last().map(String::as_str), Some("madvise_calls"));

        let on = net_report(&raw, &[]);
        assert!(on.diagnostics.net_syscalls);
        let rows = on.summary_rows();
        let row = |name: &str| rows.iter().find(|r| r.metric == name).unwrap();
        let reads = row("net_reads");
        assert_eq!((reads.total, &reads.per_phase[..]), (110, &[103, 7][..]));
        assert_eq!(reads.unit, "count");
        let bytes = row("net_read_bytes");
        assert_eq!((bytes.total, bytes.unit.as_str()), (4_096, "bytes"));
        assert_eq!(row("net_reads_eagain").per_phase, [0, 5]);
        assert_eq!(row("recvfrom_calls").total, 107);
        assert_eq!(row("readv_calls").total, 0);
        assert_eq!(
            (row("epoll_waits").total, row("epoll_waits_empty").total),
            (9, 2)
        );
        let accepts = row("accepts");
        assert_eq!((accepts.total, accepts.before_first_phase), (5, 1));
        assert_eq!(
            (row("accepts_failed").total, row("accepts_eagain").total),
            (2, 1)
        );
        assert_eq!(row("close_calls").total, 0);
        assert_eq!(
            metric_label("net_reads"),
            "read + readv + recvfrom + recvmsg calls (any fd)"
        );
        // Every row of the summary has its words.
        for r in &rows {
            assert_ne!(metric_label(&r.metric), r.metric, "{}", r.metric);
        }

        // One syscall's probe missing: its rows go, and so do the groups it is part of; the
        // others stay.
        let gone = net_report(&raw, &["syscalls:sys_exit_recvmsg"]);
        assert!(gone.metric("recvmsg_calls").is_none());
        let rows: Vec<String> = gone.summary_rows().into_iter().map(|r| r.metric).collect();
        for name in [
            "recvmsg_calls",
            "net_reads",
            "net_read_bytes",
            "net_reads_eagain",
        ] {
            assert!(!rows.iter().any(|r| r == name), "{name} in {rows:?}");
        }
        for name in ["read_calls", "recvfrom_calls", "net_writes", "epoll_waits"] {
            assert!(rows.iter().any(|r| r == name), "{name} not in {rows:?}");
        }
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
