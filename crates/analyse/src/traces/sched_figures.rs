//! The scheduler trace's figures per phase: wake-to-run and preempted-to-run latency rows, the waits,
//! and the run queues beside what the probes counted.

use crate::traces::sched_trace::{LatencyRow, SchedTrace, METHOD, WHOLE_RUN};
use hdrhistogram::Histogram;
use record::trace::TraceCapture;
use serde::{Deserialize, Serialize};

/// One wait's pairs, as the trace shows them.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WaitRow {
    /// futex, mmap_lock_read, mmap_lock_write, clone, lock.
    pub wait: String,
    pub pairs: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Closed for them: by an outer wait's end, the thread's exit, or the run's end (begun, never
    /// seen to end).
    pub cut: u64,
    pub closed_at_exit: u64,
    pub closed_at_end: u64,
    /// Ends whose begin was not captured.
    pub unmatched_ends: u64,
}

/// One kind of run-queue wait as the full mode's probes and the trace each count it.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunqKindBeside {
    /// "wake-to-run" or "preempted-to-run".
    pub kind: String,
    pub probes_count: u64,
    pub trace_count: u64,
    /// Upper bounds of the probes' log2 buckets holding p50 and p99.
    pub probes_p50_at_most_ns: Option<u64>,
    pub probes_p99_at_most_ns: Option<u64>,
    pub trace_p50_ns: Option<u64>,
    pub trace_p99_ns: Option<u64>,
}

/// The full mode's histograms of the run-queue wait (collector.json's `runq_ns`, per-thread
/// probes, log2 buckets; split by what began the wait into `wake_to_run_ns` and
/// `preempted_to_run_ns` where the collector did) beside the trace's two.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbesRunq<'a> {
    pub all: Option<&'a spawnscope_collector::Histogram>,
    pub wake: Option<&'a spawnscope_collector::Histogram>,
    pub preempted: Option<&'a spawnscope_collector::Histogram>,
}

/// The full mode's histogram "wakeup or preemption → switch-in" beside the trace's two.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunqBeside {
    /// The probes' samples.
    pub probes_count: u64,
    /// The trace's: wake-to-run plus preempted-to-run, whole run.
    pub trace_count: u64,
    /// Upper bounds of the probes' log2 buckets holding p50 and p99.
    pub probes_p50_at_most_ns: Option<u64>,
    pub probes_p99_at_most_ns: Option<u64>,
    /// The trace's p50 and p99 over both kinds together.
    pub trace_p50_ns: Option<u64>,
    pub trace_p99_ns: Option<u64>,
    /// Each kind apart, where the probes split it (collectors before the split: empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_kind: Vec<RunqKindBeside>,
    /// How they compare, in words.
    pub agreement: String,
}

/// The trace's figures in a run's summary (`--perfetto`).
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SchedFigures {
    /// How the figures were derived.
    pub method: String,
    /// A wakeup (sched_wakeup or _new) of the run's thread → its next switch-in, per phase.
    pub wake_to_run: Vec<LatencyRow>,
    /// A switch out still runnable (preempted) → the thread's next switch-in, per phase.
    pub preempted_to_run: Vec<LatencyRow>,
    pub records: u64,
    pub processes: u64,
    pub threads: u64,
    pub switches: u64,
    pub waits: Vec<WaitRow>,
    /// Records the ring buffer had no room for (None: the capture did not say).
    pub records_lost: Option<u64>,
    /// Records later than the reorder window (passed on out of order).
    pub late_records: u64,
    /// The full mode's histogram beside these (runs with per-thread probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes_runq: Option<RunqBeside>,
    pub notes: Vec<String>,
    /// The trace is larger than Perfetto's UI may open: how to cut it, with the exact command
    /// (`report --perfetto`; analyse::trace_cut, `UI_TRACE_BYTES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub too_big_for_the_ui: Option<String>,
    /// The trace was capped (`--trace-max-size`): its kept window in words; these figures cover
    /// it only (`TraceCapture::capped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_window: Option<String>,
}

impl SchedFigures {
    /// The whole run's wake-to-run (the only row when phases could not be placed).
    pub fn wake_whole(&self) -> Option<&LatencyRow> {
        whole(&self.wake_to_run)
    }

    pub fn preempted_whole(&self) -> Option<&LatencyRow> {
        whole(&self.preempted_to_run)
    }
}

fn whole(rows: &[LatencyRow]) -> Option<&LatencyRow> {
    rows.iter()
        .find(|r| r.phase == WHOLE_RUN)
        .or_else(|| (rows.len() == 1).then(|| &rows[0]))
}

/// The figures of a derived trace; `runq`: collector.json's run-queue histograms where the
/// per-thread probes filled them.
pub fn figures(
    trace: &SchedTrace,
    capture: Option<&TraceCapture>,
    runq: ProbesRunq<'_>,
) -> SchedFigures {
    let mut notes = Vec::new();
    if trace.phases.names.len() == 1 && trace.phases.names[0] == WHOLE_RUN {
        notes.push(
            "not split by phase: the run's phase marks and the capture's clock offset (collector.json's trace section) are both needed".into(),
        );
    }
    if let Some(why) = capture.and_then(|c| c.incomplete.as_deref()) {
        notes.push(format!(
            "the capture stopped early ({why}): the figures are of the records written"
        ));
    }
    if let Some(window) = capture.and_then(|c| c.capped.as_deref()) {
        notes.push(format!("{window}: the figures cover the kept window only"));
    }
    let lost = capture.and_then(|c| c.records_lost);
    match lost {
        Some(0) => {}
        Some(n) => notes.push(format!(
            "{n} records lost by the capture (its ring buffer was full): a lost wakeup or switch leaves its sample out"
        )),
        None => notes.push("records lost: not said by the capture (collector.json has no trace section)".into()),
    }
    let mut both = trace.wake_to_run.whole.hist.clone();
    both.add(&trace.preempted_to_run.whole.hist)
        .expect("histograms of the same precision add");
    let kind =
        |name: &str, probes: Option<&spawnscope_collector::Histogram>, trace: &Histogram<u64>| {
            probes.map(|h| RunqKindBeside {
                kind: name.into(),
                probes_count: h.count,
                trace_count: trace.len(),
                probes_p50_at_most_ns: h.quantile_upper(0.5),
                probes_p99_at_most_ns: h.quantile_upper(0.99),
                trace_p50_ns: (!trace.is_empty()).then(|| trace.value_at_quantile(0.5)),
                trace_p99_ns: (!trace.is_empty()).then(|| trace.value_at_quantile(0.99)),
            })
        };
    let by_kind: Vec<RunqKindBeside> = [
        kind("wake-to-run", runq.wake, &trace.wake_to_run.whole.hist),
        kind(
            "preempted-to-run",
            runq.preempted,
            &trace.preempted_to_run.whole.hist,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let probes_runq = runq.all.filter(|h| h.count > 0).map(|h| {
        let trace_count = both.len();
        let diff = trace_count as f64 - h.count as f64;
        let pct = 100.0 * diff / (h.count as f64);
        RunqBeside {
            probes_count: h.count,
            trace_count,
            probes_p50_at_most_ns: h.quantile_upper(0.5),
            probes_p99_at_most_ns: h.quantile_upper(0.99),
            trace_p50_ns: (trace_count > 0).then(|| both.value_at_quantile(0.5)),
            trace_p99_ns: (trace_count > 0).then(|| both.value_at_quantile(0.99)),
            by_kind,
            agreement: format!(
                "{pct:+.1} % samples here; the probes follow the same rule (a wakeup or a switch out still runnable starts the wait, a blocking switch out clears it, the switch-in ends it) but tell a preemption by the thread's nivcsw where the trace reads prev_state (their disagreements: the probes' switch_rule_disagrees), and count from their attach to the reap, the trace from its first record to its last"
            ),
        }
    });
    SchedFigures {
        kept_window: capture.and_then(|c| c.capped.clone()),
        method: METHOD.into(),
        wake_to_run: trace.wake_to_run.rows(&trace.phases),
        preempted_to_run: trace.preempted_to_run.rows(&trace.phases),
        records: trace.records,
        processes: trace.processes.len() as u64,
        threads: trace.threads.len() as u64,
        switches: trace.switches,
        waits: trace
            .waits
            .iter()
            .filter(|(_, t)| t.pairs > 0 || t.unmatched_ends > 0)
            .map(|(w, t)| WaitRow {
                wait: w.name().into(),
                pairs: t.pairs,
                total_ns: t.total_ns,
                max_ns: t.max_ns,
                cut: t.cut,
                closed_at_exit: t.closed_at_exit,
                closed_at_end: t.closed_at_end,
                unmatched_ends: t.unmatched_ends,
            })
            .collect(),
        records_lost: lost,
        late_records: trace.late_records,
        probes_runq,
        notes,
        too_big_for_the_ui: None,
    }
}
