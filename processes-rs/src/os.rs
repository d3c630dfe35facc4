//! The system calls a task that is a process needs and std does not offer: fork, waitpid, _exit,
//! pipes and raw reads and writes on them, poll, kill. libc's, which std links, declared here
//! because the workload takes no crates. Everything a child calls is in this file or is a single
//! system call of std's (a socket's read or write): no allocation, no lock, as is safe after fork.

use std::io;
use std::os::raw::{c_int, c_long, c_short, c_void};

#[repr(C)]
struct Timespec {
    tv_sec: c_long,
    tv_nsec: c_long,
}

#[repr(C)]
pub struct PollFd {
    pub fd: c_int,
    pub events: c_short,
    pub revents: c_short,
}

extern "C" {
    fn fork() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
    fn pipe(fds: *mut c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize;
    fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    fn nanosleep(req: *const Timespec, rem: *mut Timespec) -> c_int;
    fn poll(fds: *mut PollFd, nfds: u64, timeout_ms: c_int) -> c_int;
    fn kill(pid: c_int, sig: c_int) -> c_int;
}

pub const POLLIN: c_short = 1;
const WNOHANG: c_int = 1;
const EINTR: i32 = 4;
const F_GETFL: c_int = 3;
const F_SETFL: c_int = 4;
const O_NONBLOCK: c_int = 0o4000;
const F_SETPIPE_SZ: c_int = 1031;
const SIGKILL: c_int = 9;

/// The bytes of one record on the processes' pipes: a u64, under PIPE_BUF, so each write is
/// atomic and never interleaved with another child's.
pub const RECORD: usize = 8;

fn interrupted() -> bool {
    io::Error::last_os_error().raw_os_error() == Some(EINTR)
}

/// What `fork` returned.
pub enum Forked {
    /// In the child.
    Child,
    /// In the parent: the child's PID.
    Parent(c_int),
}

/// fork(2): a copy of this process, its pages shared with it until either writes them.
pub fn fork_process() -> io::Result<Forked> {
    // SAFETY: the caller (spawn.rs) forks only while this process has one thread, and the child
    // calls only what this file allows before its `exit_now`.
    match unsafe { fork() } {
        0 => Ok(Forked::Child),
        pid if pid > 0 => Ok(Forked::Parent(pid)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// _exit(2): the child ends without running the parent's exit handlers or flushing its buffers
/// (stdout's is the parent's, copied).
pub fn exit_now(status: c_int) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { _exit(status) }
}

/// Reaps one child that has ended (`wait`: blocking until one does, else only one already
/// ended); None when there is none (to wait for, or ended yet).
pub fn reap_one(wait: bool) -> Option<c_int> {
    loop {
        let mut status = 0;
        // SAFETY: status is a valid, writable int.
        let pid = unsafe { waitpid(-1, &mut status, if wait { 0 } else { WNOHANG }) };
        match pid {
            p if p > 0 => return Some(p),
            -1 if interrupted() => continue,
            _ => return None, // 0: none ended yet (WNOHANG); -1: ECHILD, no child left
        }
    }
}

/// SIGKILL to one child (serve's, still in a connection when the drain gave up).
pub fn kill_now(pid: c_int) {
    // SAFETY: kill(2) with no pointers; the PID is a child not reaped yet, so never reused.
    unsafe { kill(pid, SIGKILL) };
}

/// A pipe's two ends, as raw descriptors: every process forked while they are open holds them
/// too, so each closes the ends it does not use (a reader sees end of file only once every
/// write end is closed).
#[derive(Clone, Copy)]
pub struct Pipe {
    pub read: c_int,
    pub write: c_int,
}

impl Pipe {
    /// A new pipe; Err when no descriptor is left.
    pub fn new() -> io::Result<Self> {
        let mut fds = [0 as c_int; 2];
        // SAFETY: fds has room for the two descriptors pipe(2) writes.
        match unsafe { pipe(fds.as_mut_ptr()) } {
            0 => Ok(Pipe {
                read: fds[0],
                write: fds[1],
            }),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Asks the kernel for a buffer of at least `bytes` (it rounds up to a power of two pages);
    /// the pipe keeps its default where that is refused.
    pub fn resize(self, bytes: u64) {
        let bytes = c_int::try_from(bytes).unwrap_or(c_int::MAX);
        // SAFETY: fcntl(2) F_SETPIPE_SZ on a pipe this process holds, an int argument.
        unsafe { fcntl(self.write, F_SETPIPE_SZ, bytes) };
    }

    pub fn close_read(self) {
        close_fd(self.read);
    }

    pub fn close_write(self) {
        close_fd(self.write);
    }

    pub fn close(self) {
        self.close_read();
        self.close_write();
    }
}

pub fn close_fd(fd: c_int) {
    // SAFETY: close(2) on a descriptor this process holds; it is not used afterwards.
    unsafe { close(fd) };
}

/// Writes all of `bytes` (a pipe's reader gone: false).
pub fn write_all(fd: c_int, bytes: &[u8]) -> bool {
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        // SAFETY: rest is a valid slice of rest.len() bytes.
        match unsafe { write(fd, rest.as_ptr().cast(), rest.len()) } {
            n if n > 0 => done += n as usize,
            -1 if interrupted() => {}
            _ => return false,
        }
    }
    true
}

/// Reads what is there into `buf`, waiting for at least one byte: Some(0) at end of file, None on
/// an error.
pub fn read_some(fd: c_int, buf: &mut [u8]) -> Option<usize> {
    loop {
        // SAFETY: buf is a valid, writable slice of buf.len() bytes.
        match unsafe { read(fd, buf.as_mut_ptr().cast(), buf.len()) } {
            n if n >= 0 => return Some(n as usize),
            -1 if interrupted() => {}
            _ => return None,
        }
    }
}

/// Writes one record (see [`RECORD`]).
pub fn write_record(fd: c_int, value: u64) -> bool {
    write_all(fd, &value.to_ne_bytes())
}

/// Reads exactly one record; None at end of file or on an error.
pub fn read_record(fd: c_int) -> Option<u64> {
    let mut bytes = [0u8; RECORD];
    let mut got = 0;
    while got < RECORD {
        match read_some(fd, &mut bytes[got..])? {
            0 => return None,
            n => got += n,
        }
    }
    Some(u64::from_ne_bytes(bytes))
}

/// Blocks until the pipe's every write end is closed (a gate opening): nothing is ever written.
pub fn wait_for_end_of_file(fd: c_int) {
    let mut byte = [0u8; 1];
    while let Some(1..) = read_some(fd, &mut byte) {}
}

/// Waits up to `timeout_ms` for `fds` (-1: no limit); the number ready, 0 on timeout or signal.
pub fn poll_fds(fds: &mut [PollFd], timeout_ms: c_int) -> usize {
    // SAFETY: fds is a valid, writable array of fds.len() pollfd structs.
    let ready = unsafe { poll(fds.as_mut_ptr(), fds.len() as u64, timeout_ms) };
    ready.max(0) as usize
}

/// Sets O_NONBLOCK: an accept on a listening socket several processes wait on returns at once
/// when another took the connection.
pub fn set_nonblocking(fd: c_int) -> io::Result<()> {
    // SAFETY: fcntl(2) F_GETFL/F_SETFL on a descriptor the caller holds, int arguments.
    let flags = unsafe { fcntl(fd, F_GETFL) };
    if flags < 0 || unsafe { fcntl(fd, F_SETFL, flags | O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sleeps `ns`, whole (a signal's interruption sleeps the rest).
pub fn sleep_ns(ns: u64) {
    let mut req = Timespec {
        tv_sec: (ns / 1_000_000_000) as c_long,
        tv_nsec: (ns % 1_000_000_000) as c_long,
    };
    let mut rem = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: req and rem are valid timespecs; on EINTR rem holds what is left.
    while unsafe { nanosleep(&req, &mut rem) } == -1 && interrupted() {
        req = Timespec {
            tv_sec: rem.tv_sec,
            tv_nsec: rem.tv_nsec,
        };
    }
}

/// One page of a task's own stack, page-aligned so that writing it dirties exactly one page.
#[repr(C, align(4096))]
struct StackPage([u8; 4096]);

/// What a task does first: it writes one page of its stack, as a thread writes its own stack. A
/// forked child shares every page with its parent until it writes one; without this, a child
/// that only blocks would cost its kernel task, page tables and the few pages its calls touch,
/// and "one process" would be cheaper than any process that does work.
#[inline(never)]
pub fn write_own_stack_page() {
    let mut page = StackPage([0; 4096]);
    for byte in page.0.iter_mut().step_by(64) {
        *byte = 1;
    }
    std::hint::black_box(&mut page);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_cross_a_pipe_whole_and_end_at_end_of_file() {
        let pipe = Pipe::new().unwrap();
        assert!(write_record(pipe.write, 7));
        assert!(write_record(pipe.write, u64::MAX));
        pipe.close_write();
        assert_eq!(read_record(pipe.read), Some(7));
        assert_eq!(read_record(pipe.read), Some(u64::MAX));
        assert_eq!(read_record(pipe.read), None);
        pipe.close_read();
    }

    #[test]
    fn a_forked_child_is_reaped_once() {
        // The test harness runs tests on threads: this child only exits, which is safe after a
        // fork from a process with threads.
        let pid = match fork_process().unwrap() {
            Forked::Child => exit_now(0),
            Forked::Parent(pid) => pid,
        };
        let mut status = 0;
        // Waits for this child only: another test's children are not ours to reap.
        // SAFETY: status is a valid, writable int.
        assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(status, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { waitpid(pid, &mut status, WNOHANG) }, -1);
    }
}
