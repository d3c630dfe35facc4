//! SVG charts drawn with plotters' SVG backend (no fonts or bitmaps needed: the browser renders
//! the text): memory per task vs N stacked by part, threads beside goroutines; time per task vs N;
//! the timeline of one run (the collector's 100 ms series when it ran, else the conductor's
//! 100 ms memory samples), phases shaded.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::analysis::{self, Cell, CompareReport};
use crate::report;
use crate::units::{bytes, count};

const FONT: &str = "sans-serif";
const RUNTIMES: [&str; 2] = ["threads", "goroutines"];

/// One chart, ready to write or inline.
pub struct Chart {
    /// File name under charts/.
    pub file: String,
    pub title: String,
    /// What the chart shows and where its data came from.
    pub note: String,
    pub svg: String,
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e:?}")
}

const PARTS: [(&str, RGBColor); 4] = [
    ("RSS", RGBColor(70, 130, 180)),
    ("kernel stack", RGBColor(214, 39, 40)),
    ("page tables", RGBColor(255, 127, 14)),
    ("slab", RGBColor(44, 160, 44)),
];

fn part_values(c: &Cell) -> Option<[f64; 4]> {
    Some([
        c.rss_kb?.median,
        c.kernel_stack_kb?.median,
        c.page_tables_kb?.median,
        c.slab_kb?.median,
    ])
}

fn short_n(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => count(n),
    }
}

/// Memory per task alive at the peak, by N: one bar per runtime, stacked RSS / kernel stack /
/// page tables / slab (medians over repeats), on one scale so the two compare at a glance.
pub fn memory_per_task(cells: &[&Cell], workload: &str) -> Result<Option<String>> {
    let mut ns: Vec<u64> = cells
        .iter()
        .filter(|c| c.workload == workload && part_values(c).is_some())
        .map(|c| c.n)
        .collect();
    ns.sort_unstable();
    ns.dedup();
    if ns.is_empty() {
        return Ok(None);
    }
    let find = |rt: &str, n: u64| {
        cells
            .iter()
            .find(|c| c.workload == workload && c.runtime == rt && c.n == n)
            .and_then(|c| part_values(c))
    };
    let ymax = ns
        .iter()
        .flat_map(|&n| RUNTIMES.iter().filter_map(move |rt| find(rt, n)))
        .map(|p| p.iter().map(|v| v.max(0.0)).sum::<f64>())
        .fold(1.0, f64::max)
        * 1.25;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Memory per task alive at the peak — {workload} (median of repeats)"),
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..ns.len() as f64, 0f64..ymax)
            .map_err(err)?;
        let labels = ns.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(ns.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (x - 0.5).round();
                if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                    format!("N = {}", short_n(labels[i as usize]))
                } else {
                    String::new()
                }
            })
            .y_desc("KiB per task")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(err)?;
        for (k, (name, color)) in PARTS.iter().enumerate() {
            let mut rects = Vec::new();
            for (i, &n) in ns.iter().enumerate() {
                for (j, rt) in RUNTIMES.iter().enumerate() {
                    let Some(p) = find(rt, n) else { continue };
                    let below: f64 = p[..k].iter().map(|v| v.max(0.0)).sum();
                    let x0 = i as f64 + 0.1 + j as f64 * 0.42;
                    rects.push(Rectangle::new(
                        [(x0, below), (x0 + 0.38, below + p[k].max(0.0))],
                        color.filled(),
                    ));
                }
            }
            let color = *color;
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 12, y + 6)], color.filled())
                });
        }
        let style =
            TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, &n) in ns.iter().enumerate() {
            for (j, rt) in RUNTIMES.iter().enumerate() {
                let Some(p) = find(rt, n) else { continue };
                let total: f64 = p.iter().map(|v| v.max(0.0)).sum();
                let x = i as f64 + 0.1 + j as f64 * 0.42 + 0.19;
                chart
                    .draw_series([
                        Text::new(
                            bytes(total * 1024.0),
                            (x, total + ymax * 0.005),
                            style.clone(),
                        ),
                        Text::new(rt.to_string(), (x, total + ymax * 0.05), style.clone()),
                    ])
                    .map_err(err)?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 14))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

/// Time per task spawned vs N (log–log): user and system time per runtime, medians with
/// min–max whiskers.
pub fn time_per_task(cells: &[&Cell], workload: &str) -> Result<Option<String>> {
    type Get = fn(&Cell) -> Option<crate::regression::Spread>;
    let lines: [(&str, &str, Get, RGBColor); 4] = [
        ("threads", "system", |c| c.sys_us, RGBColor(214, 39, 40)),
        ("threads", "user", |c| c.user_us, RGBColor(255, 152, 150)),
        ("goroutines", "system", |c| c.sys_us, RGBColor(31, 119, 180)),
        ("goroutines", "user", |c| c.user_us, RGBColor(120, 170, 220)),
    ];
    let mut series = Vec::new();
    for (rt, what, get, color) in lines {
        let mut pts: Vec<(f64, crate::regression::Spread)> = cells
            .iter()
            .filter(|c| c.workload == workload && c.runtime == rt)
            .filter_map(|c| Some((c.n as f64, get(c).filter(|s| s.median > 0.0)?)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !pts.is_empty() {
            series.push((format!("{rt} {what}"), pts, color));
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let all = || series.iter().flat_map(|s| s.1.iter());
    let xmin = all().map(|p| p.0).fold(f64::MAX, f64::min);
    let xmax = all().map(|p| p.0).fold(0.0, f64::max);
    // The axis follows the medians (a repeat whose rusage rounded to 0 would stretch it to
    // nothing), with room below them for the legend; whiskers are cut at the axis.
    let ymin = all().map(|p| p.1.median).fold(f64::MAX, f64::min) / 8.0;
    let ymax = all().map(|p| p.1.max).fold(0.0, f64::max) * 2.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("CPU time per task spawned — {workload} (median, min–max whiskers)"),
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (xmin / 1.6..xmax * 1.6).log_scale(),
                (ymin..ymax).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("N (tasks)")
            .y_desc("µs per task")
            .x_label_formatter(&|x| short_n(x.round() as u64))
            .y_label_formatter(&|y| {
                if *y >= 1.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.2}")
                }
            })
            .draw()
            .map_err(err)?;
        for (name, pts, color) in &series {
            let color = *color;
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|(x, s)| (*x, s.median)),
                    color.stroke_width(2),
                ))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    pts.iter()
                        .map(|(x, s)| Circle::new((*x, s.median), 4, color.filled())),
                )
                .map_err(err)?;
            chart
                .draw_series(pts.iter().filter(|(_, s)| s.max > s.min).map(|(x, s)| {
                    PathElement::new([(*x, s.min.max(ymin)), (*x, s.max)], color.stroke_width(1))
                }))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 14))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

/// One panel of a timeline: lines sharing a unit.
pub struct Panel {
    pub title: String,
    pub unit: String,
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

pub struct Timeline {
    pub title: String,
    pub source: String,
    /// (name, start s, end s) from the run's release.
    pub phases: Vec<(String, f64, f64)>,
    pub panels: Vec<Panel>,
}

const LINE_COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];
const PHASE_COLORS: [RGBColor; 5] = [
    RGBColor(255, 221, 170),
    RGBColor(200, 230, 200),
    RGBColor(210, 210, 240),
    RGBColor(240, 200, 220),
    RGBColor(220, 220, 220),
];

/// The timeline of one run from its directory: the collector's per-bucket counts of faults,
/// clones and switches when collector.json is there, else memory.json's 100 ms samples.
pub fn timeline_data(dir: &Path) -> Option<Timeline> {
    let loaded = report::load(dir).ok()?;
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
        let name = if p.name == "end" { "exit" } else { &p.name };
        marks.push((name.to_string(), secs(p.t_ns)));
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
    if let Some(c) = analysis::read_collector(dir) {
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

pub fn timeline(t: &Timeline) -> Result<String> {
    let height = 90 + 230 * t.panels.len() as u32;
    let xmax = t
        .phases
        .iter()
        .map(|p| p.2)
        .chain(
            t.panels
                .iter()
                .flat_map(|p| p.lines.iter().flat_map(|l| l.1.iter().map(|q| q.0))),
        )
        .fold(0.1, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(&format!("Timeline — {}", t.title), (FONT, 20))
            .map_err(err)?;
        let areas = root.split_evenly((t.panels.len(), 1));
        for (panel, area) in t.panels.iter().zip(areas.iter()) {
            let ymax = panel
                .lines
                .iter()
                .flat_map(|l| l.1.iter().map(|p| p.1))
                .fold(1.0, f64::max)
                * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{} ({})", panel.title, panel.unit), (FONT, 15))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..xmax, 0f64..ymax)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("seconds since the workload was released")
                .y_label_formatter(&|y| {
                    if *y >= 10_000.0 {
                        format!("{:.0}k", y / 1000.0)
                    } else {
                        format!("{y:.0}")
                    }
                })
                .draw()
                .map_err(err)?;
            let label =
                TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Left, VPos::Top));
            for (i, (name, t0, t1)) in t.phases.iter().enumerate() {
                let color = PHASE_COLORS[i % PHASE_COLORS.len()];
                chart
                    .draw_series([Rectangle::new(
                        [(*t0, 0.0), (*t1, ymax)],
                        color.mix(0.5).filled(),
                    )])
                    .map_err(err)?;
                // Labels only where there is room (start-up is often a sliver).
                if t1 - t0 > xmax * 0.04 {
                    chart
                        .draw_series([Text::new(name.clone(), (*t0, ymax * 0.98), label.clone())])
                        .map_err(err)?;
                }
            }
            for (i, (name, pts)) in panel.lines.iter().enumerate() {
                let color = LINE_COLORS[i % LINE_COLORS.len()];
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                    .map_err(err)?
                    .label(name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FONT, 13))
                .draw()
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Every chart for a report: per machine, per workload, memory and time; one timeline per
/// runtime (its largest completed run of the first workload). `base` resolves the runs' dirs.
pub fn all(report: &CompareReport, base: &Path) -> Result<Vec<Chart>> {
    let mut charts = Vec::new();
    let multi = report.machines.len() > 1;
    for (mi, machine) in report.machines.iter().enumerate() {
        let suffix = if multi {
            format!("-m{}", mi + 1)
        } else {
            String::new()
        };
        let on = if multi {
            format!(" — {}", machine.id)
        } else {
            String::new()
        };
        let cells: Vec<&Cell> = report
            .cells
            .iter()
            .filter(|c| c.machine == machine.id)
            .collect();
        let mut workloads: Vec<&str> = Vec::new();
        for c in &cells {
            if !workloads.contains(&c.workload.as_str()) {
                workloads.push(&c.workload);
            }
        }
        for wl in &workloads {
            if let Some(svg) = memory_per_task(&cells, wl)? {
                charts.push(Chart {
                    file: format!("memory-per-task-{wl}{suffix}.svg"),
                    title: format!("Memory per task, {wl}{on}"),
                    note: "Median over repeats of each part per task alive at the peak: RSS (/proc/PID/status), kernel stack, page tables, slab (cgroup or /proc/meminfo). One scale for both runtimes.".into(),
                    svg,
                });
            }
            if let Some(svg) = time_per_task(&cells, wl)? {
                charts.push(Chart {
                    file: format!("time-per-task-{wl}{suffix}.svg"),
                    title: format!("Time per task, {wl}{on}"),
                    note: "User and system time (wait4 rusage) divided by tasks spawned; log–log."
                        .into(),
                    svg,
                });
            }
        }
        let first = workloads.first().copied();
        for rt in RUNTIMES {
            let run = report
                .runs
                .iter()
                .filter(|r| {
                    r.machine == machine.id
                        && r.measured
                        && r.runtime.as_deref() == Some(rt)
                        && r.workload.as_deref() == first
                })
                .max_by_key(|r| (r.has_collector, r.n));
            let Some(run) = run else { continue };
            let dir: PathBuf = base.join(&run.dir);
            if let Some(data) = timeline_data(&dir) {
                charts.push(Chart {
                    file: format!(
                        "timeline-{rt}-{}-{}{suffix}.svg",
                        first.unwrap_or(""),
                        run.n.unwrap_or(0)
                    ),
                    title: format!("Timeline, {}{on}", run.label),
                    note: format!("Source: {}. Phases shaded.", data.source),
                    svg: timeline(&data)?,
                });
            }
        }
    }
    Ok(charts)
}

/// Writes the charts under `out/charts/`.
pub fn write(charts: &[Chart], out: &Path) -> Result<()> {
    let dir = out.join("charts");
    fs::create_dir_all(&dir)?;
    // Charts of an earlier rendering that this one does not draw again (say, a timeline of
    // another run) would sit beside the new ones as if current.
    for entry in fs::read_dir(&dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = ["memory-per-task-", "time-per-task-", "timeline-"]
            .iter()
            .any(|p| name.starts_with(p))
            && name.ends_with(".svg");
        if ours && !charts.iter().any(|c| c.file == name) {
            let _ = fs::remove_file(entry.path());
        }
    }
    for c in charts {
        fs::write(dir.join(&c.file), &c.svg)?;
    }
    Ok(())
}
