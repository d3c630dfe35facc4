//! The loops `spawnscope probe-cost` times, one per kind of hook, and the process that runs them
//! (`spawnscope probe-loop`, hidden): it reads one order a line on stdin and answers on stdout, so
//! that the conductor can attach and detach programs between rounds, and make this process the
//! run (it execs itself again on `exec`: the collector's counting starts at its run's exec).
//!
//! Each loop fires its hook a known way; how often it really fired is the kernel's count, read by
//! the conductor (the statistics' run_cnt), not assumed here.

use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::sync::{Arc, Barrier};
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
}

impl Loop {
    pub fn name(self) -> &'static str {
        match self {
            Loop::Getppid => "getppid",
            Loop::PingPong => "pingpong",
            Loop::FilePosLock => "f_pos_lock",
            Loop::Faults => "faults",
            Loop::Spawn => "spawn",
        }
    }

    pub fn from_name(name: &str) -> Option<Loop> {
        [
            Loop::Getppid,
            Loop::PingPong,
            Loop::FilePosLock,
            Loop::Faults,
            Loop::Spawn,
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
        }
    }

    /// Wall ns of `iterations` iterations.
    pub fn run(self, iterations: u64) -> Result<u64> {
        let start = Instant::now();
        match self {
            Loop::Getppid => {
                for _ in 0..iterations {
                    std::hint::black_box(std::os::unix::process::parent_id());
                }
            }
            Loop::PingPong => ping_pong(iterations)?,
            Loop::FilePosLock => file_pos_lock(iterations)?,
            Loop::Faults => faults(iterations)?,
            Loop::Spawn => {
                for _ in 0..iterations {
                    std::thread::spawn(|| std::hint::black_box(0))
                        .join()
                        .map_err(|_| anyhow::anyhow!("a spawned thread panicked"))?;
                }
            }
        }
        Ok(start.elapsed().as_nanos() as u64)
    }
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
    // SAFETY: as above.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu is a CPU the kernel just named, below CPU_SETSIZE; one is ours.
    unsafe { libc::CPU_SET(cpu as usize, &mut one) };
    set_affinity(&one)?;
    Ok(before)
}

fn set_affinity(set: &libc::cpu_set_t) -> Result<()> {
    // SAFETY: pid 0 is this thread; set is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_setaffinity");
    }
    Ok(())
}

fn ping_pong(round_trips: u64) -> Result<()> {
    let before = stay_on_this_cpu()?;
    let result = ping_pong_here(round_trips);
    set_affinity(&before)?;
    result
}

fn ping_pong_here(round_trips: u64) -> Result<()> {
    use std::io::Read;
    let (mut ping_r, mut ping_w) = pipe()?;
    let (mut pong_r, mut pong_w) = pipe()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8];
        for _ in 0..round_trips {
            ping_r.read_exact(&mut byte)?;
            pong_w.write_all(&byte)?;
        }
        Ok(())
    });
    let mut byte = [0u8];
    for _ in 0..round_trips {
        ping_w.write_all(&byte)?;
        pong_r.read_exact(&mut byte)?;
    }
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echoing thread panicked"))??;
    Ok(())
}

const PAGE: usize = 4096;

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

fn file_pos_lock(iterations: u64) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    // A file opened by path (a memfd's has no position lock: only regular files opened through
    // a path get FMODE_ATOMIC_POS), in memory where there is a tmpfs, unlinked at once.
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
    let file = Arc::new(file);
    file.set_len(FILE_BYTES as u64)?;
    let threads = 4 * std::thread::available_parallelism().map_or(2, |n| n.get());
    let start = Arc::new(Barrier::new(threads));
    let readers: Vec<_> = (0..threads)
        .map(|_| {
            let (start, file) = (Arc::clone(&start), Arc::clone(&file));
            std::thread::spawn(move || -> Result<()> {
                let mut buf = vec![0u8; READ_BYTES];
                start.wait();
                for _ in 0..iterations {
                    if (&*file).read(&mut buf)? == 0 {
                        (&*file).seek(SeekFrom::Start(0))?;
                    }
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

const PAGES_A_MAPPING: u64 = 64;

fn faults(pages: u64) -> Result<()> {
    let mut left = pages;
    while left > 0 {
        let n = left.min(PAGES_A_MAPPING);
        let len = n as usize * PAGE;
        let p = map(len)?;
        // SAFETY: p is our mapping of len bytes; a huge page would fault once for 512 pages.
        unsafe { libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE) };
        for i in 0..n as usize {
            // SAFETY: inside the mapping.
            unsafe { p.add(i * PAGE).write_volatile(1) };
        }
        unmap(p, len);
        left -= n;
    }
    Ok(())
}

/// What `probe-loop` answers before its first order, and after each `exec`.
pub const READY: &str = "ready";

/// `spawnscope probe-loop`: orders on stdin, one a line — `run LOOP ITERATIONS` (answered with the
/// wall ns), `exec` (this program again, the same arguments: answered `ready` by the new image) —
/// until stdin ends.
pub fn serve() -> Result<()> {
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
            ["run", name, iterations] => {
                let l = Loop::from_name(name).with_context(|| format!("no loop {name}"))?;
                let n: u64 = iterations.parse().context("iterations")?;
                writeln!(out, "{}", l.run(n)?)?;
                out.flush()?;
            }
            _ => bail!("not an order: {line}"),
        }
    }
    Ok(())
}
