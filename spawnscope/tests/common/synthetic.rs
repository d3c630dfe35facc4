//! Synthetic results directories: the raw records `spawnscope run` writes, with figures that
//! follow exact lines over N (so a regression over them has a known answer), for `report`,
//! `compare`'s analysis and the HTML page to be tested without running anything.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// A figure that is `fixed + per_task * n` (plus `noise`, added as given).
#[derive(Clone, Copy, Debug)]
pub struct Line {
    pub per_task: f64,
    pub fixed: f64,
}

pub const fn line(per_task: f64, fixed: f64) -> Line {
    Line { per_task, fixed }
}

impl Line {
    pub fn at(&self, n: u64) -> f64 {
        self.fixed + self.per_task * n as f64
    }
}

/// A whole number of kB, µs or counts, as the kernel gives them (exact for the N used here).
fn u(x: f64) -> u64 {
    assert!(
        x >= 0.0 && x.fract() == 0.0,
        "{x} is not a whole number: pick N so it is"
    );
    x as u64
}

/// What one runtime costs in a synthetic world: memory in kB, times in µs.
#[derive(Clone, Copy, Debug)]
pub struct World {
    pub runtime: &'static str,
    pub rss_kb: Line,
    pub kernel_stack_kb: Line,
    pub page_tables_kb: Line,
    pub slab_kb: Line,
    pub user_us: Line,
    pub sys_us: Line,
    pub wall_us: Line,
    pub minor_faults: Line,
    pub voluntary: Line,
    pub involuntary: Line,
}

pub const THREADS: World = World {
    runtime: "threads",
    rss_kb: line(9.5, 2_048.0),
    kernel_stack_kb: line(16.0, 0.0),
    page_tables_kb: line(4.0, 8.0),
    slab_kb: line(7.75, 120.0),
    user_us: line(5.0, 3_000.0),
    sys_us: line(70.0, 20_000.0),
    wall_us: line(40.0, 100_000.0),
    minor_faults: line(2.5, 100.0),
    voluntary: line(2.0, 5.0),
    involuntary: line(0.25, 1.0),
};

pub const GOROUTINES: World = World {
    runtime: "goroutines",
    rss_kb: line(2.5, 1_500.0),
    kernel_stack_kb: line(0.0, 16.0),
    page_tables_kb: line(0.125, 40.0),
    slab_kb: line(0.0, 0.0),
    user_us: line(2.0, 5_000.0),
    sys_us: line(3.0, 1_000.0),
    wall_us: line(4.0, 50_000.0),
    minor_faults: line(0.75, 150.0),
    voluntary: line(0.125, 20.0),
    involuntary: line(0.5, 4.0),
};

/// A few hundred bytes a task and no kernel stack of its own, on a few threads (per-task figures
/// in eighths, so that they are whole at every N used here).
pub const TOKIO: World = World {
    runtime: "tokio",
    rss_kb: line(0.375, 1_200.0),
    kernel_stack_kb: line(0.0, 48.0),
    page_tables_kb: line(0.125, 24.0),
    slab_kb: line(0.0, 0.0),
    user_us: line(1.0, 2_000.0),
    sys_us: line(0.5, 500.0),
    wall_us: line(2.0, 20_000.0),
    minor_faults: line(0.125, 120.0),
    voluntary: line(0.125, 10.0),
    involuntary: line(0.125, 2.0),
};

fn snapshot(t_ns: u64, meminfo: Value, status: Value) -> Value {
    json!({"t_ns": t_ns, "meminfo": meminfo, "status": status, "smaps_rollup": {}, "cpu": null, "cgroup": null})
}

pub struct Options<'a> {
    pub world: World,
    pub workload: &'a str,
    pub n: u64,
    /// Added to the system time (µs) of this run: known noise.
    pub sys_noise_us: f64,
    pub hostname: &'a str,
    pub collector: bool,
    pub flame: bool,
}

impl<'a> Options<'a> {
    pub fn new(world: World, n: u64) -> Self {
        Options {
            world,
            workload: "hold",
            n,
            sys_noise_us: 0.0,
            hostname: "synthetic-a",
            collector: false,
            flame: false,
        }
    }
}

/// Writes one results directory under `root` and returns it.
pub fn write_run(root: &Path, name: &str, o: &Options) -> PathBuf {
    let dir = root.join(name);
    fs::create_dir_all(&dir).unwrap();
    let w = &o.world;
    let n = o.n;
    let t0: u64 = 1_000_000_000_000;
    let wall_ns = u(w.wall_us.at(n)) * 1000;
    let base_meminfo = json!({"MemAvailable": 100_000_000u64, "KernelStack": 1_000u64, "Slab": 100_000u64, "MemTotal": 24_000_000u64});
    let base_status = json!({"VmRSS": 1_000u64, "VmPTE": 100u64});
    let parts = [
        w.rss_kb.at(n),
        w.kernel_stack_kb.at(n),
        w.page_tables_kb.at(n),
        w.slab_kb.at(n),
    ];
    let total: f64 = parts.iter().sum();
    let peak_meminfo = json!({
        "MemAvailable": u(100_000_000.0 - total),
        "KernelStack": u(1_000.0 + parts[1]),
        "Slab": u(100_000.0 + parts[3]),
        "MemTotal": 24_000_000u64,
    });
    let peak_status = json!({"VmRSS": u(1_000.0 + parts[0]), "VmPTE": u(100.0 + parts[2])});
    let at = |frac: f64| t0 + (wall_ns as f64 * frac) as u64;
    let phases: Vec<Value> = [("spawn", 0.02), ("steady", 0.6), ("join", 0.7), ("end", 0.95)]
        .iter()
        .map(|(name, f)| {
            json!({"name": name, "t_ns": at(*f), "snapshot": snapshot(at(*f), base_meminfo.clone(), base_status.clone())})
        })
        .collect();
    let samples = 12;
    let timeline: Vec<Value> = (0..samples)
        .map(|i| {
            let f = i as f64 / (samples - 1) as f64;
            let up = if f < 0.6 {
                f / 0.6
            } else if f < 0.7 {
                1.0
            } else {
                ((0.95 - f) / 0.25).max(0.0)
            };
            json!({
                "t_ns": at(f),
                "mem_available_kb": (100_000_000.0 - total * up) as u64,
                "rss_kb": (1_000.0 + parts[0] * up) as u64,
                "threads": if w.runtime == "threads" { (n as f64 * up) as u64 + 1 } else { 4 },
                "cgroup_bytes": null,
            })
        })
        .collect();
    let memory = json!({
        "before": snapshot(t0, base_meminfo.clone(), base_status.clone()),
        "phases": phases,
        "peak": snapshot(at(0.6), peak_meminfo, peak_status),
        "after": snapshot(at(1.0), base_meminfo.clone(), json!({})),
        "timeline": timeline,
        "cgroup_final": null,
    });
    let run = json!({
        "schema": 1,
        "target": {"kind": "workload", "runtime": w.runtime, "workload": o.workload, "n": n, "flags": []},
        "argv": ["spawnscope", "run"],
        "started_utc": "2026-01-01T00:00:00+00:00",
        "root": true,
        "pid": 4242,
        "wall_ns": wall_ns,
        "released_t_ns": t0,
        "reaped_t_ns": t0 + wall_ns,
        "exit": {"code": 0, "signal": null},
        "rusage": {
            "user_us": u(w.user_us.at(n)),
            "sys_us": u(w.sys_us.at(n) + o.sys_noise_us),
            "maxrss_kb": u(1_000.0 + parts[0]),
            "minflt": u(w.minor_faults.at(n)),
            "majflt": 0,
            "nvcsw": u(w.voluntary.at(n)),
            "nivcsw": u(w.involuntary.at(n)),
        },
        "interrupted_by": null,
        "oom_killed": false,
        "memory_limit_bytes": null,
        "estimate": null,
        "contract_violations": [],
        "left_out": [],
    });
    let machine = json!({
        "hostname": o.hostname, "kernel": "6.1.0-synthetic", "arch": "x86_64",
        "cpu_model": format!("Synthetic CPU of {}", o.hostname), "cores": 2,
        "memory_total_bytes": 25_000_000_000u64, "virtualization": "virtual machine (test)",
        "transparent_hugepages": "madvise", "glibc": "2.36", "go": "go1.22", "rust": "rustc 1.85.0",
        "cgroup": "v2", "sysctls": {"kernel.pid_max": "4194304"},
    });
    let events = [
        json!({"event": "start", "schema": 1, "runtime": w.runtime, "workload": o.workload}),
        json!({"event": "result", "schema": 1, "runtime": w.runtime, "workload": o.workload, "ok": true,
               "spawned": n, "alive_at_peak": n, "alive_max": n, "failure": null,
               "spawn_ns_per_task": 1000.0, "throughput": {"unit": "tasks/s", "count": n, "value": 1e6}}),
    ];
    let jsonl: String = events.iter().map(|e| e.to_string() + "\n").collect();
    let write = |file: &str, v: &Value| {
        fs::write(dir.join(file), serde_json::to_string_pretty(v).unwrap()).unwrap()
    };
    write("run.json", &run);
    write("memory.json", &memory);
    write("machine.json", &machine);
    write(
        "sysctl.json",
        &json!({"before": {}, "changes": [], "restored": [], "after": {}, "restore_error": null}),
    );
    fs::write(dir.join("workload.jsonl"), jsonl).unwrap();
    if o.collector {
        let buckets = (wall_ns / 100_000_000 + 1) as usize;
        let ramp = |scale: f64| -> Vec<u64> {
            (0..buckets)
                .map(|i| (scale * (1.0 + (i % 5) as f64)) as u64)
                .collect()
        };
        let collector = json!({
            "schema": 1, "tgid": 4242, "exec_seen": true, "t0_ns": t0 + 1_000_000,
            "finished_ns": t0 + wall_ns, "bucket_ns": 100_000_000u64,
            "series": [
                {"name": "faults", "unit": "count", "values": ramp(500.0)},
                {"name": "new_threads", "unit": "count", "values": ramp(100.0)},
                {"name": "thread_exits", "unit": "count", "values": ramp(80.0)},
                {"name": "switches_voluntary", "unit": "count", "values": ramp(300.0)},
                {"name": "switches_involuntary", "unit": "count", "values": ramp(20.0)},
                {"name": "a_future_series", "unit": "ns", "values": [1, 2, 3]},
            ],
            "something_new": {"the reader": "ignores it"},
        });
        write("collector.json", &collector);
    }
    if o.flame {
        fs::write(
            dir.join("flame.svg"),
            "<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"60\"><rect x=\"0\" y=\"0\" width=\"400\" height=\"30\" fill=\"rgb(230,120,20)\"/><text x=\"4\" y=\"20\">clone3</text></svg>",
        )
        .unwrap();
    }
    dir
}

/// A compare-like directory: threads and goroutines × `ns` × `repeats`, hold.
pub fn write_sweep(root: &Path, ns: &[u64], repeats: u32) -> Vec<PathBuf> {
    write_sweep_of(root, &[THREADS, GOROUTINES], ns, repeats)
}

/// A compare-like directory: `worlds` × `ns` × `repeats`, hold; the threads run at the largest N
/// has a collector and a flame graph.
pub fn write_sweep_of(root: &Path, worlds: &[World], ns: &[u64], repeats: u32) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for &world in worlds {
        for &n in ns {
            for r in 0..repeats {
                let mut o = Options::new(world, n);
                o.collector = world.runtime == "threads" && n == *ns.last().unwrap() && r == 0;
                o.flame = o.collector;
                dirs.push(write_run(
                    root,
                    &format!("{}-hold-{n}-r{r}", world.runtime),
                    &o,
                ));
            }
        }
    }
    dirs
}
