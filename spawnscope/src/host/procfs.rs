//! Readers for what the kernel publishes under /proc about memory and processes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

pub use crate::record::CpuTime;
use anyhow::{Context, Result};

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

/// Free pages held in the per-CPU page lists (/proc/zoneinfo pagesets `count:`), in kB. They
/// are free but not in MemFree (nor MemAvailable): with PCP auto-tuning they can be hundreds of
/// MiB, and a workload that allocates drains them without MemFree moving.
pub fn pcp_free_kb() -> Option<u64> {
    let text = fs::read_to_string("/proc/zoneinfo").ok()?;
    let pages: u64 = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("count:"))
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf has no preconditions.
    let page_kb = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64 / 1024;
    Some(pages * page_kb)
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

#[cfg(test)]
mod tests {
    use super::*;

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
