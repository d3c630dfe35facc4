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
use crate::record::{AliveCount, PeakChoice, PeakMoment, PhaseSample, Snapshot};
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

/// A command's stdout with `--peak-when`: copied to ours and to command.stdout line by line, and
/// at the first line matching `pattern` the snapshot memory is measured at. Returns that snapshot
/// and the line.
pub fn watch_command_stdout(
    from: File,
    path: PathBuf,
    pattern: regex::Regex,
    pid: u32,
    cgroup: Option<RunCgroup>,
) -> JoinHandle<Option<(Snapshot, String)>> {
    std::thread::spawn(move || {
        let mut file = File::create(path).ok();
        let mut matched = None;
        let mut out = std::io::stdout();
        for line in BufReader::new(from).split(b'\n') {
            let Ok(line) = line else { break };
            let text = String::from_utf8_lossy(&line);
            if matched.is_none() && pattern.is_match(&text) {
                // Measured before the line is passed on: the command is at its moment now.
                matched = Some((
                    snapshot(Some(pid), cgroup.as_ref(), false),
                    text.into_owned(),
                ));
            }
            for sink in [
                Some(&mut out as &mut dyn Write),
                file.as_mut().map(|f| f as &mut dyn Write),
            ]
            .into_iter()
            .flatten()
            {
                let _ = sink.write_all(&line).and_then(|_| sink.write_all(b"\n"));
            }
            let _ = out.flush();
        }
        matched
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
    /// The snapshot memory per task is measured at, and why.
    pub peak: Option<(Snapshot, PeakMoment)>,
    pub runtime_version: Option<String>,
    pub violations: Vec<String>,
}

/// A moment that may be the peak: its snapshot and the tasks alive then (None until known).
struct Candidate {
    snapshot: Snapshot,
    alive: Option<u64>,
    counted: AliveCount,
}

/// The peak of a workload without a `peak` event (sleep, churn, pingpong, chain): the moment the
/// most tasks are alive. A snapshot at every progress event that reports more tasks alive than
/// any before (at most ten a second, while spawning) and one at the phase after spawning; the one
/// with the most alive wins. Threads are counted in the snapshot's own status (the same reading
/// as RSS); goroutines by the workload's count in the event, or, for the phase, in its result.
struct MostAlive {
    tasks_are_threads: bool,
    /// The process's threads before spawning (its main thread, a runtime's threads).
    threads_before: Option<u64>,
    best: Option<Candidate>,
    /// The phase after spawning (`steady` or `join`).
    at_phase: Option<Candidate>,
    samples: u64,
    /// The most alive any progress event reported when its snapshot was taken.
    reported: u64,
}

impl MostAlive {
    fn candidate(&mut self, snapshot: Snapshot, reported: Option<(u64, u64)>) -> Candidate {
        self.samples += 1;
        let threads = snapshot.status.get("Threads").copied();
        match (self.tasks_are_threads, threads, self.threads_before) {
            (true, Some(now), Some(before)) => Candidate {
                alive: Some(now.saturating_sub(before)),
                counted: AliveCount::ThreadsInSnapshot { before },
                snapshot,
            },
            _ => match reported {
                Some((alive, t_ns)) => Candidate {
                    counted: AliveCount::Progress {
                        lag_ns: snapshot.t_ns.saturating_sub(t_ns),
                    },
                    alive: Some(alive),
                    snapshot,
                },
                None => Candidate {
                    alive: None,
                    counted: AliveCount::ResultEvent,
                    snapshot,
                },
            },
        }
    }

    fn progress(&mut self, alive: u64, t_ns: u64, pid: u32, cgroup: Option<&RunCgroup>) {
        if alive <= self.reported {
            return;
        }
        self.reported = alive;
        let c = self.candidate(snapshot(Some(pid), cgroup, false), Some((alive, t_ns)));
        if c.alive > self.best.as_ref().and_then(|b| b.alive) {
            self.best = Some(c);
        }
    }

    /// The winner, once the result event has given the phase's count.
    fn finish(self, result_alive: Option<u64>) -> Option<(Snapshot, PeakMoment)> {
        let at_phase = self.at_phase.map(|mut c| {
            if c.alive.is_none() {
                c.alive = result_alive;
            }
            c
        });
        let winner = match (self.best, at_phase) {
            (Some(best), Some(phase)) if best.alive > phase.alive => best,
            (_, Some(phase)) => phase,
            (best, None) => best?,
        };
        let moment = PeakMoment {
            chosen: PeakChoice::MostAlive {
                samples: self.samples,
            },
            alive: winner.alive,
            counted: winner.counted,
        };
        Some((winner.snapshot, moment))
    }
}

/// Reads the workload's events as they come: raw line to workload.jsonl first, then acts.
/// `tasks_are_threads`: the runtime's tasks are OS threads (counted in /proc/PID/status).
#[allow(clippy::too_many_arguments)]
pub fn follow_events(
    stdout: File,
    stdin: Option<File>,
    raw: &Path,
    pid: u32,
    cgroup: Option<&RunCgroup>,
    collector: Option<&Collector>,
    workload: WorkloadKind,
    tasks_are_threads: bool,
    bar: &ProgressBar,
    mut sentinels: Option<&mut SentinelWatch>,
) -> Result<Followed> {
    let contract = Contract::new()?;
    let mut raw =
        LineWriter::new(File::create(raw).with_context(|| format!("creating {}", raw.display()))?);
    let mut stdin = stdin;
    let mut followed = Followed::default();
    let mut most_alive = (workload != WorkloadKind::Hold).then_some(MostAlive {
        tasks_are_threads,
        threads_before: None,
        best: None,
        at_phase: None,
        samples: 0,
        reported: 0,
    });
    let mut result_alive = None;
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
                let snap = snapshot(Some(pid), cgroup, false);
                if let Some(m) = most_alive.as_mut() {
                    if followed.phases.is_empty() {
                        m.threads_before = snap.status.get("Threads").copied();
                    }
                    if m.at_phase.is_none() && (name == "steady" || name == "join") {
                        m.at_phase = Some(m.candidate(snap.clone(), None));
                    }
                }
                bar.set_prefix(name.clone());
                followed.phases.push(PhaseSample {
                    name,
                    t_ns,
                    snapshot: snap,
                });
            }
            Ok(Event::Progress {
                t_ns,
                spawned,
                target,
                alive,
            }) => {
                bar.set_length(target);
                bar.set_position(spawned);
                if let Some(m) = most_alive.as_mut() {
                    m.progress(alive, t_ns, pid, cgroup);
                }
            }
            Ok(Event::Peak { alive, .. }) => {
                let snap = snapshot(Some(pid), cgroup, true);
                followed.peak = Some((
                    snap,
                    PeakMoment {
                        chosen: PeakChoice::PeakEvent,
                        alive: Some(alive),
                        counted: AliveCount::PeakEvent,
                    },
                ));
                bar.set_position(alive);
                // The snapshot is taken: release the tasks.
                if let Some(mut input) = stdin.take() {
                    let _ = input.write_all(b"\n");
                }
            }
            Ok(Event::Result(result)) => {
                result_alive = result["alive_at_peak"].as_u64();
            }
            Err(violation) => {
                if followed.violations.len() < 20 {
                    followed.violations.push(format!("{violation}: {line}"));
                }
            }
        }
    }
    if let Some(m) = most_alive {
        followed.peak = m.finish(result_alive);
    }
    Ok(followed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ns: u64, threads: Option<u64>) -> Snapshot {
        Snapshot {
            t_ns,
            status: threads
                .map(|t| [("Threads".to_string(), t)].into())
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    fn most_alive(tasks_are_threads: bool) -> MostAlive {
        MostAlive {
            tasks_are_threads,
            threads_before: Some(3),
            best: None,
            at_phase: None,
            samples: 0,
            reported: 0,
        }
    }

    #[test]
    fn threads_are_counted_in_the_snapshot_and_the_most_alive_wins() {
        let mut m = most_alive(true);
        // The workload reported 500 alive; the snapshot read 3 + 450 a moment later: 450 count.
        let c = m.candidate(at(10, Some(453)), Some((500, 5)));
        assert_eq!(c.alive, Some(450));
        assert_eq!(c.counted, AliveCount::ThreadsInSnapshot { before: 3 });
        m.best = Some(c);
        m.at_phase = Some(m.candidate(at(20, Some(83)), None));
        let (snapshot, moment) = m.finish(Some(82)).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (10, Some(450)));
        assert_eq!(moment.chosen, PeakChoice::MostAlive { samples: 2 });
    }

    #[test]
    fn goroutines_are_counted_by_the_workload_and_the_phase_by_its_result() {
        let mut m = most_alive(false);
        let c = m.candidate(at(1_500, Some(7)), Some((600_000, 1_000)));
        assert_eq!(c.alive, Some(600_000));
        assert_eq!(c.counted, AliveCount::Progress { lag_ns: 500 });
        m.best = Some(c);
        m.at_phase = Some(m.candidate(at(2_000, Some(7)), None));
        // The result says 643,207 were alive as the phase began: the phase wins.
        let (snapshot, moment) = m.finish(Some(643_207)).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (2_000, Some(643_207)));
        assert_eq!(moment.counted, AliveCount::ResultEvent);
    }

    #[test]
    fn with_no_phase_after_spawning_the_best_progress_sample_is_the_peak() {
        let m = most_alive(true);
        assert!(m.finish(None).is_none(), "no sample, no peak");
        let mut m = most_alive(true);
        m.best = Some(m.candidate(at(10, Some(1_003)), Some((1_000, 9))));
        let (_, moment) = m.finish(None).unwrap();
        assert_eq!(moment.alive, Some(1_000));
    }
}
