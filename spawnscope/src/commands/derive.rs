//! From raw records to what people read, shared by `run`, `compare` and `report`: one run
//! directory's summary (with where its CPU time went, when it was recorded with --perf), and a
//! set of runs' exports (compare.json/csv/md, charts/, report.html).
//!
//! Who writes what: `run` writes its run directory's derived files (summary.json, summary.md,
//! perf.folded, flame.svg; with `--perfetto` trace.perfetto-trace and swimlane.svg). Reading results never rewrites them: `report` and the end of `compare`
//! write a run directory's derived file only where it is missing (a run stopped before its
//! analysis), and write their own exports where they were asked to.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use analyse::comparisons::compare::{compare_runs, Comparison, SummarizedRun};
use analyse::comparisons::kernel_gaps::known_gaps;
use analyse::probes::waits::{self, Waits};
use analyse::run::phases::perf_phases;
use analyse::run::phases::phase_names;
use analyse::run::summary::{summarize, Summary};
use analyse::runtimes::go_procs;
use analyse::runtimes::go_sched::{self, GoSchedFigures};
use analyse::runtimes::tokio_sched::TokioSchedFigures;
use analyse::time::attribution::{self, Attribution};
use analyse::time::verdict::{self, KernelCounts};
use analyse::traces::sched_figures::SchedFigures;
use analyse::traces::swimlane::{self, Swimlane};
use analyse::traces::timeline;
use analyse::traces::trace_cut;
use analyse::traces::{run_tracks, sched_figures, sched_trace};
use analyse::{serving, time::sentinels};
use record::go_sched::GoSchedSummary;
use record::perf::{read_samples, write_folded, PerfRecord, Profile, Samples};
use record::tokio_sched::TokioSchedSummary;
use record::{self, LoadedRun, Plan};
use runtime::result_event;
/// Whether deriving a run's figures writes its derived files.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Right after the run: summary.*, perf.folded and flame.svg are written.
    Run,
    /// Reading results back: only derived files that are missing are written.
    Missing,
}

/// A run directory's figures, computed from its records.
pub struct DerivedRun {
    pub loaded: LoadedRun,
    pub summary: Summary,
    /// `--perfetto`: the swimlane's model (report.html draws it).
    pub swimlane: Option<Swimlane>,
}

/// The run's perf samples folded by phase: perf.folded when it is current, else `perf script`
/// on perf.data (kept in perf.folded right after the run). None when not recorded with --perf.
pub fn profile(dir: &Path, loaded: &LoadedRun, writes: Writes) -> Result<Option<RunProfile>> {
    let phases = perf_phases(&loaded.run, &loaded.memory);
    let names: Vec<String> = phases.0.iter().map(|(n, _)| n.clone()).collect();
    let (profile, script_messages) = match read_samples(dir)? {
        Samples::NotRecorded => return Ok(None),
        Samples::Folded(profile) => (profile, Vec::new()),
        Samples::Unfolded => {
            let (profile, messages) =
                measure::perf::script(dir, &phases).context("reading perf.data")?;
            if writes == Writes::Run || !dir.join(record::PERF_FOLDED).exists() {
                write_folded(dir, &profile)?;
            }
            (profile, messages)
        }
    };
    Ok(Some(RunProfile {
        profile,
        script_messages,
        phases: names,
    }))
}

/// A run's samples, read back.
pub struct RunProfile {
    pub profile: Profile,
    /// What `perf script` said (lost chunks…); empty when read from perf.folded.
    pub script_messages: Vec<String>,
    /// The run's phases in time order.
    pub phases: Vec<String>,
}

/// Where the run's CPU time went, and its flame graph (drawn where `writes` says).
/// The exact waits, when counted, get perf's sampled view of the same spinning beside them.
fn attribution_of(
    dir: &Path,
    loaded: &LoadedRun,
    writes: Writes,
    waits: Option<&mut Waits>,
) -> Result<Option<Attribution>> {
    let Some(p) = profile(dir, loaded, writes)? else {
        return Ok(None);
    };
    if let Some(w) = waits {
        w.perf = waits::perf_beside(w, &p.profile);
    }
    let perf_record: Option<PerfRecord> = record::read_json(dir, record::PERF_RECORD).ok();
    let mut a = attribution::of_run(
        &p.profile,
        &p.phases,
        &loaded.run,
        perf_record.as_ref(),
        &p.script_messages,
    );
    let flame = dir.join(record::FLAME);
    if writes == Writes::Run || !flame.exists() {
        let svg = render::time::flame::of_run(&p.profile, &loaded.run.target.label(), &a)?;
        fs::write(&flame, svg).with_context(|| format!("writing {}", flame.display()))?;
    }
    a.flame_graph = Some(record::FLAME.to_string());
    Ok(Some(a))
}

/// A run directory's summary from its records; summary.json and summary.md written as `writes`
/// says.
pub fn run_dir(dir: &Path, writes: Writes) -> Result<DerivedRun> {
    let loaded = record::load(dir)
        .with_context(|| format!("{} is not a complete results directory", dir.display()))?;
    let mut summary = summarize(
        &loaded.run,
        &loaded.memory,
        &loaded.sysctl,
        &loaded.events,
        loaded.collector.as_ref(),
    );
    summary.sentinels = loaded.sentinels.as_ref().map(sentinels::figures);
    summary.serve = loaded.load.as_ref().map(|load| {
        serving::figures(
            &loaded.run,
            &loaded.memory,
            result_event(&loaded.events),
            load,
            summary.probes.as_ref(),
            summary
                .memory_per_task
                .as_ref()
                .map(|m| (m.total_kb, m.cgroup_kb)),
        )
    });
    summary.known_gaps = known_gaps(
        loaded.machine.kernel.trim(),
        loaded.machine.memory_cgroup_v2(),
        &loaded.machine.transparent_hugepages,
    );
    summary.verdict = summary.sentinels.as_ref().map(|figures| {
        let mut kernel = loaded
            .collector
            .as_ref()
            .map(|c| KernelCounts::from_report(c, &phase_names(&loaded.memory)))
            .unwrap_or_default();
        // A run held to K CPUs is judged over those K (its sentinels read them alone).
        let held_to = loaded
            .sentinels
            .as_ref()
            .and_then(|s| s.cpus.as_deref())
            .and_then(|list| units::cpu_list::parse(list).ok());
        if held_to.is_some() {
            kernel = kernel.without_outside_cpu();
        }
        let cpus = held_to.map_or(loaded.machine.cores as u32, |c| c.len() as u32);
        let mut evidence = verdict::evidence(figures, &kernel, cpus);
        evidence.emulator = loaded.machine.emulator().map(str::to_string);
        if let Some(load) = &loaded.load {
            serving::discount_load_generator(&mut evidence, load);
        }
        verdict::judge(&evidence)
    });
    match attribution_of(dir, &loaded, writes, summary.waits.as_mut()) {
        Ok(attribution) => summary.attribution = attribution,
        Err(err) => summary
            .left_out
            .push(format!("perf analysis failed: {err:#} (perf.data is kept)")),
    }
    // --runtime-trace: the runtime's own scheduler, before the kernel's trace it joins.
    let mut go = None;
    if record::go_sched::has_records(dir) {
        match runtime_trace(dir, &loaded) {
            Ok((mut figures, reduced)) => {
                match go_procs(dir, &reduced) {
                    Ok(Some(procs)) => summary.go_procs = Some(procs),
                    Ok(None) => figures.notes.push(format!(
                        "no {}: reduced before the Ps were recorded (`spawnscope report` after reducing {} again with this gotrace-reduce shows them)",
                        record::GO_PROCS,
                        record::GO_TRACE
                    )),
                    Err(err) => figures.notes.push(format!(
                        "the Ps' records could not be read: {err:#} ({} is kept)",
                        record::GO_PROCS
                    )),
                }
                summary.runtime_trace = Some(figures.clone());
                go = Some((figures, reduced));
            }
            Err(err) => summary.left_out.push(format!(
                "the runtime's trace could not be read: {err:#} ({} and {} are kept)",
                record::GO_TRACE,
                record::GO_SCHED
            )),
        }
    }
    let mut tokio = None;
    if record::tokio_sched::has_records(dir) {
        match super::runtime_trace::tokio_figures(dir, &loaded) {
            Ok((figures, written)) => {
                summary.tokio_trace = Some(figures.clone());
                tokio = Some((figures, written));
            }
            Err(err) => summary.left_out.push(format!(
                "tokio's task hooks' records could not be read: {err:#} ({} and {} are kept)",
                record::TOKIO_SCHED,
                record::TOKIO_SCHED_SUMMARY
            )),
        }
    }
    let mut swimlane = None;
    if record::trace::has_events(dir) {
        match scheduler_trace(dir, &loaded, writes, go.as_ref(), tokio.as_ref()) {
            Ok((figures, lanes)) => {
                summary.scheduler_trace = Some(figures);
                match lanes {
                    Ok(lanes) => {
                        let capped = record::trace::read_capture(dir).and_then(|c| c.capped);
                        summary.swimlane = Some(lanes.figures(capped));
                        swimlane = Some(lanes);
                    }
                    Err(err) => summary.left_out.push(format!(
                        "the swimlane could not be drawn: {err:#} ({} is kept)",
                        record::TRACE_EVENTS
                    )),
                }
            }
            Err(err) => summary.left_out.push(format!(
                "the scheduler trace could not be read: {err:#} ({} is kept)",
                record::TRACE_EVENTS
            )),
        }
    }
    if let (Some(go), true) = (
        summary.runtime_trace.as_mut(),
        record::trace::has_events(dir),
    ) {
        match on_cpu(dir, &go.threads) {
            Ok(check) => go.on_cpu = check,
            Err(err) => go
                .notes
                .push(format!("the on-CPU check could not be made: {err:#}")),
        }
    }
    let json = dir.join(record::SUMMARY_JSON);
    if writes == Writes::Run || !json.exists() {
        record::write_json(&json, &summary)?;
    }
    let md = dir.join(record::SUMMARY_MD);
    if writes == Writes::Run || !md.exists() {
        let text = render::run::summary::markdown(&summary, &loaded.machine);
        fs::write(&md, text).with_context(|| format!("writing {}", md.display()))?;
    }
    Ok(DerivedRun {
        loaded,
        summary,
        swimlane,
    })
}

/// The scheduler trace's figures from its raw records (trace-events.bin), and its swimlane; its
/// Perfetto trace and swimlane.svg written as `writes` says. A trace that could not be written
/// whole is kept under `trace.perfetto-trace.incomplete` and said in the figures' notes: the raw
/// records stay.
fn scheduler_trace(
    dir: &Path,
    loaded: &LoadedRun,
    writes: Writes,
    go: Option<&(GoSchedFigures, GoSchedSummary)>,
    tokio: Option<&(TokioSchedFigures, TokioSchedSummary)>,
) -> Result<(SchedFigures, Result<Swimlane>)> {
    let capture = record::trace::read_capture(dir);
    let context = sched_trace::Context::of_run(&loaded.run, &loaded.memory, capture.as_ref());
    let mut reader = record::trace::open_events(dir)
        .with_context(|| format!("opening {}", record::TRACE_EVENTS))?;
    let trace = sched_trace::derive(reader.by_ref(), &context)
        .with_context(|| format!("reading {}", record::TRACE_EVENTS))?;
    let histogram = |name: &str| loaded.collector.as_ref().and_then(|c| c.histogram(name));
    let runq = sched_figures::ProbesRunq {
        all: histogram("runq_ns"),
        wake: histogram("wake_to_run_ns"),
        preempted: histogram("preempted_to_run_ns"),
    };
    let mut figures = sched_figures::figures(&trace, capture.as_ref(), runq);
    if reader.unknown > 0 {
        figures.notes.push(format!(
            "{} records of a kind this build does not know were skipped",
            reader.unknown
        ));
    }
    if reader.trailing_bytes > 0 {
        figures.notes.push(format!(
            "the raw records end with {} bytes too few for a record (cut short while written)",
            reader.trailing_bytes
        ));
    }
    let path = dir.join(record::PERFETTO_TRACE);
    if writes == Writes::Run || !path.exists() {
        if let Err(err) = write_perfetto(dir, loaded, &trace, capture.as_ref(), go, tokio) {
            figures.notes.push(format!(
                "the Perfetto trace is incomplete: {err:#} (what was written is {}.incomplete; {} is kept, and `spawnscope report` writes the trace again)",
                record::PERFETTO_TRACE,
                record::TRACE_EVENTS
            ));
        }
    }
    if let Ok(meta) = fs::metadata(&path) {
        figures.too_big_for_the_ui =
            trace_cut::too_big_for_the_ui(meta.len(), &dir.display().to_string(), &trace);
    }
    let lanes = swimlane_of(dir, loaded, &trace, writes);
    Ok((figures, lanes))
}

/// The runtime's figures from the reducer's records (go-sched.bin, go-sched.json); its phases on
/// CLOCK_MONOTONIC, the records' clock.
fn runtime_trace(dir: &Path, loaded: &LoadedRun) -> Result<(GoSchedFigures, GoSchedSummary)> {
    let reduced = record::go_sched::read_summary(dir)?;
    let phases = sched_trace::PhaseEdges::of_run(&loaded.run, &loaded.memory, Some(0));
    let against = match loaded.run.target {
        record::Target::Workload(_) => go_sched::CountedAgainst::Workload(
            result_event(&loaded.events).and_then(|r| r["spawned"].as_u64()),
        ),
        record::Target::Command { .. } => go_sched::CountedAgainst::Command,
    };
    let mut changes = record::go_sched::open_changes(dir)
        .with_context(|| format!("opening {}", record::GO_SCHED))?;
    let mut figures = go_sched::derive(changes.by_ref(), &reduced, &phases, against)
        .with_context(|| format!("reading {}", record::GO_SCHED))?;
    if changes.trailing_bytes > 0 {
        figures.notes.push(format!(
            "{} ends with {} bytes too few for a record (cut short while written)",
            record::GO_SCHED,
            changes.trailing_bytes
        ));
    }
    Ok((figures, reduced))
}

/// The Ps' and Ms' figures from the reducer's P records (go-procs.bin), and their edges for the
/// Perfetto trace; None where the run has none (reduced before they were written).
fn go_procs_walk(
    dir: &Path,
    reduced: &GoSchedSummary,
    edges: impl FnMut(go_procs::ProcEdge),
) -> Result<Option<go_procs::GoProcsFigures>> {
    if !record::go_procs::has_records(dir) {
        return Ok(None);
    }
    let mut changes = record::go_procs::open_changes(dir)
        .with_context(|| format!("opening {}", record::GO_PROCS))?;
    // A capped reduction's P records end at the goroutines' cut: intervals still open there
    // close at it, not at the trace's last event.
    let capped = reduced.records_past_cap.records > 0;
    let end_ns = match reduced.kept_until_ns {
        Some(cut) if capped => cut,
        _ => reduced.clock.last_ns,
    };
    let mut figures = go_procs::walk(changes.by_ref(), end_ns, edges)
        .with_context(|| format!("reading {}", record::GO_PROCS))?;
    if changes.trailing_bytes > 0 {
        figures.notes.push(format!(
            "{} ends with {} bytes too few for a record (cut short while written)",
            record::GO_PROCS,
            changes.trailing_bytes
        ));
    }
    if let Some(counts) = &reduced.procs {
        if counts.records_past_cap > 0 {
            figures.notes.insert(
                0,
                format!(
                    "the P records end with the goroutines' at the reducer's cap: {} P changes kept, {} more past it counted, not drawn ({} steals in the whole trace)",
                    units::count(counts.records),
                    units::count(counts.records_past_cap),
                    units::count(counts.steals)
                ),
            );
        }
        if counts.records != figures.records {
            figures.notes.push(format!(
                "{} holds {} records, {} says {} were written",
                record::GO_PROCS,
                figures.records,
                record::GO_SCHED_SUMMARY,
                counts.records
            ));
        }
    }
    Ok(Some(figures))
}

fn go_procs(dir: &Path, reduced: &GoSchedSummary) -> Result<Option<go_procs::GoProcsFigures>> {
    go_procs_walk(dir, reduced, |_| {})
}

/// The runtime's events against the kernel's on-CPU spans of their threads (two passes over
/// trace-events.bin for those threads: their states, the switch-ins it missed; one over
/// go-sched.bin). None without the clocks' offset.
fn on_cpu(dir: &Path, threads: &[u32]) -> Result<Option<go_sched::OnCpuCheck>> {
    let tids: BTreeSet<u32> = threads.iter().copied().collect();
    let Some(r) = super::runtime_trace::running(dir, &tids)? else {
        return Ok(None);
    };
    let check = go_sched::on_cpu_check(
        record::go_sched::open_changes(dir)?,
        &r.spans,
        r.offset_ns,
        r.switches_unseen,
    )?;
    Ok(Some(check))
}

/// The swimlane from a second pass over the raw records (only the sampled threads' spans are
/// kept); swimlane.svg written as `writes` says.
fn swimlane_of(
    dir: &Path,
    loaded: &LoadedRun,
    trace: &sched_trace::SchedTrace,
    writes: Writes,
) -> Result<Swimlane> {
    let events = sched_trace::TimeOrdered::new(record::trace::open_events(dir)?);
    let lanes = swimlane::build(events, trace, loaded.run.pid)
        .with_context(|| format!("reading {}", record::TRACE_EVENTS))?;
    let path = dir.join(record::SWIMLANE);
    if writes == Writes::Run || !path.exists() {
        // A capped trace's swimlane says so in its title: its lanes end with the kept window.
        let title = match record::trace::read_capture(dir).and_then(|c| c.capped) {
            Some(_) => format!(
                "{} (the trace capped: the kept window only)",
                loaded.run.target.label()
            ),
            None => loaded.run.target.label(),
        };
        let svg = render::traces::swimlane::svg(&lanes, &title)?;
        fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(lanes)
}

/// The process whose track holds the trace's phases and counters (the launched one, else the
/// first the records name), and its name.
pub fn launched(loaded: &LoadedRun, trace: &sched_trace::SchedTrace) -> (u32, String) {
    let launched = (loaded.run.pid)
        .or_else(|| trace.processes.keys().next().copied())
        .unwrap_or(0);
    let name = trace
        .processes
        .get(&launched)
        .map_or_else(|| loaded.run.target.label(), |p| p.name.clone());
    (launched, name)
}

/// Writes trace.perfetto-trace under a temporary name, renamed once whole.
fn write_perfetto(
    dir: &Path,
    loaded: &LoadedRun,
    trace: &sched_trace::SchedTrace,
    capture: Option<&record::trace::TraceCapture>,
    go: Option<&(GoSchedFigures, GoSchedSummary)>,
    tokio: Option<&(TokioSchedFigures, TokioSchedSummary)>,
) -> Result<()> {
    let tracks = run_tracks::run_tracks(
        &loaded.run,
        &loaded.memory,
        &loaded.events,
        loaded.series.as_ref(),
        capture,
    );
    let (launched, name) = launched(loaded, trace);
    let path = dir.join(record::PERFETTO_TRACE);
    let partial = dir.join(format!("{}.partial", record::PERFETTO_TRACE));
    let incomplete = dir.join(format!("{}.incomplete", record::PERFETTO_TRACE));
    let written = (|| -> Result<()> {
        let events = sched_trace::TimeOrdered::new(record::trace::open_events(dir)?);
        let mut out = io::BufWriter::new(fs::File::create(&partial)?);
        render::traces::perfetto::write(&mut out, trace, &tracks, launched, &name, events)?;
        if let Some((figures, reduced)) = go {
            // The goroutines on their threads' tracks, after the kernel's packets.
            let edges = go_sched::SliceEdges::new(record::go_sched::open_changes(dir)?);
            let described: BTreeSet<u32> = trace.threads.keys().copied().collect();
            render::traces::perfetto_goroutines::write(
                &mut out,
                edges,
                &figures.threads,
                &described,
                launched,
                &reduced.functions,
                tracks.offset_ns,
            )?;
            // The Ps' tracks, and each M's "P" track under its thread.
            let mut edges = Vec::new();
            if let Some(procs) = go_procs_walk(dir, reduced, |e| edges.push(e))? {
                let ps: Vec<u32> = procs.ps.iter().map(|p| p.proc).collect();
                let ms: Vec<u32> = procs
                    .ms
                    .iter()
                    .filter(|m| m.holds > 0)
                    .map(|m| m.tid)
                    .collect();
                render::traces::perfetto_procs::write_ps(
                    &mut out,
                    &edges,
                    &ps,
                    &ms,
                    tracks.offset_ns,
                )?;
                let mut described: BTreeSet<u32> = trace.threads.keys().copied().collect();
                described.extend(&figures.threads);
                render::traces::perfetto_procs::write_ms(
                    &mut out,
                    &edges,
                    &ps,
                    &ms,
                    &described,
                    launched,
                    tracks.offset_ns,
                )?;
            }
        }
        if let Some(tokio) = tokio {
            // The tokio tasks' polls on their threads' tracks, after the kernel's packets.
            let described: BTreeSet<u32> = trace.threads.keys().copied().collect();
            super::runtime_trace::write_polls(
                &mut out,
                dir,
                tokio,
                &described,
                launched,
                tracks.offset_ns,
            )?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(())
    })();
    match written {
        Ok(()) => {
            fs::rename(&partial, &path)
                .with_context(|| format!("renaming {}", partial.display()))?;
            let _ = fs::remove_file(&incomplete);
            Ok(())
        }
        Err(err) => {
            if partial.is_file() {
                let _ = fs::rename(&partial, &incomplete);
            }
            Err(err)
        }
    }
}

fn relative(dir: &Path, base: &Path) -> String {
    dir.strip_prefix(base)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}

/// A set of runs side by side, written into `out`: compare.json, compare.csv, compare-fits.csv,
/// compare.md, charts/ and report.html.
pub fn comparison(run_dirs: &[PathBuf], plan: Option<Plan>, out: &Path) -> Result<Comparison> {
    let mut summarized = Vec::new();
    let mut loaded_by_dir: BTreeMap<String, LoadedRun> = BTreeMap::new();
    let mut swimlanes: BTreeMap<String, render::chart_kit::Chart> = BTreeMap::new();
    for dir in run_dirs {
        let derived = run_dir(dir, Writes::Missing).with_context(|| dir.display().to_string())?;
        let name = relative(dir, out);
        if let Some(lanes) = &derived.swimlane {
            let label = derived.loaded.run.target.label();
            swimlanes.insert(
                name.clone(),
                render::chart_kit::Chart {
                    file: record::SWIMLANE.into(),
                    note: render::traces::swimlane::note(lanes),
                    svg: render::traces::swimlane::svg(lanes, &label)?,
                    title: label,
                },
            );
        }
        summarized.push(SummarizedRun::new(
            name.clone(),
            derived.summary,
            &derived.loaded,
        ));
        loaded_by_dir.insert(name, derived.loaded);
    }
    let mut report = compare_runs(&summarized, plan, chrono::Utc::now().to_rfc3339());
    report.reproduce = report
        .plan
        .as_ref()
        .and_then(|p| studies::reproduce(&report.runs, p));
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    record::write_json(&out.join(record::COMPARE_JSON), &report)?;
    fs::write(
        out.join(record::COMPARE_CSV),
        render::comparisons::compare::cells_csv(&report),
    )?;
    fs::write(
        out.join(record::FITS_CSV),
        render::comparisons::compare::fits_csv(&report),
    )?;
    fs::write(
        out.join(record::COMPARE_MD),
        render::comparisons::compare::markdown(&report),
    )?;
    let timelines: Vec<_> = timeline::shown_runs(&report)
        .into_iter()
        .filter_map(|run| {
            let loaded = loaded_by_dir.get(&run.dir)?;
            Some((run, timeline::of_run(loaded)?))
        })
        .collect();
    let charts = render::charts::all(&report, &timelines)?;
    write_charts(&charts, out)?;
    let flames: BTreeMap<String, Vec<u8>> = report
        .runs
        .iter()
        .filter(|r| r.has_flame)
        .filter_map(|r| Some((r.dir.clone(), record::read_flame(&out.join(&r.dir))?)))
        .collect();
    let page = render::html::page(&report, &charts, &flames, &swimlanes);
    fs::write(out.join(record::REPORT_HTML), page)?;
    Ok(report)
}

/// Writes the charts under `out/charts/`, removing charts of an earlier rendering that this one
/// does not draw again (say, a timeline of another run), which would sit beside the new ones as
/// if current.
fn write_charts(charts: &[render::chart_kit::Chart], out: &Path) -> Result<()> {
    let dir = out.join(record::CHARTS);
    fs::create_dir_all(&dir)?;
    for entry in fs::read_dir(&dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = render::charts::FILE_PREFIXES
            .iter()
            .chain(&render::serving::charts::FILE_PREFIXES)
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
