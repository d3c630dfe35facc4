//! What derive.rs asks of a runtime-traced run beyond the Go reducer's records: tokio's figures
//! from the hooks build's records (record/tokio_sched.rs → analyse/runtimes/tokio_sched.rs), its on-CPU
//! check and its workers' futex waits against the kernel's trace, its polls in the Perfetto trace
//! (render/traces/perfetto_tokio.rs); and the kernel's running spans of a set of threads, which the
//! goroutines' on-CPU check reads too.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use analyse::runtimes::tokio_sched::{self, TokioSchedFigures};
use analyse::traces::on_cpu::{self, OnCpuSpans};
use analyse::traces::{sched_trace, thread_states};
use record::tokio_sched::TokioSchedSummary;
use record::{self, LoadedRun};
use runtime::result_event;

/// The kernel's trace's on-CPU spans of `tids` (BOOTTIME; with the stints whose switch-in it
/// missed, `on_cpu::add_missed_switch_ins`), the clocks' offset (BOOTTIME − MONOTONIC) and the
/// switches the capture did not see; None without the offset.
pub struct Running {
    pub spans: OnCpuSpans,
    pub offset_ns: i64,
    pub switches_unseen: Option<u64>,
}

pub fn running(dir: &Path, tids: &BTreeSet<u32>) -> Result<Option<Running>> {
    let capture = record::trace::read_capture(dir);
    let Some(offset_ns) = capture.as_ref().and_then(|c| c.boottime_minus_monotonic_ns) else {
        return Ok(None);
    };
    let events = sched_trace::TimeOrdered::new(record::trace::open_events(dir)?);
    let states = thread_states::thread_states(events, tids, u64::MAX)?;
    let events = sched_trace::TimeOrdered::new(record::trace::open_events(dir)?);
    let missed = thread_states::missed_switch_ins(events, tids)?;
    let mut running: BTreeMap<u32, Vec<(u64, u64)>> = states
        .into_iter()
        .map(|(tid, spans)| {
            let on: Vec<(u64, u64)> = spans
                .iter()
                .filter(|s| s.state == thread_states::State::Running)
                .map(|s| (s.begin, s.end))
                .collect();
            (tid, on)
        })
        .collect();
    let missed = on_cpu::add_missed_switch_ins(&mut running, missed);
    Ok(Some(Running {
        spans: OnCpuSpans { running, missed },
        offset_ns,
        switches_unseen: capture.and_then(|c| c.switches_unseen),
    }))
}

/// tokio's figures from the hooks build's records; its phases on CLOCK_MONOTONIC, the records'
/// clock. With the kernel's trace, the on-CPU check and each worker's futex waits.
pub fn tokio_figures(
    dir: &Path,
    loaded: &LoadedRun,
) -> Result<(TokioSchedFigures, TokioSchedSummary)> {
    let written = record::tokio_sched::read_summary(dir)?;
    let phases = sched_trace::PhaseEdges::of_run(&loaded.run, &loaded.memory, Some(0));
    let spawned = result_event(&loaded.events).and_then(|r| r["spawned"].as_u64());
    let mut merged = record::tokio_sched::open_merged(dir, &written)
        .with_context(|| format!("opening {}", record::TOKIO_SCHED))?;
    let mut figures = tokio_sched::derive(merged.by_ref(), &written, &phases, spawned)
        .with_context(|| format!("reading {}", record::TOKIO_SCHED))?;
    if merged.missing > 0 {
        figures.notes.push(format!(
            "{} records {} said it wrote are not in {}",
            merged.missing,
            record::TOKIO_SCHED_SUMMARY,
            record::TOKIO_SCHED
        ));
    }
    if record::trace::has_events(dir) {
        if let Err(err) = against_the_kernel(dir, &written, &mut figures) {
            figures
                .notes
                .push(format!("the on-CPU check could not be made: {err:#}"));
        }
    }
    Ok((figures, written))
}

/// The on-CPU check of every kept hook event, and the workers' futex waits.
fn against_the_kernel(
    dir: &Path,
    written: &TokioSchedSummary,
    figures: &mut TokioSchedFigures,
) -> Result<()> {
    let tids: BTreeSet<u32> = written.threads.iter().map(|t| t.tid).collect();
    let workers: BTreeSet<u32> = figures.workers.iter().filter_map(|w| w.tid).collect();
    let waits = tokio_sched::futex_waits(record::trace::open_events(dir)?, &workers)?;
    for w in &mut figures.workers {
        w.kernel_futex_waits = w.tid.and_then(|t| waits.get(&t).copied());
    }
    let Some(r) = running(dir, &tids)? else {
        return Ok(());
    };
    let events = record::tokio_sched::open_events(dir)?.map(|e| {
        e.map(|e| on_cpu::Event {
            ts_ns: e.ts_ns,
            tid: Some(e.tid),
            time_moved: false,
        })
    });
    figures.on_cpu = Some(on_cpu::check(
        events,
        &r.spans,
        r.offset_ns,
        r.switches_unseen,
        &tokio_sched::ON_CPU_CLOCKS,
    )?);
    Ok(())
}

/// Appends the polls to a Perfetto trace being written (after the kernel's packets).
pub fn write_polls(
    out: &mut dyn Write,
    dir: &Path,
    tokio: &(TokioSchedFigures, TokioSchedSummary),
    described: &BTreeSet<u32>,
    launched: u32,
    offset_ns: Option<i64>,
) -> Result<()> {
    let (figures, written) = tokio;
    let edges = tokio_sched::PollEdges::new(record::tokio_sched::open_merged(dir, written)?);
    render::traces::perfetto_tokio::write(
        out,
        edges,
        &figures.threads,
        described,
        launched,
        offset_ns,
    )?;
    Ok(())
}
