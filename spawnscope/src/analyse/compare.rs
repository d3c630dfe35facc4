//! A set of results directories, read back from disk and put side by side: one point per run,
//! min / median / max per cell (machine × runtime × workload × N), per-task costs by regression
//! over N, cross-checks, and the exports (compare.json, compare.csv, compare-fits.csv,
//! compare.md). `compare` calls it after its matrix; `report DIR…` calls it on directories
//! already on disk, from this machine or others.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analyse::headline::{headlines, Headline, Measured};
use crate::analyse::regression::{self, LineFit, Spread};
use crate::analyse::repeats::{repeated, Repeated};
use crate::analyse::reproduce::Reproduce;
use crate::analyse::resolution::{self, Resolution};
pub use crate::analyse::run_point::RunPoint;
use crate::analyse::summary::{memory_unresolved, MemoryPerTask, Summary};
use crate::record::{Fingerprint, LoadedRun, Plan, Target};
use crate::runtime::{result_event, Runtime, WorkloadKind};
use crate::units::count;

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
    /// The machine's CPU was emulated (QEMU's TCG): the time figures are the emulator's, and
    /// the tables mark them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpu_emulated: bool,
    /// A run of the cell had too little memory held to resolve its memory per task
    /// (`resolution::judge_held`): the memory figures are marked not resolved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_unresolved: bool,
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
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize)]
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
            measured_at_s: l.measured_at_s,
            task_lifetime_s: l.task_lifetime_s,
            memory_limit_bytes: l.memory_limit_bytes,
            serve: s.serve.clone(),
            program: l.program.clone(),
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
    let mut cells = cells(&runs);
    for cell in &mut cells {
        cell.cpu_emulated = machines
            .iter()
            .any(|m| m.id == cell.machine && m.fingerprint.emulator().is_some());
    }
    let fits = fits(&runs);
    // Repeats are grouped by experiment and machine: the machine is named once there are two.
    let by_experiment: Vec<(String, Summary)> = summarized
        .iter()
        .zip(&runs)
        .map(|(l, point)| {
            let mut summary = l.summary.clone();
            if machines.len() > 1 {
                summary.label = format!("{} on {}", summary.label, point.machine);
            }
            (l.dir.clone(), summary)
        })
        .collect();
    let measured: Vec<Measured> = summarized
        .iter()
        .zip(&runs)
        .map(|(l, point)| Measured {
            machine: &point.machine,
            summary: &l.summary,
            measured: point.measured,
            emulated: l.machine.emulator().is_some(),
        })
        .collect();
    let headlines = headlines(&measured, machines.len() > 1);
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

type Group<'a> = BTreeMap<(String, String, String, u64), Vec<&'a RunPoint>>;

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
                cpu_emulated: false,
                memory_unresolved: ok
                    .iter()
                    .any(|r| memory_unresolved(r.memory_per_task.as_ref())),
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
/// repeat is a point: the spread of the repeats is what the standard error reflects); each slope
/// judged resolved or not at the N it was fitted over (`analyse::resolution`).
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
                let xs = pts.iter().map(|p| p.0);
                let x_min = xs.clone().fold(f64::INFINITY, f64::min);
                let x_max = xs.fold(f64::NEG_INFINITY, f64::max);
                let resolution = resolution::judge(&line, x_min, x_max);
                out.push(Fit {
                    machine: key.0.clone(),
                    runtime: key.1.clone(),
                    workload: key.2.clone(),
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
