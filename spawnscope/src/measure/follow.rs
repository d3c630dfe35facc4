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
use crate::record::{AliveCount, AliveSnapshot, PeakChoice, PeakMoment, PhaseSample, Snapshot};
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
    /// The snapshot memory per task is measured at, why, and the moments averaged with it.
    pub peak: Option<Peak>,
    pub runtime_version: Option<String>,
    pub violations: Vec<String>,
}

/// A moment that may be the peak: its snapshot and the tasks alive then (None until known).
struct Candidate {
    snapshot: Snapshot,
    alive: Option<u64>,
    counted: AliveCount,
}

/// Moments kept besides the one with the most tasks alive, and how close to it they must come:
/// where a sleep of milliseconds leaves a few hundred tasks alive, one reading is a few megabytes
/// that the kernel's own churn (deferred frees, reused slab room) moves by several percent, so
/// the figures are averaged over the moments with nearly the most alive.
const MOMENTS_KEPT: usize = 32;
const NEAR_THE_MOST: f64 = 0.8;

/// The peak of a workload without a `peak` event (sleep, churn, pingpong, chain): the moments the
/// most tasks are alive. A snapshot at every progress event that reports more tasks alive than
/// the least of the moments kept (at most ten a second) and one at the phase after spawning; the
/// one with the most alive is the peak, those within 80 % of it are averaged with it. Threads
/// are counted in the snapshot's own status (the same reading as RSS); goroutines by the
/// workload's count in the event, or, for the phase, in its result.
struct MostAlive {
    tasks_are_threads: bool,
    /// The process's threads before spawning (its main thread, a runtime's threads).
    threads_before: Option<u64>,
    /// The progress moments with the most alive, at most MOMENTS_KEPT, most alive first.
    kept: Vec<Candidate>,
    /// The phase after spawning (`steady` or `join`).
    at_phase: Option<Candidate>,
    samples: u64,
}

/// The moment memory is measured at, and the moments averaged with it.
pub type Peak = (Snapshot, PeakMoment, Vec<AliveSnapshot>);

impl MostAlive {
    fn new(tasks_are_threads: bool) -> Self {
        MostAlive {
            tasks_are_threads,
            threads_before: None,
            kept: Vec::new(),
            at_phase: None,
            samples: 0,
        }
    }

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

    /// Whether a progress event reporting `alive` may be among the moments kept.
    fn worth_a_snapshot(&self, alive: u64) -> bool {
        alive > 0
            && (self.kept.len() < MOMENTS_KEPT
                || self
                    .kept
                    .last()
                    .and_then(|c| c.alive)
                    .is_some_and(|a| alive > a))
    }

    fn keep(&mut self, c: Candidate) {
        let at = self.kept.partition_point(|k| k.alive >= c.alive);
        self.kept.insert(at, c);
        self.kept.truncate(MOMENTS_KEPT);
    }

    fn progress(&mut self, alive: u64, t_ns: u64, pid: u32, cgroup: Option<&RunCgroup>) {
        if self.worth_a_snapshot(alive) {
            let c = self.candidate(snapshot(Some(pid), cgroup, false), Some((alive, t_ns)));
            self.keep(c);
        }
    }

    /// The peak and the moments near it, once the result event has given the phase's count.
    fn finish(mut self, result_alive: Option<u64>) -> Option<Peak> {
        if let Some(mut phase) = self.at_phase.take() {
            if phase.alive.is_none() {
                phase.alive = result_alive;
            }
            // The phase's count comes from the workload itself: it wins a tie.
            let at = self.kept.partition_point(|k| k.alive > phase.alive);
            self.kept.insert(at, phase);
        }
        let mut moments = self.kept.into_iter();
        let winner = moments.next()?;
        let most = winner.alive.unwrap_or(0);
        let near: Vec<AliveSnapshot> = moments
            .filter_map(|c| Some((c.alive?, c.snapshot)))
            .filter(|(alive, _)| *alive as f64 >= most as f64 * NEAR_THE_MOST)
            .take(MOMENTS_KEPT - 1)
            .map(|(alive, snapshot)| AliveSnapshot { alive, snapshot })
            .collect();
        let moment = PeakMoment {
            chosen: PeakChoice::MostAlive {
                samples: self.samples,
            },
            alive: winner.alive,
            counted: winner.counted,
        };
        Some((winner.snapshot, moment, near))
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
    let mut most_alive =
        (workload != WorkloadKind::Hold).then(|| MostAlive::new(tasks_are_threads));
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
                    Vec::new(),
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
            threads_before: Some(3),
            ..MostAlive::new(tasks_are_threads)
        }
    }

    #[test]
    fn threads_are_counted_in_the_snapshot_and_the_most_alive_wins() {
        let mut m = most_alive(true);
        // The workload reported 500 alive; the snapshot read 3 + 450 a moment later: 450 count.
        let c = m.candidate(at(10, Some(453)), Some((500, 5)));
        assert_eq!(c.alive, Some(450));
        assert_eq!(c.counted, AliveCount::ThreadsInSnapshot { before: 3 });
        m.keep(c);
        m.at_phase = Some(m.candidate(at(20, Some(83)), None));
        let (snapshot, moment, near) = m.finish(Some(82)).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (10, Some(450)));
        assert_eq!(moment.chosen, PeakChoice::MostAlive { samples: 2 });
        assert!(near.is_empty(), "82 alive is not near 450");
    }

    #[test]
    fn goroutines_are_counted_by_the_workload_and_the_phase_by_its_result() {
        let mut m = most_alive(false);
        let c = m.candidate(at(1_500, Some(7)), Some((600_000, 1_000)));
        assert_eq!(c.alive, Some(600_000));
        assert_eq!(c.counted, AliveCount::Progress { lag_ns: 500 });
        m.keep(c);
        m.at_phase = Some(m.candidate(at(2_000, Some(7)), None));
        // The result says 643,207 were alive as the phase began: the phase wins, and the
        // progress moment, within 80 % of it, is averaged with it.
        let (snapshot, moment, near) = m.finish(Some(643_207)).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (2_000, Some(643_207)));
        assert_eq!(moment.counted, AliveCount::ResultEvent);
        assert_eq!(near.len(), 1);
        assert_eq!((near[0].alive, near[0].snapshot.t_ns), (600_000, 1_500));
    }

    #[test]
    fn with_no_phase_after_spawning_the_best_progress_sample_is_the_peak() {
        let m = most_alive(true);
        assert!(m.finish(None).is_none(), "no sample, no peak");
        let mut m = most_alive(true);
        let c = m.candidate(at(10, Some(1_003)), Some((1_000, 9)));
        m.keep(c);
        let (_, moment, _) = m.finish(None).unwrap();
        assert_eq!(moment.alive, Some(1_000));
    }

    #[test]
    fn the_moments_with_the_most_alive_are_kept_and_those_near_the_most_averaged() {
        let mut m = most_alive(false);
        // A plateau around 300 alive after a climb: the climb's moments are pushed out.
        let reported: Vec<u64> = (1..=10)
            .map(|i| i * 30)
            .chain((0..40).map(|i| 280 + (i * 7) % 30))
            .collect();
        for (t, &alive) in reported.iter().enumerate() {
            if m.worth_a_snapshot(alive) {
                let c = m.candidate(at(t as u64, None), Some((alive, t as u64)));
                m.keep(c);
            }
        }
        assert_eq!(m.kept.len(), MOMENTS_KEPT);
        assert!(m.kept.windows(2).all(|w| w[0].alive >= w[1].alive));
        assert!(!m.worth_a_snapshot(m.kept.last().unwrap().alive.unwrap()));
        let (_, moment, near) = m.finish(None).unwrap();
        let most = moment.alive.unwrap();
        assert_eq!(most, *reported.iter().max().unwrap());
        assert_eq!(near.len(), MOMENTS_KEPT - 1);
        assert!(near
            .iter()
            .all(|n| n.alive as f64 >= most as f64 * 0.8 && n.alive <= most));
    }
}
