//! The BPF object and its probes: one row per tracepoint, naming its programs in
//! collector.bpf.c, and the check that a classic program's fixed record layout matches this
//! kernel's tracefs `format` file.

use std::fs;
use std::path::{Path, PathBuf};

/// The compiled BPF object (built from `probes/collector.bpf.c` by build.rs).
pub(crate) const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/collector.bpf.o"));

/// One tracepoint. Its programs are `btf_<name>` (tp_btf, when `btf`) and `tp_<name>` (classic,
/// when `classic`).
pub(crate) struct Probe {
    /// `category:name`, as perf spells it (tracefs: `events/category/name`).
    pub tracepoint: &'static str,
    pub btf: bool,
    /// It has a classic twin; without one, a kernel without BTF lacks the probe.
    pub classic: bool,
    /// Record fields the classic program reads, at the offsets its C struct assumes.
    pub fields: &'static [(&'static str, u32)],
    /// It serves only per-thread figures (Config::per_thread): not attached without them.
    pub per_thread_only: bool,
    /// It counts the syscalls that serve requests (Config::net_syscalls): not loaded, nor
    /// listed in the report's probes, without them.
    pub net_only: bool,
    /// It serves the trace alone (Config::trace): not loaded, nor listed, without it.
    pub trace_only: bool,
}

impl Probe {
    /// `category:name`.
    pub fn id(&self) -> &'static str {
        self.tracepoint
    }

    pub fn category(&self) -> &'static str {
        self.tracepoint.split_once(':').map_or("", |(c, _)| c)
    }

    pub fn name(&self) -> &'static str {
        self.tracepoint
            .split_once(':')
            .map_or(self.tracepoint, |(_, n)| n)
    }

    pub fn btf_prog(&self) -> String {
        format!("btf_{}", self.name())
    }

    pub fn tp_prog(&self) -> String {
        format!("tp_{}", self.name())
    }
}

/// Counting starts at this one: without it nothing is collected.
pub(crate) const ARMING_PROBE: &str = "sched:sched_process_exec";

/// A probe with a tp_btf program and its classic twin.
const fn btf(tracepoint: &'static str, fields: &'static [(&'static str, u32)]) -> Probe {
    Probe {
        tracepoint,
        btf: true,
        classic: true,
        fields,
        per_thread_only: false,
        net_only: false,
        trace_only: false,
    }
}

/// A tp_btf program without a classic twin: it keeps the start of a wait in task storage, which
/// needs the kernel's BTF anyway, so on a kernel without BTF its figures are not available.
const fn btf_only(tracepoint: &'static str) -> Probe {
    Probe {
        tracepoint,
        btf: true,
        classic: false,
        fields: &[],
        per_thread_only: false,
        net_only: false,
        trace_only: false,
    }
}

/// A probe with a classic tracepoint program only: the serving syscalls' exits, csd_queue_cpu.
const fn syscall(tracepoint: &'static str, fields: &'static [(&'static str, u32)]) -> Probe {
    Probe {
        tracepoint,
        btf: false,
        classic: true,
        fields,
        per_thread_only: false,
        net_only: false,
        trace_only: false,
    }
}

/// A probe needed only for per-thread figures: RSS over time (kmem:rss_stat fires on every RSS
/// counter change of every process), futex wait times (the exits).
const fn per_thread_only(probe: Probe) -> Probe {
    Probe {
        per_thread_only: true,
        ..probe
    }
}

/// The exit of a syscall that serves requests (Config::net_syscalls): classic, its return value
/// read. Each fires for every such call on the machine, so none is attached unless asked for.
const fn net_syscall(tracepoint: &'static str) -> Probe {
    Probe {
        net_only: true,
        ..syscall(tracepoint, RET)
    }
}

/// A probe whose records only the trace needs (task_rename: the names threads take).
const fn trace_only(probe: Probe) -> Probe {
    Probe {
        trace_only: true,
        ..probe
    }
}

const WAKEUP: &[(&str, u32)] = &[("comm", 8), ("pid", 24), ("prio", 28), ("target_cpu", 32)];
const FAULT: &[(&str, u32)] = &[("address", 8)];
const RET: &[(&str, u32)] = &[("ret", 16)];

pub(crate) const PROBES: &[Probe] = &[
    btf("sched:sched_process_exec", &[("pid", 12)]),
    btf(
        "task:task_newtask",
        &[("pid", 8), ("comm", 12), ("clone_flags", 32)],
    ),
    btf(
        "sched:sched_process_exit",
        &[("comm", 8), ("pid", 24), ("prio", 28)],
    ),
    btf(
        "sched:sched_switch",
        &[
            ("prev_pid", 24),
            ("prev_prio", 28),
            ("prev_state", 32),
            ("next_comm", 40),
            ("next_pid", 56),
            ("next_prio", 60),
        ],
    ),
    btf("sched:sched_wakeup", WAKEUP),
    btf("sched:sched_wakeup_new", WAKEUP),
    btf("sched:sched_migrate_task", &[("pid", 12)]),
    trace_only(btf("task:task_rename", &[("pid", 8), ("newcomm", 28)])),
    btf("exceptions:page_fault_user", FAULT),
    btf("exceptions:page_fault_kernel", FAULT),
    // Signals delivered to the target: each lets one fault be entered twice (the faults'
    // cross-check). The classic program reads no field of its record.
    btf("signal:signal_deliver", &[]),
    per_thread_only(btf(
        "kmem:rss_stat",
        &[("curr", 12), ("member", 16), ("size", 24)],
    )),
    // The syscalls the run counts (clone, clone3, mmap, munmap, mprotect, madvise, the futex
    // calls, getrusage, write to stdout): one pair for all, filtered on the process first
    // (probes/collector/syscalls.bpf.c), not one classic syscalls:* program each.
    btf("raw_syscalls:sys_enter", &[("id", 8), ("args", 16)]),
    btf("raw_syscalls:sys_exit", &[("id", 8), ("ret", 16)]),
    // The kernel's waits, for the workload's tasks (see waits.rs for which figure needs which).
    btf_only("lock:contention_begin"),
    btf_only("lock:contention_end"),
    btf("tlb:tlb_flush", &[("reason", 8)]),
    btf_only("ipi:ipi_send_cpu"),
    btf_only("ipi:ipi_send_cpumask"),
    // tp_btf cannot read its function-pointer argument: the classic record only.
    syscall("csd:csd_queue_cpu", &[("func", 24)]),
    // The whole machine while the run is armed.
    btf_only("vmscan:mm_vmscan_direct_reclaim_begin"),
    btf_only("vmscan:mm_vmscan_direct_reclaim_end"),
    btf_only("vmscan:mm_vmscan_memcg_reclaim_begin"),
    btf_only("vmscan:mm_vmscan_memcg_reclaim_end"),
    btf_only("compaction:mm_compaction_begin"),
    btf_only("compaction:mm_compaction_end"),
    btf("compaction:mm_compaction_try_to_compact_pages", &[]),
    btf("huge_memory:mm_collapse_huge_page", &[]),
    btf("huge_memory:mm_khugepaged_collapse_file", &[]),
    // The syscalls that serve requests, at their return (Config::net_syscalls only).
    net_syscall("syscalls:sys_exit_accept"),
    net_syscall("syscalls:sys_exit_accept4"),
    net_syscall("syscalls:sys_exit_read"),
    net_syscall("syscalls:sys_exit_readv"),
    net_syscall("syscalls:sys_exit_recvfrom"),
    net_syscall("syscalls:sys_exit_recvmsg"),
    net_syscall("syscalls:sys_exit_write"),
    net_syscall("syscalls:sys_exit_writev"),
    net_syscall("syscalls:sys_exit_sendto"),
    net_syscall("syscalls:sys_exit_sendmsg"),
    net_syscall("syscalls:sys_exit_epoll_wait"),
    net_syscall("syscalls:sys_exit_epoll_pwait"),
    net_syscall("syscalls:sys_exit_epoll_pwait2"),
    net_syscall("syscalls:sys_exit_epoll_ctl"),
    net_syscall("syscalls:sys_exit_poll"),
    net_syscall("syscalls:sys_exit_ppoll"),
    net_syscall("syscalls:sys_exit_close"),
    net_syscall("syscalls:sys_exit_shutdown"),
];

/// Every tracepoint the collector's probes attach to, as `category:name` (tracefs has each under
/// `events/category/name`), in the order of the probe table. Whichever a kernel lacks is left out
/// of a run and said in `report.probes`.
pub fn tracepoints() -> Vec<&'static str> {
    PROBES.iter().map(Probe::id).collect()
}

/// Where tracefs is mounted, if it is (the classic programs attach through it).
pub fn tracefs_root() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .map(PathBuf::from)
        .find(|root| root.join("events/sched").is_dir())
}

/// Ok when the tracepoint exists and every field the classic program reads sits where it expects.
pub(crate) fn check_classic(tracefs: Option<&Path>, probe: &Probe) -> Result<(), String> {
    let Some(root) = tracefs else {
        return Err("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)".into());
    };
    let path = root
        .join("events")
        .join(probe.category())
        .join(probe.name())
        .join("format");
    let text = fs::read_to_string(&path)
        .map_err(|err| format!("no tracepoint {} on this kernel ({err})", probe.id()))?;
    check_fields(&text, probe.fields)
}

/// Compares a tracefs `format` text with the (field, offset) pairs a program assumes.
pub(crate) fn check_fields(format: &str, wanted: &[(&str, u32)]) -> Result<(), String> {
    let fields = parse_format(format);
    for &(name, offset) in wanted {
        match fields.iter().find(|(n, _)| n == name) {
            None => return Err(format!("record has no field `{name}`")),
            Some((_, at)) if *at != offset => {
                return Err(format!(
                    "record field `{name}` is at offset {at}, the program reads offset {offset}"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// (name, offset) of each `field:TYPE NAME; offset:N; size:S; ...` line.
fn parse_format(format: &str) -> Vec<(String, u32)> {
    let mut fields = Vec::new();
    for line in format.lines() {
        let Some(rest) = line.trim().strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';');
        let decl = parts.next().unwrap_or("");
        let name = decl
            .split_whitespace()
            .last()
            .unwrap_or("")
            .trim_start_matches('*')
            .split('[')
            .next()
            .unwrap_or("");
        let offset = parts
            .find_map(|p| p.trim().strip_prefix("offset:"))
            .and_then(|v| v.parse().ok());
        if let (false, Some(offset)) = (name.is_empty(), offset) {
            fields.push((name.to_string(), offset));
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch
ID: 320
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:int * parent_tidptr;\toffset:40;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] comm;\toffset:48;\tsize:4;\tsigned:0;

print fmt: \"prev_comm=%s\", REC->prev_comm
";

    #[test]
    fn tracepoints_are_category_colon_name_once_each() {
        let tps = tracepoints();
        assert_eq!(tps.len(), PROBES.len());
        assert!(tps.contains(&ARMING_PROBE));
        for (i, tp) in tps.iter().enumerate() {
            let (category, name) = tp.split_once(':').unwrap();
            assert!(
                !category.is_empty() && !name.is_empty() && !name.contains(':'),
                "{tp}"
            );
            assert!(!tps[..i].contains(tp), "{tp} twice");
        }
        let switch = PROBES
            .iter()
            .find(|p| p.id() == "sched:sched_switch")
            .unwrap();
        assert_eq!(
            (switch.category(), switch.name()),
            ("sched", "sched_switch")
        );
    }

    #[test]
    fn format_fields_parse_with_arrays_pointers_and_data_loc() {
        let fields = parse_format(SWITCH);
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "common_type",
                "common_pid",
                "prev_comm",
                "prev_pid",
                "prev_state",
                "parent_tidptr",
                "comm"
            ]
        );
        assert_eq!(fields[3], ("prev_pid".to_string(), 24));
    }

    #[test]
    fn a_moved_or_missing_field_is_refused_with_the_reason() {
        assert_eq!(
            check_fields(SWITCH, &[("prev_pid", 24), ("prev_state", 32)]),
            Ok(())
        );
        let moved = check_fields(SWITCH, &[("prev_pid", 12)]).unwrap_err();
        assert!(
            moved.contains("offset 24") && moved.contains("offset 12"),
            "{moved}"
        );
        let missing = check_fields(SWITCH, &[("next_pid", 56)]).unwrap_err();
        assert!(missing.contains("next_pid"), "{missing}");
    }

    #[test]
    fn every_probe_counts_its_runs_in_its_own_slot() {
        use crate::layout::prog;
        let mut names: Vec<&str> = PROBES.iter().map(Probe::name).collect();
        names.sort_unstable();
        let mut slots = prog::NAMES.to_vec();
        slots.sort_unstable();
        assert_eq!(
            names, slots,
            "enum sc_prog and PROBES name the same tracepoints"
        );
    }

    #[test]
    fn every_program_in_the_object_has_a_row_and_every_row_its_programs() {
        let obj = libbpf_rs::ObjectBuilder::default()
            .open_memory(OBJECT)
            .expect("opening the object needs no privileges");
        let progs: Vec<(String, String)> = obj
            .progs()
            .map(|p| {
                (
                    p.name().to_string_lossy().into_owned(),
                    p.section().to_string_lossy().into_owned(),
                )
            })
            .collect();
        for (name, section) in &progs {
            let row = PROBES
                .iter()
                .find(|p| *name == p.btf_prog() || *name == p.tp_prog())
                .unwrap_or_else(|| panic!("program {name} has no row in PROBES"));
            let expected = if *name == row.btf_prog() {
                format!("tp_btf/{}", row.name())
            } else {
                format!("tracepoint/{}/{}", row.category(), row.name())
            };
            assert_eq!(*section, expected, "section of {name}");
        }
        for row in PROBES {
            assert_eq!(
                progs.iter().any(|(n, _)| *n == row.tp_prog()),
                row.classic,
                "{}",
                row.tp_prog()
            );
            assert_eq!(
                progs.iter().any(|(n, _)| *n == row.btf_prog()),
                row.btf,
                "{}",
                row.btf_prog()
            );
        }
    }
}
