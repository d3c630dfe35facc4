//! memory.json: snapshots of the machine, the process and its cgroup before the run, at each
//! phase, at the peak and after, and the 100 ms timeline between them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ProcessReading;

/// One moment's readings of the machine, the process and its cgroup.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC, comparable with the workload's `t_ns`.
    pub t_ns: u64,
    /// How long the readings that are compared with one another took (free lists, meminfo,
    /// slabinfo, status, cgroup): while tasks start and exit, the snapshot is that wide a moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ns: Option<u64>,
    /// /proc/meminfo, kB.
    pub meminfo: BTreeMap<String, u64>,
    /// Free pages in the per-CPU lists, kB (free, yet outside MemFree): see procfs::pcp_free_kb.
    #[serde(default)]
    pub pcp_free_kb: Option<u64>,
    /// The zones' free pages (MemFree) from the same /proc/zoneinfo reading as `pcp_free_kb`,
    /// kB: the two add up to free memory at one instant (procfs::FreePages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_free_kb: Option<u64>,
    /// The zones' managed pages from that same reading, kB: with MemTotal, the memory the kernel
    /// has not initialized yet (`uninitialized_kb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_managed_kb: Option<u64>,
    /// Tasks on the whole host (/proc/loadavg): with KernelStack, the size of one kernel stack.
    #[serde(default)]
    pub tasks_on_host: Option<u64>,
    /// /proc/PID/status (kB for sizes).
    pub status: BTreeMap<String, u64>,
    /// /proc/PID/smaps_rollup (kB), at the peak only: it walks every mapping.
    pub smaps_rollup: BTreeMap<String, u64>,
    pub cpu: Option<CpuTime>,
    pub cgroup: Option<CgroupStats>,
    /// The kernel's slab objects, machine-wide (/proc/slabinfo, root only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slab_objects: Option<SlabObjects>,
    /// The run's processes at this moment (record/tree.rs): its cgroup's, else the process
    /// started and its descendants; each one's smaps_rollup where this is a moment memory is
    /// measured at (a `peak` event, a stopped reading, a command's peak). Where it has more than
    /// one process, the tree is what memory is counted from (analyse/memory/per_task.rs); runs recorded
    /// before it: the process started alone (`status`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tree: Vec<ProcessReading>,
    /// Object sizes of the slab caches a process's task and mm structs are in, bytes
    /// (/proc/slabinfo, root only; `tree::TASK_SLABS`), where the tree was read: a launcher's
    /// share of the slab is estimated from them (`tree::task_slab_bytes`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slab_object_bytes: BTreeMap<String, u64>,
    /// A command's base only: what its gated child, a fork of the conductor, frees when it execs
    /// the command, kB — the pages only it still maps (the conductor's writes after the fork
    /// gave the conductor new copies: `Private_Dirty`) and its page tables (`VmPTE`). Counted as
    /// free in the base (`available_kb`): freed under the run, they would hide that much of it
    /// (6 MiB a run of a sweep, 10 % of 100,000 tokio tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freed_at_exec_kb: Option<u64>,
}

impl Snapshot {
    /// Available memory, kB, for snapshots that read the zones' free pages with the per-CPU lists
    /// (procfs::FreePages): counted the way MemAvailable does, with two fixes. Free memory is
    /// that pair from one reading (MemFree is read a moment apart while pages move between the
    /// two, and pages on the per-CPU lists never left MemAvailable at all); page cache and
    /// reclaimable slab count whole — MemAvailable counts only half of each while it is under
    /// twice the low watermark (tens of MiB here), so the host's reclaim of an idle file's cache
    /// (DAMON) would raise it by half of what was reclaimed. Without the zones: MemAvailable and
    /// the per-CPU lists. Memory not yet initialized (`uninitialized_kb`) is free too: counted.
    pub fn available_kb(&self) -> Option<u64> {
        let kb = |k: &str| self.meminfo.get(k).copied();
        let pcp = self.pcp_free_kb.unwrap_or(0);
        let available = match self.zone_free_kb {
            Some(zones) => {
                let reclaimable = kb("KReclaimable").or(kb("SReclaimable")).unwrap_or(0);
                let uninitialized = self.uninitialized_kb().unwrap_or(0);
                zones
                    + pcp
                    + uninitialized
                    + kb("Active(file)")?
                    + kb("Inactive(file)")?
                    + reclaimable
            }
            None => kb("MemAvailable")? + pcp,
        };
        Some(available + self.freed_at_exec_kb.unwrap_or(0))
    }

    /// Whether memory and a command's threads are counted from the run's processes (`tree`)
    /// rather than the process started alone (`status`): where the tree has more than one, or
    /// the process started is gone and others of the run are not.
    pub fn counts_by_tree(&self) -> bool {
        self.tree.len() > 1 || (self.status.is_empty() && !self.tree.is_empty())
    }

    /// Whether every reading its memory per task is counted from is there: the status's RSS and
    /// page tables of the process started, or of each of the run's processes where memory is
    /// counted from them. A process that has let go of its address space (exiting: its threads
    /// still freeing it, their memory still charged; or a zombie) has no memory lines in its
    /// status, so a moment read then cannot be measured.
    pub fn reads_its_processes_memory(&self) -> bool {
        let has_memory = |status: &BTreeMap<String, u64>| {
            ["VmRSS", "VmPTE"].iter().all(|k| status.contains_key(*k))
        };
        if self.counts_by_tree() {
            self.tree.iter().all(|p| has_memory(&p.status))
        } else {
            has_memory(&self.status)
        }
    }

    /// The gated child's own memory, freed at its exec (`freed_at_exec_kb`), from its
    /// smaps_rollup and status.
    pub fn freed_at_exec(
        smaps_rollup: &BTreeMap<String, u64>,
        status: &BTreeMap<String, u64>,
    ) -> u64 {
        smaps_rollup.get("Private_Dirty").copied().unwrap_or(0)
            + status.get("VmPTE").copied().unwrap_or(0)
    }

    /// Memory the kernel counts in MemTotal that no zone manages yet, kB: pages not initialized
    /// since boot (deferred struct page init). A mainline kernel initializes them in the first
    /// seconds after boot (0 from then on, or a constant that differences cancel); a kernel that
    /// defers it lazily (`deferred_init=lazy`, as the development VMs boot) keeps most of RAM
    /// there and hands a zone 128 MiB sections as allocations need them, and its MemFree counts
    /// them. A run drawing on it takes almost nothing from the zones' free pages: counted without
    /// it, the first big run after boot seemed to use a fifth of its memory.
    pub fn uninitialized_kb(&self) -> Option<u64> {
        let total = self.meminfo.get("MemTotal").copied()?;
        Some(total.saturating_sub(self.zone_managed_kb?))
    }
}

/// All slab caches together (/proc/slabinfo), in kB: the objects in use and the objects their
/// slabs have room for (objects × object size). Room used up between two snapshots is memory
/// that had left MemAvailable before the first, yet is charged to whoever allocated there.
#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize,
)]
pub struct SlabObjects {
    pub in_use_kb: u64,
    pub room_kb: u64,
}

#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct PhaseSample {
    pub name: String,
    pub t_ns: u64,
    pub snapshot: Snapshot,
}

/// Every 100 ms during the run: what the progress bar and timeline charts show.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct TimelineSample {
    pub t_ns: u64,
    pub mem_available_kb: u64,
    pub rss_kb: u64,
    pub threads: u64,
    pub cgroup_bytes: Option<u64>,
}

#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Before the workload started.
    pub before: Snapshot,
    /// A workload's base, read at its start gate: after its `start` event, while it waits on
    /// stdin for the conductor's line before its first phase (`--wait-to-start`), so nothing of
    /// the run has started (its wait is a `start_gate` stop). Read still, as a stopped reading is,
    /// where the peak is too (sleep, churn), else at once. Every figure is counted from it.
    /// Runs recorded before the gate: none, and the base is the first phase's snapshot (read on
    /// the run, tasks already starting) or, without phases, `before`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Snapshot>,
    /// At each `phase` event.
    pub phases: Vec<PhaseSample>,
    /// The moment memory per task is measured at: the `peak` event (hold), the sample with the
    /// most tasks alive (other workloads), the most memory in use or a `--peak-when` match (any
    /// command). Runs recorded before `peak_moment`: the end of spawning (workloads other than
    /// hold), the most memory in use (commands).
    pub peak: Option<Snapshot>,
    /// Why `peak` is that moment and how many tasks were alive then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_moment: Option<PeakMoment>,
    /// Where `peak` is the moment the most tasks were alive: the other moments with nearly as
    /// many (within 80 %), measured the same way. Memory per task is averaged over them and
    /// `peak`, weighted by tasks alive (see measure/follow.rs, `MostAlive`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak_neighbours: Vec<AliveSnapshot>,
    /// After the workload exited and the kernel freed what it held.
    pub after: Option<Snapshot>,
    pub timeline: Vec<TimelineSample>,
    /// The cgroup's counters at the end (peaks, OOM kills).
    pub cgroup_final: Option<CgroupStats>,
    /// Where the workload waited at its start gate for its base, and where it was stopped for a
    /// reading of its memory (sleep, churn), in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stops: Vec<WorkloadStop>,
}

/// The workload held for one reading of its memory: stopped (SIGSTOP, every thread) then
/// continued (SIGCONT), or waiting at its start gate until the conductor's line. Times leave this
/// span out (`analyse::run::phases::stopped_ns_between`).
#[derive(schemars::JsonSchema, Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkloadStop {
    /// When SIGSTOP was sent (at the start gate: when its `start` event was read),
    /// CLOCK_MONOTONIC.
    pub from_t_ns: u64,
    /// When SIGCONT was sent (at the start gate: when the line that opens it was written).
    pub to_t_ns: u64,
    /// Why then: `start_gate` (the base every figure is counted from, read before the workload's
    /// first phase: nothing of the run started), `first_phase` (runs recorded before the gate: the
    /// base, read stopped with the threads already started in it), `levelled` (tasks were exiting
    /// as fast as others started, the count near the most seen) or `after_spawning` (the phase
    /// that follows spawning).
    pub at: StopAt,
    /// RCU's pending callbacks were run before the reading (rcu_barrier, through
    /// /sys/module/rcutree/parameters/do_rcu_barrier; root only). False: free memory was only
    /// waited on to hold still.
    pub rcu_barrier: bool,
    /// The reading was taken at once, without waiting for RCU's callbacks or for free memory to
    /// hold still: the start gate of a workload whose peak is read on the run too (hold,
    /// pingpong, chain, serve). False: read still.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_once: bool,
}

/// The moment a workload was stopped at (see `WorkloadStop::at`).
#[derive(schemars::JsonSchema, Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopAt {
    StartGate,
    FirstPhase,
    Levelled,
    AfterSpawning,
}

impl WorkloadStop {
    pub fn span_ns(&self) -> u64 {
        self.to_t_ns.saturating_sub(self.from_t_ns)
    }
}

/// A snapshot and the tasks alive in it.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct AliveSnapshot {
    pub alive: u64,
    pub snapshot: Snapshot,
}

/// Why the peak snapshot was taken when it was, and the tasks alive at that moment.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeakMoment {
    pub chosen: PeakChoice,
    /// Tasks alive at the snapshot (None: not known, e.g. a command without --tasks).
    pub alive: Option<u64>,
    pub counted: AliveCount,
}

/// Which moment the peak snapshot is.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PeakChoice {
    /// hold's `peak` event: every task alive and parked.
    PeakEvent,
    /// The sample with the most tasks alive (one at every progress event while spawning, one at
    /// the phase that follows spawning), out of `samples`.
    MostAlive { samples: u64 },
    /// The reading taken with the workload stopped (`MemoryRecord::stop`), at a moment with
    /// nearly the most tasks alive of `samples`.
    Stopped { samples: u64 },
    /// A command: the 100 ms sample with the most memory in use.
    MostMemory,
    /// A command: its first stdout line matching `--peak-when`.
    Matched { line: String },
}

/// How the tasks alive at the peak snapshot were counted.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AliveCount {
    /// The workload's own count in its `peak` event.
    PeakEvent,
    /// The process's threads in the snapshot's /proc/PID/status, less those it had before
    /// spawning: the same reading as its RSS.
    ThreadsInSnapshot { before: u64 },
    /// The OS threads of the run's processes (`processes`, read in the snapshot's `tree`) that
    /// are not launchers (`launchers` of them), less each one's main thread
    /// (`tree::task_threads`): a command that runs its program under a shell or `go run`.
    ThreadsInTree { processes: u64, launchers: u64 },
    /// The workload's live count in its progress event, `lag_ns` before the snapshot.
    Progress { lag_ns: u64 },
    /// The workload's live count when the phase began (the `result` event's alive_at_peak).
    ResultEvent,
    /// The command's word: `--tasks`, its tasks not being OS threads.
    Declared,
    /// `--tasks`, taken as a runtime's tasks without `--task-kind`: the command ran far fewer OS
    /// threads (`os_threads`, at the moment measured) than it was said to run tasks.
    AssumedTasks { os_threads: u64 },
}

/// CPU time of a whole process (live and exited threads), from /proc/PID/stat, in microseconds.
#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq,
)]
pub struct CpuTime {
    pub user_us: u64,
    pub sys_us: u64,
}

/// Which cgroup hierarchy a controller is on.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Memory and PID figures of a run's cgroup, read from its files.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct CgroupStats {
    pub version: Option<CgroupVersion>,
    pub memory_current_bytes: Option<u64>,
    /// v2 memory.peak, v1 memory.max_usage_in_bytes.
    pub memory_peak_bytes: Option<u64>,
    /// v1 memory.kmem.usage_in_bytes; on v2 the sum of kernel_stack, pagetables, slab, percpu, sock.
    pub kernel_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// memory.stat as the kernel prints it (v1 and v2 name things differently).
    pub memory_stat: BTreeMap<String, u64>,
    /// The run's TCP socket buffers: v2 memory.stat `sock` (part of the charge), v1
    /// memory.kmem.tcp.usage_in_bytes (apart from it), where counted (serve runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_bytes: Option<u64>,
    pub oom_kills: u64,
    pub pids_current: Option<u64>,
    pub pids_peak: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn what_the_gated_child_frees_at_its_exec_is_free_in_the_base() {
        // The child's own dirty pages and page tables, not what it still shares with the
        // conductor (Shared_*) nor file pages only it maps (clean: they stay in the page cache).
        let rollup = kv(&[
            ("Private_Dirty", 6_500),
            ("Private_Clean", 300),
            ("Shared_Dirty", 900),
        ]);
        let status = kv(&[("VmPTE", 76), ("VmRSS", 7_700)]);
        assert_eq!(Snapshot::freed_at_exec(&rollup, &status), 6_576);
        let mut base = Snapshot {
            meminfo: kv(&[("MemAvailable", 1_000_000)]),
            pcp_free_kb: Some(2_000),
            ..Default::default()
        };
        assert_eq!(base.available_kb(), Some(1_002_000));
        base.freed_at_exec_kb = Some(6_576);
        assert_eq!(base.available_kb(), Some(1_008_576));
    }
}
