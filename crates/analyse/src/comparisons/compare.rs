//! A set of results directories, read back from disk and put side by side: one point per run,
//! min / median / max per cell (machine × runtime × workload × N), per-task costs by regression
//! over N, cross-checks, and the exports (compare.json, compare.csv, compare-fits.csv,
//! compare.md). `compare` calls it after its matrix; `report DIR…` calls it on directories
//! already on disk, from this machine or others.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::comparisons::cpu_sweep::{cpu_sweep, CpuSweep};
use crate::comparisons::headline::{headlines, Headline, Measured, WAKE_WORKLOADS};
use crate::comparisons::regression::{self, LineFit, Spread};
use crate::comparisons::reproduce::Reproduce;
pub use crate::comparisons::run_point::RunPoint;
use crate::memory::per_task::{memory_unresolved, MemoryPerTask};
use crate::memory::resolution::{self, Resolution};
use crate::probes::counts_verdict;
use crate::run::summary::Summary;
use crate::time::repeats::{self, repeated, Repeated};
use crate::time::times_from::{timed, TimesFrom};
use crate::traces::runtime_latency::{self, LatencyCell};
use record::{Fingerprint, LoadedRun, Plan, Target};
use runtime::{result_event, Runtime, WorkloadKind};
use units::count;

/// The machines in the set: identical fingerprints (less sysctls and toolchain) are one.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub id: String,
    pub runs: usize,
    pub fingerprint: Fingerprint,
}

/// What tells machines apart. Memory is taken to a tenth of a GiB: MemTotal moves by a few kB
/// between two boots of the same VM (6,072,376 and 6,072,380 kB under Debian's 6.12 in the
/// kernel matrix), and a rerun on it is the same machine.
fn machine_key(f: &Fingerprint) -> String {
    format!(
        "{}|{}|{}|{:.1}|{}|{}",
        f.hostname,
        f.cpu_model,
        f.cores,
        f.memory_total_bytes as f64 / (1u64 << 30) as f64,
        f.kernel,
        f.arch
    )
}

/// min / median / max of one cell's repeats.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub machine: String,
    pub runtime: String,
    pub workload: String,
    pub n: u64,
    /// `--cpu-counts`: the K CPUs the cell's runs were held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<u32>,
    pub runs: usize,
    /// Completed.
    pub ok_runs: usize,
    /// Completed or stopped at a limit with the tasks alive measured: what the figures are of.
    pub measured_runs: usize,
    /// Which of the measured runs the time figures (wall, user, system and their per-task
    /// figures) are of: the untraced ones where the cell has any, so that no time carries the
    /// probes' cost; memory and page faults are of every measured run. Absent in sets written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times_from: Option<TimesFrom>,
    pub alive_at_peak: Option<Spread>,
    pub wall_s: Option<Spread>,
    pub user_s: Option<Spread>,
    pub sys_s: Option<Spread>,
    pub maxrss_kb: Option<Spread>,
    /// Per task alive at the peak, kB.
    pub memory_kb: Option<Spread>,
    pub rss_kb: Option<Spread>,
    /// Where `rss_kb` is a process tree's by PSS (the processes runtime, a command that forks):
    /// its task-holding processes' RSS summed, per task (`MemoryPerTask::rss_summed_kb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_summed_kb: Option<Spread>,
    pub kernel_stack_kb: Option<Spread>,
    pub page_tables_kb: Option<Spread>,
    pub slab_kb: Option<Spread>,
    pub mem_available_drop_kb: Option<Spread>,
    /// Per task spawned, µs and counts.
    pub user_us: Option<Spread>,
    pub sys_us: Option<Spread>,
    pub wall_us: Option<Spread>,
    pub minor_faults: Option<Spread>,
    /// The machine's CPU was emulated (QEMU's TCG): the time figures are the emulator's, and
    /// the tables mark them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpu_emulated: bool,
    /// A run of the cell had too little memory held to resolve its memory per task
    /// (`resolution::judge_held`): the memory figures are marked not resolved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_unresolved: bool,
    /// Runs of the cell whose counts are wrong (a cross-check failed: `counts_verdict`): the
    /// tables mark the cell.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub counts_wrong_runs: usize,
    /// The runs the time figures are of, when every one of them is suspect (its time verdict
    /// found a sentinel past its rule): the tables mark the times (¶). 0: one is trustworthy,
    /// or none has a verdict.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub times_from_suspect_runs: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What one figure is regressed on: tasks alive at the peak (memory) or tasks spawned (time,
/// counts).
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A time: fitted over the runs whose times count (analyse::times_from), not every run.
    pub time: bool,
}

pub const METRICS: [MetricDef; 13] = [
    MetricDef {
        key: "rss_kb",
        label: "RSS",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.rss_kb)),
        time: false,
    },
    MetricDef {
        key: "kernel_stack_kb",
        label: "kernel stack",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.kernel_stack_kb)),
        time: false,
    },
    MetricDef {
        key: "page_tables_kb",
        label: "page tables",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.page_tables_kb)),
        time: false,
    },
    MetricDef {
        key: "slab_kb",
        label: "slab",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.slab_kb)),
        time: false,
    },
    MetricDef {
        key: "memory_total_kb",
        label: "total memory (RSS + kernel)",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.total_kb)),
        time: false,
    },
    MetricDef {
        key: "mem_available_drop_kb",
        label: "MemAvailable drop",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| Some(m.mem_available_drop_kb)),
        time: false,
    },
    MetricDef {
        key: "cgroup_kb",
        label: "charged to the cgroup",
        unit: "kB",
        over: Over::AliveAtPeak,
        total: |p| p.memory_total(|m| m.cgroup_kb),
        time: false,
    },
    MetricDef {
        key: "wall_us",
        label: "wall time",
        unit: "µs",
        over: Over::Spawned,
        total: |p| Some(p.wall_s * 1e6),
        time: true,
    },
    MetricDef {
        key: "user_us",
        label: "user time",
        unit: "µs",
        over: Over::Spawned,
        total: |p| Some(p.user_s * 1e6),
        time: true,
    },
    MetricDef {
        key: "sys_us",
        label: "system time",
        unit: "µs",
        over: Over::Spawned,
        total: |p| Some(p.sys_s * 1e6),
        time: true,
    },
    MetricDef {
        key: "minor_faults",
        label: "minor page faults",
        unit: "count",
        over: Over::Spawned,
        total: |p| Some(p.minor_faults as f64),
        time: false,
    },
    MetricDef {
        key: "voluntary_switches",
        label: "voluntary switches",
        unit: "count",
        over: Over::Spawned,
        total: |p| Some(p.voluntary_switches as f64),
        time: false,
    },
    MetricDef {
        key: "involuntary_switches",
        label: "involuntary switches",
        unit: "count",
        over: Over::Spawned,
        total: |p| Some(p.involuntary_switches as f64),
        time: false,
    },
];

/// One metric's line over N for one machine × runtime × workload.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct Fit {
    pub machine: String,
    pub runtime: String,
    pub workload: String,
    /// `--cpu-counts`: the K the line is fitted at (over N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_count: Option<u32>,
    pub metric: String,
    pub label: String,
    pub unit: String,
    pub over: Over,
    #[serde(flatten)]
    pub line: LineFit,
    /// Whether the slope is resolved at the N measured, and if not, why and at about which N.
    #[serde(flatten)]
    pub resolution: Resolution,
}

/// Everything `compare` and `report` show for a set of runs.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
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
    /// Experiments run more than once: their time figures' spread, outliers and causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Repeated>,
    /// The result in a line per workload: the dearest runtime against the cheapest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headlines: Vec<Headline>,
    /// `--cpu-counts`: the figures per task against K, where each runtime stops scaling and the
    /// waits that grew (analyse/comparisons/cpu_sweep.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_sweep: Option<CpuSweep>,
    /// `--runtime-trace`: per workload × N, how long a woken task waits to run by its own
    /// scheduler, each runtime (analyse/traces/runtime_latency.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_latency: Vec<LatencyCell>,
}

/// One run as the comparison takes it: its summary, its machine, and what its directory holds.
pub struct SummarizedRun {
    /// The run's directory, relative to where the exports go.
    pub dir: String,
    pub summary: Summary,
    pub machine: Fingerprint,
    pub alive_max: Option<u64>,
    pub contract_violations: usize,
    pub started_utc: String,
    pub has_collector: bool,
    pub has_flame: bool,
    /// A command's moment measured, seconds after its release (RunPoint's).
    pub measured_at_s: Option<f64>,
    /// A command's declared task lifetime, seconds.
    pub task_lifetime_s: Option<f64>,
    pub memory_limit_bytes: Option<u64>,
    /// The program's own figures (RunPoint's `program`).
    pub program: BTreeMap<String, f64>,
    /// run.json's `runtime_traced`: a run of its own kind (RunPoint's).
    pub runtime_traced: bool,
}

impl SummarizedRun {
    pub fn new(dir: String, summary: Summary, loaded: &LoadedRun) -> Self {
        let (measured_at_s, task_lifetime_s) = match &loaded.run.target {
            Target::Command {
                task_lifetime_ns, ..
            } => (
                loaded
                    .memory
                    .peak
                    .as_ref()
                    .zip(loaded.run.released_t_ns)
                    .map(|(peak, released)| peak.t_ns.saturating_sub(released) as f64 / 1e9),
                task_lifetime_ns.map(|ns| ns as f64 / 1e9),
            ),
            Target::Workload(_) => (None, None),
        };
        SummarizedRun {
            measured_at_s,
            task_lifetime_s,
            dir,
            summary,
            machine: loaded.machine.clone(),
            alive_max: result_event(&loaded.events).and_then(|r| r["alive_max"].as_u64()),
            contract_violations: loaded.run.contract_violations.len(),
            started_utc: loaded.run.started_utc.clone(),
            has_collector: loaded.series.is_some() || loaded.collector.is_some(),
            has_flame: loaded.has_flame,
            memory_limit_bytes: loaded.run.memory_limit_bytes,
            program: program_figures(loaded),
            runtime_traced: loaded.run.runtime_traced,
        }
    }
}

/// A program's figures of its own work: a workload's from its result event, a command's from
/// the last result line it printed (its numeric fields).
fn program_figures(loaded: &LoadedRun) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    match &loaded.run.target {
        Target::Workload(_) => {
            if let Some(r) = result_event(&loaded.events) {
                if let Some(v) = r["spawn_ns_per_task"].as_f64() {
                    out.insert("spawn_ns_per_task".into(), v);
                }
                if let Some(v) = r["throughput"]["value"].as_f64() {
                    out.insert("throughput_per_s".into(), v);
                }
            }
        }
        Target::Command { .. } => {
            if let Some(serde_json::Value::Object(fields)) = &loaded.command_result {
                for (k, v) in fields {
                    if let Some(v) = v.as_f64().filter(|_| k != "t_ns" && k != "schema") {
                        out.insert(k.clone(), v);
                    }
                }
            }
        }
    }
    out
}

/// Groups the runs by machine and cell, fits a line per metric over N.
pub fn compare_runs(
    summarized: &[SummarizedRun],
    plan: Option<Plan>,
    rendered_utc: String,
) -> Comparison {
    let mut machines: Vec<Machine> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut runs = Vec::new();
    for l in summarized {
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
            dir: l.dir.clone(),
            machine: id,
            label: s.label.clone(),
            runtime: s.runtime.clone(),
            workload: s.workload.clone(),
            n: s.n,
            cpu_count: s.cpu_count.as_ref().map(|c| c.count),
            ok: s.ok,
            measured: s.ok
                || (s.outcome.starts_with("spawning stopped at")
                    && s.alive_at_peak.is_some_and(|a| a > 0)
                    && s.memory_per_task.is_some()),
            outcome: s.outcome.clone(),
            started_utc: l.started_utc.clone(),
            // A command's tasks are its own word (--tasks): what time per task divides by.
            spawned: s.spawned.or(s.tasks),
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
            has_collector: l.has_collector,
            probe_cost_share: s
                .probes
                .as_ref()
                .and_then(|p| p.cost.as_ref())
                .and_then(|c| c.share_of_cpu),
            has_flame: l.has_flame,
            verdict: s.verdict.clone(),
            counts_verdict: s.counts_verdict.clone(),
            measured_at_s: l.measured_at_s,
            task_lifetime_s: l.task_lifetime_s,
            memory_limit_bytes: l.memory_limit_bytes,
            serve: s.serve.clone(),
            program: l.program.clone(),
            wake_to_run: s
                .scheduler_trace
                .as_ref()
                .and_then(|f| f.wake_whole().cloned()),
            preempted_to_run: s
                .scheduler_trace
                .as_ref()
                .and_then(|f| f.preempted_whole().cloned()),
            runtime_traced: l.runtime_traced,
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
    // A runtime-traced run is listed with the runs and gives the latency table, nothing else:
    // its memory, faults and times carry the runtime's tracer.
    let ordinary: Vec<RunPoint> = runs.iter().filter(|r| !r.runtime_traced).cloned().collect();
    let mut cells = cells(&ordinary);
    for cell in &mut cells {
        cell.cpu_emulated = machines
            .iter()
            .any(|m| m.id == cell.machine && m.fingerprint.emulator().is_some());
    }
    let fits = fits(&ordinary);
    // Repeats are grouped by experiment and machine: the machine is named once there are two.
    let by_experiment: Vec<repeats::Run> = summarized
        .iter()
        .zip(&runs)
        .filter(|(_, point)| !point.runtime_traced)
        .map(|(l, point)| {
            let mut summary = l.summary.clone();
            if machines.len() > 1 {
                summary.label = format!("{} on {}", summary.label, point.machine);
            }
            repeats::Run {
                dir: l.dir.clone(),
                summary,
                traced: point.has_collector,
                machine: point.machine.clone(),
            }
        })
        .collect();
    let measured: Vec<Measured> = summarized
        .iter()
        .zip(&runs)
        .filter(|(_, point)| !point.runtime_traced)
        .map(|(l, point)| Measured {
            machine: &point.machine,
            summary: &l.summary,
            measured: point.measured,
            emulated: l.machine.emulator().is_some(),
            traced: point.has_collector,
        })
        .collect();
    let mut headlines = headlines(&measured, machines.len() > 1);
    let runtime_latency = runtime_latency::table(
        &summarized
            .iter()
            .zip(&runs)
            .map(|(l, point)| runtime_latency::Taken {
                point,
                summary: &l.summary,
            })
            .collect::<Vec<_>>(),
    );
    for h in &mut headlines {
        let machine = h
            .machine
            .as_deref()
            .or(machines.first().map(|m| m.id.as_str()));
        if let (Some(machine), true) = (machine, WAKE_WORKLOADS.contains(&h.workload.as_str())) {
            h.latency = runtime_latency::headline_sides(&runtime_latency, machine, &h.workload);
        }
    }
    let cpu_sweep = cpu_sweep(
        &summarized
            .iter()
            .map(|l| &l.summary)
            .zip(&runs)
            .filter(|(_, point)| !point.runtime_traced)
            .collect::<Vec<_>>(),
    );
    Comparison {
        schema: 1,
        rendered_utc,
        machines,
        plan,
        runs,
        cells,
        fits,
        // A study's table beside the runs: its study (studies/, a room above) fills it in.
        reproduce: None,
        excluded,
        stopped_at_limit,
        repeats: repeated(&by_experiment),
        headlines,
        cpu_sweep,
        runtime_latency,
    }
}

/// Runtime names as reports order them, each once: the descriptors' first, then the others (the
/// labels of commands) by name.
pub fn ordered_runtimes<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for name in names {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out.sort_by(|a, b| (Runtime::order_of(a), *a).cmp(&(Runtime::order_of(b), *b)));
    out
}

type Group<'a> = BTreeMap<(String, String, String, u64, Option<u32>), Vec<&'a RunPoint>>;

/// A run's experiment: machine, runtime, workload, N, K (its cell, when it has the first four).
type CellKey = (
    String,
    Option<String>,
    Option<String>,
    Option<u64>,
    Option<u32>,
);

fn cell_key(r: &RunPoint) -> CellKey {
    (
        r.machine.clone(),
        r.runtime.clone(),
        r.workload.clone(),
        r.n,
        r.cpu_count,
    )
}

/// Orders runtimes as their descriptors do, workloads in the contract's order.
fn order(runtime: &str, workload: &str) -> (usize, usize) {
    (WorkloadKind::order_of(workload), Runtime::order_of(runtime))
}

fn cells(runs: &[RunPoint]) -> Vec<Cell> {
    let mut groups: Group = BTreeMap::new();
    for r in runs {
        let (Some(rt), Some(wl), Some(n)) = (&r.runtime, &r.workload, r.n) else {
            continue;
        };
        groups
            .entry((r.machine.clone(), rt.clone(), wl.clone(), n, r.cpu_count))
            .or_default()
            .push(r);
    }
    let mut out: Vec<Cell> = groups
        .into_iter()
        .map(|((machine, runtime, workload, n, cpu_count), rs)| {
            let ok: Vec<&RunPoint> = rs.iter().copied().filter(|r| r.measured).collect();
            // Times from the untraced runs where there are any (analyse::times_from).
            let (timed_ok, times_from) = timed(&ok, |r| r.has_collector);
            let over = |runs: &[&RunPoint], f: &dyn Fn(&RunPoint) -> Option<f64>| {
                regression::spread(&runs.iter().filter_map(|r| f(r)).collect::<Vec<f64>>())
            };
            let of = |f: &dyn Fn(&RunPoint) -> Option<f64>| over(&ok, f);
            let time = |f: &dyn Fn(&RunPoint) -> Option<f64>| over(&timed_ok, f);
            let mem = |f: fn(&MemoryPerTask) -> f64| {
                of(&|r: &RunPoint| r.memory_per_task.as_ref().map(f))
            };
            let per_spawned = |runs: &[&RunPoint], f: fn(&RunPoint) -> f64| {
                over(runs, &|r: &RunPoint| {
                    r.spawned.filter(|&s| s > 0).map(|s| f(r) / s as f64)
                })
            };
            Cell {
                machine,
                runtime,
                workload,
                n,
                cpu_count,
                runs: rs.len(),
                ok_runs: rs.iter().filter(|r| r.ok).count(),
                measured_runs: ok.len(),
                times_from,
                alive_at_peak: of(&|r| r.alive_at_peak.map(|a| a as f64)),
                wall_s: time(&|r| Some(r.wall_s)),
                user_s: time(&|r| Some(r.user_s)),
                sys_s: time(&|r| Some(r.sys_s)),
                maxrss_kb: of(&|r| Some(r.maxrss_kb as f64)),
                memory_kb: mem(|m| m.total_kb),
                rss_kb: mem(|m| m.rss_kb),
                rss_summed_kb: of(&|r: &RunPoint| {
                    r.memory_per_task.as_ref().and_then(|m| m.rss_summed_kb)
                }),
                kernel_stack_kb: mem(|m| m.kernel_stack_kb),
                page_tables_kb: mem(|m| m.page_tables_kb),
                slab_kb: mem(|m| m.slab_kb),
                mem_available_drop_kb: mem(|m| m.mem_available_drop_kb),
                user_us: per_spawned(&timed_ok, |r| r.user_s * 1e6),
                sys_us: per_spawned(&timed_ok, |r| r.sys_s * 1e6),
                wall_us: per_spawned(&timed_ok, |r| r.wall_s * 1e6),
                // A count the probes do not change (they fault no page of the workload's).
                minor_faults: per_spawned(&ok, |r| r.minor_faults as f64),
                cpu_emulated: false,
                memory_unresolved: ok
                    .iter()
                    .any(|r| memory_unresolved(r.memory_per_task.as_ref())),
                counts_wrong_runs: rs
                    .iter()
                    .filter(|r| counts_verdict::wrong(r.counts_verdict.as_ref()))
                    .count(),
                times_from_suspect_runs: if !timed_ok.is_empty()
                    && timed_ok
                        .iter()
                        .all(|r| r.verdict.as_ref().is_some_and(|v| !v.trustworthy))
                {
                    timed_ok.len()
                } else {
                    0
                },
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
            a.cpu_count,
        )
            .cmp(&(
                &b.machine,
                order(&b.runtime, &b.workload),
                b.n,
                &b.runtime,
                &b.workload,
                b.cpu_count,
            ))
    });
    out
}

/// Least squares per machine × runtime × workload × metric, over every completed run (each
/// repeat is a point: the spread of the repeats is what the standard error reflects); each slope
/// judged resolved or not at the N it was fitted over (`analyse::resolution`). A time is fitted
/// over the runs whose times count in their cell: at each N the same runs as the cell's medians
/// (untraced ones where the cell has any).
pub fn fits(runs: &[RunPoint]) -> Vec<Fit> {
    let mut by_cell: BTreeMap<CellKey, Vec<&RunPoint>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.measured) {
        by_cell.entry(cell_key(r)).or_default().push(r);
    }
    let times_from: BTreeMap<CellKey, TimesFrom> = by_cell
        .iter()
        .filter_map(|(k, rs)| Some((k.clone(), timed(rs, |r| r.has_collector).1?)))
        .collect();
    let time_counts = |r: &RunPoint| {
        times_from
            .get(&cell_key(r))
            .is_some_and(|f| f.counts(r.has_collector))
    };
    // A line over N at each K (a CPU sweep's runs at different K are different experiments).
    let mut series: BTreeMap<(String, String, String, Option<u32>), Vec<&RunPoint>> =
        BTreeMap::new();
    for r in runs.iter().filter(|r| r.measured) {
        if let (Some(rt), Some(wl)) = (&r.runtime, &r.workload) {
            series
                .entry((r.machine.clone(), rt.clone(), wl.clone(), r.cpu_count))
                .or_default()
                .push(r);
        }
    }
    let mut keys: Vec<_> = series.keys().cloned().collect();
    keys.sort_by(|a, b| {
        (&a.0, order(&a.1, &a.2), &a.1, a.3).cmp(&(&b.0, order(&b.1, &b.2), &b.1, b.3))
    });
    let mut out = Vec::new();
    for key in keys {
        let rs = &series[&key];
        for m in &METRICS {
            let pts: Vec<(f64, f64)> = rs
                .iter()
                .filter(|r| !m.time || time_counts(r))
                .filter_map(|r| {
                    let x = match m.over {
                        Over::AliveAtPeak => r.alive_at_peak?,
                        Over::Spawned => r.spawned?,
                    };
                    Some((x as f64, (m.total)(r)?))
                })
                .collect();
            if let Some(line) = regression::fit(&pts) {
                let xs = pts.iter().map(|p| p.0);
                let x_min = xs.clone().fold(f64::INFINITY, f64::min);
                let x_max = xs.fold(f64::NEG_INFINITY, f64::max);
                let resolution = resolution::judge(&line, x_min, x_max);
                out.push(Fit {
                    machine: key.0.clone(),
                    runtime: key.1.clone(),
                    workload: key.2.clone(),
                    cpu_count: key.3,
                    metric: m.key.into(),
                    label: m.label.into(),
                    unit: m.unit.into(),
                    over: m.over,
                    line,
                    resolution,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::counts::{ProbeCost, ProbeRow, ProbeSummary};
    use crate::run::summary::TimePerTask;
    use crate::time::times_from::TimeRuns;

    /// A completed hold run: its times, its memory per task and page faults; traced runs carry
    /// the collector's counts (clone calls) and its cost.
    struct Hold {
        runtime: &'static str,
        n: u64,
        wall_s: f64,
        spawn_us: f64,
        memory_kb: f64,
        faults: u64,
        traced: bool,
        runtime_traced: bool,
    }

    fn hold(runtime: &'static str, n: u64, wall_s: f64, spawn_us: f64, memory_kb: f64) -> Hold {
        Hold {
            runtime,
            n,
            wall_s,
            spawn_us,
            memory_kb,
            faults: 0,
            traced: false,
            runtime_traced: false,
        }
    }

    /// The same run, traced: `slower` times its times (the probes' cost).
    fn traced(mut h: Hold, slower: f64) -> Hold {
        h.wall_s *= slower;
        h.spawn_us *= slower;
        h.traced = true;
        h
    }

    fn summarized(runs: Vec<Hold>) -> Vec<SummarizedRun> {
        runs.into_iter()
            .enumerate()
            .map(|(i, h)| SummarizedRun {
                dir: format!(
                    "{i}-{}-{}",
                    h.runtime,
                    if h.traced { "traced" } else { "untraced" }
                ),
                summary: Summary {
                    label: format!("{} hold --n {}", h.runtime, h.n),
                    runtime: Some(h.runtime.into()),
                    workload: Some("hold".into()),
                    n: Some(h.n),
                    ok: true,
                    outcome: "completed".into(),
                    spawned: Some(h.n),
                    tasks: Some(h.n),
                    alive_at_peak: Some(h.n),
                    wall_s: h.wall_s,
                    // User and system time take the run's wall time's share: slower alike.
                    user_s: h.wall_s / 10.0,
                    sys_s: h.wall_s / 2.0,
                    maxrss_kb: (h.memory_kb * h.n as f64) as u64,
                    minor_faults: h.faults,
                    memory_per_task: Some(MemoryPerTask {
                        total_kb: h.memory_kb,
                        rss_kb: h.memory_kb,
                        ..Default::default()
                    }),
                    time_per_task: Some(TimePerTask {
                        spawn_us: Some(h.spawn_us),
                        user_us: h.wall_s / 10.0 * 1e6 / h.n as f64,
                        sys_us: h.wall_s / 2.0 * 1e6 / h.n as f64,
                        ..Default::default()
                    }),
                    probes: h.traced.then(|| ProbeSummary {
                        rows: vec![ProbeRow {
                            metric: "clone_calls".into(),
                            unit: "count".into(),
                            total: h.n,
                            ..Default::default()
                        }],
                        cost: Some(ProbeCost {
                            share_of_cpu: Some(0.11),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                machine: Fingerprint::default(),
                alive_max: Some(h.n),
                contract_violations: 0,
                started_utc: format!("2026-01-01T00:00:0{i}Z"),
                has_collector: h.traced,
                has_flame: false,
                measured_at_s: None,
                task_lifetime_s: None,
                memory_limit_bytes: None,
                program: BTreeMap::new(),
                runtime_traced: h.runtime_traced,
            })
            .collect()
    }

    fn cell<'a>(c: &'a Comparison, runtime: &str, n: u64) -> &'a Cell {
        c.cells
            .iter()
            .find(|c| c.runtime == runtime && c.n == n)
            .unwrap()
    }

    /// trace.sh's main job at small N: per runtime three untraced runs and one traced, the
    /// traced one 13 % slower (the probes' cost), placed in the middle.
    fn main_job() -> Vec<Hold> {
        let with_faults = |mut h: Hold, faults: u64| {
            h.faults = faults;
            h
        };
        vec![
            with_faults(hold("threads", 2_000, 1.00, 20.0, 40.0), 100),
            hold("goroutines", 20_000, 0.50, 2.0, 2.6),
            with_faults(hold("threads", 2_000, 1.02, 21.0, 41.0), 110),
            hold("goroutines", 20_000, 0.52, 2.1, 2.7),
            with_faults(traced(hold("threads", 2_000, 1.02, 21.0, 43.0), 1.13), 130),
            traced(hold("goroutines", 20_000, 0.52, 2.1, 2.9), 1.13),
            with_faults(hold("threads", 2_000, 0.98, 19.0, 42.0), 120),
            hold("goroutines", 20_000, 0.48, 1.9, 2.8),
        ]
    }

    #[test]
    fn times_come_from_the_untraced_runs_memory_from_all_and_counts_from_the_traced_one() {
        let c = compare_runs(&summarized(main_job()), None, String::new());
        let threads = cell(&c, "threads", 2_000);
        assert_eq!(
            threads.times_from,
            Some(TimesFrom {
                runs: TimeRuns::Untraced,
                untraced_runs: 3,
                traced_runs: 1
            })
        );
        assert_eq!((threads.runs, threads.measured_runs), (4, 4));
        // Every time figure: the untraced runs' median, min and max (0.98, 1.00, 1.02 s), the
        // traced run's 1.15 s nowhere.
        let wall = threads.wall_s.as_ref().unwrap();
        assert_eq!((wall.min, wall.median, wall.max), (0.98, 1.00, 1.02));
        assert!((threads.user_s.as_ref().unwrap().max - 0.102).abs() < 1e-12);
        assert_eq!(threads.sys_s.as_ref().unwrap().median, 0.5);
        assert_eq!(threads.wall_us.as_ref().unwrap().median, 500.0);
        assert!((threads.sys_us.as_ref().unwrap().max - 255.0).abs() < 1e-9);
        // Memory over all four: (41 + 42) / 2, where the untraced three alone give 41.
        let memory = threads.memory_kb.as_ref().unwrap();
        assert_eq!((memory.median, memory.max), (41.5, 43.0));
        assert_eq!(threads.rss_kb.as_ref().unwrap().median, 41.5);
        // Page faults too: (110 + 120) / 2 over 2,000 tasks.
        assert!((threads.minor_faults.as_ref().unwrap().median - 0.0575).abs() < 1e-12);
        // The counts and the probes' cost are the traced run's alone.
        let with_counts: Vec<&RunPoint> = c
            .runs
            .iter()
            .filter(|r| r.runtime.as_deref() == Some("threads") && r.probe_cost_share.is_some())
            .collect();
        assert_eq!(with_counts.len(), 1);
        assert!(with_counts[0].has_collector && with_counts[0].dir.ends_with("-traced"));
        // Time over repeats: the three untraced runs; the traced one is no outlier of theirs.
        let rep = c
            .repeats
            .iter()
            .find(|r| r.label == "threads hold --n 2000")
            .unwrap();
        assert_eq!(rep.runs, 3);
        assert_eq!(rep.times_from, threads.times_from);
        let spawn = rep.figures.iter().find(|f| f.key == "spawn_us").unwrap();
        assert_eq!(
            (spawn.all.min, spawn.all.median, spawn.all.max),
            (19.0, 20.0, 21.0)
        );
        assert!(rep.outliers.iter().all(|o| !o.run.ends_with("-traced")));
        // The headline's spawn ratio: 20 µs against 2 µs, the untraced medians; its memory the
        // medians of all four.
        let h = &c.headlines[0];
        assert_eq!(
            (h.dearer.spawn_us, h.cheaper.spawn_us),
            (Some(20.0), Some(2.0))
        );
        assert_eq!((h.dearer.memory_kib, h.dearer.runs), (Some(41.5), 4));
    }

    #[test]
    fn a_time_fit_takes_the_runs_its_cells_take() {
        // Two N, each with two untraced runs and a traced one 13 % slower.
        let mut runs = Vec::new();
        for n in [1_000, 2_000] {
            let wall = n as f64 / 2_000.0;
            runs.push(hold("threads", n, wall, 20.0, 40.0));
            runs.push(traced(hold("threads", n, wall, 20.0, 40.0), 1.13));
            runs.push(hold("threads", n, wall * 1.01, 20.0, 40.0));
        }
        let c = compare_runs(&summarized(runs), None, String::new());
        let fit = |metric: &str| c.fits.iter().find(|f| f.metric == metric).unwrap();
        assert_eq!(fit("wall_us").line.points, 4);
        assert_eq!(fit("sys_us").line.points, 4);
        assert_eq!(fit("rss_kb").line.points, 6);
    }

    #[test]
    fn with_traced_runs_only_every_run_is_timed_as_before_and_labelled_so() {
        let all_traced: Vec<Hold> = main_job()
            .into_iter()
            .map(|mut h| {
                h.traced = true;
                h
            })
            .collect();
        let c = compare_runs(&summarized(all_traced), None, String::new());
        let threads = cell(&c, "threads", 2_000);
        assert_eq!(
            threads.times_from,
            Some(TimesFrom {
                runs: TimeRuns::Traced,
                untraced_runs: 0,
                traced_runs: 4
            })
        );
        // The four runs' medians, the slow one among them, as before the rule.
        let wall = threads.wall_s.as_ref().unwrap();
        assert_eq!((wall.median, wall.max), (1.01, 1.02 * 1.13));
        assert_eq!(threads.memory_kb.as_ref().unwrap().median, 41.5);
        let rep = &c.repeats[0];
        assert_eq!(rep.runs, 4);
        assert_eq!(c.headlines[0].dearer.spawn_us, Some(20.5));
    }

    #[test]
    fn a_runtime_traced_run_is_listed_but_counts_in_no_memory_fault_or_time_figure() {
        // The goroutines' runtime-traced run: 10× the memory, faults and times of its cell's.
        let mut runtime_traced = traced(hold("goroutines", 20_000, 5.0, 20.0, 26.0), 1.0);
        runtime_traced.faults = 100_000;
        runtime_traced.runtime_traced = true;
        let mut runs = main_job();
        runs.push(runtime_traced);
        let with = compare_runs(&summarized(runs), None, String::new());
        let without = compare_runs(&summarized(main_job()), None, String::new());
        assert_eq!(with.runs.len(), without.runs.len() + 1);
        assert!(with.runs.last().unwrap().runtime_traced);
        let (a, b) = (
            cell(&with, "goroutines", 20_000),
            cell(&without, "goroutines", 20_000),
        );
        assert_eq!(a.runs, 4, "the cell's runs are its ordinary four");
        assert_eq!(a.memory_kb, b.memory_kb);
        assert_eq!(a.minor_faults, b.minor_faults);
        assert_eq!(a.wall_s, b.wall_s);
        assert_eq!(a.times_from, b.times_from);
        assert_eq!(with.fits.len(), without.fits.len());
        for (f, g) in with.fits.iter().zip(&without.fits) {
            assert_eq!(f.line.points, g.line.points, "{}", f.metric);
        }
        assert_eq!(with.repeats, without.repeats);
        assert_eq!(with.headlines, without.headlines);
        // Counted, the memory median would move: 2.75 → 2.8 KiB over five.
        assert_eq!(a.memory_kb.as_ref().unwrap().median, 2.75);
        // hold is not a wake workload, but the run is still in the latency table's keys (it
        // gave no runtime figures: a synthetic summary).
        assert_eq!(with.runtime_latency.len(), 1);
        assert!(without.runtime_latency.is_empty());
    }

    #[test]
    fn one_vm_booted_twice_is_one_machine_and_another_size_is_not() {
        let boot = |kb: u64| Fingerprint {
            hostname: "virtme-ng".into(),
            memory_total_bytes: kb * 1024,
            ..Fingerprint::default()
        };
        assert_eq!(machine_key(&boot(6_072_376)), machine_key(&boot(6_072_380)));
        assert_ne!(machine_key(&boot(6_072_376)), machine_key(&boot(4_048_252)));
    }
}
