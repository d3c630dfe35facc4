//! Readers for what the kernel publishes under /proc about memory and processes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use record::tree::{ProcessReading, SMAPS_KEYS, STATUS_KEYS, TASK_SLABS};
pub use record::CpuTime;
use record::SlabObjects;

/// `Name: value [kB]` lines (/proc/meminfo, /proc/PID/status, smaps_rollup) as name -> number.
/// Values keep the kernel's unit (kB for sizes).
pub fn key_values(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let value = rest.split_whitespace().next()?.parse().ok()?;
            Some((name.trim().to_string(), value))
        })
        .collect()
}

pub fn read_key_values(path: impl AsRef<Path>) -> Result<BTreeMap<String, u64>> {
    let path = path.as_ref();
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(key_values(&text))
}

/// /proc/meminfo, in kB.
pub fn meminfo() -> Result<BTreeMap<String, u64>> {
    read_key_values("/proc/meminfo")
}

/// Free memory as /proc/zoneinfo gives it in one reading, in kB: the zones' free pages (what
/// MemFree sums) and the pages held in the per-CPU lists (pagesets `count:`), which are free but
/// outside MemFree and MemAvailable — with PCP auto-tuning hundreds of MiB that a workload drains
/// without MemFree moving. Read together the two agree while pages move between them (thousands
/// a millisecond while threads start and exit); MemFree read from /proc/meminfo a moment apart
/// does not.
///
/// The same reading sums the zones' `managed` pages: what the page allocator has been handed.
/// MemTotal less that is memory the kernel has not initialized yet (see
/// `Snapshot::uninitialized_kb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreePages {
    pub zones_kb: u64,
    pub pcp_kb: u64,
    pub managed_kb: u64,
}

/// The page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64
}

pub fn free_pages() -> Option<FreePages> {
    parse_zoneinfo(&fs::read_to_string("/proc/zoneinfo").ok()?)
}

fn parse_zoneinfo(text: &str) -> Option<FreePages> {
    let sum = |prefix: &str| -> u64 {
        text.lines()
            .filter_map(|l| l.trim_start().strip_prefix(prefix))
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum()
    };
    // SAFETY: sysconf has no preconditions.
    let page_kb = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64 / 1024;
    text.contains("pages free").then(|| FreePages {
        zones_kb: sum("pages free") * page_kb,
        pcp_kb: sum("count:") * page_kb,
        managed_kb: sum("managed") * page_kb,
    })
}

/// Memory not initialized yet, kB: MemTotal less the zones' managed pages (see
/// `Snapshot::uninitialized_kb`, which counts it the same way from a snapshot's readings).
pub fn uninitialized_kb() -> Option<u64> {
    let total = *meminfo().ok()?.get("MemTotal")?;
    Some(total.saturating_sub(free_pages()?.managed_kb))
}

/// The per-CPU lists' free pages alone (see [`FreePages`]).
pub fn pcp_free_kb() -> Option<u64> {
    free_pages().map(|f| f.pcp_kb)
}

/// The slab caches' objects in use and room for objects (/proc/slabinfo, readable by root only;
/// SLUB counts objects free in the per-CPU slabs as in use: the room counted is the nodes' own),
/// and the object sizes (bytes) of the caches a process's task and mm structs
/// are in (`tree::TASK_SLABS`), from one reading.
pub fn slabinfo() -> (Option<SlabObjects>, BTreeMap<String, u64>) {
    let Ok(text) = fs::read_to_string("/proc/slabinfo") else {
        return Default::default();
    };
    (parse_slabinfo(&text), object_sizes(&text, &TASK_SLABS))
}

/// The object size of each cache in `names` that slabinfo lists by that name.
fn object_sizes(text: &str, names: &[&str]) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let name = fields.next()?;
            let size = fields.nth(2)?.parse().ok()?;
            names.contains(&name).then(|| (name.to_string(), size))
        })
        .collect()
}

/// "name active_objs num_objs objsize …" rows after the two header lines.
fn parse_slabinfo(text: &str) -> Option<SlabObjects> {
    let mut bytes = (0u64, 0u64);
    let mut rows = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with("slabinfo") && !l.starts_with('#'))
    {
        let numbers: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(3)
            .filter_map(|f| f.parse().ok())
            .collect();
        if let [active, total, size] = numbers[..] {
            bytes.0 += active * size;
            bytes.1 += total * size;
            rows += 1;
        }
    }
    (rows > 0).then_some(SlabObjects {
        in_use_kb: bytes.0 / 1024,
        room_kb: bytes.1 / 1024,
    })
}

/// Why the kernel's BPF run-time statistics are on now, None when they are off:
/// `kernel.bpf_stats_enabled` written 1, or processes holding a `BPF_ENABLE_STATS` descriptor
/// (the sysctl does not show those). While they are on the kernel times every BPF program.
pub fn bpf_stats_on() -> Option<String> {
    let sysctl = fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap_or_default();
    if sysctl.trim() == "1" {
        return Some("kernel.bpf_stats_enabled is 1".into());
    }
    let mut holders = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .any(|target| target.to_string_lossy() == "anon_inode:bpf-stats")
        {
            holders.push(pid.to_string());
        }
    }
    (!holders.is_empty()).then(|| {
        format!(
            "held on by PID {} (a BPF_ENABLE_STATS descriptor)",
            holders.join(", ")
        )
    })
}

pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Parses /proc/PID/stat: fields after the parenthesised command name (which may hold spaces).
pub fn parse_stat_cpu(text: &str, ticks_per_second: u64) -> Option<CpuTime> {
    let after_comm = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // After the name: state is field 3 of the man page, utime 14, stime 15.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    let us = |ticks: u64| ticks * 1_000_000 / ticks_per_second;
    Some(CpuTime {
        user_us: us(utime),
        sys_us: us(stime),
    })
}

pub fn process_cpu(pid: u32) -> Option<CpuTime> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&text, clock_ticks_per_second())
}

/// The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the PID
/// it names a process unambiguously, even after the PID is reused.
/// The CPUs a task may run on, as the kernel lists them in /proc/PID/status (Cpus_allowed_list:
/// its affinity, within its cpuset).
pub fn cpus_allowed(pid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

pub fn start_time(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &text[text.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether the process that had this PID and start time is still alive (not a zombie).
pub fn is_alive(pid: u32, expected_start: u64) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = text
        .rfind(')')
        .and_then(|i| text[i + 1..].split_whitespace().next());
    start_time(pid) == Some(expected_start) && state != Some("Z")
}

/// The process's descendants now, children before grandchildren: every thread's children
/// (/proc/PID/task/TID/children; a child belongs to the thread that forked it). A process that
/// exits meanwhile takes its children out of the list (they are re-parented away).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(parent) = next.pop() {
        let Ok(threads) = fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for thread in threads.flatten() {
            let Ok(text) = fs::read_to_string(thread.path().join("children")) else {
                continue;
            };
            for child in text.split_whitespace().filter_map(|c| c.parse().ok()) {
                if child != pid && !found.contains(&child) {
                    found.push(child);
                    next.push(child);
                }
            }
        }
    }
    found
}

/// One process's readings (record/tree.rs) that take none of its locks: its status, stat and
/// name. None when it is gone. `read_mappings` adds the rest.
pub fn read_process(pid: u32) -> Option<ProcessReading> {
    let status_text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let status = key_values(&status_text);
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let name = status_text
        .lines()
        .find_map(|l| l.strip_prefix("Name:"))
        .map(|n| n.trim().to_string())
        .unwrap_or_default();
    Some(ProcessReading {
        pid,
        ppid: stat_field(&stat, 4)?,
        command: name,
        threads: status.get("Threads").copied().unwrap_or(0),
        cpu: parse_stat_cpu(&stat, clock_ticks_per_second()),
        status: kept(&status, &STATUS_KEYS),
        smaps_rollup: BTreeMap::new(),
        smaps_t_ns: None,
    })
}

/// Adds a process's smaps_rollup and command line to its reading: both take its mmap_lock, and
/// smaps_rollup walks every mapping under it. Left as they were when it is gone.
pub fn read_mappings(p: &mut ProcessReading) {
    let rollup = read_key_values(format!("/proc/{}/smaps_rollup", p.pid)).ok();
    take_mappings(p, rollup.as_ref());
}

/// As `read_mappings`, with the process's smaps_rollup already read (`rollup`; None: gone):
/// one walk of its mappings serves the snapshot's reading and the tree's.
pub fn take_mappings(p: &mut ProcessReading, rollup: Option<&BTreeMap<String, u64>>) {
    if let Some(rollup) = rollup {
        p.smaps_rollup = kept(rollup, &SMAPS_KEYS);
    }
    if let Some(line) = fs::read(format!("/proc/{}/cmdline", p.pid))
        .ok()
        .and_then(|raw| command_line(&raw))
    {
        p.command = line;
    }
}

fn kept(all: &BTreeMap<String, u64>, keys: &[&str]) -> BTreeMap<String, u64> {
    keys.iter()
        .filter_map(|k| Some((k.to_string(), *all.get(*k)?)))
        .collect()
}

/// /proc/PID/cmdline's arguments joined by spaces, at most 200 characters (None: empty, a
/// kernel thread or a zombie).
fn command_line(raw: &[u8]) -> Option<String> {
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let line = words.join(" ");
    (!line.is_empty()).then(|| line.chars().take(200).collect())
}

/// Field `n` of /proc/PID/stat as the man page numbers them (3 is the state), after the
/// parenthesised name.
fn stat_field<T: std::str::FromStr>(text: &str, n: usize) -> Option<T> {
    let after_comm = &text[text.rfind(')')? + 1..];
    after_comm
        .split_whitespace()
        .nth(n.checked_sub(3)?)?
        .parse()
        .ok()
}

/// Tasks (threads) on the whole host: /proc/loadavg's fourth field's denominator.
pub fn tasks_on_host() -> Option<u64> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()
}

/// Files open on the whole host now (/proc/sys/fs/file-nr's first number).
pub fn files_open() -> Option<u64> {
    fs::read_to_string("/proc/sys/fs/file-nr")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoneinfo_gives_zone_free_pages_and_per_cpu_lists_from_one_reading() {
        let text = "Node 0, zone   Normal\n  pages free     1000\n        min      10\n        spanned  5505024\n        present  5505024\n        managed  327680\n  pagesets\n    cpu: 0\n              count:    30\n              high:     500\n    cpu: 1\n              count:    12\nNode 0, zone  DMA32\n  pages free     24\n        managed  772917\n";
        let page_kb = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64 / 1024;
        assert_eq!(
            parse_zoneinfo(text),
            Some(FreePages {
                zones_kb: 1024 * page_kb,
                pcp_kb: 42 * page_kb,
                managed_kb: (327_680 + 772_917) * page_kb,
            })
        );
        assert_eq!(parse_zoneinfo("nothing here"), None);
    }

    #[test]
    fn slabinfo_sums_objects_in_use_and_room_over_caches() {
        let text = "slabinfo - version: 2.1\n\
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n\
task_struct         1024   1040  10240    3    8 : tunables    0    0    0 : slabdata    347    347      0\n\
kmalloc-64          2048   4096     64   64    1 : tunables    0    0    0 : slabdata     64     64      0\n";
        let totals = parse_slabinfo(text).unwrap();
        assert_eq!(totals.in_use_kb, (1024 * 10240 + 2048 * 64) / 1024);
        assert_eq!(totals.room_kb, (1040 * 10240 + 4096 * 64) / 1024);
        assert_eq!(parse_slabinfo("slabinfo - version: 2.1\n"), None);
    }

    #[test]
    fn slabinfo_gives_the_sizes_of_the_caches_asked_for() {
        let text = "slabinfo - version: 2.1\n\
task_struct         1024   1040  10240    3    8 : tunables    0    0    0 : slabdata    347    347      0\n\
mm_struct             72    140   1600   20    8 : tunables    0    0    0 : slabdata      7      7      0\n\
kmalloc-64          2048   4096     64   64    1 : tunables    0    0    0 : slabdata     64     64      0\n";
        let sizes = object_sizes(text, &["task_struct", "mm_struct", "fs_cache"]);
        assert_eq!(
            sizes,
            [
                ("task_struct".to_string(), 10_240),
                ("mm_struct".to_string(), 1_600)
            ]
            .into()
        );
    }

    #[test]
    fn a_process_and_its_descendants_are_read_with_their_threads_and_command() {
        // sh (one thread) above sleep: sh's child, found through its task's children.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5; true"])
            .spawn()
            .unwrap();
        let sh = child.id();
        let mut below = Vec::new();
        // Until the shell's child has exec'd sleep (a fork is seen before its exec).
        for _ in 0..100 {
            below = descendants(sh);
            let execd = below
                .first()
                .and_then(|&pid| read_process(pid))
                .is_some_and(|p| p.command == "sleep");
            if execd {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let shallow = read_process(sh).unwrap();
        let mut sleep = read_process(below[0]).unwrap();
        read_mappings(&mut sleep);
        unsafe { libc::kill(below[0] as i32, libc::SIGKILL) };
        child.wait().unwrap();
        assert_eq!(below.len(), 1, "{below:?}");
        assert_eq!((shallow.command.as_str(), shallow.threads), ("sh", 1));
        assert!(shallow.smaps_rollup.is_empty() && shallow.status.contains_key("VmRSS"));
        assert_eq!((sleep.ppid, sleep.command.as_str()), (sh, "sleep 5"));
        assert!(sleep.pss_kb().is_some() && sleep.uss_kb().is_some());
        assert!(sleep.cpu.is_some());
        assert!(read_process(sh).is_none(), "reaped: gone");
    }

    #[test]
    fn key_values_keep_numbers_and_skip_the_rest() {
        let kv =
            key_values("MemTotal:       24000000 kB\nName:\tthreads\nThreads:\t2001\nbad line\n");
        assert_eq!(kv.get("MemTotal"), Some(&24_000_000));
        assert_eq!(kv.get("Threads"), Some(&2001));
        assert!(!kv.contains_key("Name"));
    }

    #[test]
    fn stat_survives_spaces_and_parens_in_the_name() {
        // utime 250 and stime 1000 ticks at 100 Hz.
        let stat =
            "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 1000 0 0 20 0 3 0 12345 0 0";
        assert_eq!(
            parse_stat_cpu(stat, 100),
            Some(CpuTime {
                user_us: 2_500_000,
                sys_us: 10_000_000
            })
        );
    }

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        let pid = std::process::id();
        let start = start_time(pid).expect("own start time");
        assert!(is_alive(pid, start));
        assert!(
            !is_alive(pid, start + 1),
            "another start time is another process"
        );
        assert!(process_cpu(pid).is_some());
        assert!(meminfo().unwrap()["MemAvailable"] > 0);
        assert!(
            pcp_free_kb().is_some(),
            "/proc/zoneinfo has per-CPU pagesets"
        );
    }
}
