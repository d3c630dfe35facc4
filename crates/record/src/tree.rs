//! The run's processes at one moment — a command's shell and the program it starts, `go run`'s
//! go command and the binary it built, a runtime that forks a process per task — each one's
//! readings as /proc gives them, and the one rule for which of them hold the tasks (the others
//! are launchers: their memory is said beside the per-task figure, never silently in it).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::CpuTime;

/// What is kept of /proc/PID/status, kB: the resident set and its parts, and the page tables.
pub const STATUS_KEYS: [&str; 5] = ["VmRSS", "RssAnon", "RssFile", "RssShmem", "VmPTE"];

/// What is kept of /proc/PID/smaps_rollup, kB: proportional set size (each page divided by the
/// processes mapping it, so a tree's PSS adds up where its RSS counts shared pages once per
/// process) and its parts, and the private pages (USS: what the process alone maps).
pub const SMAPS_KEYS: [&str; 8] = [
    "Rss",
    "Pss",
    "Pss_Anon",
    "Pss_File",
    "Pss_Shmem",
    "Private_Clean",
    "Private_Dirty",
    "Anonymous",
];

/// The slab caches whose object sizes (/proc/slabinfo, bytes) estimate a process's task and mm
/// structs (`task_slab_bytes`): one task_struct per thread; one each of the rest per process.
pub const TASK_SLABS: [&str; 5] = [
    "task_struct",
    "mm_struct",
    "signal_cache",
    "sighand_cache",
    "files_cache",
];

/// One process of the run, read at one moment.
#[derive(schemars::JsonSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessReading {
    pub pid: u32,
    /// Its parent (/proc/PID/stat): whether it started another process of the run.
    pub ppid: u32,
    /// Its command line (/proc/PID/cmdline, arguments joined by spaces, at most 200 characters)
    /// where `smaps_rollup` was read; else its name (/proc/PID/status `Name`), which takes no
    /// lock of the process.
    pub command: String,
    /// Its threads (/proc/PID/status `Threads`).
    pub threads: u64,
    /// User and system time of all its threads, live and exited (/proc/PID/stat).
    pub cpu: Option<CpuTime>,
    /// /proc/PID/status, kB (`STATUS_KEYS`).
    pub status: BTreeMap<String, u64>,
    /// /proc/PID/smaps_rollup, kB (`SMAPS_KEYS`), at the moment memory is measured only: it
    /// walks every mapping under the process's mmap_lock, which 10,000 processes read every
    /// 100 ms would hold for a good part of the time. Empty where not read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub smaps_rollup: BTreeMap<String, u64>,
    /// Where `smaps_rollup` is an earlier reading of the same process (a command's peak sample,
    /// the tree too large to walk at every sample: measure/sampler.rs, `DeepReads`), when it
    /// was read, CLOCK_MONOTONIC; its threads and RSS were the same then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smaps_t_ns: Option<u64>,
}

impl ProcessReading {
    fn status_kb(&self, key: &str) -> Option<u64> {
        self.status.get(key).copied()
    }

    fn smaps_kb(&self, key: &str) -> Option<u64> {
        self.smaps_rollup.get(key).copied()
    }

    pub fn rss_kb(&self) -> Option<u64> {
        self.status_kb("VmRSS")
    }

    pub fn pss_kb(&self) -> Option<u64> {
        self.smaps_kb("Pss")
    }

    /// Unique set size: the pages only this process maps (private clean and dirty).
    pub fn uss_kb(&self) -> Option<u64> {
        Some(self.smaps_kb("Private_Clean")? + self.smaps_kb("Private_Dirty")?)
    }

    /// Whether smaps_rollup's walk (its Rss) found at least the pages /proc/PID/status counted
    /// (VmRSS) a moment before, less 1 % or 256 kB (pages freed between the two reads). A walk
    /// may find more: before 6.2 the status lags by the threads' unsynced RSS counters (up to
    /// 5 KiB a parked thread on 6.1), which is why smaps_rollup is read at all. A reading without
    /// its Rss or VmRSS (files from before they were kept) is taken as it is.
    pub fn smaps_walked_all(&self) -> bool {
        match (self.smaps_kb("Rss"), self.rss_kb()) {
            (Some(walked), Some(counted)) => walked + (counted / 100).max(256) >= counted,
            _ => true,
        }
    }

    pub fn page_tables_kb(&self) -> Option<u64> {
        self.status_kb("VmPTE")
    }

    /// The memory of its own that the run counts, kB: anonymous and shared memory (file-backed
    /// pages are page cache, which free memory counts), by PSS where smaps_rollup was read, so
    /// that pages shared between the run's processes (a fork's copy-on-write pages) count once
    /// in the tree's sum; else by RSS (`RssAnon + RssShmem`), which counts them once per
    /// process. The second of the pair says which.
    /// smaps_rollup is used only where its walk found at least the pages the status counted
    /// beside it (`smaps_walked_all`): once, on Debian's 6.12 under QEMU, it came back 7.6 MiB
    /// short of VmRSS for a 2,001-thread process at its peak (a page a thread; at rest the two
    /// agree), and the MemAvailable drop sided with VmRSS.
    pub fn anonymous_kb(&self) -> Option<(u64, AnonymousBy)> {
        match (self.smaps_kb("Pss_Anon"), self.smaps_kb("Pss_Shmem")) {
            (Some(anon), Some(shmem)) if self.smaps_walked_all() => {
                Some((anon + shmem, AnonymousBy::Pss))
            }
            _ => Some((
                self.status_kb("RssAnon")? + self.status_kb("RssShmem")?,
                AnonymousBy::Rss,
            )),
        }
    }
}

/// How a process's own memory was counted (`ProcessReading::anonymous_kb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnonymousBy {
    Pss,
    Rss,
}

/// Which of the run's processes are launchers, by PID: processes that hold none of the tasks. A
/// process is one when it started another process of the run (a child of it is in the tree) and
/// either
/// - it runs no more threads than it has children in the tree: a shell (`sh -c 'PROG; true'`,
///   one thread, one child), a parent that forks a process per task and waits; or
/// - a process below it runs more threads than it does: `go run`'s go command (a dozen threads)
///   above the program it built.
///
/// A program that holds its tasks itself and starts a helper (more threads than the helper has,
/// more than it has children) is not one. Only processes with children can be launchers: a leaf
/// runs what it runs.
pub fn launchers(tree: &[ProcessReading]) -> BTreeSet<u32> {
    let mut children: BTreeMap<u32, Vec<&ProcessReading>> = BTreeMap::new();
    for p in tree {
        children.entry(p.ppid).or_default().push(p);
    }
    // The most threads any process below `pid` runs.
    fn most_below(pid: u32, children: &BTreeMap<u32, Vec<&ProcessReading>>, depth: u32) -> u64 {
        if depth > 64 {
            return 0;
        }
        children.get(&pid).map_or(0, |kids| {
            kids.iter()
                .map(|k| k.threads.max(most_below(k.pid, children, depth + 1)))
                .max()
                .unwrap_or(0)
        })
    }
    tree.iter()
        .filter(|p| {
            let kids = children.get(&p.pid).map_or(0, Vec::len) as u64;
            kids > 0 && (p.threads <= kids || most_below(p.pid, &children, 0) > p.threads)
        })
        .map(|p| p.pid)
        .collect()
}

/// OS threads of the run that are tasks: of every process that is not a launcher, its threads
/// less its main thread — one process counts as a command of one process always has (threads
/// less one), a tree as the sum of its processes.
pub fn task_threads(tree: &[ProcessReading]) -> u64 {
    let launchers = launchers(tree);
    tree.iter()
        .filter(|p| !launchers.contains(&p.pid))
        .map(|p| p.threads.saturating_sub(1))
        .sum()
}

/// A process's task and mm structs in slab, estimated from the object sizes (`TASK_SLABS`):
/// one task_struct per thread, and one mm_struct, signal_struct, sighand_struct and
/// files_struct per process (its threads share them). Objects only: not the room their slabs
/// leave, nor its VMAs, PIDs, credentials, fs_struct (a cache SLUB merges with others, so
/// slabinfo does not name it) and open files' structs. A per-process cache SLUB merged away is
/// left out the same way; None without task_struct and mm_struct (slabinfo is root's).
pub fn task_slab_bytes(threads: u64, sizes: &BTreeMap<String, u64>) -> Option<u64> {
    let size = |name: &str| sizes.get(name).copied();
    size("mm_struct")?;
    let per_process: u64 = TASK_SLABS[1..].iter().filter_map(|name| size(name)).sum();
    Some(threads * size("task_struct")? + per_process)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, ppid: u32, threads: u64) -> ProcessReading {
        ProcessReading {
            pid,
            ppid,
            command: format!("p{pid}"),
            threads,
            ..Default::default()
        }
    }

    #[test]
    fn pss_counts_only_where_smaps_walked_the_pages_the_status_counts() {
        let reading = |walked_rss: u64| ProcessReading {
            status: [("VmRSS", 49_332), ("RssAnon", 48_672), ("RssShmem", 0)]
                .map(|(k, v)| (k.to_string(), v))
                .into(),
            smaps_rollup: [
                ("Rss", walked_rss),
                ("Pss_Anon", walked_rss - 700),
                ("Pss_Shmem", 0),
            ]
            .map(|(k, v)| (k.to_string(), v))
            .into(),
            ..process(11, 10, 2_001)
        };
        // The readings of the 6.12 VM: smaps_rollup 7.6 MiB short of VmRSS.
        assert_eq!(
            reading(41_560).anonymous_kb(),
            Some((48_672, AnonymousBy::Rss))
        );
        // A few pages apart: the same pages, counted by PSS.
        assert_eq!(
            reading(49_300).anonymous_kb(),
            Some((48_600, AnonymousBy::Pss))
        );
        // More than the status counted (6.1's lagging counters): the walk stands.
        assert_eq!(
            reading(59_332).anonymous_kb(),
            Some((58_632, AnonymousBy::Pss))
        );
    }

    #[test]
    fn a_shell_above_the_program_is_a_launcher_and_its_one_thread_no_task() {
        // sh -c 'PROG; true': the shell (1 thread) waits on PROG (2,001: 2,000 and its main).
        let tree = [process(10, 1, 1), process(11, 10, 2_001)];
        assert_eq!(launchers(&tree), [10].into());
        assert_eq!(task_threads(&tree), 2_000);
        // PROG alone: threads less its main thread, as before.
        assert_eq!(launchers(&tree[1..]), BTreeSet::new());
        assert_eq!(task_threads(&tree[1..]), 2_000);
    }

    #[test]
    fn go_run_and_a_forking_parent_are_launchers_a_program_with_a_helper_is_not() {
        // go run: the go command (12 threads) above the program it built (2,005).
        let go_run = [process(20, 1, 12), process(21, 20, 2_005)];
        assert_eq!(launchers(&go_run), [20].into());
        assert_eq!(task_threads(&go_run), 2_004);
        // A parent that forks a process per task: each child one thread, no task threads.
        let mut forks = vec![process(30, 1, 2)];
        forks.extend((0..100).map(|i| process(31 + i, 30, 1)));
        assert_eq!(launchers(&forks), [30].into());
        // A program of 2,001 threads that started one helper process: it holds the tasks.
        let helper = [process(40, 1, 2_001), process(41, 40, 1)];
        assert_eq!(launchers(&helper), BTreeSet::new());
        assert_eq!(task_threads(&helper), 2_000);
        // Two programs under one shell, a grandchild's threads seen through a middle shell.
        let deep = [
            process(50, 1, 1),
            process(51, 50, 1),
            process(52, 51, 501),
            process(53, 50, 1_501),
        ];
        assert_eq!(launchers(&deep), [50, 51].into());
        assert_eq!(task_threads(&deep), 2_000);
    }

    #[test]
    fn memory_of_its_own_is_pss_where_smaps_rollup_was_read_else_rss() {
        let mut p = process(1, 0, 3);
        p.status = [("RssAnon", 900), ("RssShmem", 100), ("VmRSS", 2_000)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        assert_eq!(p.anonymous_kb(), Some((1_000, AnonymousBy::Rss)));
        assert_eq!(p.uss_kb(), None);
        p.smaps_rollup = [
            ("Pss_Anon", 450),
            ("Pss_Shmem", 50),
            ("Private_Clean", 10),
            ("Private_Dirty", 400),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        assert_eq!(p.anonymous_kb(), Some((500, AnonymousBy::Pss)));
        assert_eq!(p.uss_kb(), Some(410));
    }

    #[test]
    fn task_and_mm_structs_are_a_task_struct_a_thread_and_the_rest_once() {
        let sizes: BTreeMap<String, u64> = [
            ("task_struct", 5_888),
            ("mm_struct", 1_600),
            ("signal_cache", 1_152),
            ("sighand_cache", 2_112),
            ("files_cache", 704),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        assert_eq!(
            task_slab_bytes(3, &sizes),
            Some(3 * 5_888 + 1_600 + 1_152 + 2_112 + 704)
        );
        // A cache merged with another is not named: left out, the rest stands.
        let mut merged = sizes.clone();
        merged.remove("files_cache");
        assert_eq!(
            task_slab_bytes(3, &merged),
            Some(3 * 5_888 + 1_600 + 1_152 + 2_112)
        );
        merged.remove("mm_struct");
        assert_eq!(task_slab_bytes(3, &merged), None);
    }
}
