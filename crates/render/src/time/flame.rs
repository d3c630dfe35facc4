//! Flame graphs, drawn by inferno used as a library: one per run (flame.svg), and two runs side by
//! side on one CPU-time scale, or as a differential. Kernel frames are orange, Rust (and C++)
//! yellow, Go green, C red (inferno's "java" palette keyed on the `_[k]` mark and `::` / `.`).
//!
//! The stacks come folded by record::perf, not by inferno's perf collapser: that collapser drops
//! the sample times (phases need them) and decides kernel frames by file name, which calls `[vdso]`
//! kernel; record::perf decides by address. Each graph is returned as SVG; the caller writes it.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use inferno::flamegraph::color::{MultiPalette, Palette};
use inferno::flamegraph::{self, Options};

use analyse::time::attribution::Attribution;
use record::perf::Profile;
use units::count;

fn options(title: &str, subtitle: String, count_name: &str) -> Options<'static> {
    let mut opt = Options::default();
    opt.title = title.to_string();
    opt.subtitle = Some(subtitle);
    opt.colors = Palette::Multi(MultiPalette::Java);
    // The same function gets the same colour in every graph.
    opt.hash = true;
    opt.count_name = count_name.to_string();
    // Frames narrower than this many pixels (of 1200) are left out: keeps a 100k-thread graph
    // to a few hundred KB without losing anything readable.
    opt.min_width = 0.5;
    opt
}

/// Folded lines (`frame;…;frame count`), sorted as inferno wants them.
fn lines(stacks: BTreeMap<String, u64>) -> Vec<String> {
    stacks
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s} {n}"))
        .collect()
}

fn draw(opt: &mut Options, folded: &[String]) -> Result<Vec<u8>> {
    let mut svg = Vec::new();
    flamegraph::from_lines(opt, folded.iter().map(String::as_str), &mut svg)
        .context("drawing a flame graph")?;
    Ok(svg)
}

/// A run's stacks with the phases merged, under its comm (`threads;…`).
fn by_comm(profile: &Profile) -> BTreeMap<String, u64> {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for s in &profile.stacks {
        let key = std::iter::once(s.comm.as_str())
            .chain(s.frames.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(";");
        *stacks.entry(key).or_default() += s.count;
    }
    stacks
}

/// flame.svg of one run.
pub fn of_run(profile: &Profile, label: &str, a: &Attribution) -> Result<Vec<u8>> {
    let subtitle = format!(
        "{} samples{}{}; {:.1} % of kernel samples in named categories (summary.md)",
        count(a.samples),
        a.freq_hz
            .map_or(String::new(), |hz| format!(" of cpu-clock at {hz} Hz")),
        a.call_graph
            .as_ref()
            .map_or(String::new(), |c| format!(", call graph {c}")),
        a.named_kernel_share * 100.0
    );
    let mut opt = options(label, subtitle, "samples");
    draw(&mut opt, &lines(by_comm(profile)))
}

/// One run of a pair: its label, its profile, and the CPU microseconds one sample stands for.
pub struct Side<'a> {
    pub label: String,
    pub profile: &'a Profile,
    pub us_per_sample: f64,
}

/// Two (or more) runs in one graph, each under its own root, widths in CPU microseconds: the
/// run that used three times the CPU is three times as wide.
pub fn side_by_side(sides: &[Side]) -> Result<Vec<u8>> {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for side in sides {
        let root = side.label.replace(';', ":");
        for (stack, n) in by_comm(side.profile) {
            *stacks.entry(format!("{root};{stack}")).or_default() +=
                (n as f64 * side.us_per_sample).round() as u64;
        }
    }
    let title = sides
        .iter()
        .map(|s| s.label.as_str())
        .collect::<Vec<_>>()
        .join("  vs  ");
    let mut opt = options(
        &title,
        "side by side on one scale: width = CPU time (rusage), kernel frames orange".into(),
        "µs of CPU",
    );
    draw(&mut opt, &lines(stacks))
}

/// A differential flame graph: `after`'s stacks, coloured by how their share changed from
/// `before` (red grew, blue shrank; both normalised to the same total). Stacks are compared
/// without their comm, so two programs' kernel paths line up.
pub fn differential(before: &Side, after: &Side) -> Result<Vec<u8>> {
    let strip = |p: &Profile| -> String {
        let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
        for s in &p.stacks {
            *stacks.entry(s.frames.join(";")).or_default() += s.count;
        }
        lines(stacks).join("\n") + "\n"
    };
    let (a, b) = (strip(before.profile), strip(after.profile));
    let mut folded = Vec::new();
    let diff_opt = inferno::differential::Options {
        normalize: true,
        strip_hex: true,
    };
    inferno::differential::from_readers(diff_opt, a.as_bytes(), b.as_bytes(), &mut folded)
        .context("folding the differential")?;
    let text = String::from_utf8_lossy(&folded).into_owned();
    let mut diff_lines: Vec<String> = text.lines().map(str::to_string).collect();
    diff_lines.sort();
    let mut opt = options(
        &format!("{}  →  {}", before.label, after.label),
        format!(
            "differential: shapes of {}, red = larger share than in {}, blue = smaller",
            after.label, before.label
        ),
        "samples",
    );
    draw(&mut opt, &diff_lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::perf::Stack;

    fn profile(stacks: &[(&str, &[&str], u64)]) -> Profile {
        Profile {
            stacks: stacks
                .iter()
                .map(|(comm, frames, n)| Stack {
                    phase: "run".into(),
                    comm: comm.to_string(),
                    frames: frames.iter().map(|f| f.to_string()).collect(),
                    count: *n,
                })
                .collect(),
        }
    }

    #[test]
    fn graphs_are_svg_with_the_frames_in_them() {
        let threads = profile(&[
            (
                "threads",
                &["clone3", "__x64_sys_clone3_[k]", "copy_process_[k]"],
                30,
            ),
            ("threads", &["threads::main"], 5),
        ]);
        let go = profile(&[
            ("goroutines", &["runtime.newproc1", "runtime.malg"], 10),
            (
                "goroutines",
                &["clone3", "__x64_sys_clone3_[k]", "copy_process_[k]"],
                2,
            ),
        ]);
        let a = Attribution {
            samples: 35,
            ..Default::default()
        };
        let svg = String::from_utf8(of_run(&threads, "threads sleep --n 10", &a).unwrap()).unwrap();
        assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
        // inferno shows kernel frames without their `_[k]` mark (it only colours them).
        assert!(svg.contains("<title>copy_process (30 samples") && svg.contains("threads::main"));

        let sides = [
            Side {
                label: "threads".into(),
                profile: &threads,
                us_per_sample: 1000.0,
            },
            Side {
                label: "goroutines".into(),
                profile: &go,
                us_per_sample: 500.0,
            },
        ];
        let svg = String::from_utf8(side_by_side(&sides).unwrap()).unwrap();
        assert!(svg.contains("runtime.malg") && svg.contains("µs of CPU"));
        assert!(svg.contains("41,000"), "35 ms + 6 ms of CPU in all");

        let svg = String::from_utf8(differential(&sides[0], &sides[1]).unwrap()).unwrap();
        assert!(svg.contains("runtime.newproc1") && svg.contains("copy_process"));
    }
}
