//! `serve` under load (root): each runtime's server holds 1,000 connections from wrk, and the
//! run says what wrk measured, what one connection and one request cost, with the limits a server
//! needs raised for the run and put back; a server OOM-killed in a 10 MiB cgroup is reported as
//! exactly that, and the host is left as it was.

mod common;

use std::fs;
use std::net::TcpStream;
use std::path::Path;

use common::*;
use serde_json::Value;

/// The network sysctls a serve run manages, as the kernel prints them.
const NET_KEYS: [&str; 5] = [
    "fs/nr_open",
    "fs/file-max",
    "net/core/somaxconn",
    "net/ipv4/tcp_max_syn_backlog",
    "net/ipv4/ip_local_port_range",
];

fn net_sysctls() -> Vec<String> {
    NET_KEYS
        .iter()
        .map(|k| fs::read_to_string(Path::new("/proc/sys").join(k)).unwrap())
        .collect()
}

/// Sets net.core.somaxconn for the length of a test, so that a run of 1,000 connections has it
/// to raise; the machine's value comes back on drop.
struct Somaxconn(String);

impl Somaxconn {
    fn lowered_to(value: u64) -> Self {
        let path = "/proc/sys/net/core/somaxconn";
        let original = fs::read_to_string(path).unwrap();
        fs::write(path, format!("{value}\n")).unwrap();
        Somaxconn(original)
    }
}

impl Drop for Somaxconn {
    fn drop(&mut self) {
        let _ = fs::write("/proc/sys/net/core/somaxconn", &self.0);
    }
}

fn wrk_installed() -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("wrk").is_file())
}

fn skip(test: &str) -> bool {
    if skip_unless_root(test) {
        return true;
    }
    if !wrk_installed() {
        eprintln!("SKIP {test}: wrk is not installed (apt-get install wrk)");
        return true;
    }
    false
}

/// The addresses the server listened on (its `listening` event).
fn listened_on(dir: &Path) -> Vec<String> {
    events_so_far(dir)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "listening")
        .map(|e| {
            e["addrs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The sum of the per-request counts of these metrics.
fn per_request(summary: &Value, metrics: &[&str]) -> f64 {
    summary["serve"]["per_request"]["kernel"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|k| metrics.contains(&k["metric"].as_str().unwrap_or("")))
        .map(|k| k["per_request"].as_f64().unwrap())
        .sum()
}

fn serves_1000_connections(runtime: &str) {
    let _one = serial();
    let before = net_sysctls();
    let sandbox = Sandbox::new();
    let out = sandbox.run(&[
        "--runtime",
        runtime,
        "--workload",
        "serve",
        "--n",
        "1000",
        "--duration",
        "3s",
        "--work",
        "body=1K",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let dir = sandbox.only_results_dir();
    assert_matches_schemas(&dir);
    let summary = read_json(dir.join("summary.json"));
    let serve = &summary["serve"];
    // wrk's figures.
    let load = &serve["load"];
    assert!(load["requests"].as_u64().unwrap() > 1000, "{load}");
    assert!(load["requests_per_s"].as_f64().unwrap() > 0.0, "{load}");
    assert_eq!(load["errors"]["connect"], 0, "{load}");
    assert!(load["latency_ms"]["p99"].as_f64().unwrap() > 0.0, "{load}");
    assert_eq!(serve["fell_over"], false, "{serve}");
    // The server's own counts: every connection was open at once (its `peak`).
    let server = &serve["server"];
    assert!(
        server["connections_max_open"].as_u64().unwrap() >= 1000,
        "{server}"
    );
    assert!(server["requests"].as_u64().unwrap() >= load["requests"].as_u64().unwrap());
    // One connection: memory measured with the 1,000 open, socket buffers counted apart.
    let conn = &serve["per_connection"];
    assert_eq!(conn["open"], 1000, "{conn}");
    assert!(conn["memory_kib"].as_f64().unwrap() > 0.0, "{conn}");
    assert!(conn["socket_kib"].is_number(), "{conn}");
    // One request: CPU time and its system calls, counted in the kernel in the `load` phase.
    let request = &serve["per_request"];
    assert!(request["sys_us"].as_f64().unwrap() > 0.0, "{request}");
    // Calls that read data (EAGAIN reads of a non-blocking socket are counted apart).
    let reads =
        per_request(&summary, &["net_reads"]) - per_request(&summary, &["net_reads_eagain"]);
    let writes = per_request(&summary, &["net_writes"]);
    // A response is one write call; a request at least one read (plus those that found nothing).
    assert!(
        (0.95..=1.2).contains(&writes),
        "writes per request {writes}: {request}"
    );
    assert!(reads >= 0.95, "reads per request {reads}: {request}");
    // Raw records kept: the load's record and the hook it ran with.
    assert!(dir.join("load.json").is_file() && dir.join("wrk.lua").is_file());
    // Nothing left listening, the limits as they were.
    let addrs = listened_on(&dir);
    assert!(!addrs.is_empty());
    for addr in addrs {
        assert!(TcpStream::connect(&addr).is_err(), "{addr} still accepts");
    }
    assert_eq!(net_sysctls(), before);
}

#[test]
fn threads_serve_1000_connections() {
    if skip("threads_serve_1000_connections") {
        return;
    }
    serves_1000_connections("threads");
}

#[test]
fn goroutines_serve_1000_connections() {
    if skip("goroutines_serve_1000_connections") {
        return;
    }
    serves_1000_connections("goroutines");
}

#[test]
fn tokio_serves_1000_connections() {
    if skip("tokio_serves_1000_connections") {
        return;
    }
    serves_1000_connections("tokio");
}

/// What a server of 1,000 connections needs is raised for the run only: the accept queue
/// (somaxconn, lowered here first so there is something to raise) comes back to its value.
#[test]
fn the_accept_queue_is_raised_for_the_run_and_restored() {
    if skip("the_accept_queue_is_raised_for_the_run_and_restored") {
        return;
    }
    let _one = serial();
    let lowered = Somaxconn::lowered_to(128);
    let sandbox = Sandbox::new();
    let out = sandbox.run(&[
        "--runtime",
        "goroutines",
        "--workload",
        "serve",
        "--n",
        "1000",
        "--duration",
        "1s",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = read_json(sandbox.only_results_dir().join("sysctl.json"));
    let change = record["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "net.core.somaxconn")
        .cloned()
        .unwrap_or_else(|| panic!("somaxconn raised: {record}"));
    assert_eq!(
        (change["from"].as_u64(), change["to"].as_u64()),
        (Some(128), Some(1000))
    );
    assert_eq!(
        fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim(),
        "128",
        "restored"
    );
    drop(lowered);
}

/// The article's 10 MB limit on a thread per connection: the server is OOM-killed in its cgroup,
/// the run says so in those words, and the host is as before (no process, no cgroup, limits
/// back).
#[test]
fn a_server_oom_killed_in_10_mib_is_reported_as_such() {
    if skip("a_server_oom_killed_in_10_mib_is_reported_as_such") {
        return;
    }
    let _one = serial();
    let before = (net_sysctls(), sysctls());
    let sandbox = Sandbox::new();
    let out = sandbox.run(&[
        "--runtime",
        "threads",
        "--workload",
        "serve",
        "--n",
        "3000",
        "--duration",
        "3s",
        "--memory-limit",
        "10M",
        "--force",
        // The article's servers had no guard: without one, the kernel is what stops them.
        "--reserve",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let dir = sandbox.only_results_dir();
    let run = read_json(dir.join("run.json"));
    assert_eq!(run["oom_killed"], true, "{stderr}");
    let summary = read_json(dir.join("summary.json"));
    let serve = &summary["serve"];
    assert_eq!(serve["fell_over"], true, "{serve}");
    let happened = serve["happened"].to_string();
    assert!(
        happened.contains("OOM-killed in its cgroup (memory limit 10.0 MiB)"),
        "{happened}"
    );
    // wrk was stopped when the server died, not left loading a dead address for its 3 s.
    let load = read_json(dir.join("load.json"));
    let measured_us = load["processes"][0]["report"]["duration_us"]
        .as_u64()
        .unwrap();
    assert!(measured_us < 2_500_000, "wrk ran {measured_us} µs: {load}");
    assert!(run_cgroups().is_empty(), "{:?}", run_cgroups());
    assert_eq!((net_sysctls(), sysctls()), before);
    for addr in listened_on(&dir) {
        assert!(TcpStream::connect(&addr).is_err(), "{addr} still accepts");
    }
    // The host still starts processes.
    assert!(std::process::Command::new("true")
        .status()
        .unwrap()
        .success());
}

/// `--addrs 2`: the server listens on 127.0.0.1 and 127.0.0.2, one wrk process loads each with
/// half the connections, and the run sums them (latency quantiles then a weighted mean, marked
/// so). Past 30,000 connections the run does this by itself; here it is asked for, at 2,000.
#[test]
fn two_addresses_split_the_load_over_two_wrk_processes() {
    if skip("two_addresses_split_the_load_over_two_wrk_processes") {
        return;
    }
    let _one = serial();
    let before = net_sysctls();
    let sandbox = Sandbox::new();
    let out = sandbox.run(&[
        "--runtime",
        "tokio",
        "--workload",
        "serve",
        "--n",
        "2000",
        "--addrs",
        "2",
        "--duration",
        "2s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let dir = sandbox.only_results_dir();
    let mut addrs = listened_on(&dir);
    addrs.sort();
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    assert!(addrs[0].starts_with("127.0.0.1:") && addrs[1].starts_with("127.0.0.2:"));
    let load = read_json(dir.join("load.json"));
    let processes = load["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2, "{load}");
    let mut loaded: Vec<String> = Vec::new();
    for p in processes {
        assert_eq!(p["connections"], 1000, "{p}");
        let report = &p["report"];
        assert!(report["requests"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(report["errors"]["connect"], 0, "{p}");
        loaded.push(p["addr"].as_str().unwrap().to_string());
    }
    loaded.sort();
    assert_eq!(loaded, addrs, "one wrk per address the server listened on");
    let summary = read_json(dir.join("summary.json"));
    let figures = &summary["serve"]["load"];
    assert_eq!(figures["processes"], 2, "{figures}");
    assert_eq!(figures["latency_exact"], false, "{figures}");
    let both: u64 = processes
        .iter()
        .map(|p| p["report"]["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(figures["requests"].as_u64(), Some(both));
    let server = &summary["serve"]["server"];
    assert!(
        server["connections_max_open"].as_u64().unwrap() >= 2000,
        "{server}"
    );
    for addr in addrs {
        assert!(TcpStream::connect(&addr).is_err(), "{addr} still accepts");
    }
    assert_eq!(net_sysctls(), before);
}

/// CAP_SYS_RESOURCE (capability(7)).
const CAP_SYS_RESOURCE: u32 = 24;

/// capget/capset's header and data (linux/capability.h, version 3: two 32-bit words).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// In a child before its exec: CAP_SYS_RESOURCE out of the bounding and inheritable sets, so the
/// root program it execs does not get it (root's exec takes the bounding set | inheritable).
fn drop_cap_sys_resource() -> std::io::Result<()> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget/capset with a version-3 header and two data words, as the kernel expects;
    // prctl(PR_CAPBSET_DROP) takes a capability number.
    unsafe {
        if libc::prctl(
            libc::PR_CAPBSET_DROP,
            CAP_SYS_RESOURCE as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) != 0
            || libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        data[0].inheritable &= !(1 << CAP_SYS_RESOURCE);
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A server of more connections than a process of ours may open (its hard RLIMIT_NOFILE, which
/// it cannot raise without CAP_SYS_RESOURCE) is refused before anything changes, with the most
/// it could hold: the run would otherwise measure EMFILE, not the server.
#[test]
fn more_connections_than_files_allowed_are_refused_before_anything_changes() {
    if skip("more_connections_than_files_allowed_are_refused_before_anything_changes") {
        return;
    }
    let _one = serial();
    let before = (net_sysctls(), sysctls());
    let sandbox = Sandbox::new();
    let out_dir = sandbox.out();
    let mut command = sandbox.command(&[
        "run",
        "--out",
        out_dir.to_str().unwrap(),
        "--runtime",
        "tokio",
        "--workload",
        "serve",
        "--n",
        "3000",
    ]);
    // SAFETY: setrlimit, prctl, capget and capset are system calls; nothing else runs before
    // exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            // Lowering is always allowed.
            let low = libc::rlimit {
                rlim_cur: 1500,
                rlim_max: 1500,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &low) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            drop_cap_sys_resource()
        });
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("3,000 connections need")
            && stderr.contains("1,500 is RLIMIT_NOFILE's hard limit"),
        "{stderr}"
    );
    // The most it could hold: under 1,500 less what wrk's threads (one per CPU) and the room
    // take.
    let most: u64 = stderr
        .split("at most ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .map(|n| n.replace(',', "").parse().unwrap())
        .unwrap_or_else(|| panic!("no 'at most': {stderr}"));
    assert!((1_000..1_500).contains(&most), "{stderr}");
    assert!(
        !out_dir.exists() || fs::read_dir(&out_dir).unwrap().next().is_none(),
        "no results directory for a refused run"
    );
    assert!(run_cgroups().is_empty(), "{:?}", run_cgroups());
    assert_eq!((net_sysctls(), sysctls()), before);
}
