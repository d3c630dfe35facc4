//! The load on a `serve` run: wrk, started when the server listens, one process per address it
//! listens on (one source address holds about as many connections to one address as there are
//! ephemeral ports), each holding its share of the connections for --duration. Its figures come
//! from wrk's own `done` hook as one JSON line, not from its human output.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::{Context, Result};

use host::clock::monotonic_ns;
use host::{binary, limits, sysctl};
use record::loadgen::{LoadProcess, LoadRecord, WrkReport};

/// The line wrk's `done` hook starts its JSON with.
const REPORT_MARK: &str = "SPAWNSCOPE_WRK ";

/// wrk's `done` hook (LuaJIT): the summary, errors and latency percentiles as one JSON line.
/// Numbers go through %.0f: LuaJIT's %d truncates past 2^31.
pub const WRK_SCRIPT: &str = r#"-- spawnscope: wrk's figures as one JSON line (measure/loadgen.rs reads it)
done = function(summary, latency, requests)
  local e = summary.errors
  local lat = "null"
  -- Responses all later than --timeout leave the histogram empty (min > max): no latency then.
  if summary.requests > 0 and latency.min <= latency.max then
    lat = string.format('{"min":%.0f,"max":%.0f,"mean":%.1f,"stdev":%.1f,"p50":%.0f,"p75":%.0f,"p90":%.0f,"p99":%.0f,"p999":%.0f}',
      latency.min, latency.max, latency.mean, latency.stdev, latency:percentile(50),
      latency:percentile(75), latency:percentile(90), latency:percentile(99), latency:percentile(99.9))
  end
  io.write(string.format('SPAWNSCOPE_WRK {"duration_us":%.0f,"requests":%.0f,"bytes":%.0f,"errors":{"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f},"latency_us":%s}\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, lat))
end
"#;

/// What to put on the server.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadPlan {
    pub connections: u64,
    /// wrk threads in all (each process gets its share, at least one, at most its connections).
    pub threads: u64,
    pub duration: Duration,
    pub timeout: Duration,
}

/// `run`'s load options (its "Load" flags); compare passes the same to every serve cell.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadOptions {
    pub duration: Duration,
    /// wrk threads in all [None: one per CPU, at most one per connection].
    pub threads: Option<u64>,
    /// A wrk thread per connection, as the 2023 server article ran it (-t = -c).
    pub thread_per_connection: bool,
    pub timeout: Duration,
}

impl Default for LoadOptions {
    /// 10 s of load; wrk's own 2 s timeout.
    fn default() -> Self {
        LoadOptions {
            duration: Duration::from_secs(10),
            threads: None,
            thread_per_connection: false,
            timeout: Duration::from_secs(2),
        }
    }
}

impl LoadOptions {
    /// The load for a server of `connections`.
    pub fn plan(&self, connections: u64) -> LoadPlan {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        let threads = match (self.thread_per_connection, self.threads) {
            (true, _) => connections,
            (false, Some(t)) => t,
            (false, None) => cpus,
        };
        LoadPlan {
            connections,
            threads: threads.clamp(1, connections.max(1)),
            duration: self.duration,
            timeout: self.timeout,
        }
    }
}

/// Descriptors a process needs beside its connections: stdio, listeners, epoll, the runtime's
/// own (Go's netpoller, tokio's driver), with room.
const FILES_ROOM: u64 = 64;

/// The open files one process needs to hold `connections` (and an epoll per thread for wrk).
pub fn files_needed(connections: u64, threads: u64) -> u64 {
    connections + threads + FILES_ROOM
}

/// Whether the server (its connections and `addresses` listeners) and every wrk process can be
/// given the open files they need, `reachable` being the most a child of ours can get and why
/// (`limits::open_files_reachable`); the reason in one line when not.
pub fn open_files_check(
    plan: &LoadPlan,
    addresses: u64,
    reachable: &(u64, String),
) -> Result<(), String> {
    let (most, why) = reachable;
    let server = files_needed(plan.connections, addresses);
    // With the threads wanted, not the divisor `split` gives: never fewer, and a need that grows
    // with the connections, so that `most_connections` finds the largest that fits and any
    // fewer fit too.
    let wrk = shares(plan, addresses as usize)
        .iter()
        .map(|(c, t)| files_needed(*c, *t))
        .max()
        .unwrap_or(0);
    let (who, needed) = if server >= wrk {
        ("the server", server)
    } else {
        ("each wrk process", wrk)
    };
    if needed <= *most {
        return Ok(());
    }
    Err(format!(
        "{} connections need {} open files in {who}, and {} is {why}",
        units::count(plan.connections),
        units::count(needed),
        units::count(*most)
    ))
}

/// The most connections, up to `requested`, whose server and wrk get the open files they need,
/// listening on the addresses the user gave (--addrs) or else those a server of C gets. Every
/// number below it fits too.
pub fn most_connections(
    requested: u64,
    options: &LoadOptions,
    addresses_given: Option<u64>,
    reachable: &(u64, String),
) -> u64 {
    let fits = |c: u64| {
        let addresses = addresses_given.unwrap_or_else(|| sysctl::addresses_for(c));
        open_files_check(&options.plan(c), addresses, reachable).is_ok()
    };
    if fits(requested) {
        return requested;
    }
    // Fewer connections never need more files: the largest that fits, by bisection.
    let (mut low, mut high) = (0, requested);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// The wrk binary, or what to install.
pub fn wrk() -> Result<PathBuf, String> {
    binary::resolve_program("wrk").ok_or_else(|| {
        "serve needs the load generator wrk: sudo apt-get install wrk (Debian, Ubuntu)".to_string()
    })
}

/// wrk's version, from `wrk --version` ("wrk debian/4.1.0-3+b2 [epoll] …").
pub fn wrk_version(wrk: &Path) -> Option<String> {
    let out = Command::new(wrk).arg("--version").output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    (words.len() == 2 && words[0] == "wrk").then(|| words[1].to_string())
}

/// How the connections and threads are split over the addresses: (connections, threads) each,
/// in address order; the first addresses take the remainders.
pub fn split(plan: &LoadPlan, addresses: usize) -> Vec<(u64, u64)> {
    shares(plan, addresses)
        .into_iter()
        .map(|(connections, wanted)| {
            // wrk gives each thread connections / threads, rounded down: a divisor of the
            // connections opens all of them.
            let threads = (1..=wanted)
                .rev()
                .find(|t| connections % t == 0)
                .unwrap_or(1);
            (connections, threads)
        })
        .collect()
}

/// Each address's connections and the wrk threads wanted for them (at least one, at most one
/// per connection), before `split` makes them a divisor: the most threads a process gets.
fn shares(plan: &LoadPlan, addresses: usize) -> Vec<(u64, u64)> {
    let k = addresses.max(1) as u64;
    let share = |total: u64, i: u64| total / k + u64::from(i < total % k);
    (0..k)
        .map(|i| {
            let connections = share(plan.connections, i);
            let wanted = share(plan.threads.max(k), i).clamp(1, connections.max(1));
            (connections, wanted)
        })
        .filter(|(c, _)| *c > 0)
        .collect()
}

/// wrk reads whole seconds only ("2s, 2m, 2h"): rounded up, at least one.
fn whole_seconds(d: Duration) -> u64 {
    (d.as_millis().div_ceil(1000) as u64).max(1)
}

/// The wrk arguments for one process.
pub fn argv(
    wrk: &Path,
    script: &Path,
    plan: &LoadPlan,
    addr: &str,
    (connections, threads): (u64, u64),
) -> Vec<String> {
    let secs = |d: Duration| format!("{}s", whole_seconds(d));
    vec![
        wrk.display().to_string(),
        format!("-t{threads}"),
        format!("-c{connections}"),
        format!("-d{}", secs(plan.duration)),
        format!("--timeout={}", secs(plan.timeout)),
        "--latency".into(),
        "-s".into(),
        script.display().to_string(),
        format!("http://{addr}/"),
    ]
}

/// The report in a wrk process's output (its `done` hook's line).
pub fn parse_report(output: &str) -> Option<WrkReport> {
    output
        .lines()
        .find_map(|line| line.strip_prefix(REPORT_MARK))
        .and_then(|json| serde_json::from_str(json).ok())
}

/// The load's processes, shared by the thread that starts them and the follower that stops them.
#[derive(Clone, Default)]
pub struct Running(Arc<Mutex<Processes>>);

#[derive(Default)]
struct Processes {
    /// Still running (not yet reaped): the only ones [`stop`] may signal.
    pids: Vec<u32>,
    /// The load was stopped: no process starts after it (the server may be gone before wrk is).
    stopped: bool,
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, Processes> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal(&self, signal: libc::c_int) {
        for &pid in &self.lock().pids {
            // SAFETY: kill has no memory-safety preconditions; `pid` is our unreaped child.
            unsafe { libc::kill(pid as i32, signal) };
        }
    }
}

/// Ends the load early (the server is gone): SIGINT, on which wrk stops and prints its figures,
/// and no process of it starts from now on. Only processes not yet reaped are signalled, so the
/// PID cannot belong to another process.
pub fn stop(running: &Running) {
    running.lock().stopped = true;
    running.signal(libc::SIGINT);
}

/// The load's processes, stopped (`stop_and_wait`) when this is dropped: whatever way the
/// follower leaves (an error while reading the server's output too), no wrk outlives the run.
#[derive(Default)]
pub struct StoppedOnDrop(pub Running);

impl Drop for StoppedOnDrop {
    fn drop(&mut self) {
        stop_and_wait(&self.0);
    }
}

/// Stops what still runs of the load and waits until it is reaped: SIGINT every 100 ms (wrk
/// ignores it while it is still starting its threads), SIGKILL after 5 s.
pub fn stop_and_wait(running: &Running) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        stop(running);
        if running.lock().pids.is_empty() {
            return;
        }
        if std::time::Instant::now() >= deadline {
            running.signal(libc::SIGKILL);
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for a wrk process: its exit code (None when a signal ended it) and CPU time. It is
/// taken off `running` after it exited and before it is reaped.
fn reap(pid: u32, running: &Running) -> (Option<i32>, Option<u64>) {
    // SAFETY: a zeroed siginfo is valid; WNOWAIT leaves the child to be reaped below.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
    running.lock().pids.retain(|&p| p != pid);
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 fills both for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) } != pid as i32 {
        return (None, None);
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, Some(ns(usage.ru_utime) + ns(usage.ru_stime)))
}

/// The load running: joined, it gives the record of every process.
pub struct Load {
    handles: Vec<JoinHandle<LoadProcess>>,
    record: LoadRecord,
}

/// Starts one wrk per address (RLIMIT_NOFILE raised in the child for its connections). `script`
/// is where the `done` hook is written (the results directory: the input kept with the output).
pub fn start(plan: &LoadPlan, addrs: &[String], script: &Path, running: &Running) -> Result<Load> {
    let wrk = wrk().map_err(anyhow::Error::msg)?;
    std::fs::write(script, WRK_SCRIPT).with_context(|| format!("writing {}", script.display()))?;
    let shares = split(plan, addrs.len());
    let wanted = limits::nofile_for(shares.iter().map(|(c, _)| *c).max().unwrap_or(0));
    let limit = limits::open_files_limit(
        wanted,
        limits::open_files_now().rlim_max,
        limits::can_raise_hard_limits(),
    );
    let nofile = limit.rlim_cur;
    let record = LoadRecord {
        tool: "wrk".into(),
        version: wrk_version(&wrk),
        connections: plan.connections,
        threads: shares.iter().map(|(_, t)| t).sum(),
        // As wrk was given them: whole seconds.
        duration_ns: whole_seconds(plan.duration) * 1_000_000_000,
        timeout_ns: whole_seconds(plan.timeout) * 1_000_000_000,
        nofile,
        ..Default::default()
    };
    let mut handles = Vec::new();
    for (addr, share) in addrs.iter().zip(shares) {
        let argv = argv(&wrk, script, plan, addr, share);
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let started_t_ns = monotonic_ns();
        // Started under the lock, so that a stop either comes first (and nothing starts) or
        // finds the PID to signal.
        let child = {
            let mut processes = running.lock();
            if processes.stopped {
                Err(std::io::Error::other(
                    "the load was stopped before it started (the server ended)",
                ))
            } else {
                let child = command.spawn();
                if let Ok(child) = &child {
                    processes.pids.push(child.id());
                }
                child
            }
        };
        let addr = addr.clone();
        let running = running.clone();
        handles.push(thread::spawn(move || {
            let mut process = LoadProcess {
                argv,
                addr,
                connections: share.0,
                threads: share.1,
                started_t_ns,
                ..Default::default()
            };
            match child {
                Ok(mut child) => {
                    // wrk prints only at the end: read stdout whole, then stderr.
                    let mut output = String::new();
                    if let Some(mut out) = child.stdout.take() {
                        let _ = out.read_to_string(&mut output);
                    }
                    if let Some(mut err) = child.stderr.take() {
                        let _ = err.read_to_string(&mut output);
                    }
                    (process.exit_code, process.cpu_ns) = reap(child.id(), &running);
                    process.report = parse_report(&output);
                    process.output = output;
                }
                Err(err) => process.output = format!("could not start wrk: {err}"),
            }
            process.ended_t_ns = monotonic_ns();
            process
        }));
    }
    Ok(Load { handles, record })
}

impl Load {
    /// Waits for every process and gives the record.
    pub fn finish(self) -> LoadRecord {
        let mut record = self.record;
        for handle in self.handles {
            match handle.join() {
                Ok(process) => record.processes.push(process),
                Err(_) => record.failed = Some("a load thread panicked".into()),
            }
        }
        if record.failed.is_none() && record.processes.iter().any(|p| p.report.is_none()) {
            record.failed = Some("a wrk process printed no report (see its output)".into());
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(connections: u64, threads: u64) -> LoadPlan {
        LoadPlan {
            connections,
            threads,
            duration: Duration::from_secs(30),
            timeout: Duration::from_secs(15),
        }
    }

    #[test]
    fn connections_and_threads_are_shared_over_the_addresses() {
        assert_eq!(split(&plan(10, 2), 1), vec![(10, 2)]);
        // wrk opens connections / threads per thread, rounded down: threads divide them.
        assert_eq!(split(&plan(100_001, 4), 2), vec![(50_001, 1), (50_000, 2)]);
        assert_eq!(split(&plan(1_000, 16), 1), vec![(1_000, 10)]);
        // More threads than connections: wrk refuses, so a process gets at most its connections.
        assert_eq!(split(&plan(3, 8), 1), vec![(3, 3)]);
        // More addresses than threads: one thread each.
        assert_eq!(split(&plan(9, 1), 3), vec![(3, 1), (3, 1), (3, 1)]);
        assert_eq!(split(&plan(2, 1), 3), vec![(1, 1), (1, 1)]);
    }

    #[test]
    fn the_article_flags_are_passed() {
        let argv = argv(
            Path::new("/usr/bin/wrk"),
            Path::new("/r/wrk.lua"),
            &plan(1000, 1000),
            "127.0.0.1:8080",
            (1000, 1000),
        );
        assert_eq!(
            argv.join(" "),
            "/usr/bin/wrk -t1000 -c1000 -d30s --timeout=15s --latency -s /r/wrk.lua http://127.0.0.1:8080/"
        );
    }

    #[test]
    fn the_report_line_is_found_among_wrk_output() {
        let output = "Running 1s test @ http://127.0.0.1:1/\n  1 threads and 1 connections\n\
            SPAWNSCOPE_WRK {\"duration_us\":1000412,\"requests\":27,\"bytes\":4000,\"errors\":{\"connect\":0,\"read\":1,\"write\":0,\"status\":2,\"timeout\":3},\"latency_us\":{\"min\":10,\"max\":900,\"mean\":35.5,\"stdev\":4.2,\"p50\":30,\"p75\":40,\"p90\":50,\"p99\":800,\"p999\":900}}\n\
            Requests/sec: 27\n";
        let report = parse_report(output).unwrap();
        assert_eq!((report.requests, report.errors.timeout), (27, 3));
        assert_eq!(report.latency_us.unwrap().p99, 800);
        let none = "SPAWNSCOPE_WRK {\"duration_us\":1,\"requests\":0,\"bytes\":0,\"errors\":{\"connect\":5,\"read\":0,\"write\":0,\"status\":0,\"timeout\":0},\"latency_us\":null}";
        let report = parse_report(none).unwrap();
        assert_eq!((report.errors.connect, report.latency_us), (5, None));
        assert_eq!(parse_report("Requests/sec: 1\n"), None);
    }

    /// wrk itself, against a listener that answers one fixed response: the hook's line is there
    /// and parses. Skips (saying so) where wrk is not installed.
    #[test]
    fn wrk_runs_the_hook() {
        let Ok(_) = wrk() else {
            eprintln!("skipped: wrk is not installed (apt-get install wrk)");
            return;
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        thread::spawn(move || {
            use std::io::Write;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0
                            || stream
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let plan = LoadPlan {
            duration: Duration::from_millis(500),
            ..plan(4, 2)
        };
        let record = start(
            &plan,
            &[addr],
            &dir.path().join("wrk.lua"),
            &Running::default(),
        )
        .unwrap()
        .finish();
        assert_eq!(record.failed, None, "{record:?}");
        let report = record.processes[0].report.clone().unwrap();
        assert!(report.requests > 0, "{record:?}");
        assert_eq!(report.errors.connect, 0);
        assert!(record.version.is_some());
    }

    /// The largest number of connections found fits, one more does not, and any fewer fit (the
    /// rounded number compare runs too), whatever the CPUs and the limit.
    #[test]
    fn the_most_connections_fit_and_so_does_any_fewer() {
        let addresses = sysctl::addresses_for;
        for (threads, per_connection) in
            [(1, false), (2, false), (40, false), (150, false), (1, true)]
        {
            let options = LoadOptions {
                threads: Some(threads),
                thread_per_connection: per_connection,
                ..Default::default()
            };
            for limit in [1_500, 4_096, 20_000, 200_000] {
                let reachable = (limit, "a limit".to_string());
                let fits =
                    |c: u64| open_files_check(&options.plan(c), addresses(c), &reachable).is_ok();
                let most = most_connections(150_000, &options, None, &reachable);
                let case = format!(
                    "{threads} threads (per connection: {per_connection}), {limit} files: {most}"
                );
                assert!(fits(most), "{case}");
                assert!(most == 150_000 || !fits(most + 1), "{case}");
                for fewer in [most - 1, most / 2, 1, crate::preflight::round_down(most)] {
                    assert!(fits(fewer), "{case}, {fewer}");
                }
            }
        }
    }

    /// A load stopped before its processes start (the server ended right after it listened)
    /// starts none: nothing would be left to signal, and wrk would load a dead address.
    #[test]
    fn a_load_stopped_first_starts_nothing() {
        let Ok(_) = wrk() else {
            eprintln!("skipped: wrk is not installed (apt-get install wrk)");
            return;
        };
        let running = Running::default();
        stop_and_wait(&running);
        let dir = tempfile::tempdir().unwrap();
        let record = start(
            &plan(4, 2),
            &["127.0.0.1:9".to_string()],
            &dir.path().join("wrk.lua"),
            &running,
        )
        .unwrap()
        .finish();
        let process = &record.processes[0];
        assert!(
            process.output.contains("stopped before it started"),
            "{process:?}"
        );
        assert_eq!(process.report, None);
        assert!(record.failed.is_some());
        assert!(running.lock().pids.is_empty());
    }
}
