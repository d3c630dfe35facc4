//! A serve sweep against C, the connections held open: memory per connection, latency,
//! requests/s and CPU time per request, one line per runtime (median over repeats), drawn with
//! plotters like the other charts. Runs whose server fell over have no such figures: they are
//! named in the chart's note instead.

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::chart_kit::{err, short_n, Chart, FONT};
use analyse::comparisons::compare::{ordered_runtimes, RunPoint};
use analyse::comparisons::regression::spread;
use analyse::serving::ServeFigures;
use runtime::Runtime;
use units::count;

/// The file names these charts start with (under charts/).
pub const FILE_PREFIXES: [&str; 4] = [
    "memory-per-connection-",
    "latency-",
    "requests-per-second-",
    "time-per-request-",
];

/// One line of a chart for each runtime: what it reads from a run's figures, and its style.
struct Measure {
    label: &'static str,
    get: fn(&ServeFigures) -> Option<f64>,
    dashed: bool,
}

/// One chart: its file name, title, axis and the lines of each runtime.
struct Spec {
    file: &'static str,
    title: &'static str,
    caption: &'static str,
    y_desc: &'static str,
    log_y: bool,
    measures: &'static [Measure],
    note: &'static str,
}

const SPECS: [Spec; 4] = [
    Spec {
        file: "memory-per-connection",
        title: "Memory per connection",
        caption: "Memory per open connection against C (median of repeats)",
        y_desc: "KiB per connection",
        log_y: false,
        measures: &[
            Measure {
                label: "RSS + kernel",
                get: |f| f.per_connection.as_ref()?.memory_kib,
                dashed: false,
            },
            Measure {
                label: "socket buffers",
                get: |f| f.per_connection.as_ref()?.socket_kib,
                dashed: true,
            },
        ],
        note: "The server's memory with every connection open, per connection: RSS, kernel stacks, page tables and slab (solid), and apart from them the kernel's TCP buffers of its sockets (dashed; cgroup v2 sock, v1 memory.kmem.tcp), which hold only what is in flight at that moment.",
    },
    Spec {
        file: "latency",
        title: "Latency",
        caption: "Latency against C: p50 (solid) and p99 (dashed), median of repeats",
        y_desc: "ms",
        log_y: true,
        measures: &[
            Measure {
                label: "p50",
                get: |f| Some(f.load.latency_ms.as_ref()?.p50),
                dashed: false,
            },
            Measure {
                label: "p99",
                get: |f| Some(f.load.latency_ms.as_ref()?.p99),
                dashed: true,
            },
        ],
        note: "wrk's latency of each request, from its send to the end of its response (its --latency histogram); with more than one wrk process, each quantile is their requests-weighted mean. Log scale.",
    },
    Spec {
        file: "requests-per-second",
        title: "Requests per second",
        caption: "Requests per second against C (median of repeats)",
        y_desc: "requests/s",
        log_y: false,
        measures: &[Measure {
            label: "requests/s",
            get: |f| Some(f.load.requests_per_s),
            dashed: false,
        }],
        note: "Responses wrk read, over its duration, from every process.",
    },
    Spec {
        file: "time-per-request",
        title: "CPU time per request",
        caption: "CPU time per request against C: system (solid), user (dashed)",
        y_desc: "µs per request",
        log_y: false,
        measures: &[
            Measure {
                label: "system",
                get: |f| f.per_request.as_ref()?.sys_us,
                dashed: false,
            },
            Measure {
                label: "user",
                get: |f| f.per_request.as_ref()?.user_us,
                dashed: true,
            },
        ],
        note: "The server's user and system time in the load phase (its /proc stat at the phase marks) over the requests it answered in that phase.",
    },
];

/// A runtime's line colour: the darker of its descriptor's pair; a command's from tab10's rest.
fn color_of(runtime: &str, commands_seen: &mut usize) -> RGBColor {
    match Runtime::ALL.iter().find(|r| r.name() == runtime) {
        Some(r) => {
            let (red, green, blue) = r.describe().colors[0];
            RGBColor(red, green, blue)
        }
        None => {
            *commands_seen += 1;
            [
                RGBColor(148, 103, 189),
                RGBColor(255, 127, 14),
                RGBColor(140, 86, 75),
            ][(*commands_seen - 1) % 3]
        }
    }
}

/// The figures of the runs that served, by runtime and C.
type Served<'a> = BTreeMap<(String, u64), Vec<&'a ServeFigures>>;

/// The serve runs of one machine that served, by runtime and C; and those that fell over, named.
fn served_runs<'a>(runs: &[&'a RunPoint]) -> (Served<'a>, Vec<String>) {
    let mut served: Served = BTreeMap::new();
    let mut fell_over = Vec::new();
    for run in runs {
        let (Some(runtime), Some(f)) = (&run.runtime, &run.serve) else {
            continue;
        };
        if f.fell_over {
            let what = f.happened.first().cloned().unwrap_or(run.outcome.clone());
            fell_over.push(format!("{runtime} at {} ({what})", count(f.connections)));
        } else {
            served
                .entry((runtime.clone(), f.connections))
                .or_default()
                .push(f);
        }
    }
    (served, fell_over)
}

/// Every chart of a serve sweep on one machine; none when no run served.
pub fn charts(runs: &[&RunPoint], suffix: &str, on: &str) -> Result<Vec<Chart>> {
    let (served, fell_over) = served_runs(runs);
    if served.is_empty() {
        return Ok(Vec::new());
    }
    let runtimes = ordered_runtimes(served.keys().map(|(r, _)| r.as_str()));
    let left_out = if fell_over.is_empty() {
        String::new()
    } else {
        format!(" Not drawn (fell over): {}.", fell_over.join("; "))
    };
    let mut charts = Vec::new();
    for spec in &SPECS {
        let mut lines = Vec::new();
        let mut commands_seen = 0;
        for runtime in &runtimes {
            let color = color_of(runtime, &mut commands_seen);
            for m in spec.measures {
                let points: Vec<(f64, f64)> = served
                    .iter()
                    .filter(|((r, _), _)| r == runtime)
                    .filter_map(|((_, c), figures)| {
                        let values: Vec<f64> = figures.iter().filter_map(|f| (m.get)(f)).collect();
                        let v = spread(&values)?.median;
                        (!spec.log_y || v > 0.0).then_some((*c as f64, v))
                    })
                    .collect();
                if !points.is_empty() {
                    lines.push((format!("{runtime} {}", m.label), points, color, m.dashed));
                }
            }
        }
        if lines.is_empty() {
            continue;
        }
        charts.push(Chart {
            file: format!("{}-serve{suffix}.svg", spec.file),
            title: format!("{}, serve{on}", spec.title),
            note: format!("{}{left_out}", spec.note),
            svg: draw(spec, &lines)?,
        });
    }
    Ok(charts)
}

type Line = (String, Vec<(f64, f64)>, RGBColor, bool);

fn draw(spec: &Spec, lines: &[Line]) -> Result<String> {
    let all = || lines.iter().flat_map(|l| l.1.iter());
    let xmin = all().map(|p| p.0).fold(f64::MAX, f64::min);
    let xmax = all().map(|p| p.0).fold(0.0, f64::max);
    let ymax = all().map(|p| p.1).fold(0.0, f64::max);
    let ymin = all().map(|p| p.1).fold(f64::MAX, f64::min);
    let x_range = (xmin / 1.6..xmax * 1.6).log_scale();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(format!("{} — serve", spec.caption), (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        if spec.log_y {
            let chart = builder
                .build_cartesian_2d(x_range, (ymin / 2.0..ymax * 3.0).log_scale())
                .map_err(err)?;
            plot(chart, spec, lines)?;
        } else {
            // Room above the highest line for the legend.
            let chart = builder
                .build_cartesian_2d(x_range, 0f64..(ymax * 1.35).max(1.0))
                .map_err(err)?;
            plot(chart, spec, lines)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn plot<'a, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, Y>>,
    spec: &Spec,
    lines: &[Line],
) -> Result<()>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        // A log axis's light lines crowd into grey bands between its labels.
        .light_line_style(TRANSPARENT)
        .x_desc("C (connections open)")
        .y_desc(spec.y_desc)
        .x_label_formatter(&|x| short_n(x.round() as u64))
        .y_label_formatter(&|y| {
            if *y >= 10.0 || y.fract() == 0.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.2}")
            }
        })
        .draw()
        .map_err(err)?;
    for (name, points, color, dashed) in lines {
        let (color, dashed) = (*color, *dashed);
        let style = color.stroke_width(2);
        let series = if dashed {
            chart.draw_series(DashedLineSeries::new(points.iter().copied(), 8, 5, style))
        } else {
            chart.draw_series(LineSeries::new(points.iter().copied(), style))
        };
        series
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| {
                if dashed {
                    PathElement::new([(x, y), (x + 6, y)], color.stroke_width(2))
                } else {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                }
            });
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::serving::{LatencyMs, LoadFigures, PerConnection};

    fn run(runtime: &str, c: u64, memory_kib: f64, p99: f64, fell_over: bool) -> RunPoint {
        RunPoint {
            program: Default::default(),
            serve: Some(ServeFigures {
                connections: c,
                load: LoadFigures {
                    requests_per_s: 1000.0,
                    latency_ms: Some(LatencyMs {
                        p50: p99 / 4.0,
                        p99,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                per_connection: Some(PerConnection {
                    open: c,
                    memory_kib: Some(memory_kib),
                    ..Default::default()
                }),
                happened: if fell_over {
                    vec!["the server was OOM-killed in its cgroup".into()]
                } else {
                    Vec::new()
                },
                fell_over,
                ..Default::default()
            }),
            ..analyse::test_support::run_point(runtime, "serve", c)
        }
    }

    #[test]
    fn medians_by_runtime_and_c_and_what_fell_over_named() {
        let runs = [
            run("threads", 1000, 44.0, 9.0, false),
            run("threads", 1000, 46.0, 11.0, false),
            run("threads", 1000, 90.0, 13.0, false),
            run("threads", 20_000, 0.0, 0.0, true),
            run("tokio", 1000, 9.0, 3.0, false),
        ];
        let refs: Vec<&RunPoint> = runs.iter().collect();
        let (served, fell_over) = served_runs(&refs);
        assert_eq!(served[&("threads".to_string(), 1000)].len(), 3);
        assert_eq!(
            fell_over,
            vec!["threads at 20,000 (the server was OOM-killed in its cgroup)"]
        );
        let charts = charts(&refs, "", "").unwrap();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "memory-per-connection-serve.svg",
                "latency-serve.svg",
                "requests-per-second-serve.svg"
            ],
            "no CPU per request measured: no such chart"
        );
        assert!(charts[0]
            .note
            .contains("Not drawn (fell over): threads at 20,000"));
        // The median of 44, 46 and 90 is what is drawn, and labelled by runtime and measure.
        assert!(charts[0].svg.contains("threads RSS + kernel"));
        assert!(charts[1].svg.contains("tokio p99"));
        assert_eq!(spread(&[44.0, 90.0, 46.0]).unwrap().median, 46.0);
        assert_eq!(spread(&[1.0, 3.0]).unwrap().median, 2.0);
    }
}
