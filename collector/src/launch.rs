//! The one launcher of the project: starting a workload the way measurement needs it — in its
//! cgroup from its first instruction, killed if the conductor dies, held at a gate between fork
//! and exec until the tracers are attached to its PID, and reaped with wait4 so its rusage
//! (user/sys time, faults, switches) is the kernel's own count.
//!
//! Fork and exec are done by hand: std's `Command::spawn` returns only once the child has exec'd
//! (it waits on a close-on-exec pipe for exec errors), so a child held before exec would hold the
//! parent too.
//!
//! ```no_run
//! use std::path::Path;
//! use spawnscope_collector::launch::{self, ChildSetup, Stdio};
//!
//! let setup = ChildSetup { gated: true, stdout: Stdio::Pipe, ..ChildSetup::default() };
//! let mut child = launch::spawn(Path::new("/bin/echo"), &["hi".into()], setup)?;
//! // ... attach to child.pid while it waits at its gate, then:
//! child.release()?;                              // execs; Err if the exec failed
//! let (exit, rusage) = launch::wait(child.pid)?; // reaped: the kernel's rusage of it
//! assert!(exit.success() && rusage.minflt > 0);
//! # Ok::<(), anyhow::Error>(())
//! ```

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// getrusage-style figures: of a child reaped by [`wait`] (wait4), or the `rusage` object of a
/// workload's `result` event (its own getrusage(RUSAGE_SELF); same fields, same names, so it
/// deserializes from that object as is). The one rusage type of the project: run.json holds it.
#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq,
)]
pub struct Rusage {
    pub user_us: u64,
    pub sys_us: u64,
    pub maxrss_kb: u64,
    pub minflt: u64,
    pub majflt: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
}

impl From<&libc::rusage> for Rusage {
    fn from(ru: &libc::rusage) -> Self {
        let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
        Rusage {
            user_us: us(ru.ru_utime),
            sys_us: us(ru.ru_stime),
            maxrss_kb: ru.ru_maxrss as u64,
            minflt: ru.ru_minflt as u64,
            majflt: ru.ru_majflt as u64,
            nvcsw: ru.ru_nvcsw as u64,
            nivcsw: ru.ru_nivcsw as u64,
        }
    }
}

/// How the child ended.
#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq,
)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
            _ => "unknown".into(),
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => "other",
    }
}

/// Where one of the child's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdio {
    Inherit,
    /// A pipe to the parent.
    Pipe,
    Null,
}

/// What the child does between fork and exec. The default: no cgroup, limits kept, not gated,
/// every stream inherited.
#[derive(Clone, Debug)]
pub struct ChildSetup {
    /// cgroup.procs files to write "0" to (join the run's cgroup).
    pub cgroup_procs: Vec<CString>,
    /// Lift RLIMIT_NPROC (root only: the kernel refuses otherwise).
    pub unlimited_nproc: bool,
    /// Hold the child before exec until `Spawned::release`.
    pub gated: bool,
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
    /// Variables set in the child's environment over the parent's (the rest inherited as is):
    /// `run --runtime-trace`'s `SPAWNSCOPE_GO_TRACE` for a command.
    pub env: Vec<(String, OsString)>,
}

/// A started child. It execs once released (gated) or at once.
pub struct Spawned {
    pub pid: u32,
    pub stdin: Option<File>,
    pub stdout: Option<File>,
    pub stderr: Option<File>,
    gate: Option<File>,
    exec_result: File,
}

impl Spawned {
    /// Lets a gated child exec, then waits for the exec: Err if it failed (no such program…).
    pub fn release(&mut self) -> Result<()> {
        if let Some(mut gate) = self.gate.take() {
            gate.write_all(b"x")
                .context("releasing the workload at its gate")?;
        }
        // The child writes errno here if exec fails; a successful exec closes it (CLOEXEC).
        let mut errno = [0u8; 4];
        match self.exec_result.read(&mut errno) {
            Ok(4) => Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
                .context("the workload could not be executed"),
            Ok(_) => Ok(()),
            Err(err) => Err(err).context("waiting for the workload's exec"),
        }
    }
}

impl Default for ChildSetup {
    fn default() -> Self {
        ChildSetup {
            cgroup_procs: Vec::new(),
            unlimited_nproc: false,
            gated: false,
            stdin: Stdio::Inherit,
            stdout: Stdio::Inherit,
            stderr: Stdio::Inherit,
            env: Vec::new(),
        }
    }
}

impl Drop for Spawned {
    /// A gated child dropped before its release is killed: it never execs. (Closing the gate alone
    /// would not do: another child forked meanwhile, still held, may hold a copy of its write end.)
    fn drop(&mut self) {
        if self.gate.take().is_some() {
            kill(self.pid);
        }
    }
}

fn pipe() -> Result<(File, File)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating a pipe");
    }
    // SAFETY: pipe2 just returned these two descriptors, owned by nobody else.
    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })
}

/// Forks and execs `program` (a path: no PATH search) with `args` (argv[1..]), set up as `setup`
/// says. Done by hand rather than with std::process::Command because Command::spawn waits for the
/// exec, and a gated child must not exec before the collector is attached to its PID. The child
/// gets SIGKILL when the thread that spawned it ends (PR_SET_PDEATHSIG follows the thread), so
/// spawn from a thread that outlives it. A gated child dropped unreleased is killed; reap it with
/// [`wait`]. Until it execs, the child holds copies of every descriptor the parent had open at the
/// fork (close-on-exec ones close at the exec): a pipe another thread reads to its end stays open
/// while a child forked meanwhile waits at its gate.
pub fn spawn(program: &Path, args: &[String], setup: ChildSetup) -> Result<Spawned> {
    // Everything the child needs is made before fork: after fork it may not allocate.
    let path =
        CString::new(program.as_os_str().as_bytes()).context("program path has a NUL byte")?;
    let mut argv: Vec<CString> = vec![path.clone()];
    for arg in args {
        argv.push(CString::new(arg.as_bytes()).context("argument has a NUL byte")?);
    }
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    // The environment, only when some variable is set: else the child inherits ours (execv).
    let envp: Vec<CString> = if setup.env.is_empty() {
        Vec::new()
    } else {
        let set = |key: &std::ffi::OsStr| setup.env.iter().any(|(k, _)| key == k.as_str());
        let mut envp = Vec::new();
        for (key, value) in std::env::vars_os()
            .filter(|(k, _)| !set(k))
            .chain(setup.env.iter().map(|(k, v)| (k.into(), v.clone())))
        {
            let mut pair = key.into_vec();
            pair.push(b'=');
            pair.extend(value.into_vec());
            envp.push(CString::new(pair).context("environment variable has a NUL byte")?);
        }
        envp
    };
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    let envp_ptrs = (!setup.env.is_empty()).then_some(envp_ptrs);
    let optional_pipe =
        |wanted: bool| -> Result<Option<(File, File)>> { wanted.then(pipe).transpose() };
    let stdin = optional_pipe(setup.stdin == Stdio::Pipe)?;
    let stdout = optional_pipe(setup.stdout == Stdio::Pipe)?;
    let stderr = optional_pipe(setup.stderr == Stdio::Pipe)?;
    let gate = optional_pipe(setup.gated)?;
    let (exec_result_read, exec_result_write) = pipe()?;
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?;
    // The descriptor the child puts in place of one stream: -1 leaves the parent's own.
    let child_end = |how: Stdio, p: &Option<(File, File)>, read_end: bool| match how {
        Stdio::Inherit => -1,
        Stdio::Null => null.as_raw_fd(),
        Stdio::Pipe => p.as_ref().map_or(-1, |(r, w)| {
            if read_end {
                r.as_raw_fd()
            } else {
                w.as_raw_fd()
            }
        }),
    };
    let (stdin_fd, stdout_fd, stderr_fd) = (
        child_end(setup.stdin, &stdin, true),
        child_end(setup.stdout, &stdout, false),
        child_end(setup.stderr, &stderr, false),
    );
    let gate_fd = gate.as_ref().map_or(-1, |(r, _)| r.as_raw_fd());
    let exec_result_fd = exec_result_write.as_raw_fd();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };

    // SAFETY: fork is sound here because the child only makes async-signal-safe calls on memory
    // prepared above, then execs or _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // SAFETY: the child side of fork, see above.
        unsafe {
            child_after_fork(
                &setup,
                parent,
                [stdin_fd, stdout_fd, stderr_fd],
                gate_fd,
                exec_result_fd,
                &Exec {
                    path: &path,
                    argv: &argv_ptrs,
                    envp: envp_ptrs.as_deref(),
                },
            )
        }
    }
    drop(exec_result_write);
    drop(null);
    Ok(Spawned {
        pid: pid as u32,
        stdin: stdin.map(|(_, w)| w),
        stdout: stdout.map(|(r, _)| r),
        stderr: stderr.map(|(r, _)| r),
        gate: gate.map(|(_, w)| w),
        exec_result: exec_result_read,
    })
}

/// What the child execs: the program, its argv and, when a variable is set, its whole
/// environment (else it inherits ours); null-terminated arrays made before the fork.
struct Exec<'a> {
    path: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: Option<&'a [*const libc::c_char]>,
}

/// The child between fork and exec. Never returns.
///
/// # Safety
/// Must only be called in the child of a fork; every pointer must stay valid (they point into the
/// parent's memory, which the child has a copy of).
unsafe fn child_after_fork(
    setup: &ChildSetup,
    parent: libc::pid_t,
    stdio: [libc::c_int; 3],
    gate_fd: libc::c_int,
    exec_result_fd: libc::c_int,
    exec: &Exec,
) -> ! {
    let fail = |fd: libc::c_int| -> ! {
        let errno = *libc::__errno_location();
        libc::write(fd, errno.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(127)
    };
    // Die with the parent (the conductor): nothing may outlive a SIGKILLed run.
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    if libc::getppid() != parent {
        libc::_exit(127);
    }
    for (target, fd) in stdio.iter().enumerate() {
        let target = target as libc::c_int;
        // dup2 onto itself would keep CLOEXEC (when the parent's own 0-2 were closed).
        let ok = match *fd {
            fd if fd < 0 => true,
            fd if fd == target => libc::fcntl(fd, libc::F_SETFD, 0) == 0,
            fd => libc::dup2(fd, target) >= 0,
        };
        if !ok {
            fail(exec_result_fd);
        }
    }
    for file in &setup.cgroup_procs {
        let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
            fail(exec_result_fd);
        }
        libc::close(fd);
    }
    if setup.unlimited_nproc {
        let unlimited = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        libc::setrlimit(libc::RLIMIT_NPROC, &unlimited);
    }
    if gate_fd >= 0 {
        let mut byte = 0u8;
        if libc::read(gate_fd, (&mut byte as *mut u8).cast(), 1) != 1 {
            libc::_exit(127); // the parent went away without releasing us
        }
    }
    match exec.envp {
        Some(envp) => libc::execve(exec.path.as_ptr(), exec.argv.as_ptr(), envp.as_ptr()),
        None => libc::execv(exec.path.as_ptr(), exec.argv.as_ptr()),
    };
    fail(exec_result_fd)
}

/// Reaps the child with wait4: its exit and the rusage of it and all its threads.
pub fn wait(pid: u32) -> Result<(Exit, Rusage)> {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: status and ru are valid, writable out-parameters.
        let rc = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
        if rc == pid as i32 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err).context("waiting for the workload");
        }
    }
    let exit = if libc::WIFEXITED(status) {
        Exit {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else {
        Exit {
            code: None,
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        }
    };
    Ok((exit, Rusage::from(&ru)))
}

/// Sends SIGKILL to a process this process started.
pub fn kill(pid: u32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(gated: bool) -> ChildSetup {
        ChildSetup {
            cgroup_procs: vec![],
            unlimited_nproc: false,
            gated,
            stdin: Stdio::Null,
            stdout: Stdio::Pipe,
            stderr: Stdio::Null,
            env: vec![],
        }
    }

    #[test]
    fn gated_child_waits_and_rusage_is_the_childs() {
        let script =
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done; exit 7".to_string();
        let mut child = spawn(Path::new("/bin/sh"), &["-c".into(), script], setup(true)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let exe = std::fs::read_link(format!("/proc/{}/exe", child.pid)).unwrap();
        assert_eq!(
            exe,
            std::env::current_exe().unwrap(),
            "held before exec: still our own image"
        );
        child.release().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "done\n");
        let (exit, rusage) = wait(child.pid).unwrap();
        assert_eq!(
            exit,
            Exit {
                code: Some(7),
                signal: None
            }
        );
        assert!(
            rusage.user_us + rusage.sys_us > 0,
            "the loop took CPU time: {rusage:?}"
        );
        assert!(rusage.minflt > 0);
    }

    #[test]
    fn a_missing_program_is_an_error_not_a_hang() {
        let mut child = spawn(Path::new("/nonexistent/program"), &[], setup(true)).unwrap();
        let err = child.release().unwrap_err();
        assert!(format!("{err:#}").contains("No such file"), "{err:#}");
        let (exit, _) = wait(child.pid).unwrap();
        assert_eq!(exit.code, Some(127));
    }

    #[test]
    fn a_variable_set_for_the_child_is_seen_and_the_rest_inherited() {
        let path = std::env::var("PATH").unwrap_or_default();
        let mut with_env = setup(false);
        // Set twice over: PATH replaced, not doubled, the new variable added.
        with_env.env = vec![
            ("SPAWNSCOPE_LAUNCH_TEST".into(), "a b=c".into()),
            ("PATH".into(), format!("{path}:/nowhere").into()),
        ];
        let script = r#"echo "$SPAWNSCOPE_LAUNCH_TEST|$PATH|$(env | grep -c '^PATH=')""#;
        let mut child = spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            with_env,
        )
        .unwrap();
        child.release().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, format!("a b=c|{path}:/nowhere|1\n"));
        wait(child.pid).unwrap();
        // Without it, the child's environment is ours.
        let script = r#"echo "${SPAWNSCOPE_LAUNCH_TEST-unset}""#;
        let mut child = spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            setup(false),
        )
        .unwrap();
        child.release().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "unset\n");
        wait(child.pid).unwrap();
    }

    #[test]
    fn killed_child_reports_its_signal() {
        let mut child = spawn(Path::new("/bin/sleep"), &["30".into()], setup(false)).unwrap();
        child.release().unwrap();
        kill(child.pid);
        let (exit, _) = wait(child.pid).unwrap();
        assert_eq!(exit.signal, Some(libc::SIGKILL));
        assert!(exit.describe().contains("SIGKILL"));
    }

    #[test]
    fn a_gated_child_never_released_never_runs_the_program() {
        let marker = std::env::temp_dir().join(format!("spawnscope-held-{}", std::process::id()));
        let script = format!("echo ran > '{}'", marker.display());
        let child = spawn(Path::new("/bin/sh"), &["-c".into(), script], setup(true)).unwrap();
        let pid = child.pid;
        drop(child);
        let (exit, _) = wait(pid).unwrap();
        assert_eq!(exit.signal, Some(libc::SIGKILL));
        assert!(!marker.exists());
    }

    /// run.json files on disk hold these: the names and their order are a file format.
    #[test]
    fn rusage_and_exit_keep_their_json_form() {
        let ru = Rusage {
            user_us: 1,
            sys_us: 2,
            maxrss_kb: 3,
            minflt: 4,
            majflt: 5,
            nvcsw: 6,
            nivcsw: 7,
        };
        let text = serde_json::to_string(&ru).unwrap();
        assert_eq!(
            text,
            r#"{"user_us":1,"sys_us":2,"maxrss_kb":3,"minflt":4,"majflt":5,"nvcsw":6,"nivcsw":7}"#
        );
        assert_eq!(serde_json::from_str::<Rusage>(&text).unwrap(), ru);
        let exit = Exit {
            code: None,
            signal: Some(9),
        };
        assert_eq!(
            serde_json::to_string(&exit).unwrap(),
            r#"{"code":null,"signal":9}"#
        );
    }
}
