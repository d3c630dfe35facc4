//! What a run sets on the process it starts, beside the sysctls: its open-file limit (a server's
//! connections are descriptors) and the CPUs it may run on (the 2023 server article's 2 CPUs).
//! Both are set on the child while it waits at its gate, before it execs, so every thread it
//! starts inherits them; neither outlives the process.

use anyhow::{bail, Context, Result};

use crate::privileges::{has_capability, CAP_SYS_RESOURCE};

/// Open files a process is given for `connections`: one descriptor each, as many again at most
/// for wrk's threads (each has its own epoll; -t = -c in the 2023 article), and room. What a
/// run raises RLIMIT_NOFILE (and fs.nr_open) to.
pub fn nofile_for(connections: u64) -> u64 {
    2 * connections + 1024
}

/// This process's RLIMIT_NOFILE.
pub fn open_files_now() -> libc::rlimit {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills a valid rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut now) };
    now
}

/// fs.nr_open: the most any RLIMIT_NOFILE may be, capability or not (0 when unreadable).
pub fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether this process may raise a hard rlimit (RLIMIT_NOFILE for a server's connections).
/// Root usually may; the root of a container started without CAP_SYS_RESOURCE may not, nor one
/// in a user namespace of its own (the capability shows, but counts only in the initial one).
/// So it is tried: this process's hard RLIMIT_NOFILE raised by one and put back. Where it is at
/// fs.nr_open already (no raise possible), the capability set says.
pub fn can_raise_hard_limits() -> bool {
    let now = open_files_now();
    if now.rlim_max < nr_open() {
        let raised = libc::rlimit {
            rlim_max: now.rlim_max + 1,
            ..now
        };
        // SAFETY: setrlimit with valid limits; lowering back to `now` is always allowed.
        return unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0
                && libc::setrlimit(libc::RLIMIT_NOFILE, &now) == 0
        };
    }
    has_capability(CAP_SYS_RESOURCE)
}

/// Raises `pid`'s RLIMIT_NOFILE to `files` (soft and hard) where it is lower. Without
/// CAP_SYS_RESOURCE (`raise_hard`) only the soft limit can rise, up to the hard one: returns the
/// limit in force afterwards.
pub fn raise_open_files(pid: u32, files: u64, raise_hard: bool) -> Result<u64> {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads into `now`, a valid rlimit; no new limit is passed.
    if unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, std::ptr::null(), &mut now) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading RLIMIT_NOFILE");
    }
    if now.rlim_cur >= files {
        return Ok(now.rlim_cur);
    }
    let new = open_files_limit(files, now.rlim_max, raise_hard);
    // SAFETY: prlimit with a valid new limit and no old one.
    if unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("raising RLIMIT_NOFILE to {files}"));
    }
    Ok(new.rlim_cur)
}

/// RLIMIT_NOFILE for `files` open files, given the hard limit in force: with CAP_SYS_RESOURCE
/// (`raise_hard`) the hard limit rises too; without it only the soft one, up to the hard one.
pub fn open_files_limit(files: u64, hard_now: u64, raise_hard: bool) -> libc::rlimit {
    let hard = if raise_hard {
        hard_now.max(files)
    } else {
        hard_now
    };
    libc::rlimit {
        rlim_cur: files.min(hard),
        rlim_max: hard,
    }
}

/// The most open files a process this one starts can be given, and why no more: the hard
/// RLIMIT_NOFILE it inherits, unless this process may raise it (then fs.nr_open, which a run as
/// root raises as far as it needs: no limit here).
pub fn open_files_reachable(raise_hard: bool, root: bool) -> (u64, String) {
    if raise_hard && root {
        return (u64::MAX, String::new());
    }
    let now = open_files_now();
    if raise_hard {
        return (
            nr_open().max(now.rlim_max),
            "fs.nr_open (not root: not raised)".into(),
        );
    }
    (
        now.rlim_max,
        "RLIMIT_NOFILE's hard limit here, which this process cannot raise (no CAP_SYS_RESOURCE; `ulimit -Hn` as a privileged user raises it)".into(),
    )
}

/// The CPUs this process may run on (its affinity mask: online CPUs, less those a cpuset or
/// taskset around the conductor leaves out): the only ones a workload can be pinned to.
pub fn usable_cpus() -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set, filled by the kernel for this process.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading this process's CPUs");
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// `--cpus LIST` checked against the CPUs this process may use (`usable`): a CPU the host does
/// not have, or one outside the conductor's own set, is bad input — said before anything runs.
pub fn cpus_to_pin(text: &str, usable: &[usize]) -> Result<Vec<usize>> {
    let cpus = units::cpu_list::parse(text)?;
    let outside: Vec<String> = cpus
        .iter()
        .filter(|cpu| !usable.contains(cpu))
        .map(|cpu| cpu.to_string())
        .collect();
    if !outside.is_empty() {
        bail!(
            "CPU {} is not one this process may run on (usable here: {})",
            outside.join(", "),
            cpu_list(usable)
        );
    }
    Ok(cpus)
}

/// CPUs as taskset writes them: "0-3,6".
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Pins `pid` (one thread: the gated child, before its exec) to `cpus`; the threads it starts
/// inherit the mask. Fails for CPUs this machine does not have online.
pub fn pin_to_cpus(pid: u32, cpus: &[usize]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays within CPU_SETSIZE (checked when
    // parsed).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: a valid set of its own size.
    if unsafe { libc::sched_setaffinity(pid as i32, std::mem::size_of_val(&set), &set) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("pinning the workload to CPUs {cpus:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_outside_the_usable_set_is_refused_and_named() {
        assert_eq!(cpus_to_pin("0-1", &[0, 1, 2]).unwrap(), vec![0, 1]);
        let err = cpus_to_pin("1,3", &[0, 1, 2]).unwrap_err().to_string();
        assert!(
            err.contains("CPU 3 is not") && err.contains("usable here: 0-2"),
            "{err}"
        );
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert!(!usable_cpus().unwrap().is_empty());
    }

    /// A child of ours: its limit raised (as far as a non-root user may) and its CPUs pinned, as
    /// the kernel then reports them.
    #[test]
    fn a_child_gets_the_limit_and_the_cpus() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        let raise_hard = can_raise_hard_limits();
        let got = raise_open_files(pid, 4096, raise_hard).unwrap();
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap()
            .to_string();
        assert!(line.contains(&got.to_string()), "{line}");
        if raise_hard {
            assert!(got >= 4096, "{line}");
        }
        pin_to_cpus(pid, &[0]).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(
            status.lines().any(|l| l == "Cpus_allowed_list:\t0"),
            "{status}"
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    /// What this process finds agrees with what the kernel lets a child do.
    #[test]
    fn the_answer_matches_what_setrlimit_allows() {
        let now = open_files_now();
        // Past fs.nr_open the kernel refuses even with the capability.
        if now.rlim_max >= nr_open() {
            eprintln!(
                "skipped: RLIMIT_NOFILE's hard limit {} is already at fs.nr_open",
                now.rlim_max
            );
            return;
        }
        // In a child, so this process keeps its limits.
        let raised = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -Hn {}", now.rlim_max + 1))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert_eq!(
            raised,
            can_raise_hard_limits(),
            "hard limit {}",
            now.rlim_max
        );
    }
}
