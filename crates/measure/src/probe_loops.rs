//! The loops `spawnscope probe-cost` times, one per kind of hook, and the process that runs them
//! (`spawnscope probe-loop`, hidden): it reads one order a line on stdin and answers on stdout, so
//! that the conductor can attach and detach programs between rounds, and make this process the
//! run (it execs itself again on `exec`: the collector's counting starts at its run's exec).
//!
//! Each loop fires its hook a known way; how often it really fired is the kernel's count, read by
//! the conductor (the statistics' run_cnt), not assumed here.
//!
//! Every loop also runs **cold** (`run LOOP N cold`): the thread that fires the hook first reads
//! through a buffer twice the size of the largest cache the CPU has to itself (its L2), so the
//! event finds the program's maps, the task's kernel structures and their TLB entries gone from
//! the CPU's own caches and at best in the shared last-level cache — as an event of a big run
//! finds much of them: between two events on a CPU a run of 100,000 threads or a million
//! goroutines does microseconds of other work on other tasks' slots, stacks and structures. And
//! **coldest** (`run LOOP N coldest`): every cache emptied, the shared one too (a buffer twice the
//! largest cache), every line from memory: the most an event can cost the program. The loops' few
//! threads otherwise keep all of it in the CPU's own caches, which a run does not.

use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// The loops, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// getppid() calls: one sys_enter and one sys_exit each.
    Getppid,
    /// Two threads handing a byte back and forth through two pipes, both on one CPU: each
    /// hand-over blocks one and wakes the other, one switch and one wakeup (sched_switch,
    /// sched_wakeup). On two CPUs the time would hang on where the scheduler put them.
    PingPong,
    /// Four threads a CPU reading the same file through one shared descriptor: each read() holds
    /// the file's position lock (f_pos_lock, a mutex: the descriptor is shared by threads, so
    /// the kernel serialises their reads) while it copies, so the others contend on it
    /// (lock:contention_begin and contention_end, the mutex's spinning and sleeping waits).
    /// More threads than CPUs: a reader preempted while it holds the lock makes the others wait
    /// even when other work keeps the CPUs busy (with one thread a CPU, a loaded machine made
    /// them meet a few times in 40,000 reads; so did threads mapping pages, on mmap_lock).
    FilePosLock,
    /// A fresh anonymous mapping touched a page at a time (huge pages refused), then unmapped:
    /// one user page fault a page.
    Faults,
    /// Threads started and joined one at a time (task_newtask, sched_wakeup_new,
    /// sched_process_exit).
    Spawn,
    /// A signal sent to the calling thread (tgkill, SIGUSR1, a handler that does nothing): one
    /// delivery an iteration (signal_deliver).
    Signal,
    /// The calling thread moved to the other of two CPUs (sched_setaffinity): one migration an
    /// iteration (sched_migrate_task).
    Migrate,
    /// PingPong with the two threads on two CPUs: each hand-over wakes a thread on the other CPU,
    /// which the kernel does with a function call queued there (csd_queue_cpu) or a reschedule
    /// interrupt (ipi_send_cpu) where the CPU is not polling for work. How many of each an
    /// iteration is the kernel's choice: the statistics count them.
    CrossPingPong,
    /// One page mapped, touched and unmapped: the unmap flushes its TLB entry (tlb_flush).
    Unmap,
    /// A fresh page of a mapping filled by a read() from /dev/zero: the kernel's copy to it
    /// faults, in kernel mode (page_fault_kernel).
    KernelFaults,
    /// Unmap with a second thread of the process running on another CPU: the unmap's TLB flush
    /// must reach that CPU too, a function call queued for it (csd_queue_cpu) and an interrupt.
    /// (The cross-CPU ping-pong's wakeups go by interrupt alone where the CPUs share a cache.)
    RemoteUnmap,
}

impl Loop {
    pub fn name(self) -> &'static str {
        match self {
            Loop::Getppid => "getppid",
            Loop::PingPong => "pingpong",
            Loop::FilePosLock => "f_pos_lock",
            Loop::Faults => "faults",
            Loop::Spawn => "spawn",
            Loop::Signal => "signal",
            Loop::Migrate => "migrate",
            Loop::CrossPingPong => "cross_pingpong",
            Loop::Unmap => "unmap",
            Loop::KernelFaults => "kernel_faults",
            Loop::RemoteUnmap => "remote_unmap",
        }
    }

    /// The CPUs the loop needs to fire its hook (the thread's own CPUs: its affinity).
    pub fn cpus_needed(self) -> usize {
        match self {
            Loop::Migrate | Loop::CrossPingPong | Loop::RemoteUnmap => 2,
            _ => 1,
        }
    }

    pub fn from_name(name: &str) -> Option<Loop> {
        [
            Loop::Getppid,
            Loop::PingPong,
            Loop::FilePosLock,
            Loop::Faults,
            Loop::Spawn,
            Loop::Signal,
            Loop::Migrate,
            Loop::CrossPingPong,
            Loop::Unmap,
            Loop::KernelFaults,
            Loop::RemoteUnmap,
        ]
        .into_iter()
        .find(|l| l.name() == name)
    }

    /// What one iteration does, in words.
    pub fn does(self) -> &'static str {
        match self {
            Loop::Getppid => "one getppid() call",
            Loop::PingPong => {
                "one round trip of a byte between two threads on one CPU through two pipes"
            }
            Loop::FilePosLock => {
                "a 64 KiB read() by each of four threads a CPU, one shared descriptor of a file in memory (its f_pos_lock contended)"
            }
            Loop::Faults => "one fresh page touched (64 pages a mapping, huge pages refused)",
            Loop::Spawn => "one thread started and joined",
            Loop::Signal => "one SIGUSR1 sent to the calling thread and handled",
            Loop::Migrate => "the calling thread moved to the other of two CPUs",
            Loop::CrossPingPong => {
                "one round trip of a byte between two threads on two CPUs through two pipes"
            }
            Loop::Unmap => "one page mapped, touched and unmapped",
            Loop::KernelFaults => {
                "one fresh page filled by read() from /dev/zero (64 pages a mapping, huge pages refused)"
            }
            Loop::RemoteUnmap => {
                "one page mapped, touched and unmapped while another thread of the process spins on another CPU"
            }
        }
    }

    /// What a cold iteration does beyond the warm one, in words.
    pub fn cold_does(self) -> &'static str {
        match self {
            Loop::PingPong | Loop::CrossPingPong => {
                "each thread empties its CPU's caches before it hands the byte over"
            }
            Loop::FilePosLock => {
                "one thread reads 64 KiB at a time, holding the lock, on a CPU of its own; another empties its CPU's caches before each 4 KiB read, meeting it"
            }
            _ => "the caches emptied before each iteration",
        }
    }

    /// Wall ns of `iterations` iterations, each after `chill` (see the module's header).
    pub fn run(self, iterations: u64, chill: Chill) -> Result<u64> {
        let start = Instant::now();
        match self {
            Loop::Getppid => {
                for _ in 0..iterations {
                    chill.apply();
                    std::hint::black_box(std::os::unix::process::parent_id());
                }
            }
            Loop::PingPong => ping_pong(iterations, Cpus::One, chill)?,
            Loop::CrossPingPong => ping_pong(iterations, Cpus::Two, chill)?,
            Loop::FilePosLock if chill == Chill::Warm => file_pos_lock(iterations)?,
            Loop::FilePosLock => file_pos_lock_cold(iterations, chill)?,
            Loop::Faults => faults(iterations, chill, Touch::Write)?,
            Loop::KernelFaults => faults(iterations, chill, Touch::ReadInto(zero()?))?,
            Loop::Spawn => {
                for _ in 0..iterations {
                    chill.apply();
                    std::thread::spawn(|| std::hint::black_box(0))
                        .join()
                        .map_err(|_| anyhow::anyhow!("a spawned thread panicked"))?;
                }
            }
            Loop::Signal => signals(iterations, chill)?,
            Loop::Migrate => migrations(iterations, chill)?,
            Loop::Unmap => unmaps(iterations, chill)?,
            Loop::RemoteUnmap => remote_unmaps(iterations, chill)?,
        }
        Ok(start.elapsed().as_nanos() as u64)
    }
}

/// How much of what an event touches the loop pushes out of the caches before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chill {
    /// Nothing: the loop's few threads keep it all in the CPU's own caches.
    Warm,
    /// The caches the CPU has to itself (its L1 and L2): twice the largest of them read through.
    /// What an event of a big run meets (see the module's header).
    Own,
    /// Every cache, the shared last-level one too (twice the largest cache read through), and
    /// the TLB: every line the event touches comes from memory. The most an event can cost.
    All,
}

impl Chill {
    pub fn word(self) -> &'static str {
        match self {
            Chill::Warm => "warm",
            Chill::Own => "cold",
            Chill::All => "coldest",
        }
    }

    fn from_word(word: &str) -> Option<Chill> {
        [Chill::Warm, Chill::Own, Chill::All]
            .into_iter()
            .find(|c| c.word() == word)
    }

    /// Reads a word of every cache line of this level's buffer: what the caches held is gone.
    fn apply(self) {
        let buffer = match self {
            Chill::Warm => return,
            Chill::Own => &EVICT_OWN,
            Chill::All => &EVICT_ALL,
        };
        let Some(&(addr, len)) = buffer.get() else {
            return;
        };
        let mut sum = 0u64;
        for off in (0..len).step_by(CACHE_LINE) {
            // SAFETY: inside the mapping prepare_cold made, never unmapped.
            sum = sum.wrapping_add(unsafe { ((addr + off) as *const u64).read_volatile() });
        }
        std::hint::black_box(sum);
    }
}

/// The buffers the cold loops read through (address, length), mapped and written once when the
/// process starts (`prepare_cold`), so that no round pays their page faults.
static EVICT_OWN: OnceLock<(usize, usize)> = OnceLock::new();
static EVICT_ALL: OnceLock<(usize, usize)> = OnceLock::new();

/// What is assumed where sysfs names no cache: an L2 and a last-level cache of today's servers.
const UNKNOWN_OWN_CACHE: usize = 1 << 20;
const UNKNOWN_SHARED_CACHE: usize = 32 << 20;
/// The most a buffer may be.
const EVICTION_MOST: usize = 512 << 20;
const CACHE_LINE: usize = 64;

/// The largest cache sysfs names for CPU 0, of those it has to itself (shared_cpu_list "0": L1
/// and L2 on today's x86 and arm64 servers) or of all, bytes.
fn largest_cache(own_only: bool) -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.flatten()
        .filter(|e| {
            !own_only
                || std::fs::read_to_string(e.path().join("shared_cpu_list"))
                    .is_ok_and(|list| list.trim() == "0")
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| {
            let s = s.trim();
            let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
            let n: usize = digits.parse().ok()?;
            Some(match unit {
                "K" => n << 10,
                "M" => n << 20,
                "G" => n << 30,
                _ => return None,
            })
        })
        .max()
}

/// A buffer of `len` bytes mapped in small pages (a huge page would leave most of the TLB's
/// entries in place) and written a page at a time.
fn eviction_buffer(len: usize) -> Result<(usize, usize)> {
    let p = map(len)?;
    // SAFETY: p is our mapping of len bytes; a refusal leaves huge pages, still an eviction.
    unsafe { libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE) };
    for off in (0..len).step_by(PAGE) {
        // SAFETY: inside the mapping.
        unsafe { p.add(off).write_volatile(1) };
    }
    Ok((p as usize, len))
}

/// Maps and writes both eviction buffers: twice the largest cache the CPU has to itself, and
/// twice the largest of all.
pub fn prepare_cold() -> Result<()> {
    let own = (2 * largest_cache(true).unwrap_or(UNKNOWN_OWN_CACHE)).min(EVICTION_MOST);
    let all = (2 * largest_cache(false).unwrap_or(UNKNOWN_SHARED_CACHE)).clamp(own, EVICTION_MOST);
    if EVICT_OWN.get().is_none() {
        let _ = EVICT_OWN.set(eviction_buffer(own)?);
    }
    if EVICT_ALL.get().is_none() {
        let _ = EVICT_ALL.set(eviction_buffer(all)?);
    }
    Ok(())
}

fn pipe() -> Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating a pipe");
    }
    use std::os::fd::FromRawFd;
    // SAFETY: pipe2 just returned these two descriptors, owned by nobody else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// The calling thread kept on the CPU it runs on now (it and the threads it starts after);
/// returns the CPUs it could use before.
fn stay_on_this_cpu() -> Result<libc::cpu_set_t> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut before: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; before is ours, of the size given.
    if unsafe { libc::sched_getaffinity(0, size, &mut before) } != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_getaffinity");
    }
    // SAFETY: sched_getcpu takes nothing.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        return Err(std::io::Error::last_os_error()).context("sched_getcpu");
    }
    set_affinity(&one_cpu(cpu as usize))?;
    Ok(before)
}

/// `body` run on the CPU the calling thread runs on now (given the CPUs it could use before:
/// `other_cpu` picks from them), the thread's affinity put back after, whatever `body` returned.
fn on_this_cpu<T>(body: impl FnOnce(&libc::cpu_set_t) -> Result<T>) -> Result<T> {
    let before = stay_on_this_cpu()?;
    let result = body(&before);
    set_affinity(&before)?;
    result
}

/// The set of `cpu` alone (a CPU the kernel named, below CPU_SETSIZE).
fn one_cpu(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu is below CPU_SETSIZE; set is ours.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    set
}

fn set_affinity(set: &libc::cpu_set_t) -> Result<()> {
    // SAFETY: pid 0 is this thread; set is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_setaffinity");
    }
    Ok(())
}

/// Where the two threads of a ping-pong run.
#[derive(Clone, Copy)]
enum Cpus {
    /// Both on the CPU the caller runs on: each hand-over is a switch on it.
    One,
    /// The echoing thread on another of the caller's CPUs: each hand-over wakes the other CPU.
    Two,
}

fn ping_pong(round_trips: u64, cpus: Cpus, chill: Chill) -> Result<()> {
    on_this_cpu(|before| {
        let echo_on = match cpus {
            Cpus::One => None,
            Cpus::Two => Some(other_cpu(before)?),
        };
        ping_pong_here(round_trips, echo_on, chill)
    })
}

fn ping_pong_here(round_trips: u64, echo_on: Option<libc::cpu_set_t>, chill: Chill) -> Result<()> {
    use std::io::Read;
    let (mut ping_r, mut ping_w) = pipe()?;
    let (mut pong_r, mut pong_w) = pipe()?;
    let echo = std::thread::spawn(move || -> Result<()> {
        if let Some(set) = echo_on {
            set_affinity(&set)?;
        }
        let mut byte = [0u8];
        for _ in 0..round_trips {
            ping_r.read_exact(&mut byte)?;
            chill.apply();
            pong_w.write_all(&byte)?;
        }
        Ok(())
    });
    let mut byte = [0u8];
    for _ in 0..round_trips {
        chill.apply();
        ping_w.write_all(&byte)?;
        pong_r.read_exact(&mut byte)?;
    }
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echoing thread panicked"))??;
    Ok(())
}

/// A set of one CPU of `allowed` other than the one the caller runs on now.
fn other_cpu(allowed: &libc::cpu_set_t) -> Result<libc::cpu_set_t> {
    // SAFETY: sched_getcpu takes nothing.
    let here = unsafe { libc::sched_getcpu() };
    let other = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: cpu is below CPU_SETSIZE; allowed is a valid set.
        .find(|&cpu| cpu as i32 != here && unsafe { libc::CPU_ISSET(cpu, allowed) })
        .context("the loop needs two CPUs and this thread may use one")?;
    Ok(one_cpu(other))
}

/// The calling thread moved between its CPU and another `iterations` times (each move is a
/// migration: the thread is running when its affinity leaves out the CPU it runs on).
fn migrations(iterations: u64, chill: Chill) -> Result<()> {
    on_this_cpu(|before| {
        let there = other_cpu(before)?;
        // SAFETY: sched_getcpu takes nothing; the thread was just kept on this CPU.
        let here = one_cpu(unsafe { libc::sched_getcpu() } as usize);
        for i in 0..iterations {
            chill.apply();
            set_affinity(if i % 2 == 0 { &there } else { &here })?;
        }
        Ok(())
    })
}

extern "C" fn on_sigusr1(_: libc::c_int) {}

/// SIGUSR1 sent to the calling thread `iterations` times, handled by a function that does
/// nothing; the handler before is put back.
fn signals(iterations: u64, chill: Chill) -> Result<()> {
    // SAFETY: zeroed sigactions are valid; the handler is an extern "C" fn that does nothing
    // (async-signal-safe), installed for SIGUSR1, which nothing else in this process uses.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_sigusr1 as extern "C" fn(libc::c_int) as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    let mut before: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both point to valid sigactions.
    if unsafe { libc::sigaction(libc::SIGUSR1, &action, &mut before) } != 0 {
        return Err(std::io::Error::last_os_error()).context("sigaction(SIGUSR1)");
    }
    // SAFETY: getpid and gettid take nothing.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    let mut result = Ok(());
    for _ in 0..iterations {
        chill.apply();
        // SAFETY: a signal to this thread of this process, whose handler is installed above.
        if unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) } != 0 {
            result = Err(std::io::Error::last_os_error()).context("tgkill");
            break;
        }
    }
    // SAFETY: before is what sigaction returned above.
    unsafe { libc::sigaction(libc::SIGUSR1, &before, std::ptr::null_mut()) };
    result
}

const PAGE: usize = 4096;

fn unmaps(iterations: u64, chill: Chill) -> Result<()> {
    for _ in 0..iterations {
        chill.apply();
        let p = map(PAGE)?;
        // SAFETY: p is our mapping of one page.
        unsafe { p.write_volatile(1) };
        unmap(p, PAGE);
    }
    Ok(())
}

/// `unmaps` while a thread of this process spins on another CPU (the mm is live there, so each
/// flush must reach it).
fn remote_unmaps(iterations: u64, chill: Chill) -> Result<()> {
    on_this_cpu(|before| {
        let there = other_cpu(before)?;
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || -> Result<()> {
                set_affinity(&there)?;
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
                Ok(())
            })
        };
        let result = unmaps(iterations, chill);
        stop.store(true, Ordering::Relaxed);
        spinner
            .join()
            .map_err(|_| anyhow::anyhow!("the spinning thread panicked"))??;
        result
    })
}

/// An anonymous private mapping of `len` bytes.
fn map(len: usize) -> Result<*mut u8> {
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()).context("mmap");
    }
    Ok(p.cast())
}

fn unmap(p: *mut u8, len: usize) {
    // SAFETY: p and len are a whole mapping this module made and no longer uses.
    unsafe { libc::munmap(p.cast(), len) };
}

const READ_BYTES: usize = 64 << 10;
const FILE_BYTES: usize = 1 << 20;

/// A file of `bytes` opened by path (a memfd's has no position lock: only regular files opened
/// through a path get FMODE_ATOMIC_POS), in memory where there is a tmpfs, unlinked at once.
fn shared_file(bytes: usize) -> Result<Arc<std::fs::File>> {
    let dir = ["/dev/shm", "/run"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("spawnscope-probe-cost-{}", std::process::id()));
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    file.set_len(bytes as u64)?;
    Ok(Arc::new(file))
}

/// One read() of `buf.len()` bytes at the shared position, back to the start at the end.
fn read_on(file: &std::fs::File, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    if f.read(buf)? == 0 {
        f.seek(SeekFrom::Start(0))?;
    }
    Ok(())
}

fn file_pos_lock(iterations: u64) -> Result<()> {
    let file = shared_file(FILE_BYTES)?;
    let threads = 4 * std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = Arc::new(Barrier::new(threads));
    let readers: Vec<_> = (0..threads)
        .map(|_| {
            let (start, file) = (Arc::clone(&start), Arc::clone(&file));
            std::thread::spawn(move || -> Result<()> {
                let mut buf = vec![0u8; READ_BYTES];
                start.wait();
                for _ in 0..iterations {
                    read_on(&file, &mut buf)?;
                }
                Ok(())
            })
        })
        .collect();
    for r in readers {
        r.join()
            .map_err(|_| anyhow::anyhow!("a reading thread panicked"))??;
    }
    Ok(())
}

const HOLDER_READ_BYTES: usize = 64 << 10;
const HOLDER_FILE_BYTES: usize = 1 << 20;
const COLD_READ_BYTES: usize = 4 << 10;

/// The cold lock loop: a holder reads 64 KiB at a time (the lock held almost all the while, its
/// copy streaming through the caches), and the calling thread, after emptying its CPU's caches,
/// reads 4 KiB, meeting the holder's lock: its contention_begin and contention_end are cold. The
/// holder meets the caller's short hold too, warmer (counted alike: the statistics cannot tell).
fn file_pos_lock_cold(iterations: u64, chill: Chill) -> Result<()> {
    // Where there are two CPUs, the holder has one to itself: it then holds the lock almost all
    // the while, and each of the caller's reads meets it.
    on_this_cpu(|before| file_pos_lock_cold_here(iterations, other_cpu(before).ok(), chill))
}

fn file_pos_lock_cold_here(
    iterations: u64,
    holder_on: Option<libc::cpu_set_t>,
    chill: Chill,
) -> Result<()> {
    let file = shared_file(HOLDER_FILE_BYTES)?;
    let stop = Arc::new(AtomicBool::new(false));
    let holder = {
        let (file, stop) = (Arc::clone(&file), Arc::clone(&stop));
        std::thread::spawn(move || -> Result<()> {
            if let Some(set) = holder_on {
                set_affinity(&set)?;
            }
            let mut buf = vec![0u8; HOLDER_READ_BYTES];
            while !stop.load(Ordering::Relaxed) {
                read_on(&file, &mut buf)?;
            }
            Ok(())
        })
    };
    let mut buf = vec![0u8; COLD_READ_BYTES];
    let mut result = Ok(());
    for _ in 0..iterations {
        chill.apply();
        if let Err(err) = read_on(&file, &mut buf) {
            result = Err(err.into());
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    holder
        .join()
        .map_err(|_| anyhow::anyhow!("the holding thread panicked"))??;
    result
}

const PAGES_A_MAPPING: u64 = 64;

/// How a page of the faults loops is first touched.
enum Touch {
    /// By this thread: a user fault.
    Write,
    /// By the kernel, a read() from this file (/dev/zero) into it: a kernel fault.
    ReadInto(std::fs::File),
}

fn zero() -> Result<std::fs::File> {
    std::fs::File::open("/dev/zero").context("opening /dev/zero")
}

fn faults(pages: u64, chill: Chill, touch: Touch) -> Result<()> {
    let mut left = pages;
    while left > 0 {
        let n = left.min(PAGES_A_MAPPING);
        let len = n as usize * PAGE;
        let p = map(len)?;
        // SAFETY: p is our mapping of len bytes; a huge page would fault once for 512 pages.
        unsafe { libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE) };
        for i in 0..n as usize {
            chill.apply();
            match &touch {
                // SAFETY: inside the mapping.
                Touch::Write => unsafe { p.add(i * PAGE).write_volatile(1) },
                Touch::ReadInto(zero) => {
                    use std::os::fd::AsRawFd;
                    // SAFETY: one byte into our mapping, inside it.
                    let n = unsafe { libc::read(zero.as_raw_fd(), p.add(i * PAGE).cast(), 1) };
                    if n != 1 {
                        let err = std::io::Error::last_os_error();
                        unmap(p, len);
                        return Err(err).context("reading /dev/zero into a fresh page");
                    }
                }
            }
        }
        unmap(p, len);
        left -= n;
    }
    Ok(())
}

/// What `probe-loop` answers before its first order, and after each `exec`.
pub const READY: &str = "ready";

/// `spawnscope probe-loop`: orders on stdin, one a line — `run LOOP ITERATIONS warm|cold|coldest`
/// (answered with the wall ns), `exec` (this program again, the same arguments: answered `ready`
/// by the new image) — until stdin ends. The cold loops' buffers are made before `ready`.
pub fn serve() -> Result<()> {
    prepare_cold().context("mapping the cold loops' buffers")?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{READY}")?;
    out.flush()?;
    for line in stdin.lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["exec"] => {
                let exe = std::env::current_exe().context("this program's path")?;
                let args: Vec<String> = std::env::args().skip(1).collect();
                let err = std::process::Command::new(exe).args(args).exec();
                bail!("exec failed: {err}");
            }
            ["run", name, iterations, chill] => {
                let l = Loop::from_name(name).with_context(|| format!("no loop {name}"))?;
                let n: u64 = iterations.parse().context("iterations")?;
                let chill =
                    Chill::from_word(chill).with_context(|| format!("not a level: {chill}"))?;
                writeln!(out, "{}", l.run(n, chill)?)?;
                out.flush()?;
            }
            _ => bail!("not an order: {line}"),
        }
    }
    Ok(())
}
