//! `spawnscope report DIR --perfetto [--from S] [--to S | --window PHASE] [--threads K | --tids
//! LIST] [--out FILE]`: a cut of a traced run's Perfetto trace, for one larger than the UI opens.
//! analyse/traces/trace_cut.rs chooses the window and the threads and clips the records,
//! render/traces/perfetto.rs encodes them as it encodes the full trace; here they are written under a
//! temporary name and renamed once whole (on an error nothing stays). The full trace
//! (trace.perfetto-trace) and every other file of the run directory are left as they are.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use crate::cli::{usage_error, PerfettoCutArgs};
use crate::commands::derive;
use analyse::traces::run_tracks;
use analyse::traces::sched_trace::{self, Context, SchedTrace};
use analyse::traces::trace_cut::{self, Cut, CutCounts, Sample, Window, WindowAsked};
use record::{self, LoadedRun};
use render::traces::perfetto::{self, Written};
pub fn command(dirs: &[PathBuf], out: Option<PathBuf>, args: &PerfettoCutArgs) -> ExitCode {
    let [dir] = dirs else {
        return usage_error(format!(
            "report --perfetto cuts one run directory's trace: {} were given",
            dirs.len()
        ));
    };
    if args.from.is_none()
        && args.to.is_none()
        && args.window.is_none()
        && args.threads.is_none()
        && args.tids.is_empty()
    {
        return usage_error("report --perfetto writes a cut: give a window (--from/--to in seconds, or --window PHASE) and/or a sample (--threads K or --tids LIST); the full trace is trace.perfetto-trace, which `spawnscope report DIR` writes");
    }
    if !dir.join(record::RUN).is_file() {
        return usage_error(format!(
            "{} is not a run directory (it has no {})",
            dir.display(),
            record::RUN
        ));
    }
    if !record::trace::has_events(dir) {
        return usage_error(format!(
            "{} has no {}: the run was not recorded with --perfetto, so there is no trace to cut",
            dir.display(),
            record::TRACE_EVENTS
        ));
    }
    if out
        .as_deref()
        .and_then(Path::file_name)
        .is_some_and(|n| n == record::PERFETTO_TRACE)
    {
        return usage_error(format!(
            "--out: {} is the full trace's name; a cut is written under a name of its own",
            record::PERFETTO_TRACE
        ));
    }
    let loaded = match record::load(dir) {
        Ok(loaded) => loaded,
        Err(err) => {
            return usage_error(format!(
                "{} is not a complete results directory: {err:#}",
                dir.display()
            ))
        }
    };
    let capture = record::trace::read_capture(dir);
    let context = Context::of_run(&loaded.run, &loaded.memory, capture.as_ref());
    let trace = match record::trace::open_events(dir)
        .and_then(|mut reader| sched_trace::derive(reader.by_ref(), &context))
    {
        Ok(trace) => trace,
        Err(err) => {
            eprintln!("spawnscope: reading {}: {err}", record::TRACE_EVENTS);
            return ExitCode::from(1);
        }
    };
    let asked = WindowAsked {
        from_s: args.from,
        to_s: args.to,
        phase: args.window.clone(),
    };
    let window = match Window::resolve(&asked, &trace) {
        Ok(w) => w,
        Err(why) => return usage_error(why),
    };
    let sample = match (args.tids.is_empty(), args.threads) {
        (false, _) => Sample::Tids(args.tids.clone()),
        (true, Some(k)) => Sample::Threads(k),
        (true, None) => Sample::Every,
    };
    let kept = match trace_cut::choose(&trace, loaded.run.pid, &window, &sample) {
        Ok(kept) => kept,
        Err(why) => return usage_error(why),
    };
    let path =
        out.unwrap_or_else(|| dir.join(record::perfetto_cut(&window.label(), &sample.label())));
    let cut = Chosen {
        trace: &trace,
        window: &window,
        sample: &sample,
        kept: &kept,
    };
    match write(dir, &loaded, &cut, &path) {
        Ok((written, counts)) => {
            record::give_to_invoking_user(&path);
            print!("{}", said(&path, &cut, &written, &counts));
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("spawnscope: writing {}: {err:#}", path.display());
            ExitCode::from(1)
        }
    }
}

/// What was asked, resolved.
struct Chosen<'a> {
    trace: &'a SchedTrace,
    window: &'a Window,
    sample: &'a Sample,
    kept: &'a BTreeSet<u32>,
}

/// The cut under `path`.partial, renamed once whole; nothing left on an error.
fn write(
    dir: &Path,
    loaded: &LoadedRun,
    cut: &Chosen,
    path: &Path,
) -> Result<(Written, CutCounts)> {
    let capture = record::trace::read_capture(dir);
    let tracks = run_tracks::run_tracks(
        &loaded.run,
        &loaded.memory,
        &loaded.events,
        loaded.series.as_ref(),
        capture.as_ref(),
    );
    let tracks = trace_cut::clip_tracks(
        &tracks,
        cut.window,
        cut.sample,
        cut.kept.len(),
        cut.trace.threads.len(),
    );
    let shown = trace_cut::cut_trace(cut.trace, cut.kept, cut.window);
    let (launched, name) = derive::launched(loaded, cut.trace);
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let written = (|| -> Result<(Written, CutCounts)> {
        let events = sched_trace::TimeOrdered::new(record::trace::open_events(dir)?);
        let mut records = Cut::new(events, cut.trace, cut.kept, cut.window.clone());
        let mut out = io::BufWriter::new(fs::File::create(&partial)?);
        let written =
            perfetto::write(&mut out, &shown, &tracks, launched, &name, records.by_ref())?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok((written, records.counts))
    })();
    match written {
        Ok(w) => {
            fs::rename(&partial, path)
                .with_context(|| format!("renaming {}", partial.display()))?;
            Ok(w)
        }
        Err(err) => {
            let _ = fs::remove_file(&partial);
            Err(err)
        }
    }
}

/// Where the cut is, its size, and what it kept.
fn said(path: &Path, cut: &Chosen, written: &Written, counts: &CutCounts) -> String {
    let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let length = cut.trace.end_ts.saturating_sub(cut.window.start);
    let processes: BTreeSet<u32> = (cut.trace.threads.iter())
        .filter(|(tid, _)| !cut.kept.contains(tid))
        .map(|(_, t)| t.tgid)
        .collect();
    let left_out = cut.trace.threads.len() - cut.kept.len();
    format!(
        "spawnscope report: a cut of the Perfetto trace: {} ({})\n  window: {}, of the trace's {} s\n  threads: {} of {} ({}){}\n  records: {} of the {} in the window; switches: {} with a kept thread, {} of the placeholders; wakeups: {}\n  waits: {} open at the window's start begin there, {} open at its end end there\n",
        path.display(),
        units::bytes(size as f64),
        cut.window.words(),
        trace_cut::seconds(length),
        units::count(cut.kept.len() as u64),
        units::count(cut.trace.threads.len() as u64),
        cut.sample.rule(),
        if left_out > 0 {
            format!(
                "; the {} left out shown as one thread per process ({}), \"{}\"",
                units::count(left_out as u64),
                match processes.len() {
                    1 => "1 process".to_string(),
                    n => format!("{n} processes"),
                },
                trace_cut::PLACEHOLDER_NAME
            )
        } else {
            String::new()
        },
        units::count(counts.kept),
        units::count(counts.in_window),
        units::count(counts.kept_thread_switches),
        units::count(counts.placeholder_switches),
        units::count(written.wakings),
        units::count(counts.waits_open_at_start),
        units::count(counts.waits_open_at_end),
    )
}
