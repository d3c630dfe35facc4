//! Memory per task: what the run's tasks hold above the base at the peak (or at moments read with the
//! workload stopped), split into its parts — the processes' own memory by PSS or RSS, page tables,
//! kernel stacks, slab and its unused room, huge pages — and checked against what memory fell by.

use crate::memory::processes::thread_size_kb;
use crate::memory::resolution::{self, Resolution};
use record::tree::{self, AnonymousBy};
use record::{CgroupStats, CgroupVersion, ProcessReading, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How far the parts may be from what memory fell by and still "add up", percent.
pub const ADDS_UP_PERCENT: f64 = 5.0;

/// How far /proc/PID/status's RssAnon may be from the exact count (smaps_rollup `Anonymous`,
/// read at the same moment) and still be taken, percent of the RSS measured. Its counters are
/// approximate: per-thread caches flushed every 64 faults before 6.2 (a parked thread's last
/// pages never reach them: −5 KiB a thread, −40 %, on Debian's 6.1), per-CPU counters read
/// without summing since. Within this, the two readings' moments apart (smaps_rollup walks every
/// mapping after status was read) move them as much as the counters' own error.
pub const STATUS_RSS_TOLERANCE_PERCENT: f64 = 2.0;

/// Memory per task, kB, and where each part was read.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryPerTask {
    pub rss_kb: f64,
    pub kernel_stack_kb: f64,
    pub page_tables_kb: f64,
    pub slab_kb: f64,
    pub total_kb: f64,
    /// How much MemAvailable fell, plus the free pages drained from the per-CPU lists (free
    /// memory that MemAvailable never counted).
    pub mem_available_drop_kb: f64,
    /// What the run's cgroup was charged (RSS, page cache and kernel memory), when there was one:
    /// per run, unlike MemAvailable, which anything else on the host moves too.
    pub cgroup_kb: Option<f64>,
    /// Two kernel mechanisms that move MemAvailable apart from the tasks alive, measured in
    /// records that carry /proc/slabinfo (root). Slab objects put in room old slabs had (objects
    /// in use rose more than room for them): charged to the run, yet that memory had left
    /// MemAvailable before the base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slab_room_used_kb: Option<f64>,
    /// Kernel stacks of exited threads waiting for their RCU-deferred free (VmallocUsed less
    /// KernelStack): MemAvailable fell by them, no live task holds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks_awaiting_free_kb: Option<f64>,
    /// Huge pages of exited threads' stacks waiting whole for their split (cgroup v2: anonymous
    /// memory on the LRU that nothing maps, `active_anon + inactive_anon − anon − shmem`, where
    /// huge pages were faulted in). A stack's huge page that glibc partly gave back when its
    /// thread exited goes on the deferred split queue and stays charged, 2 MiB, until memory
    /// pressure splits it: kernels that give thread stacks huge pages (before 6.8, THP
    /// `always`), workloads whose threads exit (sleep, churn). MemAvailable fell by them, no live
    /// task holds them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_pages_awaiting_split_kb: Option<f64>,
    /// Of the drop, memory the kernel initialized for the first time since boot while the run
    /// took it (`Snapshot::uninitialized_kb` fell): free before, counted in the drop, and slow
    /// to use the first time. Records that read the zones' managed pages only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_used_kb: Option<f64>,
    /// (total - drop) / drop, percent, where the drop is taken plus the slab room used and less
    /// the stacks awaiting their free. None (null) where nothing dropped to compare with.
    pub difference_percent: Option<f64>,
    /// Within ±ADDS_UP_PERCENT of the MemAvailable drop.
    pub adds_up: bool,
    /// (total - cgroup charge) / cgroup charge, percent: the same check against what was charged
    /// to the run alone, which nothing else on the host moves (kernel memory the cgroup is not
    /// charged for is missing from it, so MemAvailable stays the check). The charge is taken less
    /// page cache and less the huge pages awaiting their split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge_difference_percent: Option<f64>,
    /// Where the kernel parts were read.
    pub kernel_source: String,
    /// What RSS counts when it is not the whole of VmRSS (a command's anonymous and shared
    /// memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_counted: Option<String>,
    /// Where RSS's anonymous memory was read when not from /proc/PID/status: smaps_rollup
    /// `Anonymous` at the peak, where status's RssAnon was more than
    /// STATUS_RSS_TOLERANCE_PERCENT off it (kernels before 6.2 with many threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_source: Option<String>,
    /// Of RSS, transparent huge pages (cgroup v2 `anon_thp`, v1 `rss_huge`, else smaps_rollup
    /// `AnonHugePages`), where there were any: on kernels that map thread stacks without
    /// VM_NOHUGEPAGE (before 6.8) and THP `always`, each stack that starts on a 2 MiB boundary
    /// gets a whole huge page, so RSS varies from run to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_pages_kb: Option<f64>,
    /// Slab pages the run's cgroup was not charged for (cgroup v2): /proc/meminfo's Slab rise less
    /// memory.stat `slab`, which counts the bytes of the objects charged, not the slab pages they
    /// fill (task_struct: 3 to a 32 KiB slab) nor caches charged to no cgroup (vmap_area,
    /// maple_node, kmalloc). The slab part is the pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slab_uncharged_kb: Option<f64>,
    /// What the launchers held (processes of the run that hold none of the tasks: a shell or
    /// `go run` above the program; record/tree.rs, `launchers`), per task like the rest: their
    /// own memory, page tables, kernel stacks and task and mm structs (estimated). Not in
    /// `total_kb`; `total_kb` and it together are what is checked against the drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launchers_kb: Option<f64>,
    /// Where RSS (`rss_kb`) is the tree's by PSS: the task-holding processes' RSS summed
    /// (RssAnon + RssShmem, above the base), per task — what summing RSS would say, a page they
    /// share counted once per process (a forked child's copy-on-write pages): shown beside the
    /// PSS figure, never in the parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_summed_kb: Option<f64>,
    /// The moments averaged, when more than one (the most tasks alive and those near it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moments: Option<Moments>,
    /// Whether these figures are resolved: the tasks alive at the moment measured held at least
    /// `resolution::MIN_HELD_KB` in all (a `churn` of a hundred threads alive does not). Where
    /// not, the figures stay here for the record and every page says "not resolved" instead.
    #[serde(flatten)]
    pub resolution: Resolution,
}

/// Whether a run's memory per task was judged not resolved (too little held); false where there
/// is none, and for records from before the rule.
pub fn memory_unresolved(m: Option<&MemoryPerTask>) -> bool {
    m.is_some_and(|m| !m.resolution.resolved)
}

/// How many moments memory per task was averaged over, and the tasks alive in them.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Moments {
    pub count: u64,
    pub alive_min: u64,
    pub alive_max: u64,
}

fn delta(later: &BTreeMap<String, u64>, earlier: &BTreeMap<String, u64>, key: &str) -> Option<f64> {
    Some(*later.get(key)? as f64 - *earlier.get(key)? as f64)
}

fn cgroup_stat_kb(s: &Snapshot, key: &str) -> Option<f64> {
    let stats = s.cgroup.as_ref()?;
    (stats.version == Some(CgroupVersion::V2)).then_some(())?;
    Some(*stats.memory_stat.get(key)? as f64 / 1024.0)
}

fn cgroup_kb(s: &Snapshot, pick: impl Fn(&CgroupStats) -> Option<u64>) -> Option<f64> {
    Some(pick(s.cgroup.as_ref()?)? as f64 / 1024.0)
}

/// The process's kernel stacks (kB): one THREAD_SIZE stack per thread, THREAD_SIZE read as the
/// host's KernelStack over its tasks at the peak (16 KiB on x86_64). Per process, so other
/// activity on the host does not blur it the way a KernelStack delta would.
fn kernel_stacks(base: &Snapshot, peak: &Snapshot) -> Option<f64> {
    let threads = if peak.counts_by_tree() {
        tree_sum(peak, |p| Some(p.threads as f64))? - tree_sum(base, |p| Some(p.threads as f64))?
    } else {
        delta(&peak.status, &base.status, "Threads")?
    };
    Some(threads * thread_size_kb(peak)?)
}

/// A figure summed over a snapshot's processes (`Snapshot::tree`); a snapshot without them (a
/// command's base, taken before it existed) holds none.
fn tree_sum(s: &Snapshot, figure: impl Fn(&ProcessReading) -> Option<f64>) -> Option<f64> {
    if s.tree.is_empty() {
        return Some(0.0);
    }
    s.tree.iter().map(figure).sum()
}

/// The sources `kernel_parts` names.
pub(crate) const V2_KERNEL_SOURCE: &str = "kernel stacks: cgroup v2 memory.stat; slab: /proc/meminfo Slab (host-wide slab pages; memory.stat slab counts only the objects charged)";

/// Kernel stacks and slab (kB) between two snapshots, from the most specific source there is:
/// cgroup v2 memory.stat for kernel stacks with /proc/meminfo's Slab (v2's `slab` is the bytes
/// of the objects charged to the cgroup, not the slab pages they occupy: 2.7 KiB a thread short
/// on 6.1 and 6.12); cgroup v1 kmem (per cgroup) less kernel stacks and page tables; else
/// /proc/meminfo (host-wide: anything else running moves it).
fn kernel_parts(
    base: &Snapshot,
    peak: &Snapshot,
    page_tables: f64,
) -> Option<(f64, f64, &'static str)> {
    let v2 = |key| Some(cgroup_stat_kb(peak, key)? - cgroup_stat_kb(base, key)?);
    if let (Some(stack), Some(_)) = (v2("kernel_stack"), v2("slab")) {
        let slab = delta(&peak.meminfo, &base.meminfo, "Slab")?;
        return Some((stack, slab, V2_KERNEL_SOURCE));
    }
    let v1_kmem = cgroup_kb(peak, |c| c.kernel_bytes).zip(cgroup_kb(base, |c| c.kernel_bytes));
    let is_v1 = peak.cgroup.as_ref().and_then(|c| c.version) == Some(CgroupVersion::V1);
    match (kernel_stacks(base, peak), v1_kmem) {
        (Some(stack), Some((after, before))) if is_v1 => {
            let slab = (after - before - stack - page_tables).max(0.0);
            Some((
                stack,
                slab,
                "cgroup v1 kmem less kernel stacks (threads × THREAD_SIZE) and page tables",
            ))
        }
        (Some(stack), _) => Some((
            stack,
            delta(&peak.meminfo, &base.meminfo, "Slab")?,
            "kernel stacks: threads × THREAD_SIZE; slab: /proc/meminfo (host-wide)",
        )),
        _ => Some((
            delta(&peak.meminfo, &base.meminfo, "KernelStack")?,
            delta(&peak.meminfo, &base.meminfo, "Slab")?,
            "/proc/meminfo (host-wide)",
        )),
    }
}

/// Memory per task between `base` (before spawning) and one or more moments, each with its tasks
/// alive (the moment with the most alive and those near it): each figure is summed over the
/// moments and divided by the tasks alive summed over them, so a reading the kernel's churn
/// moved weighs no more than its share.
pub fn memory_per_task_over(
    base: &Snapshot,
    moments: &[(&Snapshot, u64)],
) -> Option<MemoryPerTask> {
    per_task(base, moments, Reading::OnTheRun)
}

/// Memory per task between two readings both taken with the workload stopped and free memory
/// still (measure/stop.rs): the slab room the run's objects used is what the run's cgroup was
/// charged for slab beyond the slab pages the host gained, /proc/meminfo's own count, which a
/// still host makes exact. /proc/slabinfo cannot say it: SLUB counts the free objects in per-CPU
/// slabs and sheaves as in use, by the megabyte after a big run has freed its objects there.
pub fn memory_per_task_still(
    base: &Snapshot,
    peak: &Snapshot,
    alive: u64,
) -> Option<MemoryPerTask> {
    per_task(base, &[(peak, alive)], Reading::Still)
}

/// How the readings compared were taken.
#[derive(Clone, Copy, PartialEq)]
enum Reading {
    /// While the workload ran (or parked, as in hold).
    OnTheRun,
    /// With the workload stopped and free memory still.
    Still,
}

fn per_task(
    base: &Snapshot,
    moments: &[(&Snapshot, u64)],
    reading: Reading,
) -> Option<MemoryPerTask> {
    let alive: u64 = moments.iter().map(|(_, a)| a).sum();
    if alive == 0 {
        return None;
    }
    let parts = moments
        .iter()
        .map(|(peak, _)| memory_parts(base, peak, reading))
        .collect::<Option<Vec<_>>>()?;
    let per = |kb: f64| kb / alive as f64;
    // Summed over the moments; an optional part only where every moment has it.
    let sum = |part: fn(&MemoryParts) -> f64| parts.iter().map(part).sum::<f64>();
    let sum_optional =
        |part: fn(&MemoryParts) -> Option<f64>| parts.iter().map(part).sum::<Option<f64>>();
    let last = parts.last()?;
    let total = sum(MemoryParts::total);
    let launchers = sum_optional(|p| p.launchers);
    // What is checked against the drop: the launchers too, whose memory it holds.
    let checked = total + launchers.unwrap_or(0.0);
    let charge_difference = sum_optional(|p| p.charged_less_cache)
        .filter(|c| *c > 0.0)
        .map(|c| (checked - c) / c * 100.0);
    let mut m = MemoryPerTask {
        rss_kb: per(sum(|p| p.rss)),
        kernel_stack_kb: per(sum(|p| p.kernel_stack)),
        page_tables_kb: per(sum(|p| p.page_tables)),
        slab_kb: per(sum(|p| p.slab)),
        total_kb: per(total),
        mem_available_drop_kb: per(sum(|p| p.drop)),
        slab_room_used_kb: sum_optional(|p| p.slab_room_used).map(per),
        stacks_awaiting_free_kb: sum_optional(|p| p.stacks_awaiting_free).map(per),
        huge_pages_awaiting_split_kb: sum_optional(|p| p.awaiting_split).map(per),
        first_used_kb: sum_optional(|p| p.first_used).map(per),
        cgroup_kb: sum_optional(|p| p.charged).map(per),
        difference_percent: None,
        adds_up: false,
        charge_difference_percent: charge_difference,
        kernel_source: last.source.into(),
        rss_counted: last.rss_counted.map(str::to_string),
        rss_source: last.rss_source.clone(),
        huge_pages_kb: sum_optional(|p| p.huge_pages)
            .filter(|kb| *kb > 0.0)
            .map(per),
        slab_uncharged_kb: sum_optional(|p| p.slab_uncharged).map(per),
        launchers_kb: launchers.map(per),
        rss_summed_kb: sum_optional(|p| p.rss_summed).map(per),
        moments: (moments.len() > 1).then(|| Moments {
            count: moments.len() as u64,
            alive_min: moments.iter().map(|(_, a)| *a).min().unwrap_or(0),
            alive_max: moments.iter().map(|(_, a)| *a).max().unwrap_or(0),
        }),
        resolution: Resolution::default(),
    };
    // On the sums, before dividing: the figures recorded before stay byte for byte.
    let compared = drop_compared(
        sum(|p| p.drop),
        sum_optional(|p| p.slab_room_used),
        sum_optional(|p| p.stacks_awaiting_free),
    ) - sum_optional(|p| p.awaiting_split).unwrap_or(0.0);
    m.difference_percent = (compared > 0.0).then(|| (checked - compared) / compared * 100.0);
    m.adds_up = m
        .difference_percent
        .is_some_and(|d| d.abs() <= ADDS_UP_PERCENT);
    // What one moment held, so that averaging over several does not pass a small figure.
    m.resolution = resolution::judge_held(
        total / moments.len() as f64,
        m.total_kb,
        alive / moments.len() as u64,
    );
    Some(m)
}

/// What the parts are checked against: the MemAvailable drop, plus the slab room the run used
/// and less the stacks awaiting their free, where those were measured (and less the huge pages
/// awaiting their split: `MemoryPerTask::drop_compared_kb`).
fn drop_compared(drop: f64, slab_room_used: Option<f64>, stacks_awaiting_free: Option<f64>) -> f64 {
    drop + slab_room_used.unwrap_or(0.0) - stacks_awaiting_free.unwrap_or(0.0)
}

impl MemoryPerTask {
    /// The drop the parts were checked against, per task.
    pub fn drop_compared_kb(&self) -> f64 {
        drop_compared(
            self.mem_available_drop_kb,
            self.slab_room_used_kb,
            self.stacks_awaiting_free_kb,
        ) - self.huge_pages_awaiting_split_kb.unwrap_or(0.0)
    }
}

/// What one moment holds above the base, in kB (not yet per task).
struct MemoryParts {
    rss: f64,
    kernel_stack: f64,
    page_tables: f64,
    slab: f64,
    drop: f64,
    slab_room_used: Option<f64>,
    stacks_awaiting_free: Option<f64>,
    awaiting_split: Option<f64>,
    first_used: Option<f64>,
    charged: Option<f64>,
    charged_less_cache: Option<f64>,
    source: &'static str,
    rss_counted: Option<&'static str>,
    rss_source: Option<String>,
    huge_pages: Option<f64>,
    slab_uncharged: Option<f64>,
    /// What the launchers hold (`Launchers`), where memory was counted from the run's processes:
    /// not in the parts, in the check against the drop.
    launchers: Option<f64>,
    /// The task-holding processes' RSS summed, where `rss` is by PSS (`TreeParts::rss_summed`).
    rss_summed: Option<f64>,
}

impl MemoryParts {
    fn total(&self) -> f64 {
        self.rss + self.kernel_stack + self.page_tables + self.slab
    }
}

/// What the run's processes hold above the base, kB, where memory is counted from them
/// (`Snapshot::counts_by_tree`): all of them, and the launchers' share (record/tree.rs,
/// `launchers`), which is said apart from the tasks'.
struct TreeParts {
    /// Their own memory, anonymous and shared (`ProcessReading::anonymous_kb`).
    own: f64,
    page_tables: f64,
    /// How their own memory was counted: by PSS where every process's smaps_rollup was read.
    by: AnonymousBy,
    launchers: Launchers,
    /// The task-holding processes' anonymous and shared RSS summed, above the base (a process
    /// there at the base counts what it gained since): beside the PSS sum, what RSS would say.
    rss_summed: Option<f64>,
}

/// The launchers' memory above the base, kB: their own, their page tables, their kernel stacks
/// (threads × THREAD_SIZE) and their task and mm structs (an estimate from the slab's object
/// sizes: `tree::task_slab_bytes`; 0 where slabinfo was not read).
#[derive(Default)]
struct Launchers {
    own: f64,
    page_tables: f64,
    kernel_stack: f64,
    slab: f64,
}

impl Launchers {
    fn total(&self) -> f64 {
        self.own + self.page_tables + self.kernel_stack + self.slab
    }
}

fn tree_parts(base: &Snapshot, peak: &Snapshot) -> Option<TreeParts> {
    let own = |p: &ProcessReading| p.anonymous_kb().map(|(kb, _)| kb as f64);
    let page_tables = |p: &ProcessReading| p.page_tables_kb().map(|kb| kb as f64);
    let by = if peak.tree.iter().all(|p| {
        p.anonymous_kb()
            .is_some_and(|(_, by)| by == AnonymousBy::Pss)
    }) {
        AnonymousBy::Pss
    } else {
        AnonymousBy::Rss
    };
    let thread_size = thread_size_kb(peak).unwrap_or(0.0);
    let task_slab = |s: &Snapshot, p: &ProcessReading| {
        tree::task_slab_bytes(p.threads, &s.slab_object_bytes).map_or(0.0, |b| b as f64 / 1024.0)
    };
    let mut launchers = Launchers::default();
    for p in peak
        .tree
        .iter()
        .filter(|p| tree::launchers(&peak.tree).contains(&p.pid))
    {
        // A launcher there at the base (a workload's own process) counts what it gained since.
        let before = base.tree.iter().find(|b| b.pid == p.pid);
        let gained = |f: &dyn Fn(&ProcessReading) -> Option<f64>| {
            f(p).unwrap_or(0.0) - before.and_then(f).unwrap_or(0.0)
        };
        launchers.own += gained(&own);
        launchers.page_tables += gained(&page_tables);
        launchers.kernel_stack += gained(&|q| Some(q.threads as f64)) * thread_size;
        launchers.slab += task_slab(peak, p) - before.map_or(0.0, |b| task_slab(base, b));
    }
    // The task-holders' RSS summed, above what each had at the base.
    let rss_own =
        |p: &ProcessReading| Some((p.status.get("RssAnon")? + p.status.get("RssShmem")?) as f64);
    let holders = tree::launchers(&peak.tree);
    let rss_summed = peak
        .tree
        .iter()
        .filter(|p| !holders.contains(&p.pid))
        .map(|p| {
            let before = base.tree.iter().find(|b| b.pid == p.pid).and_then(rss_own);
            Some(rss_own(p)? - before.unwrap_or(0.0))
        })
        .sum::<Option<f64>>();
    Some(TreeParts {
        own: tree_sum(peak, own)? - tree_sum(base, own)?,
        page_tables: tree_sum(peak, page_tables)? - tree_sum(base, page_tables)?,
        by,
        launchers,
        rss_summed,
    })
}

fn memory_parts(base: &Snapshot, peak: &Snapshot, reading: Reading) -> Option<MemoryParts> {
    if peak.counts_by_tree() {
        return tree_memory_parts(base, peak, reading);
    }
    // RSS and page tables are the process's own (/proc/PID/status). Where the base says the
    // process did not exist yet (a command), its file-backed pages are left out: they are the
    // page cache of its binary and libraries, mostly there before it ran and counted as
    // available, so RSS would count what MemAvailable never lost. A workload's base is its own
    // first phase, where those pages are already mapped.
    let anon_and_shared = |s: &Snapshot| Some(s.status.get("RssAnon")? + s.status.get("RssShmem")?);
    let (rss, rss_counted) = match (anon_and_shared(peak), base.status.get("RssAnon")) {
        (Some(now), Some(0)) => (now as f64, Some("anonymous and shared memory (RssAnon + RssShmem); file-backed pages are page cache")),
        _ => (delta(&peak.status, &base.status, "VmRSS")?, None),
    };
    let (rss, rss_source) = match status_anon_lag(peak, rss) {
        Some(lag) => (rss + lag, Some(format!(
            "anonymous memory from smaps_rollup (Anonymous): /proc/PID/status RssAnon was {:.0} % below it (per-thread RSS counters, kernels before 6.2)",
            lag / rss.max(1.0) * 100.0
        ))),
        None => (rss, None),
    };
    let page_tables = delta(&peak.status, &base.status, "VmPTE")?;
    let counted = Counted {
        rss,
        page_tables,
        rss_counted,
        rss_source,
        launchers: None,
        rss_summed: None,
    };
    parts_with_kernel(base, peak, reading, counted)
}

/// A moment's memory counted from the run's processes (`tree_parts`): the processes that hold
/// the tasks in the parts, the launchers' memory apart (`MemoryParts::launchers`), both checked
/// together against the drop. The kernel parts are read for the whole run as for one process,
/// then the launchers' share taken out of them.
fn tree_memory_parts(base: &Snapshot, peak: &Snapshot, reading: Reading) -> Option<MemoryParts> {
    let tree = tree_parts(base, peak)?;
    let l = &tree.launchers;
    let counted = Counted {
        rss: tree.own - l.own,
        page_tables: tree.page_tables,
        rss_counted: Some(match tree.by {
            AnonymousBy::Pss => TREE_BY_PSS,
            AnonymousBy::Rss => TREE_BY_RSS,
        }),
        rss_source: None,
        launchers: Some(l.total()),
        rss_summed: (tree.by == AnonymousBy::Pss)
            .then_some(tree.rss_summed)
            .flatten(),
    };
    let mut parts = parts_with_kernel(base, peak, reading, counted)?;
    parts.page_tables -= l.page_tables;
    parts.kernel_stack -= l.kernel_stack;
    parts.slab -= l.slab;
    Some(parts)
}

/// What RSS counts where memory is counted from the run's processes.
pub(crate) const TREE_BY_PSS: &str = "anonymous and shared memory of the run's processes by PSS (Pss_Anon + Pss_Shmem: a page shared between them counted once); file-backed pages are page cache";

pub(crate) const TREE_BY_RSS: &str = "anonymous and shared memory of the run's processes by RSS (RssAnon + RssShmem; smaps_rollup not read at this moment, or its walk short of the status's VmRSS read beside it: a page shared between them counted once per process); file-backed pages are page cache";

/// A moment's own memory of the run, counted one way or the other, before the kernel parts.
struct Counted {
    rss: f64,
    /// All the run's page tables (the launchers' too: the kernel parts are read for the run).
    page_tables: f64,
    rss_counted: Option<&'static str>,
    rss_source: Option<String>,
    launchers: Option<f64>,
    rss_summed: Option<f64>,
}

fn parts_with_kernel(
    base: &Snapshot,
    peak: &Snapshot,
    reading: Reading,
    counted: Counted,
) -> Option<MemoryParts> {
    let Counted {
        rss,
        page_tables,
        rss_counted,
        rss_source,
        launchers,
        rss_summed,
    } = counted;
    let (kernel_stack, slab, source) = kernel_parts(base, peak, page_tables)?;
    let slab_uncharged = (source == V2_KERNEL_SOURCE)
        .then(|| Some(slab - (cgroup_stat_kb(peak, "slab")? - cgroup_stat_kb(base, "slab")?)))
        .flatten();
    let huge_pages = huge_pages(base, peak);
    let awaiting_split = huge_pages_awaiting_split(base, peak);
    // Available memory as `Snapshot::available_kb` counts it, where both snapshots read the
    // zones' free pages; older records: MemAvailable, with the per-CPU lists drained added back.
    let drop = if base.zone_free_kb.is_some() && peak.zone_free_kb.is_some() {
        base.available_kb()? as f64 - peak.available_kb()? as f64
    } else {
        let pcp_drained = match (base.pcp_free_kb, peak.pcp_free_kb) {
            (Some(b), Some(p)) => b as f64 - p as f64,
            _ => 0.0,
        };
        -delta(&peak.meminfo, &base.meminfo, "MemAvailable")? + pcp_drained
    };
    let first_used = base
        .uninitialized_kb()
        .zip(peak.uninitialized_kb())
        .map(|(before, after)| before as f64 - after as f64);
    // Where few tasks are alive (a few megabytes in all), what the kernel reuses and defers
    // matters: new slab objects fill room old slabs had (charged, yet never free), and exited
    // threads' stacks stay allocated until an RCU grace period ends.
    let stacks_awaiting_free = || {
        let vmalloc = delta(&peak.meminfo, &base.meminfo, "VmallocUsed").unwrap_or(0.0);
        let stacks = delta(&peak.meminfo, &base.meminfo, "KernelStack").unwrap_or(0.0);
        Some((vmalloc - stacks).max(0.0))
    };
    // Where slab is the host's slab pages, objects put in room old slabs had are in neither the
    // parts nor the drop: nothing to correct.
    let slab_is_pages = source == V2_KERNEL_SOURCE;
    let (slab_room_used, stacks_awaiting_free) =
        match (reading, base.slab_objects, peak.slab_objects) {
            (Reading::Still, ..) => (
                Some(slab - delta(&peak.meminfo, &base.meminfo, "Slab")?),
                stacks_awaiting_free(),
            ),
            (Reading::OnTheRun, Some(b), Some(p)) => {
                let in_use = p.in_use_kb as f64 - b.in_use_kb as f64;
                let room = p.room_kb as f64 - b.room_kb as f64;
                (Some(in_use - room), stacks_awaiting_free())
            }
            _ => (None, None),
        };
    let slab_room_used = slab_room_used.filter(|_| !slab_is_pages);
    let charged = cgroup_kb(peak, |c| c.memory_current_bytes)
        .zip(cgroup_kb(base, |c| c.memory_current_bytes))
        .map(|(after, before)| after - before);
    // Checked against the charge less the page cache charged with it (v1 `cache`, v2 `file`):
    // the parts hold no page cache, and neither does MemAvailable's drop.
    let page_cache = |s: &Snapshot| {
        let stats = s.cgroup.as_ref()?;
        let key = match stats.version? {
            CgroupVersion::V1 => "cache",
            CgroupVersion::V2 => "file",
        };
        Some(*stats.memory_stat.get(key)? as f64 / 1024.0)
    };
    // Huge pages awaiting their split are charged to the run too, held by no live task.
    let charged_less_cache = charged
        .zip(page_cache(peak).zip(page_cache(base)))
        .map(|(c, (after, before))| c - (after - before) - awaiting_split.unwrap_or(0.0));
    Some(MemoryParts {
        rss,
        kernel_stack,
        page_tables,
        slab,
        drop,
        slab_room_used,
        stacks_awaiting_free,
        awaiting_split,
        first_used,
        charged,
        charged_less_cache,
        source,
        rss_counted,
        rss_source,
        huge_pages,
        slab_uncharged,
        launchers,
        rss_summed,
    })
}

/// How far /proc/PID/status's RssAnon is below the exact count, smaps_rollup `Anonymous`, at one
/// moment, kB: where it is more than STATUS_RSS_TOLERANCE_PERCENT of `rss` off (kernels before
/// 6.2 with many threads), else None and status stands.
fn status_anon_lag(s: &Snapshot, rss: f64) -> Option<f64> {
    let exact = *s.smaps_rollup.get("Anonymous")? as f64;
    let lag = exact - *s.status.get("RssAnon")? as f64;
    (lag.abs() > rss.abs() * STATUS_RSS_TOLERANCE_PERCENT / 100.0).then_some(lag)
}

/// Transparent huge pages the run gained, kB: its cgroup's count (v2 `anon_thp`, v1
/// `rss_huge`), else smaps_rollup `AnonHugePages` at the peak less the base's (none where the base
/// did not read it).
fn huge_pages(base: &Snapshot, peak: &Snapshot) -> Option<f64> {
    let cgroup = |s: &Snapshot| {
        let stats = s.cgroup.as_ref()?;
        let key = match stats.version? {
            CgroupVersion::V1 => "rss_huge",
            CgroupVersion::V2 => "anon_thp",
        };
        Some(*stats.memory_stat.get(key)? as f64 / 1024.0)
    };
    if let (Some(after), Some(before)) = (cgroup(peak), cgroup(base)) {
        return Some(after - before);
    }
    let smaps = |s: &Snapshot| s.smaps_rollup.get("AnonHugePages").map(|&kb| kb as f64);
    Some(smaps(peak)? - smaps(base).unwrap_or(0.0))
}

/// Huge pages awaiting their split, kB (`MemoryPerTask::huge_pages_awaiting_split_kb`): cgroup
/// v2's anonymous memory on the LRU less what is mapped (`anon`) and shmem, its rise from base to
/// peak; only where huge pages were faulted in meanwhile (`thp_fault_alloc` rose) and it rose.
/// Elsewhere the LRU's anon trails `anon` by the pages not yet on a list (a few dozen kB).
fn huge_pages_awaiting_split(base: &Snapshot, peak: &Snapshot) -> Option<f64> {
    let unmapped = |s: &Snapshot| {
        Some(
            cgroup_stat_kb(s, "active_anon")? + cgroup_stat_kb(s, "inactive_anon")?
                - cgroup_stat_kb(s, "anon")?
                - cgroup_stat_kb(s, "shmem")?,
        )
    };
    let faulted =
        cgroup_stat_kb(peak, "thp_fault_alloc")? - cgroup_stat_kb(base, "thp_fault_alloc")?;
    let kb = unmapped(peak)? - unmapped(base)?;
    (faulted > 0.0 && kb > 0.0).then_some(kb)
}
