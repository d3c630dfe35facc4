//! The kernel-side map sizes, chosen at load time from the config and the machine.

use std::fs;

use crate::config::Config;

/// Map sizes chosen at load time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizing {
    /// Entries of the per-thread map (1, unused, without per-thread state).
    pub tasks: u32,
    /// Slots of the nvcsw-by-tid array: pid_max without per-thread state (every possible tid),
    /// else 1 (unused: the per-thread map holds it).
    pub nv_slots: u32,
    /// Slots of the wait-starts array, a power of two (see `wait_slots`).
    pub wait_slots: u32,
    /// Entries of the map of the run's processes followed by fork (1, unused, when the run's
    /// cgroup selects its tasks): see `run_processes`.
    pub run_processes: u32,
    /// Time buckets of the series.
    pub buckets: u32,
    pub bucket_ns: u64,
    /// Bytes of the trace's ring buffer (one page without the trace): see `ring_bytes`.
    pub ring_bytes: u32,
}

/// The most a trace's ring may take (1 GiB: 14.9 million records held at once, each 64 bytes and the ring's 8-byte header). Its pages are
/// the kernel's, allocated when the collector starts.
pub const MAX_RING_BYTES: u64 = 1 << 30;

/// The ring's size for `asked` bytes: the kernel wants a power of two of pages, so rounded up,
/// at least a page and at most MAX_RING_BYTES.
pub fn ring_bytes(asked: u64, page: u64) -> u32 {
    asked
        .max(page)
        .checked_next_power_of_two()
        .unwrap_or(MAX_RING_BYTES)
        .min(MAX_RING_BYTES) as u32
}

impl Sizing {
    pub fn of(cfg: &Config) -> Sizing {
        let pid_max = fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(1 << 22);
        let bucket_ns = cfg.bucket_ns.max(1_000);
        Sizing {
            tasks: if cfg.per_thread {
                tasks(cfg.expected_tasks, pid_max)
            } else {
                1
            },
            nv_slots: if cfg.per_thread {
                1
            } else {
                pid_max.clamp(1, 1 << 22) as u32
            },
            wait_slots: wait_slots(cfg.expected_tasks, pid_max),
            run_processes: if cfg.run_cgroup_id.is_some() {
                1
            } else {
                run_processes(cfg.expected_tasks, pid_max)
            },
            buckets: cfg.max_duration_ns.div_ceil(bucket_ns).clamp(1, 1 << 20) as u32,
            bucket_ns,
            ring_bytes: ring_bytes(cfg.trace.as_ref().map_or(0, |t| t.ring_bytes), page_size()),
        }
    }
}

/// Per-thread map entries: the expected tasks, never more than pid_max (no process can have more
/// threads), plus room for the runtime's own threads.
fn tasks(expected_tasks: u64, pid_max: u64) -> u32 {
    (expected_tasks.min(pid_max) + 1024).min(1 << 24) as u32
}

/// Entries of the map of the run's processes when they are followed by fork: one per task
/// expected (a task may be a process) and room for launchers and helpers, never more than
/// pid_max (no more processes can exist at once) nor 2^20 (a preallocated hash: about 64 MB).
fn run_processes(expected_tasks: u64, pid_max: u64) -> u32 {
    (expected_tasks + 1024).min(pid_max.max(1024)).min(1 << 20) as u32
}

/// Slots of the wait-starts array (slot = tid & (slots - 1)): one per possible tid when pid_max
/// allows, else twice the tasks expected (at least 65,536), never more than 2^21 (about 220 MB):
/// a machine with pid_max at 4 M would otherwise pin 400 MB for a run of a few threads.
fn wait_slots(expected_tasks: u64, pid_max: u64) -> u32 {
    let every_tid = pid_max.max(1).next_power_of_two();
    let for_the_tasks = (2 * expected_tasks).max(1 << 16).next_power_of_two();
    every_tid.min(for_the_tasks).min(1 << 21) as u32
}

pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ring_is_a_power_of_two_of_pages_and_capped() {
        use super::{ring_bytes, MAX_RING_BYTES};
        assert_eq!(ring_bytes(0, 4096), 4096);
        assert_eq!(ring_bytes(5000, 4096), 8192);
        assert_eq!(ring_bytes(100 << 20, 4096), 128 << 20);
        assert_eq!(ring_bytes(64 << 20, 4096), 64 << 20);
        assert_eq!(ring_bytes(u64::MAX, 4096) as u64, MAX_RING_BYTES);
        assert_eq!(ring_bytes(3 << 30, 65536) as u64, MAX_RING_BYTES);
        assert_eq!(ring_bytes(1000, 65536), 65536);
    }

    #[test]
    fn wait_slots_cover_every_tid_when_they_can_and_twice_the_tasks_when_not() {
        use super::wait_slots;
        assert_eq!(wait_slots(100_000, 104_184), 131_072); // every tid: no tag ever differs
        assert_eq!(wait_slots(2_000, 32_768), 32_768);
        assert_eq!(wait_slots(2_000, 4_194_304), 65_536); // a big pid_max, few threads
        assert_eq!(wait_slots(1_000_000, 4_194_304), 1 << 21);
        assert_eq!(wait_slots(1_000_000, 1_050_000), 1 << 21);
    }

    use super::*;

    #[test]
    fn the_followed_processes_fit_the_tasks_and_never_pass_pid_max() {
        assert_eq!(run_processes(2_000, 32_768), 3_024);
        assert_eq!(run_processes(100_000, 32_768), 32_768);
        assert_eq!(run_processes(10_000_000, 1 << 22), 1 << 20);
    }

    #[test]
    fn the_per_thread_map_is_capped_by_pid_max() {
        assert_eq!(tasks(2_000, 32_768), 3_024);
        assert_eq!(tasks(1_000_000, 32_768), 33_792);
        assert_eq!(tasks(0, 32_768), 1_024);
    }

    #[test]
    fn only_the_map_in_use_is_sized_to_the_threads() {
        let mut cfg = Config::new(1, 100_000);
        let lean = Sizing::of(&cfg);
        assert_eq!(lean.tasks, 1);
        assert!(lean.nv_slots >= 300, "every tid below pid_max has a slot");
        cfg.per_thread = true;
        let full = Sizing::of(&cfg);
        assert_eq!(full.nv_slots, 1);
        assert!(full.tasks > 1024);
    }

    #[test]
    fn buckets_cover_the_duration() {
        let mut cfg = Config::new(1, 10);
        let s = Sizing::of(&cfg);
        assert_eq!((s.buckets, s.bucket_ns), (12_000, 100_000_000));
        cfg.bucket_ns = 1;
        cfg.max_duration_ns = 10_000;
        let s = Sizing::of(&cfg);
        assert_eq!((s.buckets, s.bucket_ns), (10, 1_000));
    }
}
