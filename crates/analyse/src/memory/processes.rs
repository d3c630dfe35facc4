//! The run's processes at the moment memory was measured, one row each — its PID, command,
//! threads, CPU time, RSS, PSS, USS and kernel parts — and the tree summed by PSS (never by RSS,
//! which counts a page the processes share once per process). Which processes are launchers (hold
//! none of the tasks) is record/tree.rs's rule; their memory is said beside the per-task figure
//! (`MemoryPerTask::launchers_kb`), never silently in it.

use serde::{Deserialize, Serialize};

use record::tree::{launchers, task_slab_bytes};
use record::Snapshot;

/// The table of the run's processes (from the peak snapshot's `tree`).
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Processes {
    /// One row per process, in PID order.
    pub rows: Vec<ProcessRow>,
    /// The tree's PSS summed, kB: each page counted once however many of its processes map it
    /// (file-backed pages included, shared with processes outside the run in proportion). None
    /// where a process's smaps_rollup was not read at that moment.
    pub pss_kb: Option<u64>,
    /// The size of one kernel stack the host uses (THREAD_SIZE), kB: the host's KernelStack over
    /// its tasks, rounded to a power of two.
    pub kernel_stack_size_kb: Option<f64>,
    /// How a process's task and mm structs are estimated (`task_slab_kb`).
    pub task_slab_estimate: String,
}

/// One process at the moment measured.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessRow {
    pub pid: u32,
    pub ppid: u32,
    /// Its command line (its name where smaps_rollup was not read).
    pub command: String,
    pub threads: u64,
    /// User and system time of all its threads so far, seconds.
    pub cpu_s: Option<f64>,
    pub rss_kb: Option<u64>,
    /// Proportional set size: each page divided by the processes that map it.
    pub pss_kb: Option<u64>,
    /// Unique set size: the pages this process alone maps (private clean and dirty).
    pub uss_kb: Option<u64>,
    /// Its kernel stacks: threads × the host's kernel stack size.
    pub kernel_stack_kb: Option<f64>,
    /// Its page tables (/proc/PID/status VmPTE).
    pub page_tables_kb: Option<u64>,
    /// Its task and mm structs in slab, estimated (`Processes::task_slab_estimate`).
    pub task_slab_kb: Option<f64>,
    /// It holds none of the tasks (record/tree.rs, `launchers`): a shell, `go run`'s go command.
    pub launcher: bool,
}

/// How `task_slab_kb` is estimated, in words (record/tree.rs, `task_slab_bytes`).
pub const TASK_SLAB_ESTIMATE: &str = "a task_struct per thread and one mm_struct, signal_struct, sighand_struct and files_struct per process, at /proc/slabinfo's object sizes (objects only: not their slabs' free room, VMAs, PIDs or credentials)";

/// The size of one kernel stack, kB: the host's KernelStack over its tasks, rounded to the power
/// of two THREAD_SIZE is (16 KiB on x86_64).
pub fn thread_size_kb(s: &Snapshot) -> Option<f64> {
    let per_stack =
        *s.meminfo.get("KernelStack")? as f64 / s.tasks_on_host.filter(|&t| t > 0)? as f64;
    Some(2f64.powf(per_stack.log2().round()))
}

/// The table of the processes in a snapshot; None where it read none (runs recorded before it,
/// a snapshot without a process).
pub fn processes(at: &Snapshot) -> Option<Processes> {
    if at.tree.is_empty() {
        return None;
    }
    let launchers = launchers(&at.tree);
    let stack = thread_size_kb(at);
    let rows: Vec<ProcessRow> = at
        .tree
        .iter()
        .map(|p| ProcessRow {
            pid: p.pid,
            ppid: p.ppid,
            command: p.command.clone(),
            threads: p.threads,
            cpu_s: p.cpu.map(|c| (c.user_us + c.sys_us) as f64 / 1e6),
            rss_kb: p.rss_kb(),
            pss_kb: p.pss_kb(),
            uss_kb: p.uss_kb(),
            kernel_stack_kb: stack.map(|kb| kb * p.threads as f64),
            page_tables_kb: p.page_tables_kb(),
            task_slab_kb: task_slab_bytes(p.threads, &at.slab_object_bytes)
                .map(|b| b as f64 / 1024.0),
            launcher: launchers.contains(&p.pid),
        })
        .collect();
    Some(Processes {
        pss_kb: rows.iter().map(|r| r.pss_kb).sum(),
        rows,
        kernel_stack_size_kb: stack,
        task_slab_estimate: TASK_SLAB_ESTIMATE.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{CpuTime, ProcessReading};

    fn kv(pairs: &[(&str, u64)]) -> std::collections::BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn process(pid: u32, ppid: u32, threads: u64, rss: u64, pss: Option<u64>) -> ProcessReading {
        ProcessReading {
            pid,
            ppid,
            command: format!("p{pid}"),
            threads,
            cpu: Some(CpuTime {
                user_us: 250_000,
                sys_us: 750_000,
            }),
            status: kv(&[("VmRSS", rss), ("VmPTE", 8 * threads)]),
            smaps_rollup: pss
                .map(|pss| {
                    kv(&[
                        ("Pss", pss),
                        ("Private_Clean", 4),
                        ("Private_Dirty", pss / 2),
                    ])
                })
                .unwrap_or_default(),
            smaps_t_ns: None,
        }
    }

    fn at(tree: Vec<ProcessReading>) -> Snapshot {
        Snapshot {
            meminfo: kv(&[("KernelStack", 16_000)]),
            // 16,000 kB over 990 tasks: 16.2 kB a task, THREAD_SIZE 16 KiB.
            tasks_on_host: Some(990),
            slab_object_bytes: kv(&[("task_struct", 6_144), ("mm_struct", 1_024)]),
            tree,
            ..Default::default()
        }
    }

    #[test]
    fn a_shell_and_its_program_are_summed_by_pss_the_shell_apart() {
        // The shell and the program share libc's pages: their RSS counts them twice, PSS once.
        let table = processes(&at(vec![
            process(10, 1, 1, 1_600, Some(300)),
            process(11, 10, 2_001, 50_000, Some(48_700)),
        ]))
        .unwrap();
        assert_eq!(table.pss_kb, Some(49_000));
        assert_eq!(table.kernel_stack_size_kb, Some(16.0));
        let [sh, prog] = &table.rows[..] else {
            panic!("{table:?}")
        };
        assert!(sh.launcher && !prog.launcher);
        assert_eq!((sh.rss_kb, sh.uss_kb), (Some(1_600), Some(154)));
        assert_eq!(prog.kernel_stack_kb, Some(2_001.0 * 16.0));
        assert_eq!(prog.page_tables_kb, Some(8 * 2_001));
        assert_eq!(
            prog.task_slab_kb,
            Some((2_001.0 * 6_144.0 + 1_024.0) / 1024.0)
        );
        assert_eq!(prog.cpu_s, Some(1.0));
    }

    #[test]
    fn without_every_process_s_pss_there_is_no_sum_and_without_a_tree_no_table() {
        let table = processes(&at(vec![
            process(10, 1, 1, 1_600, None),
            process(11, 10, 2_001, 50_000, Some(48_700)),
        ]))
        .unwrap();
        assert_eq!(table.pss_kb, None, "RSS is never summed in its place");
        assert!(processes(&at(Vec::new())).is_none());
    }
}
