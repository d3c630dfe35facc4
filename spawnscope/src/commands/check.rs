//! `spawnscope check`: what this host can do for a run, each line with OK or the exact fix.

use std::fmt;
use std::path::Path;
use std::process::{Command, ExitCode};

use crate::cli::CheckArgs;
use analyse::comparisons::kernel_gaps::known_gaps;
use host::machine::transparent_hugepages;
use host::privileges::is_root;
use host::sysctl::{self, SysctlStore};
use host::{cgroup, procfs, tracefs};
use measure::examples;
use measure::preflight::default_budget;
use record::{CgroupVersion, Entry};
use runtime::Runtime;
use units::{bytes, count};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Works, with a limitation worth knowing.
    Warn,
    /// A run will lack this.
    Missing,
}

pub struct Line {
    pub status: Status,
    pub item: String,
    pub detail: String,
    pub fix: Option<String>,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.status {
            Status::Ok => "OK     ",
            Status::Warn => "WARN   ",
            Status::Missing => "MISSING",
        };
        write!(f, "{tag} {:<26} {}", self.item, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n        {:<26} fix: {fix}", "")?;
        }
        Ok(())
    }
}

fn line(status: Status, item: &str, detail: impl Into<String>, fix: Option<&str>) -> Line {
    Line {
        status,
        item: item.into(),
        detail: detail.into(),
        fix: fix.map(str::to_string),
    }
}

fn tool_version(program: &str, arg: &str) -> Option<String> {
    let out = Command::new(program).arg(arg).output().ok()?;
    let text = String::from_utf8_lossy(if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    })
    .into_owned();
    out.status
        .success()
        .then(|| text.lines().next().unwrap_or("").trim().to_string())
}

pub fn lines(args: &CheckArgs) -> Vec<Line> {
    let mut out = Vec::new();
    let root = is_root();
    out.push(if root {
        line(
            Status::Ok,
            "root",
            "yes: sysctls, cgroups, eBPF and perf are available",
            None,
        )
    } else {
        // A run still works without root; it says what it leaves out.
        line(
            Status::Warn,
            "root",
            "no: runs still measure time and memory, without sysctl tuning, a cgroup (no memory limit, no per-run charge), eBPF probes or perf",
            Some("sudo spawnscope … (or sudo ./scripts/trace.sh)"),
        )
    });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    out.push(line(Status::Ok, "kernel", kernel.trim(), None));
    // What the kernel matrix found to differ on this kernel, and what it means for the figures.
    let cgroup_v2 = cgroup::find("memory").is_some_and(|h| h.version == CgroupVersion::V2);
    for gap in known_gaps(kernel.trim(), cgroup_v2, &transparent_hugepages()) {
        out.push(line(Status::Warn, "known gap", gap, None));
    }
    out.push(if Path::new("/sys/kernel/btf/vmlinux").exists() {
        line(
            Status::Ok,
            "BTF",
            "/sys/kernel/btf/vmlinux: CO-RE probes and tp_btf load",
            None,
        )
    } else {
        line(
            Status::Warn,
            "BTF",
            "missing: probes fall back to classic tracepoints where they can",
            Some("a kernel built with CONFIG_DEBUG_INFO_BTF=y (most distribution kernels)"),
        )
    });
    let tracepoints = spawnscope_collector::tracepoints();
    match tracefs::events_dir() {
        Some(events) => {
            let missing: Vec<&str> = tracepoints.iter().copied().filter(|tp| !events.join(tp.replace(':', "/")).is_dir()).collect();
            out.push(if missing.is_empty() {
                line(Status::Ok, "tracepoints", format!("all {} the collector uses", tracepoints.len()), None)
            } else {
                line(Status::Warn, "tracepoints", format!("missing: {}", missing.join(", ")),
                     Some("a newer kernel; the probes for these are left out"))
            });
        }
        // Mounted but root-only (its usual mode 700): only root loads probes anyway.
        None if !root && tracefs::mounted() => out.push(line(Status::Ok, "tracefs",
            "mounted, readable by root only: the probes load there as root", None)),
        None => out.push(line(Status::Warn, "tracefs", "not mounted",
            Some("sudo mount -t tracefs nodev /sys/kernel/tracing (spawnscope run does this itself as root)"))),
    }
    out.push(match tool_version("perf", "--version") {
        Some(v) => {
            let paranoid =
                std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
            line(
                Status::Ok,
                "perf",
                format!("{v}; perf_event_paranoid {}", paranoid.trim()),
                None,
            )
        }
        None => line(
            Status::Missing,
            "perf",
            "not installed: no flame graphs or system-time attribution",
            Some("sudo apt-get install linux-perf (Debian) or linux-tools-$(uname -r) (Ubuntu)"),
        ),
    });
    out.push(match tool_version("bpftrace", "--version") {
        Some(v) => line(Status::Ok, "bpftrace", v, None),
        None => line(
            Status::Warn,
            "bpftrace",
            "not installed: the probes/*.bt tools need it",
            Some("sudo apt-get install bpftrace"),
        ),
    });
    let memory = cgroup::find("memory");
    let pids = cgroup::find("pids");
    out.push(match (&memory, &pids) {
        (Some(_), Some(_)) => line(Status::Ok, "cgroups", format!("{}; memory and pids controllers", cgroup::describe_host()), None),
        _ => line(Status::Warn, "cgroups", format!("{}; memory: {}, pids: {}", cgroup::describe_host(),
                  if memory.is_some() { "yes" } else { "no" }, if pids.is_some() { "yes" } else { "no" }),
                  Some("enable the memory and pids controllers (cgroup_enable=memory on the kernel command line)")),
    });
    for runtime in Runtime::ALL {
        out.push(match runtime.binary() {
            Ok(path) => line(
                Status::Ok,
                &format!("{} binary", runtime.name()),
                path.display().to_string(),
                None,
            ),
            Err(err) => line(
                Status::Missing,
                &format!("{} binary", runtime.name()),
                "not found",
                Some(&err.to_string()),
            ),
        });
    }
    // The studies' optional runtimes: a reproduction runs the programs whose runtime is here
    // and says of the others what this says.
    for (name, found) in examples::optional_runtimes(&examples::Toolchains::from_env()) {
        out.push(match found {
            Ok(version) => line(Status::Ok, name, version, None),
            Err(why) => line(Status::Warn, name, "not found (optional)", Some(&why)),
        });
    }
    let store = SysctlStore::system();
    if let Some(n) = args
        .n
        .filter(|_| args.runtime.describe().kernel_task_each())
    {
        match sysctl::needs_for_threads(n, procfs::tasks_on_host().unwrap_or(0)) {
            Ok(needs) => {
                for need in needs {
                    let current = store.read(&need.key).unwrap_or(0);
                    out.push(if current >= need.min {
                        line(Status::Ok, &need.key, format!("{current} ≥ {} needed for {} threads", need.min, count(n)), None)
                    } else {
                        line(Status::Warn, &need.key, format!("{current} < {} needed for {} threads ({}); run raises it and restores it", need.min, count(n), need.why),
                             Some(&format!("sudo spawnscope sysctl apply --n {n}  (or sysctl -w {}={})", need.key, need.min)))
                    });
                }
            }
            Err(err) => out.push(line(
                Status::Missing,
                "threads",
                err.to_string(),
                Some("a smaller --n"),
            )),
        }
    }
    if let Ok(raised) = store.entries() {
        // A run still going holds its raises and puts them back itself: nothing to restore.
        let (live, left): (Vec<_>, Vec<_>) = raised
            .into_iter()
            .partition(|e| sysctl::is_live_run(&e.owner));
        let said = |entries: &[Entry]| -> String {
            entries
                .iter()
                .map(|e| format!("{}={} (was {})", e.key, e.applied, e.original))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !live.is_empty() {
            out.push(line(
                Status::Ok,
                "sysctls of a running run",
                format!("{}; it restores them when it ends", said(&live)),
                None,
            ));
        }
        if !left.is_empty() {
            out.push(line(
                Status::Warn,
                "raised sysctls",
                said(&left),
                Some("sudo spawnscope sysctl restore"),
            ));
        }
    }
    // SAFETY: a zeroed rlimit is valid; getrlimit fills it.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: rl is a valid, writable rlimit.
    // RLIMIT_NPROC counts threads and processes: it matters only to runtimes whose tasks are
    // kernel tasks.
    if !root
        && args.runtime.describe().kernel_task_each()
        && unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut rl) } == 0
        && rl.rlim_cur != libc::RLIM_INFINITY
    {
        let short = args.n.is_some_and(|n| n > rl.rlim_cur);
        out.push(line(
            if short { Status::Warn } else { Status::Ok },
            "RLIMIT_NPROC",
            format!("{} tasks for this user (root is exempt)", rl.rlim_cur),
            short.then_some("run as root, or ulimit -u unlimited"),
        ));
    }
    let meminfo = procfs::meminfo().unwrap_or_default();
    let kb = |k: &str| meminfo.get(k).copied().unwrap_or(0) * 1024;
    let budget = default_budget().unwrap_or(0);
    let mut detail = format!(
        "{} total, {} available, {} for a run",
        bytes(kb("MemTotal") as f64),
        bytes(kb("MemAvailable") as f64),
        bytes(budget as f64)
    );
    let mut status = Status::Ok;
    if let Some(n) = args.n {
        // Rough figures per coexisting task measured on the project's dev VM; `run` calibrates.
        let d = args.runtime.describe();
        let need = d.rough_task_bytes * n as f64;
        detail.push_str(&format!(
            "; {} {}s alive at once need ≈{}",
            count(n),
            d.one_task,
            bytes(need)
        ));
        if need > budget as f64 {
            status = Status::Warn;
        }
    }
    out.push(line(
        status,
        "memory",
        detail,
        (status == Status::Warn)
            .then_some("a smaller --n, or the sleep workload (tasks do not coexist)"),
    ));
    out
}

/// `spawnscope check`: exit 1 when a run would lack something.
pub fn command(args: &CheckArgs) -> ExitCode {
    if let Some(major) = args.jdk_home {
        // For scripts (bench-chan.sh's Kotlin build): the JDK a reproduction would use.
        return match examples::Toolchains::from_env().jdks.find(major) {
            Ok(jdk) => {
                println!("{}", jdk.home.display());
                ExitCode::SUCCESS
            }
            Err(why) => {
                eprintln!("spawnscope check: {why}");
                ExitCode::from(1)
            }
        };
    }
    let lines = lines(args);
    for l in &lines {
        println!("{l}");
    }
    if lines.iter().any(|l| l.status == Status::Missing) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
