//! A set of results directories, read back from disk and put side by side: one point per run,
//! min / median / max per cell (machine × runtime × workload × N), per-task costs by regression
//! over N, cross-checks, and the exports (compare.json, compare.csv, compare-fits.csv,
//! compare.md). `compare` calls it after its matrix; `report DIR…` calls it on directories
//! already on disk, from this machine or others.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::costs::{self, MemoryPerTask, Summary};
use crate::machine::Fingerprint;
use crate::regression::{self, LineFit, Spread};
use crate::report;
use crate::results;
use crate::units::{bytes, count};

pub const PLAN: &str = "plan.json";
pub const COLLECTOR: &str = "collector.json";
pub const FLAME: &str = "flame.svg";
pub const COMPARE_JSON: &str = "compare.json";
pub const COMPARE_CSV: &str = "compare.csv";
pub const FITS_CSV: &str = "compare-fits.csv";
pub const COMPARE_MD: &str = "compare.md";

/// What `compare` planned, written before the first run: the matrix, and why an N was clamped.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Plan {
    pub schema: u32,
    pub created_utc: String,
    pub argv: Vec<String>,
    pub reproduce: Option<String>,
    pub repeats: u32,
    pub cells: Vec<PlannedCell>,
    /// Set when the matrix stopped early (a signal), with why.
    pub stopped: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlannedCell {
    pub runtime: String,
    pub workload: String,
    pub requested_n: u64,
    /// The N run; None when the cell was left out.
    pub n: Option<u64>,
    /// Why N differs from what was asked, or why the cell was left out.
    pub note: Option<String>,
}

/// One run, as read from its directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunPoint {
    pub dir: String,
    pub machine: String,
    pub label: String,
    pub runtime: Option<String>,
    pub workload: Option<String>,
    pub n: Option<u64>,
    pub ok: bool,
    /// Completed, or stopped at a limit (memory, pid_max…) with what it had spawned alive and
    /// measured at the peak: a point at N = tasks alive, kept in cells and fits.
    pub measured: bool,
    pub outcome: String,
    pub started_utc: String,
    pub spawned: Option<u64>,
    pub alive_at_peak: Option<u64>,
    pub alive_max: Option<u64>,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_percent: f64,
    pub maxrss_kb: u64,
    pub minor_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub memory_per_task: Option<MemoryPerTask>,
    pub sysctls_restored: bool,
    pub contract_violations: usize,
    pub has_collector: bool,
    pub has_flame: bool,
}

impl RunPoint {
    /// A memory part in total kB at the peak (per task × tasks alive).
    fn memory_total(&self, part: fn(&MemoryPerTask) -> Option<f64>) -> Option<f64> {
        let alive = self.alive_at_peak? as f64;
        Some(part(self.memory_per_task.as_ref()?)? * alive)
    }
}

/// The machines in the set: identical fingerprints (less sysctls and toolchain) are one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub id: String,
    pub runs: usize,
    pub fingerprint: Fingerprint,
}

fn machine_key(f: &Fingerprint) -> String {
    format!(
        "{}|{}|{}|{}|{}|{}",
        f.hostname, f.cpu_model, f.cores, f.memory_total_bytes, f.kernel, f.arch
    )
}

/// min / median / max of one cell's repeats.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub machine: String,
    pub runtime: String,
    pub workload: String,
    pub n: u64,
    pub runs: usize,
    /// Completed.
    pub ok_runs: usize,
    /// Completed or stopped at a limit with the tasks alive measured: what the figures are of.
    pub measured_runs: usize,
    pub alive_at_peak: Option<Spread>,
    pub wall_s: Option<Spread>,
    pub user_s: Option<Spread>,
    pub sys_s: Option<Spread>,
    pub maxrss_kb: Option<Spread>,
    /// Per task alive at the peak, kB.
    pub memory_kb: Option<Spread>,
    pub rss_kb: Option<Spread>,
    pub kernel_stack_kb: Option<Spread>,
    pub page_tables_kb: Option<Spread>,
    pub slab_kb: Option<Spread>,
    pub mem_available_drop_kb: Option<Spread>,
    /// Per task spawned, µs and counts.
    pub user_us: Option<Spread>,
    pub sys_us: Option<Spread>,
    pub wall_us: Option<Spread>,
    pub minor_faults: Option<Spread>,
}

/// What one figure is regressed on: tasks alive at the peak (memory) or tasks spawned (time,
/// counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Over {
    AliveAtPeak,
    Spawned,
}

pub struct MetricDef {
    pub key: &'static str,
    pub label: &'static str,
    /// kB, µs or count.
    pub unit: &'static str,
    pub over: Over,
    pub total: fn(&RunPoint) -> Option<f64>,
}

pub const METRICS: [MetricDef; 13] = [
    MetricDef {
        key: "rss_kb",
        label: "RSS",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.rss_kb)),
    },
    MetricDef {
        key: "kernel_stack_kb",
        label: "kernel stack",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.kernel_stack_kb)),
    },
    MetricDef {
        key: "page_tables_kb",
        label: "page tables",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.page_tables_kb)),
    },
    MetricDef {
        key: "slab_kb",
        label: "slab",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.slab_kb)),
    },
    MetricDef {
        key: "memory_total_kb",
        label: "total memory (RSS + kernel)",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.total_kb)),
    },
    MetricDef {
        key: "mem_available_drop_kb",
        label: "MemAvailable drop",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.mem_available_drop_kb)),
    },
    MetricDef {
        key: "cgroup_kb",
        label: "charged to the cgroup",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| m.cgroup_kb),
    },
    MetricDef {
        key: "wall_us",
        label: "wall time",
        unit: "µs",
        over: Over::Spawned,
        total: |p| Some(p.wall_s * 1e6),
    },
    MetricDef {
        key: "user_us",
        label: "user time",
        unit: "µs",
        over: Over::Spawned,
        total: |p| Some(p.user_s * 1e6),
    },
    MetricDef {
        key: "sys_us",
        label: "system time",
        unit: "µs",
        over: Over::Spawned,
        total: |p| Some(p.sys_s * 1e6),
    },
    MetricDef {
        key: "minor_faults",
        label: "minor page faults",
        unit: "count",
        over: Over::Spawned,
        total: |p| Some(p.minor_faults as f64),
    },
    MetricDef {
        key: "voluntary_switches",
        label: "voluntary switches",
        unit: "count",
        over: Over::Spawned,
        total: |p| Some(p.voluntary_switches as f64),
    },
    MetricDef {
        key: "involuntary_switches",
        label: "involuntary switches",
        unit: "count",
        over: Over::Spawned,
        total: |p| Some(p.involuntary_switches as f64),
    },
];

/// One metric's line over N for one machine × runtime × workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fit {
    pub machine: String,
    pub runtime: String,
    pub workload: String,
    pub metric: String,
    pub label: String,
    pub unit: String,
    pub over: Over,
    #[serde(flatten)]
    pub line: LineFit,
}

/// Everything `compare` and `report` show for a set of runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareReport {
    pub schema: u32,
    pub rendered_utc: String,
    pub machines: Vec<Machine>,
    pub plan: Option<Plan>,
    pub runs: Vec<RunPoint>,
    pub cells: Vec<Cell>,
    pub fits: Vec<Fit>,
    pub reproduce: Option<Reproduce>,
    /// Runs with nothing measured (interrupted, OOM-killed, failed): left out of cells and fits.
    pub excluded: Vec<String>,
    /// Runs that stopped at a limit with their tasks alive measured: kept, at N = tasks alive.
    pub stopped_at_limit: Vec<String>,
}

/// A results directory, or a directory holding results directories (a compare directory).
pub fn expand(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut runs = Vec::new();
    for dir in dirs {
        if dir.join(results::RUN).is_file() {
            runs.push(dir.clone());
            continue;
        }
        let mut inside: Vec<PathBuf> = fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join(results::RUN).is_file())
            .collect();
        if inside.is_empty() {
            anyhow::bail!(
                "{} is neither a results directory (no run.json) nor a directory of them",
                dir.display()
            );
        }
        inside.sort();
        runs.extend(inside);
    }
    Ok(runs)
}

/// The plan of a compare directory, when one of the given directories is one.
pub fn find_plan(dirs: &[PathBuf]) -> Option<Plan> {
    dirs.iter()
        .find_map(|d| results::read_json::<Plan>(d, PLAN).ok())
}

/// A run directory read back: its summary recomputed (summary.json/md rewritten), its machine.
pub struct Loaded {
    pub summary: Summary,
    pub machine: Fingerprint,
    pub alive_max: Option<u64>,
    pub contract_violations: usize,
    pub started_utc: String,
}

pub fn load_run(dir: &Path) -> Result<Loaded> {
    let (summary, _) = report::render(dir)?;
    let loaded = report::load(dir)?;
    let alive_max = costs::result_event(&loaded.events).and_then(|r| r["alive_max"].as_u64());
    Ok(Loaded {
        summary,
        machine: loaded.machine,
        alive_max,
        contract_violations: loaded.run.contract_violations.len(),
        started_utc: loaded.run.started_utc,
    })
}

fn relative(dir: &Path, base: &Path) -> String {
    dir.strip_prefix(base)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}

/// Reads every run, groups, fits. `base` is where the exports go (paths are shown relative to it).
pub fn analyze(run_dirs: &[PathBuf], plan: Option<Plan>, base: &Path) -> Result<CompareReport> {
    let mut machines: Vec<Machine> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut runs = Vec::new();
    for dir in run_dirs {
        let l = load_run(dir).with_context(|| format!("{}", dir.display()))?;
        let key = machine_key(&l.machine);
        let id = match keys.iter().position(|k| *k == key) {
            Some(i) => {
                machines[i].runs += 1;
                machines[i].id.clone()
            }
            None => {
                keys.push(key);
                let id = if l.machine.hostname.is_empty() {
                    format!("M{}", machines.len() + 1)
                } else {
                    format!("M{} ({})", machines.len() + 1, l.machine.hostname)
                };
                machines.push(Machine {
                    id: id.clone(),
                    runs: 1,
                    fingerprint: l.machine.clone(),
                });
                id
            }
        };
        let s = &l.summary;
        runs.push(RunPoint {
            dir: relative(dir, base),
            machine: id,
            label: s.label.clone(),
            runtime: s.runtime.clone(),
            workload: s.workload.clone(),
            n: s.n,
            ok: s.ok,
            measured: s.ok
                || (s.outcome.starts_with("spawning stopped at")
                    && s.alive_at_peak.is_some_and(|a| a > 0)
                    && s.memory_per_task.is_some()),
            outcome: s.outcome.clone(),
            started_utc: l.started_utc.clone(),
            spawned: s.spawned,
            alive_at_peak: s.alive_at_peak,
            alive_max: l.alive_max,
            wall_s: s.wall_s,
            user_s: s.user_s,
            sys_s: s.sys_s,
            cpu_percent: s.cpu_percent,
            maxrss_kb: s.maxrss_kb,
            minor_faults: s.minor_faults,
            voluntary_switches: s.voluntary_switches,
            involuntary_switches: s.involuntary_switches,
            memory_per_task: s.memory_per_task.clone(),
            sysctls_restored: s.sysctls_restored,
            contract_violations: l.contract_violations,
            has_collector: dir.join(COLLECTOR).is_file(),
            has_flame: dir.join(FLAME).is_file(),
        });
    }
    let excluded = runs
        .iter()
        .filter(|r| !r.measured)
        .map(|r| format!("{} ({}): {}", r.label, r.dir, r.outcome))
        .collect();
    let stopped_at_limit = runs
        .iter()
        .filter(|r| r.measured && !r.ok)
        .map(|r| {
            format!(
                "{} ({}): {} alive at the peak — {}",
                r.label,
                r.dir,
                r.alive_at_peak.map_or("?".into(), count),
                r.outcome
            )
        })
        .collect();
    let cells = cells(&runs);
    let fits = fits(&runs);
    let reproduce = plan
        .as_ref()
        .filter(|p| p.reproduce.as_deref() == Some("hansen2023"))
        .map(|_| reproduce_table(&runs));
    Ok(CompareReport {
        schema: 1,
        rendered_utc: chrono::Utc::now().to_rfc3339(),
        machines,
        plan,
        runs,
        cells,
        fits,
        reproduce,
        excluded,
        stopped_at_limit,
    })
}

type Group<'a> = BTreeMap<(String, String, String, u64), Vec<&'a RunPoint>>;

/// Orders runtimes threads first, workloads in the contract's order.
fn order(runtime: &str, workload: &str) -> (usize, usize) {
    let r = ["threads", "goroutines"]
        .iter()
        .position(|x| *x == runtime)
        .unwrap_or(9);
    let w = ["hold", "sleep", "churn", "pingpong", "chain"]
        .iter()
        .position(|x| *x == workload)
        .unwrap_or(9);
    (w, r)
}

fn cells(runs: &[RunPoint]) -> Vec<Cell> {
    let mut groups: Group = BTreeMap::new();
    for r in runs {
        let (Some(rt), Some(wl), Some(n)) = (&r.runtime, &r.workload, r.n) else {
            continue;
        };
        groups
            .entry((r.machine.clone(), rt.clone(), wl.clone(), n))
            .or_default()
            .push(r);
    }
    let mut out: Vec<Cell> = groups
        .into_iter()
        .map(|((machine, runtime, workload, n), rs)| {
            let ok: Vec<&RunPoint> = rs.iter().copied().filter(|r| r.measured).collect();
            let of = |f: &dyn Fn(&RunPoint) -> Option<f64>| {
                regression::spread(&ok.iter().filter_map(|r| f(r)).collect::<Vec<f64>>())
            };
            let mem = |f: fn(&MemoryPerTask) -> f64| {
                of(&|r: &RunPoint| r.memory_per_task.as_ref().map(f))
            };
            let per_spawned = |f: fn(&RunPoint) -> f64| {
                of(&|r: &RunPoint| r.spawned.filter(|&s| s > 0).map(|s| f(r) / s as f64))
            };
            Cell {
                machine,
                runtime,
                workload,
                n,
                runs: rs.len(),
                ok_runs: rs.iter().filter(|r| r.ok).count(),
                measured_runs: ok.len(),
                alive_at_peak: of(&|r| r.alive_at_peak.map(|a| a as f64)),
                wall_s: of(&|r| Some(r.wall_s)),
                user_s: of(&|r| Some(r.user_s)),
                sys_s: of(&|r| Some(r.sys_s)),
                maxrss_kb: of(&|r| Some(r.maxrss_kb as f64)),
                memory_kb: mem(|m| m.total_kb),
                rss_kb: mem(|m| m.rss_kb),
                kernel_stack_kb: mem(|m| m.kernel_stack_kb),
                page_tables_kb: mem(|m| m.page_tables_kb),
                slab_kb: mem(|m| m.slab_kb),
                mem_available_drop_kb: mem(|m| m.mem_available_drop_kb),
                user_us: per_spawned(|r| r.user_s * 1e6),
                sys_us: per_spawned(|r| r.sys_s * 1e6),
                wall_us: per_spawned(|r| r.wall_s * 1e6),
                minor_faults: per_spawned(|r| r.minor_faults as f64),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (
            &a.machine,
            order(&a.runtime, &a.workload),
            a.n,
            &a.runtime,
            &a.workload,
        )
            .cmp(&(
                &b.machine,
                order(&b.runtime, &b.workload),
                b.n,
                &b.runtime,
                &b.workload,
            ))
    });
    out
}

/// Least squares per machine × runtime × workload × metric, over every completed run (each
/// repeat is a point: the spread of the repeats is what the standard error reflects).
pub fn fits(runs: &[RunPoint]) -> Vec<Fit> {
    let mut series: BTreeMap<(String, String, String), Vec<&RunPoint>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.measured) {
        if let (Some(rt), Some(wl)) = (&r.runtime, &r.workload) {
            series
                .entry((r.machine.clone(), rt.clone(), wl.clone()))
                .or_default()
                .push(r);
        }
    }
    let mut keys: Vec<_> = series.keys().cloned().collect();
    keys.sort_by(|a, b| (&a.0, order(&a.1, &a.2), &a.1).cmp(&(&b.0, order(&b.1, &b.2), &b.1)));
    let mut out = Vec::new();
    for key in keys {
        let rs = &series[&key];
        for m in &METRICS {
            let pts: Vec<(f64, f64)> = rs
                .iter()
                .filter_map(|r| {
                    let x = match m.over {
                        Over::AliveAtPeak => r.alive_at_peak?,
                        Over::Spawned => r.spawned?,
                    };
                    Some((x as f64, (m.total)(r)?))
                })
                .collect();
            if let Some(line) = regression::fit(&pts) {
                out.push(Fit {
                    machine: key.0.clone(),
                    runtime: key.1.clone(),
                    workload: key.2.clone(),
                    metric: m.key.into(),
                    label: m.label.into(),
                    unit: m.unit.into(),
                    over: m.over,
                    line,
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Hansen 2023, side by side.

/// The article's published figures ("Threads and Goroutines", Hansen, 2023; see
/// shared/anchors.md): `/usr/bin/time` of 1,000,000 tasks each sleeping 1 s, one run each.
pub struct Published {
    pub runtime: &'static str,
    pub tasks: u64,
    pub user_s: f64,
    pub sys_s: f64,
    pub wall_s: f64,
    pub cpu_percent: f64,
    pub maxrss_kb: u64,
    pub minor_faults: u64,
    pub conclusion: &'static str,
}

pub const HANSEN_2023_SOURCE: &str =
    "Hansen, \"Threads and Goroutines\" (2023): /usr/bin/time, one run, hardware not named";

pub const HANSEN_2023: [Published; 2] = [
    Published {
        runtime: "threads",
        // Its loop ran 1..count: 999,999 threads.
        tasks: 999_999,
        user_s: 6.17,
        sys_s: 80.41,
        wall_s: 38.55,
        cpu_percent: 224.0,
        maxrss_kb: 8_500_640,
        minor_faults: 2_125_114,
        conclusion: "~8 KB per thread",
    },
    Published {
        runtime: "goroutines",
        tasks: 1_000_000,
        user_s: 16.66,
        sys_s: 0.68,
        wall_s: 2.44,
        cpu_percent: 709.0,
        maxrss_kb: 2_122_296,
        minor_faults: 529_900,
        conclusion: "~2 KB per goroutine",
    },
];

/// The reproduction table: columns of figures, rows by figure.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reproduce {
    pub source: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
    pub caveats: Vec<String>,
}

fn pick<'a>(runs: &'a [RunPoint], runtime: &str, workload: &str) -> Option<&'a RunPoint> {
    // The largest N that completed (the reproduction runs one of each).
    runs.iter()
        .filter(|r| {
            r.runtime.as_deref() == Some(runtime) && r.workload.as_deref() == Some(workload)
        })
        .max_by_key(|r| (r.measured, r.n.unwrap_or(0)))
}

pub fn reproduce_table(runs: &[RunPoint]) -> Reproduce {
    struct Col<'a> {
        title: String,
        published: Option<&'a Published>,
        run: Option<&'a RunPoint>,
    }
    let mut cols: Vec<Col> = Vec::new();
    for p in &HANSEN_2023 {
        cols.push(Col {
            title: format!("article: {} sleep 1 s", p.runtime),
            published: Some(p),
            run: None,
        });
        if let Some(r) = pick(runs, p.runtime, "sleep") {
            cols.push(Col {
                title: format!("here: {} sleep {}", p.runtime, count(r.n.unwrap_or(0))),
                published: None,
                run: Some(r),
            });
        }
    }
    for runtime in ["threads", "goroutines"] {
        if let Some(r) = pick(runs, runtime, "hold") {
            cols.push(Col {
                title: format!(
                    "here: {runtime} hold {} (all alive)",
                    count(r.n.unwrap_or(0))
                ),
                published: None,
                run: Some(r),
            });
        }
    }
    fn kb(v: f64) -> String {
        bytes(v * 1024.0)
    }
    type RowFn = fn(&Published) -> String;
    type RunFn = fn(&RunPoint) -> Option<String>;
    let rows: Vec<(&str, RowFn, RunFn)> = vec![
        ("tasks", |p| count(p.tasks), |r| r.spawned.map(count)),
        (
            "user time",
            |p| format!("{:.2} s", p.user_s),
            |r| Some(format!("{:.2} s", r.user_s)),
        ),
        (
            "system time",
            |p| format!("{:.2} s", p.sys_s),
            |r| Some(format!("{:.2} s", r.sys_s)),
        ),
        (
            "elapsed",
            |p| format!("{:.2} s", p.wall_s),
            |r| Some(format!("{:.2} s", r.wall_s)),
        ),
        (
            "CPU",
            |p| format!("{:.0} %", p.cpu_percent),
            |r| Some(format!("{:.0} %", r.cpu_percent)),
        ),
        (
            "max RSS",
            |p| format!("{} KB", count(p.maxrss_kb)),
            |r| Some(format!("{} KB", count(r.maxrss_kb))),
        ),
        (
            "minor faults",
            |p| count(p.minor_faults),
            |r| Some(count(r.minor_faults)),
        ),
        (
            "max RSS / tasks (the article's per-task figure)",
            |p| format!("{:.1} KB", p.maxrss_kb as f64 / p.tasks as f64),
            |r| {
                r.spawned
                    .filter(|&s| s > 0)
                    .map(|s| format!("{:.1} KB", r.maxrss_kb as f64 / s as f64))
            },
        ),
        (
            "tasks alive at the peak",
            |_| "not measured".into(),
            |r| r.alive_at_peak.map(count),
        ),
        (
            "most tasks alive at once",
            |_| "not measured".into(),
            |r| r.alive_max.map(count),
        ),
        (
            "RSS per task alive",
            |_| "—".into(),
            |r| r.memory_per_task.as_ref().map(|m| kb(m.rss_kb)),
        ),
        (
            "kernel memory per task alive (stack + page tables + slab)",
            |_| "not visible to max RSS".into(),
            |r| {
                r.memory_per_task
                    .as_ref()
                    .map(|m| kb(m.kernel_stack_kb + m.page_tables_kb + m.slab_kb))
            },
        ),
        (
            "total per task alive (RSS + kernel)",
            |_| "—".into(),
            |r| r.memory_per_task.as_ref().map(|m| kb(m.total_kb)),
        ),
        (
            "MemAvailable drop per task alive",
            |_| "—".into(),
            |r| {
                r.memory_per_task
                    .as_ref()
                    .map(|m| kb(m.mem_available_drop_kb))
            },
        ),
        (
            "outcome",
            |p| p.conclusion.into(),
            |r| Some(r.outcome.split(':').next().unwrap_or("").to_string()),
        ),
    ];
    let table_rows = rows
        .iter()
        .map(|(label, published, measured)| {
            let values = cols
                .iter()
                .map(|c| match (c.published, c.run) {
                    (Some(p), _) => published(p),
                    (_, Some(r)) => measured(r).unwrap_or_else(|| "?".into()),
                    _ => "?".into(),
                })
                .collect();
            (label.to_string(), values)
        })
        .collect();
    let mut caveats = Vec::new();
    for runtime in ["threads", "goroutines"] {
        let Some(r) = pick(runs, runtime, "sleep") else {
            caveats.push(format!("{runtime} sleep 1,000,000 did not run"));
            continue;
        };
        let spawned = r.spawned.unwrap_or(0);
        if let (Some(alive), Some(max)) = (r.alive_at_peak, r.alive_max) {
            caveats.push(format!(
                "{runtime} sleep: of {} tasks spawned, at most {} ({:.0} %) were alive at once, {} at the peak snapshot: {}",
                count(spawned),
                count(max),
                max as f64 / spawned.max(1) as f64 * 100.0,
                count(alive),
                if max < spawned {
                    "the million never coexisted; max RSS / N divides the memory of the tasks alive at once by all of them"
                } else {
                    "all coexisted"
                }
            ));
        }
        if let Some(m) = &r.memory_per_task {
            let kernel = m.kernel_stack_kb + m.page_tables_kb + m.slab_kb;
            caveats.push(format!(
                "{runtime} sleep: per task alive, {} RSS but {} of kernel memory (kernel stack {}, page tables {}, slab {}) that max RSS does not count",
                kb(m.rss_kb),
                kb(kernel),
                kb(m.kernel_stack_kb),
                kb(m.page_tables_kb),
                kb(m.slab_kb)
            ));
        }
    }
    if let Some(r) = pick(runs, "threads", "hold") {
        if r.n.unwrap_or(0) < 1_000_000 {
            caveats.push(format!(
                "threads hold ran at {} (the largest N the preflight let fit), not 1,000,000: a million coexisting threads do not fit in this machine's memory",
                count(r.n.unwrap_or(0))
            ));
        }
    }
    Reproduce {
        source: HANSEN_2023_SOURCE.into(),
        columns: cols.into_iter().map(|c| c.title).collect(),
        rows: table_rows,
        caveats,
    }
}

// ---------------------------------------------------------------------------------------------
// Exports.

fn spread_cell(s: &Option<Spread>, digits: usize) -> String {
    match s {
        Some(s) if s.min == s.max => format!("{:.*}", digits, s.median),
        Some(s) => format!(
            "{:.*} ({:.*} … {:.*})",
            digits, s.median, digits, s.min, digits, s.max
        ),
        None => "—".into(),
    }
}

fn kb_spread(s: &Option<Spread>) -> String {
    match s {
        Some(s) if s.min == s.max => bytes(s.median * 1024.0),
        Some(s) => format!(
            "{} ({} … {})",
            bytes(s.median * 1024.0),
            bytes(s.min * 1024.0),
            bytes(s.max * 1024.0)
        ),
        None => "—".into(),
    }
}

/// The slope and intercept in the metric's unit, readable.
pub fn fit_figures(f: &Fit) -> (String, String) {
    let l = &f.line;
    let se = |scale: &dyn Fn(f64) -> String| {
        l.slope_stderr
            .map_or(String::new(), |e| format!(" ± {}", scale(e)))
    };
    match f.unit.as_str() {
        "kB" => {
            let b = |v: f64| bytes(v * 1024.0);
            (format!("{}{}", b(l.slope), se(&b)), b(l.intercept))
        }
        "µs" => {
            let us = |v: f64| format!("{v:.2} µs");
            let fixed = if l.intercept.abs() >= 1e6 {
                format!("{:.2} s", l.intercept / 1e6)
            } else {
                format!("{:.1} ms", l.intercept / 1e3)
            };
            (format!("{}{}", us(l.slope), se(&us)), fixed)
        }
        _ => {
            let c = |v: f64| format!("{v:.3}");
            (
                format!("{}{}", c(l.slope), se(&c)),
                format!("{:.0}", l.intercept),
            )
        }
    }
}

pub fn machine_line(m: &Fingerprint) -> String {
    let host = if m.hostname.is_empty() {
        "?"
    } else {
        &m.hostname
    };
    format!("{host}: {}; cgroup {}", m.describe(), m.cgroup)
}

/// compare.md: hyperfine-like tables.
pub fn markdown(r: &CompareReport) -> String {
    let mut md = String::from("# spawnscope compare\n\n");
    for m in &r.machines {
        let _ = writeln!(md, "- Machine {}", machine_line_with_id(m));
    }
    if let Some(plan) = &r.plan {
        let _ = writeln!(
            md,
            "- Repeats: {}{}",
            plan.repeats,
            plan.reproduce
                .as_ref()
                .map_or(String::new(), |p| format!("; reproducing {p}"))
        );
        for c in plan.cells.iter().filter(|c| c.note.is_some()) {
            let _ = writeln!(md, "- {}", c.note.as_deref().unwrap_or(""));
        }
        if let Some(why) = &plan.stopped {
            let _ = writeln!(md, "- Stopped early: {why}");
        }
    }
    let multi = r.machines.len() > 1;
    let _ = writeln!(
        md,
        "\n## Runs: median (min … max) over repeats\n\n{}| runtime | workload | N | runs complete / measured / all | alive at peak | wall [s] | user [s] | system [s] | memory / task alive | RSS / task | kernel stack / task | page tables / task | slab / task |\n{}|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        if multi { "| machine " } else { "" },
        if multi { "|---" } else { "" }
    );
    for c in &r.cells {
        let _ = writeln!(
            md,
            "{}| {} | {} | {} | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            if multi {
                format!("| {} ", c.machine)
            } else {
                String::new()
            },
            c.runtime,
            c.workload,
            count(c.n),
            c.ok_runs,
            c.measured_runs,
            c.runs,
            c.alive_at_peak
                .map_or("—".into(), |s| count(s.median as u64)),
            spread_cell(&c.wall_s, 2),
            spread_cell(&c.user_s, 2),
            spread_cell(&c.sys_s, 2),
            kb_spread(&c.memory_kb),
            kb_spread(&c.rss_kb),
            kb_spread(&c.kernel_stack_kb),
            kb_spread(&c.page_tables_kb),
            kb_spread(&c.slab_kb),
        );
    }
    let _ = writeln!(
        md,
        "\n## Per task by regression over N\n\nslope = what one more task costs; intercept = the fixed cost; memory over tasks alive at the peak, time and counts over tasks spawned; every completed repeat is a point.\n\n{}| runtime | workload | figure | per task (slope ± s.e.) | fixed (intercept) | R² | points (N values) |\n{}|---|---|---|---:|---:|---:|---:|",
        if multi { "| machine " } else { "" },
        if multi { "|---" } else { "" }
    );
    if r.fits.is_empty() {
        let _ = writeln!(
            md,
            "\nNo line: a fit needs completed runs at two N values or more."
        );
    }
    for f in &r.fits {
        let (slope, fixed) = fit_figures(f);
        let _ = writeln!(
            md,
            "{}| {} | {} | {} | {} | {} | {:.4} | {} ({}) |",
            if multi {
                format!("| {} ", f.machine)
            } else {
                String::new()
            },
            f.runtime,
            f.workload,
            f.label,
            slope,
            fixed,
            f.line.r2,
            f.line.points,
            f.line.distinct_x
        );
    }
    if let Some(rep) = &r.reproduce {
        md.push_str(&reproduce_markdown(rep));
    }
    if !r.stopped_at_limit.is_empty() {
        let _ = writeln!(
            md,
            "\n## Runs that stopped at a limit (kept: every task they had was alive and measured at the peak)\n"
        );
        for e in &r.stopped_at_limit {
            let _ = writeln!(md, "- {e}");
        }
    }
    if !r.excluded.is_empty() {
        let _ = writeln!(
            md,
            "\n## Runs with nothing measured (left out of the tables and fits)\n"
        );
        for e in &r.excluded {
            let _ = writeln!(md, "- {e}");
        }
    }
    md
}

pub fn machine_line_with_id(m: &Machine) -> String {
    format!(
        "{}, {} runs — {}",
        m.id,
        m.runs,
        machine_line(&m.fingerprint)
    )
}

pub fn reproduce_markdown(rep: &Reproduce) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## Hansen 2023, reproduced\n\nArticle figures: {}.\n",
        rep.source
    );
    let _ = writeln!(md, "| | {} |", rep.columns.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(rep.columns.len()));
    for (label, values) in &rep.rows {
        let _ = writeln!(md, "| {label} | {} |", values.join(" | "));
    }
    if !rep.caveats.is_empty() {
        md.push('\n');
        for c in &rep.caveats {
            let _ = writeln!(md, "- {c}");
        }
    }
    md
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// compare.csv: one row per cell (min / median / max of each figure).
pub fn cells_csv(r: &CompareReport) -> String {
    type Get = fn(&Cell) -> &Option<Spread>;
    let spreads: [(&str, Get); 15] = [
        ("alive_at_peak", |c| &c.alive_at_peak),
        ("wall_s", |c| &c.wall_s),
        ("user_s", |c| &c.user_s),
        ("sys_s", |c| &c.sys_s),
        ("maxrss_kb", |c| &c.maxrss_kb),
        ("memory_kb_per_task", |c| &c.memory_kb),
        ("rss_kb_per_task", |c| &c.rss_kb),
        ("kernel_stack_kb_per_task", |c| &c.kernel_stack_kb),
        ("page_tables_kb_per_task", |c| &c.page_tables_kb),
        ("slab_kb_per_task", |c| &c.slab_kb),
        ("mem_available_drop_kb_per_task", |c| {
            &c.mem_available_drop_kb
        }),
        ("wall_us_per_task", |c| &c.wall_us),
        ("user_us_per_task", |c| &c.user_us),
        ("sys_us_per_task", |c| &c.sys_us),
        ("minor_faults_per_task", |c| &c.minor_faults),
    ];
    let mut out = String::from("machine,runtime,workload,n,runs,ok_runs,measured_runs");
    for (name, _) in &spreads {
        let _ = write!(out, ",{name}_min,{name}_median,{name}_max");
    }
    out.push('\n');
    for c in &r.cells {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{}",
            csv_field(&c.machine),
            c.runtime,
            c.workload,
            c.n,
            c.runs,
            c.ok_runs,
            c.measured_runs
        );
        for (_, get) in &spreads {
            match get(c) {
                Some(s) => {
                    let _ = write!(out, ",{},{},{}", s.min, s.median, s.max);
                }
                None => out.push_str(",,,"),
            }
        }
        out.push('\n');
    }
    out
}

/// compare-fits.csv: one row per fitted line.
pub fn fits_csv(r: &CompareReport) -> String {
    let mut out = String::from(
        "machine,runtime,workload,metric,unit,over,points,distinct_n,slope,slope_stderr,intercept,r2\n",
    );
    for f in &r.fits {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&f.machine),
            f.runtime,
            f.workload,
            f.metric,
            f.unit,
            match f.over {
                Over::AliveAtPeak => "alive_at_peak",
                Over::Spawned => "spawned",
            },
            f.line.points,
            f.line.distinct_x,
            f.line.slope,
            f.line.slope_stderr.map_or(String::new(), |v| v.to_string()),
            f.line.intercept,
            f.line.r2
        );
    }
    out
}

/// Writes compare.json, compare.csv, compare-fits.csv and compare.md into `out`.
pub fn write_exports(r: &CompareReport, out: &Path) -> Result<()> {
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    results::write_json(&out.join(COMPARE_JSON), r)?;
    fs::write(out.join(COMPARE_CSV), cells_csv(r))?;
    fs::write(out.join(FITS_CSV), fits_csv(r))?;
    fs::write(out.join(COMPARE_MD), markdown(r))?;
    Ok(())
}

/// collector.json read tolerantly: any 100 ms-ish series it has, by name. None when the file is
/// absent or has no series.
pub struct CollectorSeries {
    pub t0_ns: u64,
    pub bucket_ns: u64,
    pub series: Vec<(String, Vec<f64>)>,
}

pub fn read_collector(dir: &Path) -> Option<CollectorSeries> {
    let text = fs::read_to_string(dir.join(COLLECTOR)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let bucket_ns = v["bucket_ns"].as_u64().filter(|&b| b > 0)?;
    let t0_ns = v["t0_ns"].as_u64()?;
    let series: Vec<(String, Vec<f64>)> = v["series"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            let name = s["name"].as_str()?.to_string();
            let values = s["values"]
                .as_array()?
                .iter()
                .map(|x| x.as_f64().unwrap_or(0.0))
                .collect();
            Some((name, values))
        })
        .collect();
    (!series.is_empty()).then_some(CollectorSeries {
        t0_ns,
        bucket_ns,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_figures_are_the_articles() {
        let [rust, go] = &HANSEN_2023;
        assert_eq!(
            (
                rust.user_s,
                rust.sys_s,
                rust.wall_s,
                rust.maxrss_kb,
                rust.minor_faults
            ),
            (6.17, 80.41, 38.55, 8_500_640, 2_125_114)
        );
        assert_eq!(
            (
                go.user_s,
                go.sys_s,
                go.wall_s,
                go.maxrss_kb,
                go.minor_faults
            ),
            (16.66, 0.68, 2.44, 2_122_296, 529_900)
        );
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("M1 (vm)"), "M1 (vm)");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\", y"), "\"say \"\"x\"\", y\"");
    }
}
