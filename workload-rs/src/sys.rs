//! What the workload reads about itself and the host: the monotonic clock, rusage and rlimits
//! (libc, which std links, declared here because the workload takes no crates), and /proc, /sys;
//! the two socket calls std does not offer (serve's backlog and closing its listeners); and memory
//! that forked processes share (the `processes` binary's serve counts).

use std::fs;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::raw::{c_int, c_long};
use std::path::{Path, PathBuf};

use crate::json::Obj;

#[repr(C)]
struct Timespec {
    tv_sec: c_long,
    tv_nsec: c_long,
}

#[repr(C)]
#[derive(Default)]
struct Timeval {
    tv_sec: c_long,
    tv_usec: c_long,
}

#[repr(C)]
#[derive(Default)]
struct Rusage {
    ru_utime: Timeval,
    ru_stime: Timeval,
    ru_maxrss: c_long,
    ru_ixrss: c_long,
    ru_idrss: c_long,
    ru_isrss: c_long,
    ru_minflt: c_long,
    ru_majflt: c_long,
    ru_nswap: c_long,
    ru_inblock: c_long,
    ru_oublock: c_long,
    ru_msgsnd: c_long,
    ru_msgrcv: c_long,
    ru_nsignals: c_long,
    ru_nvcsw: c_long,
    ru_nivcsw: c_long,
}

#[repr(C)]
struct Rlimit {
    rlim_cur: u64,
    rlim_max: u64,
}

extern "C" {
    fn clock_gettime(clock: c_int, tp: *mut Timespec) -> c_int;
    fn getrusage(who: c_int, usage: *mut Rusage) -> c_int;
    fn getrlimit(resource: c_int, rlim: *mut Rlimit) -> c_int;
    fn geteuid() -> u32;
    fn sysconf(name: c_int) -> c_long;
    fn listen(fd: c_int, backlog: c_int) -> c_int;
    fn shutdown(fd: c_int, how: c_int) -> c_int;
    fn mmap(
        addr: *mut std::ffi::c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        offset: i64,
    ) -> *mut std::ffi::c_void;
}

const CLOCK_MONOTONIC: c_int = 1;
const RUSAGE_SELF: c_int = 0;
const RUSAGE_CHILDREN: c_int = -1;
const RLIMIT_NPROC: c_int = 6;
const RLIM_INFINITY: u64 = u64::MAX;

/// CLOCK_MONOTONIC in nanoseconds: the clock bpf_ktime_get_ns() reads, so probes can be cut by phase.
pub fn monotonic_ns() -> u64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { clock_gettime(CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// getrusage(RUSAGE_SELF) as the `rusage` object of the schema.
pub fn rusage() -> Obj {
    rusage_obj(&read_rusage(RUSAGE_SELF))
}

/// This process's getrusage(RUSAGE_SELF) plus RUSAGE_CHILDREN (every child it has reaped) as the
/// `rusage` object: the processes binary's tasks are its children. Times, faults and switches
/// are summed; maxrss is the larger of the two (RUSAGE_CHILDREN's is the largest child's).
/// RUSAGE_SELF is read last, so that the workload's last getrusage call is its own, as the
/// probes' cut expects.
pub fn rusage_with_children() -> Obj {
    let children = read_rusage(RUSAGE_CHILDREN);
    let own = read_rusage(RUSAGE_SELF);
    rusage_obj(&own.plus(&children))
}

fn read_rusage(who: c_int) -> Rusage {
    let mut ru = Rusage::default();
    // SAFETY: ru is a valid, writable struct rusage.
    unsafe { getrusage(who, &mut ru) };
    ru
}

impl Rusage {
    /// The fields the schema carries, summed (maxrss: the larger).
    fn plus(&self, other: &Rusage) -> Rusage {
        let tv = |a: &Timeval, b: &Timeval| {
            let us = (a.tv_sec + b.tv_sec) * 1_000_000 + a.tv_usec + b.tv_usec;
            Timeval {
                tv_sec: us / 1_000_000,
                tv_usec: us % 1_000_000,
            }
        };
        Rusage {
            ru_utime: tv(&self.ru_utime, &other.ru_utime),
            ru_stime: tv(&self.ru_stime, &other.ru_stime),
            ru_maxrss: self.ru_maxrss.max(other.ru_maxrss),
            ru_minflt: self.ru_minflt + other.ru_minflt,
            ru_majflt: self.ru_majflt + other.ru_majflt,
            ru_nvcsw: self.ru_nvcsw + other.ru_nvcsw,
            ru_nivcsw: self.ru_nivcsw + other.ru_nivcsw,
            ..Rusage::default()
        }
    }
}

fn rusage_obj(ru: &Rusage) -> Obj {
    let us = |tv: &Timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    Obj::new()
        .with("user_us", us(&ru.ru_utime))
        .with("sys_us", us(&ru.ru_stime))
        .with("maxrss_kb", ru.ru_maxrss as u64)
        .with("minflt", ru.ru_minflt as u64)
        .with("majflt", ru.ru_majflt as u64)
        .with("nvcsw", ru.ru_nvcsw as u64)
        .with("nivcsw", ru.ru_nivcsw as u64)
}

/// Moves `value` into memory that stays shared with every process this one forks from now on
/// (an anonymous MAP_SHARED mapping, never unmapped): their writes to it are seen by all, where
/// a fork's ordinary memory is copied at the first write. For atomics counted across processes;
/// what `value` points to elsewhere (a Vec's buffer) is still each process's own copy. None when
/// the mapping fails.
pub fn share<T: Sync>(value: T) -> Option<&'static T> {
    const PROT_READ: c_int = 1;
    const PROT_WRITE: c_int = 2;
    const MAP_SHARED: c_int = 0x01;
    const MAP_ANONYMOUS: c_int = 0x20;
    const MAP_FAILED: usize = usize::MAX;
    let len = std::mem::size_of::<T>().max(1);
    // SAFETY: a fresh anonymous mapping, no address asked for, no file.
    let at = unsafe {
        mmap(
            std::ptr::null_mut(),
            len,
            PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at as usize == MAP_FAILED || std::mem::align_of::<T>() > 4096 {
        return None;
    }
    let at = at.cast::<T>();
    // SAFETY: `at` is page-aligned (enough for T, checked), writable and len bytes long; the
    // mapping is never unmapped, so the reference lives as long as the process.
    unsafe {
        at.write(value);
        Some(&*at)
    }
}

/// RLIMIT_NPROC's soft limit, None when unlimited.
pub fn rlimit_nproc() -> Option<u64> {
    let mut rl = Rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a valid, writable struct rlimit.
    let rc = unsafe { getrlimit(RLIMIT_NPROC, &mut rl) };
    (rc == 0 && rl.rlim_cur != RLIM_INFINITY).then_some(rl.rlim_cur)
}

/// The smallest thread stack this libc accepts: sysconf(_SC_THREAD_STACK_MIN), which is
/// PTHREAD_STACK_MIN (16 KiB on x86_64 glibc, 128 KiB on aarch64).
pub fn min_stack_size() -> u64 {
    const SC_THREAD_STACK_MIN: c_int = 75;
    // SAFETY: sysconf has no preconditions; it returns -1 for names it does not know.
    let value = unsafe { sysconf(SC_THREAD_STACK_MIN) };
    if value > 0 {
        value as u64
    } else {
        16 * 1024
    }
}

/// Listens again with `backlog`: std listens with a backlog of its own, and Linux updates the
/// backlog of a socket that is already listening (capped at net.core.somaxconn).
pub fn set_backlog(listener: &impl AsRawFd, backlog: u64) -> io::Result<()> {
    let backlog = c_int::try_from(backlog).unwrap_or(c_int::MAX);
    // SAFETY: listen(2) on a descriptor the caller owns, with no pointers.
    match unsafe { listen(listener.as_raw_fd(), backlog) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Stops a listening socket: new connections are refused, and a thread blocked in accept on it
/// returns (EINVAL), which closing the descriptor would not do. The descriptor stays open.
pub fn stop_listening(listener: &impl AsRawFd) {
    const SHUT_RDWR: c_int = 2;
    // SAFETY: shutdown(2) on a descriptor the caller owns, with no pointers.
    unsafe { shutdown(listener.as_raw_fd(), SHUT_RDWR) };
}

pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { geteuid() }
}

/// The symbolic name of the errno values thread creation, bind and listen can return.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        1 => "EPERM",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        22 => "EINVAL",
        23 => "ENFILE",
        24 => "EMFILE",
        28 => "ENOSPC",
        98 => "EADDRINUSE",
        99 => "EADDRNOTAVAIL",
        _ => "E?",
    }
}

fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read_u64_with(&read_text, path.as_ref())
}

/// A sysctl by its /proc/sys path, e.g. `kernel/threads-max`.
pub fn sysctl(key: &str) -> Option<u64> {
    read_u64(Path::new("/proc/sys").join(key))
}

/// The fields of /proc/self/status the schema's `status` object carries (kB), and Threads.
pub fn status() -> Obj {
    let text = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Obj::new()
        .with("vm_size_kb", field("VmSize"))
        .with("vm_rss_kb", field("VmRSS"))
        .with("vm_hwm_kb", field("VmHWM"))
        .with("rss_anon_kb", field("RssAnon"))
        .with("vm_pte_kb", field("VmPTE"))
        .with("vm_stk_kb", field("VmStk"))
        .with("threads", field("Threads"))
}

/// Threads of this process, main thread included (/proc/self/status `Threads`).
pub fn thread_count() -> u64 {
    let text = fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// MemAvailable from /proc/meminfo, in bytes.
pub fn mem_available() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// MemTotal from /proc/meminfo, in bytes.
pub fn mem_total() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Tasks (threads) on the whole host: the denominator of /proc/loadavg's fourth field.
pub fn tasks_on_host() -> Option<u64> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()
}

/// Memory mappings of this process (lines of /proc/self/maps), counted without holding the text.
pub fn map_count() -> Option<u64> {
    let mut file = fs::File::open("/proc/self/maps").ok()?;
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0u64;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(_) => return None,
        }
    }
}

/// Where this process's cgroup keeps a controller's files, and which cgroup version serves it.
pub struct CgroupDir {
    pub dir: PathBuf,
    /// The controller's mount point: limits are looked up from `dir` up to here.
    pub mount: PathBuf,
    pub v2: bool,
}

/// Finds the directory of `controller` (`memory`, `pids`) for this process: the v1 hierarchy that
/// has it, else the v2 (unified) one. Handles pure v1, hybrid (this dev VM) and pure v2 hosts.
pub fn cgroup_dir(controller: &str) -> Option<CgroupDir> {
    let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    locate_cgroup_dir(controller, &membership, &mountinfo, |point| {
        fs::read_to_string(point.join("cgroup.controllers")).unwrap_or_default()
    })
}

/// `cgroup_dir` from the texts it reads: /proc/self/cgroup (`membership`), /proc/self/mountinfo,
/// and `controllers_at(mount point)`, the v2 mount's cgroup.controllers (empty when unreadable).
/// The cases are schema/cgroup-paths.tsv, shared with goroutines-go's locateCgroupDir.
pub fn locate_cgroup_dir(
    controller: &str,
    membership: &str,
    mountinfo: &str,
    controllers_at: impl FnOnce(&Path) -> String,
) -> Option<CgroupDir> {
    let mounts: Vec<(&str, &str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            // (root within the hierarchy, mount point, fs type, super options)
            Some((*pre.get(3)?, *pre.get(4)?, *post.first()?, *post.get(2)?))
        })
        .collect();
    let join = |mount_root: &str, mount_point: &str, path: &str| {
        let rel = path
            .strip_prefix(mount_root)
            .unwrap_or(path)
            .trim_start_matches('/');
        CgroupDir {
            dir: Path::new(mount_point).join(rel),
            mount: PathBuf::from(mount_point),
            v2: false,
        }
    };
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == controller) {
            let (root, point, _, _) = mounts.iter().find(|(_, _, fs, opts)| {
                *fs == "cgroup" && opts.split(',').any(|o| o == controller)
            })?;
            return Some(join(root, point, path));
        }
    }
    let path = membership
        .lines()
        .find_map(|line| line.strip_prefix("0::"))?;
    let (root, point, _, _) = mounts.iter().find(|(_, _, fs, _)| *fs == "cgroup2")?;
    let available = controllers_at(Path::new(point));
    if !available.split_whitespace().any(|c| c == controller) {
        return None;
    }
    let mut found = join(root, point, path);
    found.v2 = true;
    Some(found)
}

/// Reads a whole file: the file system, or a table's files in the tests.
pub type ReadText<'a> = &'a dyn Fn(&Path) -> Option<String>;

fn read_text(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn read_u64_with(read: ReadText, path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// The smallest numeric value of `file` from `dir` up to the mount point (`max` = no limit).
fn tightest_limit(cg: &CgroupDir, file: &str, read: ReadText) -> Option<u64> {
    let mut best: Option<u64> = None;
    let mut dir = Some(cg.dir.as_path());
    while let Some(d) = dir {
        if let Some(v) = read_u64_with(read, &d.join(file)) {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
        if d == cg.mount {
            break;
        }
        dir = d.parent();
    }
    best
}

/// Values at or above this are v1's "no limit" (PAGE_COUNTER_MAX rounded to pages).
const V1_UNLIMITED: u64 = 1 << 62;

/// (limit, usage) of this cgroup's memory in bytes; limit None when unlimited.
pub fn cgroup_memory(cg: &CgroupDir) -> (Option<u64>, Option<u64>) {
    cgroup_memory_with(cg, &read_text)
}

/// `cgroup_memory` with the files read by `read`; the cases are schema/cgroup-limits.tsv.
pub fn cgroup_memory_with(cg: &CgroupDir, read: ReadText) -> (Option<u64>, Option<u64>) {
    if cg.v2 {
        (
            tightest_limit(cg, "memory.max", read),
            read_u64_with(read, &cg.dir.join("memory.current")),
        )
    } else {
        let stat = read(&cg.dir.join("memory.stat")).unwrap_or_default();
        let limit = stat
            .lines()
            .find_map(|l| l.strip_prefix("hierarchical_memory_limit "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&v| v < V1_UNLIMITED);
        (
            limit,
            read_u64_with(read, &cg.dir.join("memory.usage_in_bytes")),
        )
    }
}

/// (pids.max, pids.current) of this cgroup; max None when unlimited.
pub fn cgroup_pids(cg: &CgroupDir) -> (Option<u64>, Option<u64>) {
    cgroup_pids_with(cg, &read_text)
}

/// `cgroup_pids` with the files read by `read`; the cases are schema/cgroup-limits.tsv.
pub fn cgroup_pids_with(cg: &CgroupDir, read: ReadText) -> (Option<u64>, Option<u64>) {
    (
        tightest_limit(cg, "pids.max", read),
        read_u64_with(read, &cg.dir.join("pids.current")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables;

    #[test]
    fn clock_moves_forward() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} -> {b}");
    }

    #[test]
    fn rusage_sums_times_and_counts_and_keeps_the_larger_maxrss() {
        let a = Rusage {
            ru_utime: Timeval {
                tv_sec: 1,
                tv_usec: 700_000,
            },
            ru_maxrss: 100,
            ru_minflt: 5,
            ru_nvcsw: 2,
            ..Rusage::default()
        };
        let b = Rusage {
            ru_utime: Timeval {
                tv_sec: 0,
                tv_usec: 400_000,
            },
            ru_maxrss: 300,
            ru_minflt: 7,
            ru_nivcsw: 3,
            ..Rusage::default()
        };
        let sum = rusage_obj(&a.plus(&b)).to_line();
        for field in [
            r#""user_us":2100000"#,
            r#""maxrss_kb":300"#,
            r#""minflt":12"#,
            r#""nvcsw":2"#,
            r#""nivcsw":3"#,
        ] {
            assert!(sum.contains(field), "{field} not in {sum}");
        }
    }

    #[test]
    fn shared_memory_is_seen_by_the_process_that_writes_it() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        let count = share(AtomicU64::new(41)).expect("an anonymous shared mapping");
        count.fetch_add(1, SeqCst);
        assert_eq!(count.load(SeqCst), 42);
    }

    #[test]
    fn status_counts_threads() {
        // Other tests run in threads of their own meanwhile: allow for them, not for a misread.
        let before = thread_count();
        let gate = std::sync::RwLock::new(());
        let closed = gate.write().unwrap();
        std::thread::scope(|s| {
            for _ in 0..64 {
                s.spawn(|| drop(gate.read()));
            }
            let during = thread_count();
            assert!(
                (before + 64 - 12..=before + 64 + 12).contains(&during),
                "{before} -> {during}"
            );
            drop(closed);
        });
    }

    /// A CgroupDir's directory, `-` for none (and the mount, version the same way).
    fn describe(found: &Option<CgroupDir>) -> [String; 3] {
        match found {
            None => ["-".into(), "-".into(), "-".into()],
            Some(cg) => [
                cg.dir.display().to_string(),
                cg.mount.display().to_string(),
                if cg.v2 { "v2" } else { "v1" }.into(),
            ],
        }
    }

    /// Every row of schema/cgroup-paths.tsv, which goroutines-go/sys_test.go checks too.
    #[test]
    fn cgroup_paths_table() {
        let mut failures = Vec::new();
        for row in tables::rows("cgroup-paths.tsv", 7, 20) {
            let [controller, membership, mountinfo, controllers, dir, mount, version] = &row[..]
            else {
                unreachable!()
            };
            let found = locate_cgroup_dir(
                controller,
                &tables::unescape(membership),
                &tables::unescape(mountinfo),
                |_| tables::unescape(controllers),
            );
            // Compared as paths: Rust's join keeps a trailing `/` that Go's Join cleans away.
            let same = match &found {
                None => [dir, mount, version].iter().all(|c| *c == "-"),
                Some(cg) => {
                    cg.dir == Path::new(dir)
                        && cg.mount == Path::new(mount)
                        && *version == if cg.v2 { "v2" } else { "v1" }
                }
            };
            if !same {
                failures.push(format!(
                    "{controller} in {membership:?}: got {:?}, want {dir} {mount} {version}",
                    describe(&found)
                ));
            }
        }
        tables::assert_all("cgroup-paths.tsv", &failures);
    }

    /// Every row of schema/cgroup-limits.tsv, which goroutines-go/sys_test.go checks too.
    #[test]
    fn cgroup_limits_table() {
        let mut failures = Vec::new();
        for row in tables::rows("cgroup-limits.tsv", 7, 20) {
            let [controller, version, dir, mount, files, limit, usage] = &row[..] else {
                unreachable!()
            };
            let files: Vec<(PathBuf, String)> = files
                .split(';')
                .filter(|f| *f != "-")
                .map(|f| {
                    let (path, text) = f.split_once('=').expect("files are PATH=TEXT");
                    (PathBuf::from(path), tables::unescape(text))
                })
                .collect();
            let read = |path: &Path| {
                files
                    .iter()
                    .find(|(p, _)| p == path)
                    .map(|(_, text)| text.clone())
            };
            let cg = CgroupDir {
                dir: PathBuf::from(dir),
                mount: PathBuf::from(mount),
                v2: match version.as_str() {
                    "v1" => false,
                    "v2" => true,
                    other => panic!("cgroup-limits.tsv: unknown version {other:?}"),
                },
            };
            let got = match controller.as_str() {
                "memory" => cgroup_memory_with(&cg, &read),
                "pids" => cgroup_pids_with(&cg, &read),
                other => panic!("cgroup-limits.tsv: unknown controller {other:?}"),
            };
            let want = (tables::optional(limit), tables::optional(usage));
            if got != want {
                failures.push(format!(
                    "{controller} {version} {dir}: got {got:?}, want {want:?}"
                ));
            }
        }
        tables::assert_all("cgroup-limits.tsv", &failures);
    }

    #[test]
    fn reads_host_facts() {
        assert!(mem_available().unwrap() > 0);
        assert!(tasks_on_host().unwrap() >= 1);
        assert!(map_count().unwrap() > 5);
        assert!(sysctl("kernel/pid_max").unwrap() >= 301);
        if Path::new("/sys/fs/cgroup").exists() {
            let memory = cgroup_dir("memory").expect("a host with cgroups has a memory controller");
            assert!(
                memory.dir.starts_with(&memory.mount),
                "{:?} outside {:?}",
                memory.dir,
                memory.mount
            );
            assert!(
                cgroup_memory(&memory).1.is_some(),
                "memory usage of {:?} unreadable",
                memory.dir
            );
        } else {
            eprintln!("SKIP cgroup part: /sys/fs/cgroup does not exist here");
        }
    }
}
