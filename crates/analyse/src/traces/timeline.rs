//! A run over time, for its timeline chart: the collector's per-bucket counts of faults, clones
//! and switches when it ran, else the conductor's 100 ms memory samples; phases as spans. And
//! which runs of a comparison get a timeline.

use crate::comparisons::compare::{ordered_runtimes, Comparison};
use crate::comparisons::run_point::RunPoint;
use crate::run::phases::shown_name;
use record::LoadedRun;

/// One panel of a timeline: lines sharing a unit.
pub struct Panel {
    pub title: String,
    pub unit: String,
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// A run over time, from its release: phases shaded, panels of lines.
pub struct Timeline {
    pub title: String,
    pub source: String,
    /// (name, start s, end s) from the run's release.
    pub phases: Vec<(String, f64, f64)>,
    pub panels: Vec<Panel>,
}

/// The timeline of one run: the collector's per-bucket counts of faults,
/// clones and switches when collector.json is there, else memory.json's 100 ms samples.
pub fn of_run(loaded: &LoadedRun) -> Option<Timeline> {
    let origin = loaded
        .run
        .released_t_ns
        .or_else(|| loaded.memory.timeline.first().map(|s| s.t_ns))?;
    let end = loaded
        .run
        .reaped_t_ns
        .unwrap_or(origin + loaded.run.wall_ns);
    let secs = |t: u64| (t as f64 - origin as f64) / 1e9;
    let mut marks: Vec<(String, f64)> = vec![("startup".into(), 0.0)];
    for p in &loaded.memory.phases {
        marks.push((shown_name(&p.name).to_string(), secs(p.t_ns)));
    }
    let mut phases = Vec::new();
    for (i, (name, t0)) in marks.iter().enumerate() {
        let t1 = marks.get(i + 1).map_or(secs(end), |m| m.1);
        if t1 > *t0 {
            phases.push((name.clone(), *t0, t1));
        }
    }
    let title = loaded.run.target.label();
    let mut panels = Vec::new();
    let source;
    if let Some(c) = &loaded.series {
        source = format!(
            "eBPF collector (collector.json), per {} ms bucket, shown per 100 ms",
            c.bucket_ns / 1_000_000
        );
        let scale = 1e8 / c.bucket_ns as f64;
        let end_s = secs(end);
        let pts = |values: &[f64]| -> Vec<(f64, f64)> {
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (secs(c.t0_ns + i as u64 * c.bucket_ns), v * scale))
                .filter(|(t, _)| *t <= end_s + 0.2)
                .collect()
        };
        let group = |title: &str, want: &dyn Fn(&str) -> bool| Panel {
            title: title.into(),
            unit: "per 100 ms".into(),
            lines: c
                .series
                .iter()
                .filter(|(name, _)| want(name))
                .map(|(name, values)| (name.replace('_', " "), pts(values)))
                .collect(),
        };
        panels.push(group("page faults", &|n| n.contains("fault")));
        panels.push(group("threads created (clones) and exited", &|n| {
            n.contains("new_thread") || n.contains("clone") || n.contains("thread_exit")
        }));
        panels.push(group("context switches", &|n| n.contains("switch")));
        panels.retain(|p| !p.lines.is_empty());
    } else {
        source = "conductor's samples every 100 ms (memory.json; no collector.json)".into();
        let tl = &loaded.memory.timeline;
        let base = tl.first().map_or(0, |s| s.mem_available_kb) as f64;
        let mib = |kb: f64| kb / 1024.0;
        let mut mem = vec![
            (
                "RSS".to_string(),
                tl.iter()
                    .map(|s| (secs(s.t_ns), mib(s.rss_kb as f64)))
                    .collect::<Vec<_>>(),
            ),
            (
                "MemAvailable drop".to_string(),
                tl.iter()
                    .map(|s| (secs(s.t_ns), mib(base - s.mem_available_kb as f64)))
                    .collect(),
            ),
        ];
        if tl.iter().any(|s| s.cgroup_bytes.is_some()) {
            mem.push((
                "charged to the cgroup".to_string(),
                tl.iter()
                    .filter_map(|s| Some((secs(s.t_ns), s.cgroup_bytes? as f64 / 1048576.0)))
                    .collect(),
            ));
        }
        panels.push(Panel {
            title: "memory".into(),
            unit: "MiB".into(),
            lines: mem,
        });
        panels.push(Panel {
            title: "OS threads of the process".into(),
            unit: "threads".into(),
            lines: vec![(
                "threads".into(),
                tl.iter()
                    .map(|s| (secs(s.t_ns), s.threads as f64))
                    .collect(),
            )],
        });
    }
    if panels
        .iter()
        .all(|p| p.lines.iter().all(|l| l.1.is_empty()))
    {
        return None;
    }
    Some(Timeline {
        title,
        source,
        phases,
        panels,
    })
}

/// The runs of a comparison that get a timeline: per machine and runtime, its largest measured run
/// of the first workload (with the collector's series when one has them).
pub fn shown_runs(report: &Comparison) -> Vec<&RunPoint> {
    let mut shown = Vec::new();
    for machine in &report.machines {
        let first = report
            .cells
            .iter()
            .find(|c| c.machine == machine.id)
            .map(|c| c.workload.as_str());
        let runtimes = ordered_runtimes(
            report
                .runs
                .iter()
                .filter(|r| r.machine == machine.id && r.workload.as_deref() == first)
                .filter_map(|r| r.runtime.as_deref()),
        );
        for runtime in runtimes {
            let run = report
                .runs
                .iter()
                .filter(|r| {
                    r.machine == machine.id
                        && r.measured
                        && r.runtime.as_deref() == Some(runtime)
                        && r.workload.as_deref() == first
                })
                .max_by_key(|r| (r.has_collector, r.n));
            shown.extend(run);
        }
    }
    shown
}
