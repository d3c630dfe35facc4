//! The files of a run recorded with `--perf`: perf.data (perf's own), perf.log, perf.json (how it
//! was recorded) and perf.folded (its samples folded by phase and stack), with the folded
//! profile's type and the one reader of `perf script`'s text.

use std::collections::BTreeMap;
use std::fs;
use std::io::BufRead;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// perf record's samples.
pub const PERF_DATA: &str = "perf.data";
/// perf record's own messages (samples written, lost events, size limit).
pub const PERF_LOG: &str = "perf.log";
/// How the samples were recorded (the plan and what perf said).
pub const PERF_RECORD: &str = "perf.json";
/// `perf script`, folded: one line per phase and stack, `phase;comm;root;…;leaf count`.
pub const PERF_FOLDED: &str = "perf.folded";

/// dwarf's stack copy when `dwarf` comes without a size: measured here, 100 % of the threads
/// workload's user stacks reach `_start` or `clone3` at 4 KiB, 90 % at 2 KiB, and 8 KiB only
/// doubles the data.
pub const DEFAULT_DWARF_STACK_BYTES: u32 = 4096;

/// How user stacks are walked.
#[derive(schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallGraph {
    /// Frame pointers, walked by the kernel at sample time.
    Fp,
    /// A copy of the user stack, unwound later with the binaries' DWARF CFI.
    Dwarf { stack_bytes: u32 },
}

impl CallGraph {
    /// `fp`, `dwarf` or `dwarf,BYTES` (perf's own syntax).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(',') {
            None if text == "fp" => Ok(CallGraph::Fp),
            None if text == "dwarf" => Ok(CallGraph::Dwarf {
                stack_bytes: DEFAULT_DWARF_STACK_BYTES,
            }),
            Some(("dwarf", size)) => match size.parse::<u32>() {
                Ok(b) if (8..=65528).contains(&b) && b % 8 == 0 => {
                    Ok(CallGraph::Dwarf { stack_bytes: b })
                }
                _ => Err(format!(
                    "'{size}' is not a dwarf stack size (a multiple of 8, 8..65528 bytes)"
                )),
            },
            _ => Err(format!("'{text}' is not fp, dwarf or dwarf,BYTES")),
        }
    }

    pub fn arg(&self) -> String {
        match self {
            CallGraph::Fp => "fp".into(),
            CallGraph::Dwarf { stack_bytes } => format!("dwarf,{stack_bytes}"),
        }
    }
}

/// How a run is recorded, decided before it starts.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PerfPlan {
    pub call_graph: CallGraph,
    pub freq_hz: u32,
    /// CPU seconds the calibration predicts for the run, when it can.
    pub expected_cpu_s: Option<f64>,
    pub sample_budget: u64,
    pub max_size_bytes: u64,
    /// One line: why this rate.
    pub why: String,
}

/// perf.json: how the samples were recorded.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize)]
pub struct PerfRecord {
    pub argv: Vec<String>,
    pub plan: Option<PerfPlan>,
    pub scope: String,
    pub exit: Option<String>,
    pub data_bytes: u64,
    /// perf record's lines about samples, lost events and limits.
    pub messages: Vec<String>,
}

/// One distinct stack and how many samples it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    pub phase: String,
    pub comm: String,
    /// Root first, leaf last; kernel frames end in `_[k]` (inferno's convention).
    pub frames: Vec<String>,
    pub count: u64,
}

impl Stack {
    /// False for a sample perf recorded without any callchain.
    pub fn has_stack(&self) -> bool {
        !(self.frames.len() == 1 && self.frames[0] == NO_STACK)
    }

    /// Whether the sample was taken in the kernel: its leaf is a kernel frame.
    pub fn kernel_mode(&self) -> bool {
        self.frames.last().is_some_and(|f| is_kernel_frame(f))
    }
}

/// The only frame of a sample perf recorded without any callchain (rare: 1 % here, during
/// thread exit). Such samples are counted, not classified.
pub const NO_STACK: &str = "[no stack]";

pub fn is_kernel_frame(frame: &str) -> bool {
    frame.ends_with("_[k]")
}

/// A frame perf could not name: `[unknown]`, or `[libfoo.so]` when only the file is known.
pub fn is_unresolved_frame(frame: &str) -> bool {
    let name = frame.strip_suffix("_[k]").unwrap_or(frame);
    name.starts_with('[') && name.ends_with(']')
}

/// All the samples of a run, folded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub stacks: Vec<Stack>,
}

impl Profile {
    pub fn samples(&self) -> u64 {
        self.stacks.iter().map(|s| s.count).sum()
    }

    /// perf.folded: `phase;comm;frame;…;frame count`, sorted (what any flame graph tool reads,
    /// with the phase as the root).
    pub fn to_folded(&self) -> String {
        let mut lines: Vec<String> = self
            .stacks
            .iter()
            .map(|s| {
                let mut line = format!("{};{}", s.phase, s.comm);
                for f in &s.frames {
                    line.push(';');
                    line.push_str(f);
                }
                format!("{line} {}", s.count)
            })
            .collect();
        lines.sort();
        lines.join("\n") + "\n"
    }

    pub fn from_folded(text: &str) -> Result<Self> {
        let mut stacks = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (path, count) = line
                .rsplit_once(' ')
                .with_context(|| format!("line {}: no sample count", i + 1))?;
            let count: u64 = count
                .parse()
                .with_context(|| format!("line {}: bad sample count", i + 1))?;
            let mut parts = path.split(';');
            let phase = parts.next().unwrap_or_default().to_string();
            let comm = parts.next().unwrap_or_default().to_string();
            stacks.push(Stack {
                phase,
                comm,
                frames: parts.map(str::to_string).collect(),
                count,
            });
        }
        Ok(Profile { stacks })
    }
}

/// Where each phase starts (CLOCK_MONOTONIC ns), in time order. A sample belongs to the last
/// phase started at or before it; samples before the first mark belong to the first phase.
pub struct Phases(pub Vec<(String, u64)>);

impl Phases {
    fn at(&self, t_ns: u64) -> &str {
        let i = self.0.partition_point(|(_, start)| *start <= t_ns);
        self.0
            .get(i.saturating_sub(1))
            .map_or("run", |(name, _)| name.as_str())
    }
}

/// A frame as the flame graph shows it: perf's symbol, or `[file]` when only the file is known,
/// with `_[k]` on kernel frames. Kernel-ness comes from the address (the upper half on x86-64
/// and arm64), which holds even when the symbol does not resolve.
fn frame_name(addr: &str, sym: &str, dso: &str) -> String {
    let kernel = u64::from_str_radix(addr, 16).is_ok_and(|a| a >= 0xffff_0000_0000_0000);
    let name = if sym == "[unknown]" {
        match dso {
            "" | "[unknown]" => "[unknown]".to_string(),
            path => format!("[{}]", path.rsplit('/').next().unwrap_or(path)),
        }
    } else {
        sym.to_string()
    };
    // ';' separates frames in the folded format.
    let mut name = name.replace(';', ":");
    if kernel {
        name.push_str("_[k]");
    }
    name
}

/// The comm a sample is shown under. A thread sampled after it detached its PID in do_exit
/// has none (perf prints ":-1").
fn comm_name(comm: &str, tid: &str) -> String {
    if tid == "-1" || comm == ":-1" {
        "[exiting thread]".to_string()
    } else {
        comm.replace([';', ' '], "_")
    }
}

/// Folds `perf script -F comm,tid,time,ip,sym,dso --ns` output: an event line
/// (`comm tid secs.nanos:`) followed by one line per frame (`addr sym (dso)`, leaf first) and a
/// blank line.
pub fn fold(reader: impl BufRead, phases: &Phases) -> Result<Profile> {
    let mut counts: BTreeMap<(String, String, Vec<String>), u64> = BTreeMap::new();
    let mut header: Option<(String, String)> = None; // (phase, comm)
    let mut frames: Vec<String> = Vec::new();
    let mut flush = |header: &mut Option<(String, String)>, frames: &mut Vec<String>| {
        if let Some((phase, comm)) = header.take() {
            if frames.is_empty() {
                // perf recorded no callchain at all: kept, so the count is honest.
                frames.push(NO_STACK.to_string());
            }
            frames.reverse();
            *counts
                .entry((phase, comm, std::mem::take(frames)))
                .or_default() += 1;
        }
        frames.clear();
    };
    for line in reader.lines() {
        let line = line.context("reading perf script output")?;
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut header, &mut frames);
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            // A frame: "ffffffff81356af8 __do_sys_clone3 ([kernel.kallsyms])".
            let text = line.trim();
            let Some((addr, rest)) = text.split_once(' ') else {
                continue;
            };
            let (sym, dso) = match rest.rsplit_once(" (") {
                Some((sym, dso)) => (sym.trim(), dso.trim_end_matches(')')),
                None => (rest.trim(), ""),
            };
            frames.push(frame_name(addr, sym, dso));
            continue;
        }
        // An event line: "threads  4360  5113.009397432:" (comm may contain spaces).
        flush(&mut header, &mut frames);
        let text = line.trim_end().trim_end_matches(':');
        let Some((rest, time)) = text.rsplit_once(char::is_whitespace) else {
            continue;
        };
        let rest = rest.trim_end();
        let (comm, tid) = rest.rsplit_once(char::is_whitespace).unwrap_or(("", rest));
        let comm = comm.trim();
        let t_ns = parse_time_ns(time).unwrap_or(0);
        header = Some((phases.at(t_ns).to_string(), comm_name(comm, tid)));
    }
    flush(&mut header, &mut frames);
    Ok(Profile {
        stacks: counts
            .into_iter()
            .map(|((phase, comm, frames), count)| Stack {
                phase,
                comm,
                frames,
                count,
            })
            .collect(),
    })
}

/// "5113.009397432" (seconds.nanoseconds) -> ns.
fn parse_time_ns(text: &str) -> Option<u64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, "0"));
    let frac = format!("{frac:0<9}");
    Some(secs.parse::<u64>().ok()? * 1_000_000_000 + frac.get(..9)?.parse::<u64>().ok()?)
}

/// What a run directory holds of perf's samples.
pub enum Samples {
    /// The run was not recorded with --perf.
    NotRecorded,
    /// perf.folded, current (newer than perf.data, or perf.data is gone).
    Folded(Profile),
    /// Only perf.data (or a perf.folded older than it): `perf script` must fold it.
    Unfolded,
}

pub fn read_samples(dir: &Path) -> Result<Samples> {
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    let folded = dir.join(PERF_FOLDED);
    match (modified(&dir.join(PERF_DATA)), modified(&folded)) {
        (None, None) => Ok(Samples::NotRecorded),
        (data_time, Some(folded_time)) if data_time.is_none_or(|d| d <= folded_time) => {
            let text = fs::read_to_string(&folded)
                .with_context(|| format!("reading {}", folded.display()))?;
            Ok(Samples::Folded(Profile::from_folded(&text)?))
        }
        _ => Ok(Samples::Unfolded),
    }
}

pub fn write_folded(dir: &Path, profile: &Profile) -> Result<()> {
    let path = dir.join(PERF_FOLDED);
    fs::write(&path, profile.to_folded()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "\
threads  4360  5113.009397432: 
\tffffffff816ca027 inode_permission ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           fd001 __open64_nocancel (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           23a70 _start (/work/target/release/threads)

:-1    -1  5113.509397432: 
\tffffffff8135dd33 do_exit.isra.0 ([kernel.kallsyms])

V8 Worker 77  5114.000000001: 
\t    7f0012345678 [unknown] ([unknown])
\t    55aa00001000 [unknown] (/usr/bin/some;thing)
\t           4b65b main (/work/target/release/threads)

threads  4360  5113.019397432: 
\tffffffff816ca027 inode_permission ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           fd001 __open64_nocancel (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           23a70 _start (/work/target/release/threads)
";

    #[test]
    fn perf_script_folds_into_phases_and_modes() {
        let phases = Phases(vec![
            ("spawn".into(), 5_113_000_000_000),
            ("join".into(), 5_113_500_000_000),
        ]);
        let p = fold(SCRIPT.as_bytes(), &phases).unwrap();
        assert_eq!(p.samples(), 4);
        let first = &p.stacks[0];
        assert_eq!(first.phase, "join");
        assert_eq!(first.comm, "V8_Worker");
        assert_eq!(
            first.frames,
            ["main", "[some:thing]", "[unknown]"],
            "root first; unknown symbols named after their file"
        );
        assert!(!first.kernel_mode());
        let exiting = p
            .stacks
            .iter()
            .find(|s| s.comm == "[exiting thread]")
            .unwrap();
        assert_eq!(exiting.frames, ["do_exit.isra.0_[k]"]);
        assert!(exiting.kernel_mode());
        let open = p.stacks.iter().find(|s| s.count == 2).unwrap();
        assert_eq!(open.phase, "spawn");
        assert_eq!(
            open.frames,
            [
                "_start",
                "__open64_nocancel",
                "entry_SYSCALL_64_after_hwframe_[k]",
                "inode_permission_[k]"
            ]
        );
        let again = Profile::from_folded(&p.to_folded()).unwrap();
        let mut sorted = p.stacks.clone();
        sorted.sort_by(|a, b| (&a.phase, &a.comm, &a.frames).cmp(&(&b.phase, &b.comm, &b.frames)));
        let mut back = again.stacks.clone();
        back.sort_by(|a, b| (&a.phase, &a.comm, &a.frames).cmp(&(&b.phase, &b.comm, &b.frames)));
        assert_eq!(back, sorted, "perf.folded reads back what was written");
        assert!(is_unresolved_frame("[unknown]") && is_unresolved_frame("[libc.so.6]_[k]"));
        assert!(!is_unresolved_frame("runtime.(*mheap).alloc"));
    }

    #[test]
    fn phases_cover_samples_before_the_first_mark() {
        let phases = Phases(vec![("startup".into(), 100), ("spawn".into(), 200)]);
        assert_eq!(phases.at(50), "startup");
        assert_eq!(phases.at(100), "startup");
        assert_eq!(phases.at(250), "spawn");
        assert_eq!(Phases(vec![]).at(5), "run");
        assert_eq!(parse_time_ns("5113.009397432"), Some(5_113_009_397_432));
        assert_eq!(parse_time_ns("12.5"), Some(12_500_000_000));
    }
}
