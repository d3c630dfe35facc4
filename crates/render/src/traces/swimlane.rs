//! A traced run's swimlane as an SVG (plotters' SVG backend, like the other charts): one lane per
//! sampled thread coloured by its state over time (running, runnable, blocked), the run's phases
//! as bands behind them with their names, then one lane per CPU coloured by who held it. The
//! model is analyse::traces::swimlane's; here it only meets pixels: each pixel column of a lane takes the
//! state (or holder) that had most of the column's time, and neighbouring columns of one colour
//! are one rectangle, so the file's size follows the width, not the records.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::chart_kit::{err, FONT};
use crate::table::Table;
use analyse::traces::swimlane::{CpuLane, Holder, Lane, Swimlane, SwimlaneFigures, Why};
use analyse::traces::thread_states::State;
use units::{count, in_unit};

/// The states' colours (RGB), in `State::ALL`'s order.
pub const STATE_COLORS: [(u8, u8, u8); 3] = [(44, 160, 44), (255, 127, 14), (107, 174, 214)];
/// Who held a CPU, in `Holder::ALL`'s order: the spawning thread, another of the run's threads
/// (running: the running colour), an outside task, idle.
pub const HOLDER_COLORS: [(u8, u8, u8); 4] = [
    (148, 103, 189),
    (44, 160, 44),
    (127, 127, 127),
    (222, 222, 222),
];
/// The phases' bands, in turn.
const BAND_COLORS: [(u8, u8, u8); 2] = [(255, 244, 214), (226, 240, 226)];

const WIDTH: u32 = 1200;
const ROW: i32 = 16;
const BAR: i32 = 12;
const TOP: i32 = 56;
const LABELS: u32 = 250;
const AXIS: u32 = 40;

/// What the figure's caption says under it in report.html.
pub fn note(s: &Swimlane) -> String {
    format!(
        "{} of the run's {} threads and {} of {} CPUs. Lanes: {}. Each pixel column shows the state (or the CPU's holder) that had most of its time; a thread's exit ends its lane; a CPU's holder is the task its last recorded switch put on it (only switches touching the run are recorded: an outside task's slice may span others').",
        count(s.lanes.len() as u64),
        count(s.threads),
        count(s.cpus.len() as u64),
        count(s.cpus_seen),
        analyse::traces::swimlane::rule()
    )
}

/// How time reads on the axis: the unit's ns and its name.
fn time_unit(ns: u64) -> (f64, &'static str) {
    match ns {
        n if n >= 2_000_000_000 => (1e9, "s"),
        n if n >= 2_000_000 => (1e6, "ms"),
        _ => (1e3, "µs"),
    }
}

/// A tick's value without float noise: at most 3 decimals, trailing zeros dropped.
fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn rgb((r, g, b): (u8, u8, u8)) -> RGBColor {
    RGBColor(r, g, b)
}

/// Per pixel column, time per class; spans given as (class, begin, end) on the trace's clock.
struct Columns {
    begin: u64,
    dur: u64,
    n: usize,
    time: Vec<[u64; 4]>,
}

impl Columns {
    fn new(begin: u64, end: u64, n: usize) -> Self {
        Columns {
            begin,
            dur: (end - begin).max(1),
            n,
            time: vec![[0; 4]; n],
        }
    }

    fn start(&self, c: usize) -> u64 {
        self.begin + (self.dur as u128 * c as u128 / self.n as u128) as u64
    }

    fn of(&self, ts: u64) -> usize {
        let at = ts.saturating_sub(self.begin) as u128 * self.n as u128 / self.dur as u128;
        (at as usize).min(self.n - 1)
    }

    fn add(&mut self, class: usize, from: u64, to: u64) {
        if to <= from {
            return;
        }
        for c in self.of(from)..=self.of(to - 1) {
            let lo = from.max(self.start(c));
            let hi = if c + 1 == self.n {
                to
            } else {
                to.min(self.start(c + 1))
            };
            self.time[c][class] += hi.saturating_sub(lo);
        }
    }

    /// Runs of columns of one class: (first column, last column, class).
    fn runs(&self) -> Vec<(usize, usize, usize)> {
        let mut runs: Vec<(usize, usize, usize)> = Vec::new();
        for (c, t) in self.time.iter().enumerate() {
            if t.iter().all(|&v| v == 0) {
                continue;
            }
            // The most time; ties to the first class.
            let class = (0..4).fold(0, |best, k| if t[k] > t[best] { k } else { best });
            match runs.last_mut() {
                Some(r) if r.1 + 1 == c && r.2 == class => r.1 = c,
                _ => runs.push((c, c, class)),
            }
        }
        runs
    }
}

fn lane_columns(lane: &Lane, s: &Swimlane, n: usize) -> Columns {
    let mut cols = Columns::new(s.begin, s.end, n);
    for span in &lane.spans {
        let class = State::ALL
            .iter()
            .position(|&x| x == span.state)
            .unwrap_or(0);
        cols.add(class, span.begin, span.end);
    }
    cols
}

fn cpu_columns(cpu: &CpuLane, s: &Swimlane, n: usize) -> Columns {
    let mut cols = Columns::new(s.begin, s.end, n);
    for (i, held) in cpu.buckets.iter().enumerate() {
        let from = s.begin + i as u64 * s.bucket_ns;
        let to = (from + s.bucket_ns).min(s.end);
        for (k, &ns) in held.iter().enumerate() {
            add_spread(&mut cols, k, from, to, ns);
        }
    }
    cols
}

/// Adds `ns` of `class` spread over [from, to) by how much of each column it covers (a
/// bucket's time is spread evenly over it: as exact as its width allows).
fn add_spread(cols: &mut Columns, class: usize, from: u64, to: u64, ns: u64) {
    if to <= from || ns == 0 {
        return;
    }
    let span = to - from;
    for c in cols.of(from)..=cols.of(to - 1) {
        let lo = from.max(cols.start(c));
        let hi = if c + 1 == cols.n {
            to
        } else {
            to.min(cols.start(c + 1))
        };
        cols.time[c][class] += (ns as u128 * hi.saturating_sub(lo) as u128 / span as u128) as u64;
    }
}

fn lane_label(l: &Lane) -> String {
    let mut name = l.name.clone();
    if name.chars().count() > 16 {
        name = name.chars().take(15).collect::<String>() + "…";
    }
    match l.why {
        Why::Every => format!("{} {name}", l.tid),
        why => format!("{} {name} · {}", l.tid, why.name()),
    }
}

/// The swimlane's SVG document.
pub fn svg(s: &Swimlane, title: &str) -> Result<String> {
    // Rows: phases' names, the thread lanes, a heading row, the CPU lanes.
    let rows = 1 + s.lanes.len() + 1 + s.cpus.len();
    let height = TOP as u32 + rows as u32 * ROW as u32 + AXIS + 12;
    let dur = (s.end - s.begin).max(1);
    let (unit_ns, unit) = time_unit(dur);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let text = |size: u32, h: HPos| {
            TextStyle::from((FONT, size).into_font()).pos(Pos::new(h, VPos::Center))
        };
        root.draw(&Text::new(
            format!("Swimlane — {title}"),
            (12, 14),
            text(18, HPos::Left),
        ))
        .map_err(err)?;
        // The legend: the threads' states, then the CPUs' holders.
        let mut x = 12;
        let legend: Vec<(String, (u8, u8, u8))> = State::ALL
            .iter()
            .zip(STATE_COLORS)
            .map(|(st, c)| (st.name().to_string(), c))
            .chain(
                Holder::ALL
                    .iter()
                    .zip(HOLDER_COLORS)
                    .map(|(h, c)| (format!("CPU: {}", h.name()), c)),
            )
            .collect();
        for (name, color) in legend {
            root.draw(&Rectangle::new(
                [(x, 32), (x + 14, 44)],
                rgb(color).filled(),
            ))
            .map_err(err)?;
            root.draw(&Text::new(name.clone(), (x + 19, 38), text(12, HPos::Left)))
                .map_err(err)?;
            x += 19 + 13 * name.chars().count() as i32 / 2 + 18;
        }
        let (_, body) = root.split_vertically(TOP);
        let mut chart = ChartBuilder::on(&body)
            .margin_right(16)
            .x_label_area_size(AXIS)
            .y_label_area_size(LABELS)
            .build_cartesian_2d(0f64..dur as f64 / unit_ns, 0f64..rows as f64)
            .map_err(err)?;
        let (xr, yr) = chart.plotting_area().get_pixel_range();
        let columns = (xr.end - xr.start).max(1) as usize;
        let row_y = |row: usize| yr.start + row as i32 * ROW;
        let to_x = |c: usize| xr.start + c as i32;
        // The phases: bands behind every lane, their names in the first row.
        let at =
            |ts: u64| xr.start + ((ts - s.begin) as u128 * columns as u128 / dur as u128) as i32;
        for (i, p) in s.phases.iter().enumerate() {
            let (x0, x1) = (at(p.begin), at(p.end).max(at(p.begin) + 1));
            root.draw(&Rectangle::new(
                [(x0, yr.start), (x1, yr.end)],
                rgb(BAND_COLORS[i % BAND_COLORS.len()]).filled(),
            ))
            .map_err(err)?;
            // A name only where there is room (start-up is often a sliver).
            if x1 - x0 >= 7 * p.name.chars().count() as i32 {
                root.draw(&Text::new(
                    p.name.clone(),
                    (x0 + 3, row_y(0) + ROW / 2),
                    text(11, HPos::Left),
                ))
                .map_err(err)?;
            }
        }
        let unit_label = unit.to_string();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(12)
            .x_desc(format!("{unit} since the trace's first record"))
            .x_label_formatter(&|v| format!("{} {unit_label}", short(*v)))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        let label = |row: usize, words: String, bold: bool| {
            let style = if bold {
                TextStyle::from((FONT, 12).into_font().style(FontStyle::Bold))
            } else {
                TextStyle::from((FONT, 11).into_font())
            };
            root.draw(&Text::new(
                words,
                (xr.start - 6, row_y(row) + ROW / 2),
                style.pos(Pos::new(HPos::Right, VPos::Center)),
            ))
        };
        label(0, "phases".into(), true).map_err(err)?;
        let bar = |row: usize, runs: Vec<(usize, usize, usize)>, colors: &[(u8, u8, u8)]| {
            let y = row_y(row) + (ROW - BAR) / 2;
            for (c0, c1, class) in runs {
                root.draw(&Rectangle::new(
                    [(to_x(c0), y), (to_x(c1 + 1), y + BAR)],
                    rgb(colors[class]).filled(),
                ))
                .map_err(err)?;
            }
            anyhow::Ok(())
        };
        for (i, lane) in s.lanes.iter().enumerate() {
            label(1 + i, lane_label(lane), false).map_err(err)?;
            bar(1 + i, lane_columns(lane, s, columns).runs(), &STATE_COLORS)?;
        }
        let heading = 1 + s.lanes.len();
        label(heading, "CPUs".into(), true).map_err(err)?;
        for (i, cpu) in s.cpus.iter().enumerate() {
            label(heading + 1 + i, format!("CPU {}", cpu.cpu), false).map_err(err)?;
            bar(
                heading + 1 + i,
                cpu_columns(cpu, s, columns).runs(),
                &HOLDER_COLORS,
            )?;
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// summary.md's lines: where the swimlane is, what it samples, each lane's time per state.
pub fn markdown(f: &SwimlaneFigures) -> String {
    let ns = |v: u64| in_unit(v as f64, "ns");
    let mut md = format!(
        "\n## Swimlane (`{}`)\n\n{} of the run's {} threads and {} of {} CPUs; lanes: {}.\n\n",
        record::SWIMLANE,
        count(f.lanes.len() as u64),
        count(f.threads),
        count(f.cpus.len() as u64),
        count(f.cpus_seen),
        f.rule
    );
    if let Some(window) = &f.kept_window {
        md.push_str(&format!(
            "{window}: the lanes cover the kept window only.\n\n"
        ));
    }
    let mut t = Table::new([
        "tid",
        "name",
        "why",
        "running",
        "runnable",
        "blocked",
        "longest wait",
    ])
    .right_aligned([0, 3, 4, 5, 6]);
    for l in &f.lanes {
        t.row([
            l.tid.to_string(),
            l.name.clone(),
            l.why.clone(),
            ns(l.running_ns),
            ns(l.runnable_ns),
            ns(l.blocked_ns),
            ns(l.longest_wait_ns),
        ]);
    }
    md.push_str(&t.markdown());
    let mut cpus = Table::new([
        "CPU",
        "the spawning thread",
        "the run's other threads",
        "outside tasks",
        "idle",
    ])
    .right_aligned([0, 1, 2, 3, 4]);
    for c in &f.cpus {
        cpus.row([
            c.cpu.to_string(),
            ns(c.spawning_ns),
            ns(c.run_ns),
            ns(c.outside_ns),
            ns(c.idle_ns),
        ]);
    }
    md.push_str("\nWho held each CPU (from a switch to the CPU's next recorded switch):\n\n");
    md.push_str(&cpus.markdown());
    md
}
