//! Following the workload while it runs: its events on stdout (raw line to workload.jsonl first,
//! then acted on), its stderr teed to ours, and the progress bar they drive.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, LineWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use spawnscope_collector::Collector;

use crate::loadgen::{self, LoadPlan};
use crate::sampler::snapshot;
use crate::sentinels::SentinelWatch;
use crate::stop::{halt, read_at_gate, read_halted, read_stopped};
use host::cgroup::RunCgroup;
use host::clock::monotonic_ns;
use host::procfs;
use record::loadgen::LoadRecord;
use record::{
    AliveCount, AliveSnapshot, PeakChoice, PeakMoment, PhaseSample, Snapshot, StopAt, WorkloadStop,
};
use runtime::{Contract, Event, WorkloadKind};

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
                // The run's processes' mappings too: this is the moment measured.
                let mut now = snapshot(Some(pid), cgroup.as_ref(), false);
                now.tree.iter_mut().for_each(procfs::read_mappings);
                matched = Some((now, text.into_owned()));
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
    /// The base, read at the workload's start gate (None: it never printed `start`).
    pub base: Option<Snapshot>,
    pub phases: Vec<PhaseSample>,
    /// The snapshot memory per task is measured at, why, and the moments averaged with it.
    pub peak: Option<Peak>,
    pub runtime_version: Option<String>,
    pub violations: Vec<String>,
    /// Where the workload was stopped for a reading of its memory, in time order.
    pub stops: Vec<WorkloadStop>,
    /// Why a stop for a memory reading failed (the reading on the run is used instead).
    pub stop_failed: Option<String>,
    /// serve: the load put on it (None when it never listened).
    pub load: Option<LoadRecord>,
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
/// A still reading (the workload stopped) is exact with fewer alive; it is the peak when it has
/// at least this share of the most alive of any moment. The stop itself waits for a progress
/// event within LEVELLED_NEAR of the most reported by the last LEVELLED_WINDOW events: one early
/// spike must not keep the plateau below it from ever counting (a CI run reported 345 alive once,
/// then held 285–320 to the end of spawning, and was never stopped).
const STOPPED_NEAR: f64 = 0.5;
/// Still readings a run may take after its base: another at the next levelled moment (or at the
/// phase after spawning) while the best one has fewer than STOPPED_NEAR of the most reported. On
/// a plateau that swings ±30 %, one stop in several landed in a trough (a CI run: 332 alive at
/// the most, the one stop under half of it), and the run fell back to a moving reading.
const STILL_READINGS: usize = 3;
const LEVELLED_NEAR: f64 = 0.9;
const LEVELLED_WINDOW: usize = 10;

/// The peak of a workload without a `peak` event (sleep, churn, pingpong, chain): the moments the
/// most tasks are alive. A snapshot at every progress event that reports more tasks alive than
/// the least of the moments kept (at most ten a second) and one at the phase after spawning; the
/// one with the most alive is the peak, those within 80 % of it are averaged with it. Threads
/// are counted in the snapshot's own status (the same reading as RSS); goroutines by the
/// workload's count in the event, or, for the phase, in its result.
///
/// Where tasks exit while others start (sleep, churn), the base is read still at the start gate
/// (records before the gate: the workload stopped at its first phase), and the workload is
/// stopped once more for a still reading (measure/stop.rs): at the first progress event
/// past a quarter of spawning where the count has levelled (see `levelled`), or else at the phase
/// after spawning. That reading is the peak when its tasks alive are at least half the most of
/// any moment (on a plateau that swings ±30 % from one tenth of a second to the next, a still
/// reading at 200 alive is exact where one on the run at 300 is not).
struct MostAlive {
    tasks_are_threads: bool,
    /// Whether to stop the workload once for a reading.
    stops: bool,
    recent_reports: RecentReports,
    /// The best reading taken with the workload stopped (the most alive), and its stop.
    stopped: Option<(Candidate, WorkloadStop)>,
    /// Every stop for a still reading, in time order: the times leave them all out.
    stops_taken: Vec<WorkloadStop>,
    /// The most tasks alive any progress event reported.
    most_reported: u64,
    stop_failed: Option<String>,
    /// The process's threads before spawning (its main thread, a runtime's threads), at the base.
    threads_before: Option<u64>,
    /// The progress moments with the most alive, at most MOMENTS_KEPT, most alive first.
    kept: Vec<Candidate>,
    /// The phase after spawning (`steady` or `join`).
    at_phase: Option<Candidate>,
    samples: u64,
}

/// The moment memory is measured at, and the moments averaged with it.
pub type Peak = (Snapshot, PeakMoment, Vec<AliveSnapshot>);

/// Whether a progress event finds the count of tasks alive levelled, worth stopping for: past a
/// quarter of spawning, no higher than the event before or with a tenth of the tasks spawned
/// already gone (tasks exit as fast as others start), and within 90 % of the most the last few
/// events reported. While no task has exited, the count only climbs: the stop waits for
/// spawning's end.
fn levelled(alive: u64, spawned: u64, target: u64, last: u64, most_recent: u64) -> bool {
    alive > 0
        && spawned.saturating_mul(4) >= target
        && (alive <= last || alive.saturating_mul(10) < spawned.saturating_mul(9))
        && alive as f64 >= most_recent as f64 * LEVELLED_NEAR
}

/// The counts of tasks alive the last LEVELLED_WINDOW progress events reported, latest last.
#[derive(Default)]
struct RecentReports(VecDeque<u64>);

impl RecentReports {
    /// Adds a report; returns the count reported before it, and the most of the window with it.
    fn push(&mut self, alive: u64) -> (u64, u64) {
        let last = self.0.back().copied().unwrap_or(0);
        self.0.push_back(alive);
        if self.0.len() > LEVELLED_WINDOW {
            self.0.pop_front();
        }
        (last, self.0.iter().copied().max().unwrap_or(0))
    }
}

impl MostAlive {
    fn new(tasks_are_threads: bool, stops: bool) -> Self {
        MostAlive {
            tasks_are_threads,
            stops,
            recent_reports: RecentReports::default(),
            stopped: None,
            stops_taken: Vec::new(),
            most_reported: 0,
            stop_failed: None,
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

    /// Whether to stop for a still reading now: none yet, or the best one has fewer than
    /// STOPPED_NEAR of the most alive seen, and STILL_READINGS not all taken.
    fn may_stop(&self) -> bool {
        if !self.stops || self.stop_failed.is_some() || self.stops_taken.len() >= STILL_READINGS {
            return false;
        }
        let most_seen = self
            .kept
            .first()
            .and_then(|c| c.alive)
            .unwrap_or(0)
            .max(self.most_reported);
        match &self.stopped {
            None => true,
            Some((c, _)) => c
                .alive
                .is_some_and(|a| (a as f64) < most_seen as f64 * STOPPED_NEAR),
        }
    }

    /// Stops the workload for a still reading (see `may_stop`); `reported`: the progress
    /// event's count. The best reading is kept as `stopped`, any other among the moments.
    fn stop(
        &mut self,
        pid: u32,
        cgroup: Option<&RunCgroup>,
        reported: Option<(u64, u64)>,
        at: StopAt,
    ) {
        if !self.may_stop() {
            return;
        }
        match read_stopped(pid, cgroup, at) {
            Ok((snapshot, stop)) => {
                self.stops_taken.push(stop);
                let mut c = self.candidate(snapshot, reported);
                // The count stood still from SIGSTOP on, not from the (later) snapshot.
                if let (AliveCount::Progress { lag_ns }, Some((_, t_ns))) =
                    (&mut c.counted, reported)
                {
                    *lag_ns = stop.from_t_ns.saturating_sub(t_ns);
                }
                let better = match &self.stopped {
                    None => true,
                    Some((best, _)) => c.alive > best.alive,
                };
                if better {
                    if let Some((before, _)) = self.stopped.replace((c, stop)) {
                        self.keep(before);
                    }
                } else {
                    self.keep(c);
                }
            }
            Err(err) => self.stop_failed = Some(format!("{err:#}")),
        }
    }

    fn progress(
        &mut self,
        (alive, spawned, target): (u64, u64, u64),
        t_ns: u64,
        pid: u32,
        cgroup: Option<&RunCgroup>,
    ) {
        let (last, most_recent) = self.recent_reports.push(alive);
        self.most_reported = self.most_reported.max(alive);
        if self.may_stop() && levelled(alive, spawned, target, last, most_recent) {
            let before = self.stops_taken.len();
            self.stop(pid, cgroup, Some((alive, t_ns)), StopAt::Levelled);
            if self.stops_taken.len() > before {
                return;
            }
        }
        if self.worth_a_snapshot(alive) {
            let c = self.candidate(snapshot(Some(pid), cgroup, false), Some((alive, t_ns)));
            self.keep(c);
        }
    }

    /// The peak and the moments near it, once the result event has given the phase's count: the
    /// stopped reading alone where it has at least half the most alive, else the moments with
    /// the most.
    fn finish(mut self, result_alive: Option<u64>) -> Option<Peak> {
        if let Some(phase) = self.at_phase.as_mut().filter(|p| p.alive.is_none()) {
            phase.alive = result_alive;
        }
        if let Some((mut stopped, _)) = self.stopped.take() {
            if stopped.alive.is_none() {
                stopped.alive = result_alive;
            }
            let most = self
                .kept
                .iter()
                .chain(&self.at_phase)
                .filter_map(|c| c.alive)
                .max()
                .unwrap_or(0);
            if stopped
                .alive
                .is_some_and(|a| a > 0 && a as f64 >= most as f64 * STOPPED_NEAR)
            {
                let moment = PeakMoment {
                    chosen: PeakChoice::Stopped {
                        samples: self.samples,
                    },
                    alive: stopped.alive,
                    counted: stopped.counted,
                };
                return Some((stopped.snapshot, moment, Vec::new()));
            }
            self.keep(stopped);
        }
        if let Some(phase) = self.at_phase.take() {
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

/// serve: the load to put on the server once it listens, and where its wrk hook is written.
pub struct ServeLoad {
    pub plan: LoadPlan,
    pub script: PathBuf,
}

/// Starts the load on the addresses the server listens on; when it ends, releases the server
/// (a line on its stdin: it drains and exits). The thread gives the load's record.
fn load_then_release(
    load: ServeLoad,
    addrs: Vec<String>,
    stdin: Option<File>,
    running: loadgen::Running,
) -> JoinHandle<LoadRecord> {
    std::thread::spawn(move || {
        let record = match loadgen::start(&load.plan, &addrs, &load.script, &running) {
            Ok(running) => running.finish(),
            Err(err) => LoadRecord {
                failed: Some(format!("{err:#}")),
                ..Default::default()
            },
        };
        // A server that died already (OOM-killed) has no reader: the write fails, harmlessly.
        if let Some(mut input) = stdin {
            let _ = input.write_all(b"\n");
        }
        record
    })
}

/// Reads the workload's events as they come: raw line to workload.jsonl first, then acts. The
/// workload runs with its start gate closed (`START_GATE_FLAG`): at its `start` event the base is
/// read and a line on `stdin` opens the gate; hold's release is the next line, at its `peak`.
/// `tasks_are_threads`: the runtime's tasks are OS threads (counted in /proc/PID/status).
/// `serve`: the load a serve workload is put under, started at its `listening` event.
#[allow(clippy::too_many_arguments)]
pub fn follow_events(
    stdout: File,
    stdin: Option<File>,
    serve: Option<ServeLoad>,
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
    let mut serve = serve;
    let mut load = None;
    // Every return below, an early `?` too, stops the load.
    let running = loadgen::StoppedOnDrop::default();
    let mut followed = Followed::default();
    let mut most_alive = (workload != WorkloadKind::Hold)
        .then(|| MostAlive::new(tasks_are_threads, workload.stopped_for_memory()));
    let mut result_alive = None;
    let mut gate_opened_t_ns = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the workload's output")?;
        raw.write_all(line.as_bytes())?;
        raw.write_all(b"\n")?;
        match contract.parse(&line) {
            Ok(Event::Start(start)) => {
                followed.runtime_version = start["runtime_version"].as_str().map(str::to_string);
                // The workload waits at its start gate (--wait-to-start) for our line: the base,
                // with nothing of the run started, then the line that opens the gate.
                let still = most_alive.as_ref().is_some_and(|m| m.stops);
                let (base, mut gate) = read_at_gate(pid, cgroup, monotonic_ns(), still);
                // Before the line: nothing the workload does once it has the line can come before.
                gate.to_t_ns = monotonic_ns();
                if let Some(input) = stdin.as_mut() {
                    let _ = input.write_all(b"\n");
                }
                gate_opened_t_ns = Some(gate.to_t_ns);
                followed.stops.push(gate);
                if let Some(m) = most_alive.as_mut() {
                    m.threads_before = base.status.get("Threads").copied();
                }
                followed.base = Some(base);
            }
            Ok(Event::Phase { name, t_ns }) => {
                let first = followed.phases.is_empty();
                // A workload that marked its first phase before the gate opened did not wait: its
                // base may hold tasks of the run.
                if let Some(opened) = gate_opened_t_ns.filter(|&at| first && t_ns < at) {
                    followed.violations.push(format!(
                        "the first phase ({name}) was marked {:.1} ms before the start gate opened: the workload did not wait at it, and the base may hold tasks of the run",
                        (opened - t_ns) as f64 / 1e6
                    ));
                }
                // Without a base at the gate (no `start` event), the base is the first phase's:
                // stopped before anything else is done, so that as few tasks as can be have
                // started (the conductor is not the only one wanting the CPUs now).
                let halted = most_alive
                    .as_ref()
                    .filter(|m| first && m.stops && followed.base.is_none())
                    .map(|_| halt(pid));
                if let Some(c) = collector {
                    c.set_phase(followed.phases.len() as u32, t_ns);
                }
                // Sentinels first: they are cheap and their edge should sit near the mark.
                if let Some(watch) = sentinels.as_deref_mut() {
                    watch.mark(&name);
                }
                // The base, read with the workload stopped: the threads it has already started
                // and their memory at one moment.
                let base = halted.map(|from| read_halted(pid, cgroup, StopAt::FirstPhase, from?));
                let snap = match (base, most_alive.as_mut()) {
                    (Some(Ok((snap, stop))), _) => {
                        followed.stops.push(stop);
                        snap
                    }
                    (Some(Err(err)), Some(m)) => {
                        m.stop_failed = Some(format!("{err:#}"));
                        snapshot(Some(pid), cgroup, false)
                    }
                    _ => snapshot(Some(pid), cgroup, false),
                };
                if let Some(m) = most_alive.as_mut() {
                    if first && followed.base.is_none() {
                        m.threads_before = snap.status.get("Threads").copied();
                    }
                    if m.at_phase.is_none() && (name == "steady" || name == "join") {
                        m.at_phase = Some(m.candidate(snap.clone(), None));
                        m.stop(pid, cgroup, None, StopAt::AfterSpawning);
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
                    m.progress((alive, spawned, target), t_ns, pid, cgroup);
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
                // The snapshot is taken: release the tasks (hold). A server has handed its stdin
                // to the load, which releases it when it ends.
                if let Some(mut input) = stdin.take() {
                    let _ = input.write_all(b"\n");
                }
            }
            Ok(Event::Listening { addrs }) => {
                if let Some(plan) = serve.take() {
                    load = Some(load_then_release(
                        plan,
                        addrs,
                        stdin.take(),
                        running.0.clone(),
                    ));
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
    if let Some(mut m) = most_alive {
        followed.stops.extend(m.stops_taken.iter().copied());
        followed.stop_failed = m.stop_failed.take();
        // A server's `peak` (all C connections open) is its moment; without one (it fell over
        // first), the moment most connections were open.
        let peak_event = followed
            .peak
            .take()
            .filter(|_| workload == WorkloadKind::Serve);
        followed.peak = peak_event.or_else(|| m.finish(result_alive));
    }
    // The server's output ended: it drained and exited, or it was killed (OOM, a signal). wrk
    // would go on loading a dead address for the rest of its duration, reconnecting as fast as
    // it can: it is stopped, and reports what it had.
    drop(running);
    followed.load = load.map(|handle| {
        handle.join().unwrap_or_else(|_| LoadRecord {
            failed: Some("the load thread panicked".into()),
            ..Default::default()
        })
    });
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
            ..MostAlive::new(tasks_are_threads, false)
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

    fn a_stop(from_t_ns: u64, at: StopAt) -> WorkloadStop {
        WorkloadStop {
            from_t_ns,
            to_t_ns: from_t_ns + 400,
            at,
            rcu_barrier: true,
            at_once: false,
        }
    }

    #[test]
    fn the_count_is_levelled_once_tasks_exit_as_fast_as_others_start() {
        // 10 ms sleeps: a plateau near 300 from the start; past a quarter of 100,000 spawned.
        assert!(levelled(290, 30_000, 100_000, 300, 310));
        assert!(
            !levelled(290, 20_000, 100_000, 300, 310),
            "before a quarter"
        );
        assert!(
            !levelled(250, 30_000, 100_000, 300, 310),
            "below 90 % of the most"
        );
        // 1 s sleeps: nobody has exited, the count climbs with spawning: wait for its end.
        assert!(!levelled(16_000, 16_000, 20_000, 15_000, 16_000));
        // ...until it stops climbing, the first exits matching the starts.
        assert!(levelled(16_400, 17_500, 20_000, 16_414, 16_414));
        assert!(!levelled(0, 30_000, 100_000, 0, 0), "no task alive");
    }

    #[test]
    fn an_early_spike_holds_the_stop_back_for_a_window_only() {
        // The CI run: 345 alive once, then a plateau of 285–320 that never came within 90 %.
        let mut recent = RecentReports::default();
        assert_eq!(recent.push(345), (0, 345));
        let plateau = [300, 290, 305, 295, 300, 290, 300, 295, 305];
        for alive in plateau {
            let (_, most) = recent.push(alive);
            assert_eq!(most, 345, "the spike is still in the window");
            assert!(!levelled(alive, 40_000, 100_000, 310, most));
        }
        let (last, most) = recent.push(300);
        assert_eq!((last, most), (305, 305), "the spike has left the window");
        assert!(levelled(300, 41_000, 100_000, last, most));
    }

    #[test]
    fn a_stopped_reading_with_half_the_most_alive_is_the_peak_alone() {
        let mut m = most_alive(true);
        for (t, threads) in [(10, 303), (20, 263)] {
            let c = m.candidate(at(t, Some(threads)), Some((threads - 3, t)));
            m.keep(c);
        }
        let stopped = m.candidate(at(30, Some(203)), Some((210, 25)));
        m.stopped = Some((stopped, a_stop(27, StopAt::Levelled)));
        let (snapshot, moment, near) = m.finish(None).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (30, Some(200)));
        assert_eq!(moment.chosen, PeakChoice::Stopped { samples: 3 });
        assert!(
            near.is_empty(),
            "a still reading is not averaged with moving ones"
        );
    }

    #[test]
    fn a_stopped_reading_with_fewer_than_half_the_most_alive_is_one_moment_among_the_others() {
        let mut m = most_alive(true);
        let c = m.candidate(at(10, Some(303)), Some((300, 9)));
        m.keep(c);
        let stopped = m.candidate(at(30, Some(103)), Some((100, 25)));
        m.stopped = Some((stopped, a_stop(27, StopAt::AfterSpawning)));
        let (snapshot, moment, _) = m.finish(None).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (10, Some(300)));
        assert_eq!(moment.chosen, PeakChoice::MostAlive { samples: 2 });
    }

    /// A still reading in a trough (under half the most reported) is taken again at the next
    /// chance, at most STILL_READINGS times; one near the most is not.
    #[test]
    fn a_still_reading_in_a_trough_is_taken_again() {
        let mut m = MostAlive {
            stops: true,
            ..most_alive(true)
        };
        assert!(m.may_stop(), "none taken yet");
        m.most_reported = 332;
        let trough = m.candidate(at(30, Some(153)), Some((150, 25)));
        m.stopped = Some((trough, a_stop(27, StopAt::Levelled)));
        m.stops_taken.push(a_stop(27, StopAt::Levelled));
        assert!(m.may_stop(), "150 of 332: another");
        let near = m.candidate(at(40, Some(253)), Some((250, 35)));
        m.stopped = Some((near, a_stop(37, StopAt::Levelled)));
        m.stops_taken.push(a_stop(37, StopAt::Levelled));
        assert!(!m.may_stop(), "250 of 332: enough");
        m.stopped.as_mut().unwrap().0.alive = Some(100);
        m.stops_taken.push(a_stop(47, StopAt::Levelled));
        assert!(!m.may_stop(), "three taken: no more");
    }

    #[test]
    fn goroutines_stopped_at_the_phase_are_counted_by_the_result() {
        let mut m = most_alive(false);
        let c = m.candidate(at(10, Some(7)), Some((600_000, 9)));
        m.keep(c);
        let stopped = m.candidate(at(30, Some(7)), None);
        m.stopped = Some((stopped, a_stop(27, StopAt::AfterSpawning)));
        let (snapshot, moment, _) = m.finish(Some(640_000)).unwrap();
        assert_eq!((snapshot.t_ns, moment.alive), (30, Some(640_000)));
        assert_eq!(moment.counted, AliveCount::ResultEvent);
    }
}
