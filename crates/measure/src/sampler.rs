//! Readings of the machine, the process and its cgroup: a snapshot at one moment, the timeline
//! every 100 ms while the workload runs (with the noise sentinels' tick), and the one rule for how
//! much memory a run holds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use crate::sentinels;
use host::cgroup::RunCgroup;
use host::clock::monotonic_ns;
use host::procfs;
use host::sentinels::RunCpuReader;
use record::{ProcessReading, SentinelTick, Snapshot, TimelineSample};
use units::bytes;

/// Readings of the machine (and the process, when there is one) at one moment. The figures that
/// are compared with one another are read back to back, in this order: free pages and the per-CPU
/// free lists (one /proc/zoneinfo reading), /proc/meminfo, /proc/slabinfo, the process's status
/// (RSS, page tables, threads), the cgroup's charge and kernel memory; the rest after. While
/// tasks start and exit, a slower order would compare moments. With a process, the run's
/// processes too (`read_tree`), their statuses among the readings compared; `with_smaps`: this is
/// a moment memory is measured at, and the process's smaps_rollup and every process's
/// (`procfs::read_mappings`) are read after the rest.
pub fn snapshot(pid: Option<u32>, cgroup: Option<&RunCgroup>, with_smaps: bool) -> Snapshot {
    let t_ns = monotonic_ns();
    let free = procfs::free_pages();
    let meminfo = procfs::meminfo().unwrap_or_default();
    let (slab_objects, slab_sizes) = procfs::slabinfo();
    let status = pid
        .and_then(|p| procfs::read_key_values(format!("/proc/{p}/status")).ok())
        .unwrap_or_default();
    let mut tree = pid.map(|p| read_tree(p, cgroup)).unwrap_or_default();
    let cgroup = cgroup.map(RunCgroup::stats);
    let read_ns = monotonic_ns().saturating_sub(t_ns);
    let smaps_rollup = match (pid, with_smaps) {
        (Some(p), true) => {
            procfs::read_key_values(format!("/proc/{p}/smaps_rollup")).unwrap_or_default()
        }
        _ => Default::default(),
    };
    if with_smaps {
        // The process's own walk was just taken: the tree's entry for it reuses it (a walk of
        // 200,000 mappings is tens of milliseconds under its mmap_lock).
        for p in tree.iter_mut() {
            if Some(p.pid) == pid && !smaps_rollup.is_empty() {
                procfs::take_mappings(p, Some(&smaps_rollup));
            } else {
                procfs::read_mappings(p);
            }
        }
    }
    // The tree read the process's stat already (its CPU: a sum over every thread of it).
    let cpu = pid.and_then(|p| {
        tree.iter()
            .find(|r| r.pid == p)
            .and_then(|r| r.cpu)
            .or_else(|| procfs::process_cpu(p))
    });
    Snapshot {
        tree,
        slab_object_bytes: if pid.is_some() {
            slab_sizes
        } else {
            Default::default()
        },
        t_ns,
        read_ns: Some(read_ns),
        meminfo,
        pcp_free_kb: free.map(|f| f.pcp_kb),
        zone_free_kb: free.map(|f| f.zones_kb),
        zone_managed_kb: free.map(|f| f.managed_kb),
        tasks_on_host: procfs::tasks_on_host(),
        status,
        smaps_rollup,
        cpu,
        cgroup,
        slab_objects,
        freed_at_exec_kb: None,
    }
}

/// The run's processes now, each read without taking its locks (`procfs::read_process`): its
/// cgroup's where it has one that lists any (every process of the run, however started), else
/// `pid` and its descendants.
pub fn read_tree(pid: u32, cgroup: Option<&RunCgroup>) -> Vec<ProcessReading> {
    let threads = procfs::read_key_values(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.get("Threads").copied());
    let mut pids: Vec<u32> = cgroup
        .map(|c| c.processes_of(pid, threads))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| u32::try_from(p).ok())
        .collect();
    if pids.is_empty() {
        pids = std::iter::once(pid)
            .chain(procfs::descendants(pid))
            .collect();
    }
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter().filter_map(procfs::read_process).collect()
}

/// When a command's peak sample reads its processes' smaps_rollup: the moment measured is only
/// known once the run is over (its most memory in use), so each sample that becomes the peak is
/// a candidate; the walks are kept to a tenth of the time (after one that took `took`, none for
/// ten times as long), so that a tree of thousands of processes is not walked, each under its
/// mmap_lock, every 100 ms. A peak sample taken meanwhile carries a process's last walk where
/// its threads and RSS are the same as then (`carry`).
#[derive(Default)]
struct DeepReads {
    last: Option<(Instant, Duration)>,
    /// The last walk's readings, by PID.
    walked: Vec<ProcessReading>,
}

impl DeepReads {
    fn due(&self) -> bool {
        self.last
            .is_none_or(|(at, took)| at.elapsed() >= took.saturating_mul(10))
    }

    fn walk(&mut self, s: &mut Snapshot) {
        let started = Instant::now();
        let t_ns = monotonic_ns();
        for p in s.tree.iter_mut() {
            procfs::read_mappings(p);
            p.smaps_t_ns = None;
        }
        self.walked = s
            .tree
            .iter()
            .cloned()
            .map(|mut p| {
                p.smaps_t_ns = Some(t_ns);
                p
            })
            .collect();
        self.last = Some((Instant::now(), started.elapsed()));
    }

    /// The last walk's smaps_rollup and command line, for each process whose threads and RSS
    /// are as they were then, and at most CARRIED_FOR old.
    fn carry(&self, s: &mut Snapshot) {
        let fresh = |w: &ProcessReading| {
            w.smaps_t_ns
                .is_some_and(|t| s.t_ns.saturating_sub(t) <= CARRIED_FOR.as_nanos() as u64)
        };
        for p in s.tree.iter_mut() {
            if let Some(w) = self.walked.iter().find(|w| {
                w.pid == p.pid && w.threads == p.threads && w.status == p.status && fresh(w)
            }) {
                p.smaps_rollup = w.smaps_rollup.clone();
                p.command = w.command.clone();
                p.smaps_t_ns = w.smaps_t_ns;
            }
        }
    }
}

/// How old a process's walk a later sample may carry: the moment measured is one where every
/// process's smaps_rollup was read no longer ago than this (and it has not changed since).
pub const CARRIED_FOR: Duration = Duration::from_secs(1);

/// Whether every process of a moment has its walk (smaps_rollup): PSS for all of them, so that a
/// page shared after fork is counted once.
fn every_process_walked(s: &Snapshot) -> bool {
    !s.tree.is_empty() && s.tree.iter().all(|p| !p.smaps_rollup.is_empty())
}

/// The moment a command's memory is measured at: the sample with the most memory in use, or,
/// where some of its processes were not walked then, the best sample where all were, if it
/// held as much within what the charge moves by at rest (`fell`). Else the most, its missing
/// walks said by the analysis ("not resolved").
fn measured_moment(most: Option<Snapshot>, walked: Option<Snapshot>) -> Option<Snapshot> {
    match (most, walked) {
        (Some(most), Some(walked))
            if !every_process_walked(&most)
                && !fell(memory_in_use(&most), memory_in_use(&walked)) =>
        {
            Some(walked)
        }
        (most, _) => most,
    }
}

/// What the sampler brings back.
#[derive(Default)]
pub struct Sampled {
    pub timeline: Vec<TimelineSample>,
    /// For a command: the snapshot with the most memory in use.
    pub peak: Option<Snapshot>,
    /// The noise sentinels' ticks (when a reader of the run's CPU time was given).
    pub sentinel_ticks: Vec<SentinelTick>,
}

/// Samples memory every 100 ms while the workload runs; for a command (no events) it also keeps
/// the snapshot with the least MemAvailable as the peak.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Sampled>,
}

impl Sampler {
    /// `run_cpu`: where the run's CPU time is read for the sentinels' ticks (None: no ticks).
    /// `peak_until_ns`: the peak is looked for up to this CLOCK_MONOTONIC time only (a command
    /// whose tasks live that long: after it, some may have ended).
    pub fn start(
        pid: u32,
        cgroup: Option<RunCgroup>,
        track_peak: bool,
        peak_until_ns: Option<u64>,
        bar: ProgressBar,
        run_cpu: Option<RunCpuReader>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut timeline = Vec::new();
            let mut peak: Option<Snapshot> = None;
            // The best moment where every process was walked in that very sample.
            let mut peak_walked: Option<Snapshot> = None;
            let mut sentinel_ticks = Vec::new();
            let mut deep = DeepReads::default();
            while !flag.load(Ordering::Relaxed) {
                if let Some(reader) = &run_cpu {
                    sentinel_ticks.push(sentinels::tick(reader));
                }
                let meminfo = procfs::meminfo().unwrap_or_default();
                let status =
                    procfs::read_key_values(format!("/proc/{pid}/status")).unwrap_or_default();
                let sample = TimelineSample {
                    t_ns: monotonic_ns(),
                    mem_available_kb: meminfo.get("MemAvailable").copied().unwrap_or(0),
                    rss_kb: status.get("VmRSS").copied().unwrap_or(0),
                    threads: status.get("Threads").copied().unwrap_or(0),
                    cgroup_bytes: cgroup.as_ref().and_then(RunCgroup::memory_current),
                };
                bar.set_message(format!("RSS {}", bytes(sample.rss_kb as f64 * 1024.0)));
                let in_time = peak_until_ns.is_none_or(|until| sample.t_ns < until);
                if track_peak && in_time && !status.is_empty() {
                    let mut now = snapshot(Some(pid), cgroup.as_ref(), false);
                    // Ties go to the later reading: the first to reach the most memory is taken
                    // at the end of the allocation burst, while the machine's free memory is
                    // still moving (a Go program's 100,000 tasks: 28 MB less free than 100 ms
                    // later, the charge the same, the drop 10 % too large); a later one, the
                    // charge unchanged, reads it settled.
                    // Not a moment the process is exiting at: its memory is still charged
                    // (a tie, taken as the later reading) while its status no longer says it.
                    let in_use = memory_in_use(&now);
                    let beats = |best: &Option<Snapshot>| {
                        best.as_ref().is_none_or(|p| in_use >= memory_in_use(p))
                    };
                    let (beats_peak, beats_walked) = (beats(&peak), beats(&peak_walked));
                    // Where the most so far lacks some process's walk, a sample that beats the
                    // best walked one is worth a walk too: it may stand in for the most.
                    let peak_unwalked = peak.as_ref().is_some_and(|p| !every_process_walked(p));
                    if now.reads_its_processes_memory()
                        && (beats_peak || (peak_unwalked && beats_walked))
                    {
                        // The walk comes after the charge was read: where the charge fell
                        // meanwhile (the tasks ending), it read memory already freed, so the
                        // moment is not taken (the tie before it, read still, stays).
                        let walked_now = deep.due();
                        let fell_while_walked = if walked_now {
                            deep.walk(&mut now);
                            fell(in_use, memory_in_use_now(cgroup.as_ref()))
                        } else {
                            deep.carry(&mut now);
                            false
                        };
                        if !fell_while_walked {
                            // Kept apart: the most memory's stand-in where its sample's walks
                            // were carried or missing (`measured_moment`).
                            if walked_now && beats_walked && every_process_walked(&now) {
                                peak_walked = Some(now.clone());
                            }
                            if beats_peak {
                                peak = Some(now);
                            }
                        }
                    }
                }
                timeline.push(sample);
                std::thread::sleep(Duration::from_millis(100));
            }
            Sampled {
                timeline,
                peak: measured_moment(peak, peak_walked),
                sentinel_ticks,
            }
        });
        Sampler { stop, handle }
    }

    pub fn finish(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Whether the memory in use fell from `before` to `after` (bytes) by more than the charge moves
/// at rest: 1 % or 1 MiB, whichever is more.
fn fell(before: u64, after: u64) -> bool {
    after + (before / 100).max(1 << 20) < before
}

/// How much memory the run holds, to find its peak: its cgroup's charge when it has one, else
/// how far free memory (MemAvailable and the per-CPU free lists, which MemAvailable leaves out)
/// is below MemTotal.
pub fn memory_in_use(s: &Snapshot) -> u64 {
    if let Some(charged) = s.cgroup.as_ref().and_then(|c| c.memory_current_bytes) {
        return charged;
    }
    let kb = |k: &str| s.meminfo.get(k).copied().unwrap_or(0);
    kb("MemTotal").saturating_sub(kb("MemAvailable") + s.pcp_free_kb.unwrap_or(0)) * 1024
}

/// `memory_in_use` read now, cheaply (one cgroup file, or /proc/meminfo and the per-CPU lists):
/// what the preflight's calibration compares before and at the peak.
pub fn memory_in_use_now(cgroup: Option<&RunCgroup>) -> u64 {
    let now = Snapshot {
        meminfo: procfs::meminfo().unwrap_or_default(),
        pcp_free_kb: procfs::pcp_free_kb(),
        cgroup: cgroup.map(|cg| record::CgroupStats {
            memory_current_bytes: cg.memory_current(),
            ..Default::default()
        }),
        ..Default::default()
    };
    memory_in_use(&now)
}

/// Waits until MemAvailable holds still: after a process exits, the kernel returns part of its
/// memory later (kernel stacks and page tables through RCU callbacks, which a lazy-RCU kernel
/// may hold for seconds). Still = three readings 200 ms apart within 1 MiB; at most ten seconds.
pub fn settle() {
    // With the per-CPU lists: after a big run they drain back into MemFree for seconds, which
    // moves MemAvailable but not free memory.
    let available = || {
        let listed = procfs::meminfo()
            .ok()
            .and_then(|m| m.get("MemAvailable").copied())
            .unwrap_or(0);
        listed + procfs::pcp_free_kb().unwrap_or(0)
    };
    hold_still(
        available,
        1024,
        Duration::from_millis(200),
        Duration::from_secs(10),
    );
}

/// Free memory now, counted as the analysis counts it (`Snapshot::available_kb`).
pub fn available_now_kb() -> u64 {
    let free = procfs::free_pages();
    let now = Snapshot {
        meminfo: procfs::meminfo().unwrap_or_default(),
        zone_free_kb: free.map(|f| f.zones_kb),
        zone_managed_kb: free.map(|f| f.managed_kb),
        pcp_free_kb: free.map(|f| f.pcp_kb),
        ..Default::default()
    };
    now.available_kb().unwrap_or(0)
}

/// Waits until free memory (`available_now_kb`) holds still within `kb`: for a reading of a
/// stopped workload, where nothing of ours moves it any more. Returns the last reading.
pub fn settle_within(kb: u64) -> u64 {
    hold_still(
        available_now_kb,
        kb,
        Duration::from_millis(100),
        Duration::from_secs(5),
    )
}

/// Reads `available` every `every` until three readings in a row are within `kb` of the one
/// before, or `at_most` has passed. Returns the last reading.
fn hold_still(available: impl Fn() -> u64, kb: u64, every: Duration, at_most: Duration) -> u64 {
    let deadline = Instant::now() + at_most;
    let mut last = available();
    let mut still = 0;
    while still < 3 && Instant::now() < deadline {
        std::thread::sleep(every);
        let now = available();
        still = if now.abs_diff(last) <= kb {
            still + 1
        } else {
            0
        };
        last = now;
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::CgroupStats;

    #[test]
    fn a_charge_that_fell_during_the_walk_is_told_from_one_at_rest() {
        const MIB: u64 = 1 << 20;
        // The 6.1 run this guards against: 102.7 MB at the sample, tens of MB gone by the walk.
        assert!(fell(102_719_488, 60_000_000));
        // At rest the charge moves by the per-CPU batches: not a fall.
        assert!(!fell(102_719_488, 102_719_488 - 512 * 1024));
        assert!(!fell(102_719_488, 102_719_488 + 4096));
        // 1 % of a large run, 1 MiB of a small one.
        assert!(!fell(1000 * MIB, 991 * MIB));
        assert!(fell(1000 * MIB, 989 * MIB));
        assert!(!fell(10 * MIB, 9 * MIB));
        assert!(fell(10 * MIB, 9 * MIB - 1));
    }

    fn snapshot_of(meminfo: &[(&str, u64)], pcp: Option<u64>, charged: Option<u64>) -> Snapshot {
        Snapshot {
            meminfo: meminfo.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            pcp_free_kb: pcp,
            cgroup: charged.map(|c| CgroupStats {
                memory_current_bytes: Some(c),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn memory_in_use_is_the_cgroup_charge_else_what_free_memory_lacks() {
        let meminfo = [("MemTotal", 1_000_000), ("MemAvailable", 600_000)];
        // Without a cgroup: MemTotal less MemAvailable less the per-CPU free lists, in bytes.
        assert_eq!(
            memory_in_use(&snapshot_of(&meminfo, Some(50_000), None)),
            350_000 * 1024
        );
        assert_eq!(
            memory_in_use(&snapshot_of(&meminfo, None, None)),
            400_000 * 1024
        );
        // A cgroup's charge is per run: it wins over the host-wide figure.
        assert_eq!(
            memory_in_use(&snapshot_of(&meminfo, Some(50_000), Some(123))),
            123
        );
        // Never below zero when the lists say more is free than MemTotal allows.
        assert_eq!(
            memory_in_use(&snapshot_of(&meminfo, Some(900_000), None)),
            0
        );
    }

    /// A peak sample taken while the walks wait carries the last walk of each process that is
    /// as it was then, and of no other.
    #[test]
    fn a_peak_between_walks_carries_the_last_walk_of_an_unchanged_process_only() {
        let reading = |pid, threads, rss| ProcessReading {
            pid,
            threads,
            command: "name".into(),
            status: [("VmRSS".to_string(), rss)].into(),
            ..Default::default()
        };
        let walked = |p: ProcessReading| ProcessReading {
            smaps_rollup: [("Pss".to_string(), 7)].into(),
            command: "sh -c prog".into(),
            smaps_t_ns: Some(42),
            ..p
        };
        let deep = DeepReads {
            last: Some((Instant::now(), Duration::from_secs(1))),
            walked: vec![walked(reading(10, 1, 100)), walked(reading(11, 5, 900))],
        };
        // Carried within CARRIED_FOR of the walk (at 42 ns).
        assert!(!deep.due(), "a walk of 1 s waits 10 s");
        let mut now = Snapshot {
            t_ns: 100,
            tree: vec![reading(10, 1, 100), reading(11, 6, 900), reading(12, 1, 50)],
            ..Default::default()
        };
        deep.carry(&mut now);
        let [same, grown, new] = &now.tree[..] else {
            panic!()
        };
        assert_eq!(same.pss_kb(), Some(7));
        assert_eq!(
            (same.command.as_str(), same.smaps_t_ns),
            ("sh -c prog", Some(42))
        );
        assert!(grown.smaps_rollup.is_empty() && grown.smaps_t_ns.is_none());
        assert!(new.smaps_rollup.is_empty());
        assert!(DeepReads::default().due(), "the first is walked");
    }

    /// A forking command's moment: the most memory where every process was walked, or the best
    /// walked moment when it holds as much within what the charge moves by at rest; else the
    /// most, for the analysis to call not resolved.
    #[test]
    fn the_moment_measured_is_one_where_every_process_was_walked() {
        let moment = |t_ns, charged: u64, walked: bool| Snapshot {
            t_ns,
            tree: [10, 11]
                .map(|pid| ProcessReading {
                    pid,
                    smaps_rollup: if walked {
                        [("Pss".to_string(), 1)].into()
                    } else {
                        Default::default()
                    },
                    ..Default::default()
                })
                .to_vec(),
            cgroup: Some(CgroupStats {
                memory_current_bytes: Some(charged),
                ..Default::default()
            }),
            ..Default::default()
        };
        const MIB: u64 = 1 << 20;
        let most = moment(2, 500 * MIB, false);
        let near = moment(1, 497 * MIB, true);
        let far = moment(1, 400 * MIB, true);
        assert_eq!(
            measured_moment(Some(most.clone()), Some(near))
                .unwrap()
                .t_ns,
            1
        );
        assert_eq!(
            measured_moment(Some(most.clone()), Some(far)).unwrap().t_ns,
            2
        );
        assert_eq!(measured_moment(Some(most.clone()), None).unwrap().t_ns, 2);
        let walked_most = moment(2, 500 * MIB, true);
        assert_eq!(
            measured_moment(Some(walked_most), Some(moment(1, 499 * MIB, true)))
                .unwrap()
                .t_ns,
            2,
            "the most, walked, stands"
        );
    }

    /// A walk is carried at most CARRIED_FOR: an older one leaves the process without PSS.
    #[test]
    fn an_old_walk_is_not_carried() {
        let reading = ProcessReading {
            pid: 10,
            threads: 1,
            ..Default::default()
        };
        let deep = DeepReads {
            last: Some((Instant::now(), Duration::from_secs(1))),
            walked: vec![ProcessReading {
                smaps_rollup: [("Pss".to_string(), 7)].into(),
                smaps_t_ns: Some(1_000_000_000),
                ..reading.clone()
            }],
        };
        let at = |t_ns| {
            let mut s = Snapshot {
                t_ns,
                tree: vec![reading.clone()],
                ..Default::default()
            };
            deep.carry(&mut s);
            s.tree[0].pss_kb()
        };
        assert_eq!(at(1_900_000_000), Some(7));
        assert_eq!(at(2_100_000_000), None);
    }

    #[test]
    fn memory_in_use_now_reads_the_host_like_a_snapshot() {
        let now = memory_in_use_now(None);
        let total_kb = procfs::meminfo().unwrap()["MemTotal"];
        assert!(now > 0 && now < total_kb * 1024, "{now} of {total_kb} kB");
    }

    #[test]
    fn the_sampler_follows_a_live_process_and_keeps_its_peak() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.6")
            .spawn()
            .unwrap();
        let bar = ProgressBar::hidden();
        let sampler = Sampler::start(
            child.id(),
            None,
            true,
            None,
            bar,
            Some(RunCpuReader::Process(child.id())),
        );
        // A second sampler that looks for the peak in the first 150 ms only.
        let until = monotonic_ns() + 150_000_000;
        let early = Sampler::start(
            child.id(),
            None,
            true,
            Some(until),
            ProgressBar::hidden(),
            None,
        );
        std::thread::sleep(Duration::from_millis(450));
        let early = early.finish();
        assert!(
            early.timeline.iter().any(|s| s.t_ns >= until),
            "it sampled on"
        );
        assert!(early.peak.expect("a peak in time").t_ns < until);
        let Sampled {
            timeline,
            peak,
            sentinel_ticks,
        } = sampler.finish();
        assert_eq!(sentinel_ticks.len(), timeline.len(), "one tick per sample");
        let _ = child.wait();
        assert!(timeline.len() >= 3, "{} samples in 450 ms", timeline.len());
        assert!(timeline.windows(2).all(|w| w[1].t_ns > w[0].t_ns));
        assert!(timeline.iter().all(|s| s.mem_available_kb > 0));
        assert!(timeline.iter().any(|s| s.rss_kb > 0 && s.threads == 1));
        let peak = peak.expect("a command's peak is the sample with the most memory in use");
        assert_eq!(peak.status.get("Threads"), Some(&1));
        assert!(timeline.first().unwrap().t_ns <= peak.t_ns);
    }

    #[test]
    fn a_snapshot_reads_the_process_and_the_machine() {
        let me = std::process::id();
        let s = snapshot(Some(me), None, true);
        assert!(s.meminfo["MemTotal"] > 0);
        assert!(s.status["VmRSS"] > 0);
        assert!(s.smaps_rollup.contains_key("Rss"));
        assert!(s.cpu.is_some() && s.t_ns > 0);
        let host = snapshot(None, None, false);
        assert!(host.status.is_empty() && host.smaps_rollup.is_empty() && host.cpu.is_none());
    }

    /// Free memory as the analysis counts it is MemFree's: on a kernel that initializes memory
    /// lazily, MemFree holds the memory not initialized yet, which the zones' free pages lack
    /// (gigabytes on a fresh development VM); elsewhere the two are the same pages. Read a few
    /// times, as other tests move memory meanwhile: one agreement within 64 MiB is enough.
    #[test]
    fn free_memory_counts_what_memfree_counts() {
        let from_meminfo = || {
            let m = procfs::meminfo().unwrap();
            let kb = |k: &str| m.get(k).copied().unwrap_or(0);
            let reclaimable = m.get("KReclaimable").or(m.get("SReclaimable")).copied();
            kb("MemFree")
                + procfs::pcp_free_kb().unwrap_or(0)
                + kb("Active(file)")
                + kb("Inactive(file)")
                + reclaimable.unwrap_or(0)
        };
        let mut differences = Vec::new();
        for _ in 0..5 {
            let ours = available_now_kb() as i64;
            let theirs = from_meminfo() as i64;
            differences.push(ours - theirs);
            if (ours - theirs).abs() <= 64 << 10 {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "free memory counted apart from MemFree by {differences:?} kB (memory not initialized \
             now: {:?} kB)",
            procfs::uninitialized_kb()
        );
    }
}
