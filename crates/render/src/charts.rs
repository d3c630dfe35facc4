//! SVG charts drawn with plotters' SVG backend (no fonts or bitmaps needed: the browser renders
//! the text): memory per task vs N stacked by part, the runtimes side by side; time per task vs N;
//! the timeline of one run (the collector's 100 ms series when it ran, else the conductor's
//! 100 ms memory samples), phases shaded.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::chart_kit::{err, short_n, Chart, FONT};
use analyse::comparisons::compare::{ordered_runtimes, Cell, Comparison, RunPoint};
use analyse::comparisons::cpu_sweep::CpuSeries;
use analyse::comparisons::regression::Spread;
use analyse::traces::timeline::Timeline;
use runtime::Runtime;
use units::{bytes, count};

/// The file names of the charts this module draws start with one of these (under charts/); a
/// serve sweep's are `serving_charts::FILE_PREFIXES`.
pub const FILE_PREFIXES: [&str; 4] = [
    "memory-per-task-",
    "time-per-task-",
    "timeline-",
    "per-task-against-cpus-",
];

/// A command's system and user time colours (RGB), by its place among the chart's commands:
/// those of tab10 the runtimes' descriptors leave.
const COMMAND_COLORS: [[(u8, u8, u8); 2]; 6] = [
    [(148, 103, 189), (197, 176, 213)],
    [(255, 127, 14), (255, 187, 120)],
    [(140, 86, 75), (196, 156, 148)],
    [(227, 119, 194), (247, 182, 210)],
    [(23, 190, 207), (158, 218, 229)],
    [(188, 189, 34), (219, 219, 141)],
];

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

/// Memory per task alive at the peak, by N: one bar per runtime, stacked RSS / kernel stack /
/// page tables / slab (medians over repeats), on one scale so the runtimes compare at a glance.
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
    // One bar per runtime in each N's slot, in the descriptors' order, commands after.
    let runtimes = ordered_runtimes(
        cells
            .iter()
            .filter(|c| c.workload == workload)
            .map(|c| c.runtime.as_str()),
    );
    let slot = 0.84 / runtimes.len() as f64;
    let find = |rt: &str, n: u64| {
        cells
            .iter()
            .find(|c| c.workload == workload && c.runtime == rt && c.n == n)
            .and_then(|c| part_values(c))
    };
    let ymax = ns
        .iter()
        .flat_map(|&n| runtimes.iter().filter_map(move |rt| find(rt, n)))
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
                for (j, rt) in runtimes.iter().enumerate() {
                    let Some(p) = find(rt, n) else { continue };
                    let below: f64 = p[..k].iter().map(|v| v.max(0.0)).sum();
                    let x0 = i as f64 + 0.1 + j as f64 * slot;
                    rects.push(Rectangle::new(
                        [(x0, below), (x0 + slot - 0.04, below + p[k].max(0.0))],
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
            for (j, rt) in runtimes.iter().enumerate() {
                let Some(p) = find(rt, n) else { continue };
                let total: f64 = p.iter().map(|v| v.max(0.0)).sum();
                let x = i as f64 + 0.1 + j as f64 * slot + (slot - 0.04) / 2.0;
                chart
                    .draw_series([
                        Text::new(
                            bytes(total * 1024.0),
                            (x, total + ymax * 0.005),
                            style.clone(),
                        ),
                        // Every other runtime's name a line higher: neighbours' names over bars
                        // of about the same height would run into each other.
                        Text::new(
                            rt.to_string(),
                            (x, total + ymax * (0.05 + 0.045 * (j % 2) as f64)),
                            style.clone(),
                        ),
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
    type Get = fn(&Cell) -> Option<Spread>;
    let mut lines: Vec<(&str, &str, Get, RGBColor)> = Vec::new();
    let runtimes = ordered_runtimes(
        cells
            .iter()
            .filter(|c| c.workload == workload)
            .map(|c| c.runtime.as_str()),
    );
    let mut commands = 0;
    for name in runtimes {
        let [(sr, sg, sb), (ur, ug, ub)] = match Runtime::ALL.iter().find(|r| r.name() == name) {
            Some(runtime) => runtime.describe().colors,
            None => {
                commands += 1;
                COMMAND_COLORS[(commands - 1) % COMMAND_COLORS.len()]
            }
        };
        lines.push((name, "system", |c| c.sys_us, RGBColor(sr, sg, sb)));
        lines.push((name, "user", |c| c.user_us, RGBColor(ur, ug, ub)));
    }
    let mut series = Vec::new();
    for (rt, what, get, color) in lines {
        let mut pts: Vec<(f64, Spread)> = cells
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

/// Every chart for a report: per machine, per workload, memory and time; the timelines of the
/// runs `analyse::traces::timeline::shown_runs` picks (one per runtime and machine).
/// A CPU sweep's chart for one workload at one N: wall and system time per task against K (log 2
/// on K, log on time), a line per runtime (its descriptor's colours, wall solid, system light).
pub fn per_task_against_cpus(series: &[&CpuSeries]) -> Result<Option<String>> {
    // (name, (K, µs) points, colour)
    type Line = (String, Vec<(f64, f64)>, RGBColor);
    let mut lines: Vec<Line> = Vec::new();
    let mut commands = 0;
    for s in series {
        let [(sr, sg, sb), (ur, ug, ub)] = match Runtime::ALL.iter().find(|r| r.name() == s.runtime)
        {
            Some(runtime) => runtime.describe().colors,
            None => {
                commands += 1;
                COMMAND_COLORS[(commands - 1) % COMMAND_COLORS.len()]
            }
        };
        type Get = fn(&analyse::comparisons::cpu_sweep::CpuPoint) -> Option<f64>;
        let figures: [(&str, Get, RGBColor); 2] = [
            ("wall", |p| p.wall_us, RGBColor(sr, sg, sb)),
            ("system", |p| p.sys_us, RGBColor(ur, ug, ub)),
        ];
        for (what, get, color) in figures {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter_map(|p| Some((p.cpu_count as f64, get(p).filter(|v| *v > 0.0)?)))
                .collect();
            if pts.len() >= 2 {
                lines.push((format!("{} {what}", s.runtime), pts, color));
            }
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let all = || lines.iter().flat_map(|l| l.1.iter());
    let kmax = all().map(|p| p.0).fold(1.0, f64::max);
    let ymin = all().map(|p| p.1).fold(f64::MAX, f64::min) / 4.0;
    let ymax = all().map(|p| p.1).fold(0.0, f64::max) * 2.0;
    let (workload, n) = (&series[0].workload, series[0].n);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Per task against CPUs — {workload} {} (median)", short_n(n)),
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (0.8..kmax * 1.25).log_scale().base(2.0),
                (ymin..ymax).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("CPUs (K, log 2)")
            .y_desc("µs per task")
            .x_label_formatter(&|x| format!("{:.0}", x))
            .y_label_formatter(&|y| {
                if *y >= 1.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.2}")
                }
            })
            .draw()
            .map_err(err)?;
        for (name, pts, color) in &lines {
            let color = *color;
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .map_err(err)?;
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

pub fn all(report: &Comparison, timelines: &[(&RunPoint, Timeline)]) -> Result<Vec<Chart>> {
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
        // A CPU sweep: the charts over N are of its largest K (the sweep's own chart is over K).
        let most_cpus = report
            .cells
            .iter()
            .filter(|c| c.machine == machine.id)
            .filter_map(|c| c.cpu_count)
            .max();
        let cells: Vec<&Cell> = report
            .cells
            .iter()
            .filter(|c| c.machine == machine.id && c.cpu_count == most_cpus)
            .collect();
        if let Some(sweep) = &report.cpu_sweep {
            let mine: Vec<&CpuSeries> = sweep
                .series
                .iter()
                .filter(|s| s.machine == machine.id)
                .collect();
            let mut groups: Vec<(&str, u64)> = Vec::new();
            for s in &mine {
                if !groups.contains(&(s.workload.as_str(), s.n)) {
                    groups.push((&s.workload, s.n));
                }
            }
            for (wl, n) in groups {
                let of: Vec<&CpuSeries> = mine
                    .iter()
                    .copied()
                    .filter(|s| s.workload == wl && s.n == n)
                    .collect();
                if let Some(svg) = per_task_against_cpus(&of)? {
                    charts.push(Chart {
                        file: format!("per-task-against-cpus-{wl}-{n}{suffix}.svg"),
                        title: format!("Per task against CPUs, {wl} {}{on}", count(n)),
                        note: "Wall and system time per task spawned (median over the runs whose times count) at each K the runs were held to; log 2 on K, log on time. A line that stops falling is a runtime that stopped scaling: the sweep's table names the wait that grew.".into(),
                        svg,
                    });
                }
            }
        }
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
                    note: "Median over repeats of each part per task alive at the peak: RSS (/proc/PID/status), kernel stack, page tables, slab (cgroup or /proc/meminfo). One scale for every runtime.".into(),
                    svg,
                });
            }
            if *wl == "serve" {
                // A server's costs are per connection and per request, against C: time per
                // connection accepted would say little.
                let runs: Vec<&RunPoint> = report
                    .runs
                    .iter()
                    .filter(|r| r.machine == machine.id && r.workload.as_deref() == Some("serve"))
                    .collect();
                charts.extend(crate::serving::charts::charts(&runs, &suffix, &on)?);
                continue;
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
        for (run, data) in timelines.iter().filter(|(r, _)| r.machine == machine.id) {
            charts.push(Chart {
                file: format!(
                    "timeline-{}-{}-{}{suffix}.svg",
                    run.runtime.as_deref().unwrap_or(""),
                    first.unwrap_or(""),
                    run.n.unwrap_or(0)
                ),
                title: format!("Timeline, {}{on}", run.label),
                note: format!("Source: {}. Phases shaded.", data.source),
                svg: timeline(data)?,
            });
        }
    }
    Ok(charts)
}
