//! Following the workload while it runs: its events on stdout (raw line to workload.jsonl first,
//! then acted on), its stderr teed to ours, and the progress bar they drive.

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, LineWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use spawnscope_collector::Collector;

use crate::host::cgroup::RunCgroup;
use crate::measure::sampler::snapshot;
use crate::measure::sentinels::SentinelWatch;
use crate::record::{PhaseSample, Snapshot};
use crate::runtime::{Contract, Event, WorkloadKind};

/// Copies the workload's stderr to ours and to workload.stderr as it comes.
pub fn tee_stderr(mut from: File, path: PathBuf, bar: ProgressBar) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut file = File::create(path).ok();
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            bar.suspend(|| {
                let _ = std::io::stderr().write_all(&buf[..n]);
            });
            if let Some(f) = file.as_mut() {
                let _ = f.write_all(&buf[..n]);
            }
        }
    })
}

pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // The bar draws on stderr: quiet when stderr is not a terminal (CI, redirected), whatever
    // stdout is (`run | tee` still shows it).
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {human_pos}/{human_len} tasks ({per_sec}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// What the workload's stdout told us.
#[derive(Default)]
pub struct Followed {
    pub phases: Vec<PhaseSample>,
    pub peak: Option<Snapshot>,
    pub runtime_version: Option<String>,
    pub violations: Vec<String>,
}

/// Reads the workload's events as they come: raw line to workload.jsonl first, then acts.
#[allow(clippy::too_many_arguments)]
pub fn follow_events(
    stdout: File,
    stdin: Option<File>,
    raw: &Path,
    pid: u32,
    cgroup: Option<&RunCgroup>,
    collector: Option<&Collector>,
    workload: WorkloadKind,
    bar: &ProgressBar,
    mut sentinels: Option<&mut SentinelWatch>,
) -> Result<Followed> {
    let contract = Contract::new()?;
    let mut raw =
        LineWriter::new(File::create(raw).with_context(|| format!("creating {}", raw.display()))?);
    let mut stdin = stdin;
    let mut followed = Followed::default();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the workload's output")?;
        raw.write_all(line.as_bytes())?;
        raw.write_all(b"\n")?;
        match contract.parse(&line) {
            Ok(Event::Start(start)) => {
                followed.runtime_version = start["runtime_version"].as_str().map(str::to_string);
            }
            Ok(Event::Phase { name, t_ns }) => {
                if let Some(c) = collector {
                    c.set_phase(followed.phases.len() as u32, t_ns);
                }
                // Sentinels first: they are cheap and their edge should sit near the mark.
                if let Some(watch) = sentinels.as_deref_mut() {
                    watch.mark(&name);
                }
                let at_peak = followed.peak.is_none()
                    && !matches!(workload, WorkloadKind::Hold | WorkloadKind::Churn)
                    && (name == "steady" || name == "join");
                let snap = snapshot(Some(pid), cgroup, at_peak);
                if at_peak {
                    followed.peak = Some(snap.clone());
                }
                bar.set_prefix(name.clone());
                followed.phases.push(PhaseSample {
                    name,
                    t_ns,
                    snapshot: snap,
                });
            }
            Ok(Event::Progress {
                spawned, target, ..
            }) => {
                bar.set_length(target);
                bar.set_position(spawned);
            }
            Ok(Event::Peak { alive, .. }) => {
                followed.peak = Some(snapshot(Some(pid), cgroup, true));
                bar.set_position(alive);
                // The snapshot is taken: release the tasks.
                if let Some(mut input) = stdin.take() {
                    let _ = input.write_all(b"\n");
                }
            }
            Ok(Event::Result(_)) => {}
            Err(violation) => {
                if followed.violations.len() < 20 {
                    followed.violations.push(format!("{violation}: {line}"));
                }
            }
        }
    }
    Ok(followed)
}
