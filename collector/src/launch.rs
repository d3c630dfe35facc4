//! Start a command held between fork and exec, so the collector can be attached to its PID before
//! it runs a single instruction of the workload.
//!
//! std's `Command::spawn` cannot do this alone: it returns only once the child has exec'd (it
//! waits on a close-on-exec pipe to report exec errors), so a `pre_exec` hook that blocks would
//! block `spawn` too. Here `spawn` runs on a helper thread; the child's `pre_exec` sends its PID
//! on one pipe and waits for a byte on another; [`HeldChild::release`] sends the byte, and the
//! helper's `spawn` then returns the `Child`. Any `pre_exec` hooks already set on the command
//! (joining a cgroup, say) run before the hold.

use std::fs::File;
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::thread::{self, JoinHandle};

/// A forked child waiting before exec.
pub struct HeldChild {
    pid: u32,
    go: Option<io::PipeWriter>,
    spawner: Option<JoinHandle<io::Result<Child>>>,
}

impl HeldChild {
    /// Forks `cmd` and returns once the child waits before its exec.
    pub fn spawn(mut cmd: Command) -> io::Result<HeldChild> {
        let (mut pid_reader, pid_writer) = io::pipe()?;
        let (go_reader, go_writer) = io::pipe()?;
        let pid_fd = pid_writer.as_raw_fd();
        let go_fd = go_reader.as_raw_fd();
        let go_writer_fd = go_writer.as_raw_fd();
        let pid_reader_fd = pid_reader.as_raw_fd();
        // SAFETY: between fork and exec only async-signal-safe calls are made (getpid, write,
        // read, close), on descriptors the parent keeps open until spawn returns.
        unsafe {
            cmd.pre_exec(move || child_wait(pid_fd, go_fd, &[go_writer_fd, pid_reader_fd]));
        }
        let spawner = thread::spawn(move || {
            let child = cmd.spawn();
            drop(pid_writer);
            drop(go_reader);
            child
        });
        let mut pid = [0u8; 4];
        match pid_reader.read_exact(&mut pid) {
            Ok(()) => Ok(HeldChild {
                pid: u32::from_ne_bytes(pid),
                go: Some(go_writer),
                spawner: Some(spawner),
            }),
            // The pipe closed without a PID: spawn failed before the child got to its hold.
            Err(_) => {
                drop(go_writer);
                match spawner.join() {
                    Ok(Ok(mut child)) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        Err(io::Error::other("the child exec'd without being held"))
                    }
                    Ok(Err(err)) => Err(err),
                    Err(_) => Err(io::Error::other("the spawning thread panicked")),
                }
            }
        }
    }

    /// The child's PID, which the exec keeps.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Lets the child exec; returns it once it has (or the exec error).
    pub fn release(mut self) -> io::Result<Child> {
        let mut go = self.go.take().expect("released once");
        go.write_all(&[1])?;
        drop(go);
        self.spawner
            .take()
            .expect("released once")
            .join()
            .map_err(|_| io::Error::other("the spawning thread panicked"))?
    }
}

impl Drop for HeldChild {
    /// Not released: the child sees the pipe close and exits without exec'ing.
    fn drop(&mut self) {
        self.go.take();
        if let Some(spawner) = self.spawner.take() {
            let _ = spawner.join();
        }
    }
}

/// In the child, before exec: report the PID, wait for the go byte. EOF (the parent gave up) or an
/// error fails the spawn, so the workload never runs untraced by mistake.
fn child_wait(pid_fd: RawFd, go_fd: RawFd, close: &[RawFd]) -> io::Result<()> {
    for &fd in close {
        // SAFETY: these are the child's copies of the parent's ends; closing them here makes the
        // parent's close reach the child as EOF.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    // SAFETY: the descriptors are open (inherited); ManuallyDrop leaves closing to exec (CLOEXEC).
    let mut pid_pipe = ManuallyDrop::new(unsafe { File::from_raw_fd(pid_fd) });
    let mut go_pipe = ManuallyDrop::new(unsafe { File::from_raw_fd(go_fd) });
    pid_pipe.write_all(&std::process::id().to_ne_bytes())?;
    let mut byte = [0u8; 1];
    match go_pipe.read(&mut byte)? {
        1 => Ok(()),
        _ => Err(io::Error::other("released without a go")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    #[test]
    fn the_child_keeps_its_pid_through_exec_and_waits_for_release() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo $$"]).stdout(Stdio::piped());
        let held = HeldChild::spawn(cmd).unwrap();
        let pid = held.pid();
        // Held: /proc/PID/exe is still this test binary, not sh.
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(exe, std::env::current_exe().unwrap());
        let child = held.release().unwrap();
        assert_eq!(child.id(), pid);
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string());
    }

    #[test]
    fn a_child_never_released_never_runs_the_command() {
        let marker = std::env::temp_dir().join(format!("held-{}", std::process::id()));
        let mut cmd = Command::new("touch");
        cmd.arg(&marker);
        let held = HeldChild::spawn(cmd).unwrap();
        drop(held);
        assert!(!marker.exists());
    }

    #[test]
    fn a_missing_program_is_an_error_at_release() {
        let held = HeldChild::spawn(Command::new("/nonexistent/spawnscope")).unwrap();
        assert!(held.release().is_err());
    }
}
