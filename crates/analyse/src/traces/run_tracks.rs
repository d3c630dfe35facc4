//! A traced run's counter tracks for its Perfetto trace and swimlane: the collector's series as
//! counters and the phases as spans.

use crate::run::phases::phase_marks;
use crate::traces::sched_trace::boot;
use record::load::CollectorSeries;
use record::trace::TraceCapture;
use record::{MemoryRecord, RunRecord};

/// A counter of the run shown beside its threads: points on the trace's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Counter {
    pub name: String,
    pub unit: CounterUnit,
    pub points: Vec<(u64, i64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterUnit {
    Bytes,
    Count,
}

/// A span of the run on the trace's clock (a phase).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub name: String,
    pub begin: u64,
    pub end: u64,
}

/// What the trace shows of the run's other records: its phases and its counters, all on the
/// trace's clock (BOOTTIME); empty where the clocks cannot be lined up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunTracks {
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, when the capture said it.
    pub offset_ns: Option<i64>,
    pub phases: Vec<Span>,
    pub counters: Vec<Counter>,
    pub records_lost: Option<u64>,
    /// What the trace cannot show, said on a track of its own.
    pub notes: Vec<String>,
}

/// The collector's series shown as counters (summed where several make one).
const SERIES_COUNTERS: [(&str, &[&str]); 3] = [
    ("page faults per bucket", &["faults"]),
    ("clones (threads created) per bucket", &["new_threads"]),
    (
        "context switches per bucket",
        &["switches_voluntary", "switches_involuntary"],
    ),
];

/// The run's phases and counters for its trace.
pub fn run_tracks(
    run: &RunRecord,
    memory: &MemoryRecord,
    events: &[serde_json::Value],
    series: Option<&CollectorSeries>,
    capture: Option<&TraceCapture>,
) -> RunTracks {
    let mut tracks = RunTracks {
        records_lost: capture.and_then(|c| c.records_lost),
        ..RunTracks::default()
    };
    tracks.notes.push("only switches with one of the run's threads on a side are recorded: on a CPU, an outside task's slice may span switches among other programs that were not recorded".into());
    if let Some(why) = capture.and_then(|c| c.incomplete.as_deref()) {
        tracks.notes.push(format!(
            "the capture stopped early ({why}): this trace holds the records written before"
        ));
    }
    if let Some(window) = capture.and_then(|c| c.capped.as_deref()) {
        tracks
            .notes
            .push(format!("{window}: this trace shows the kept window only"));
    }
    let Some(offset) = capture.and_then(|c| c.boottime_minus_monotonic_ns) else {
        tracks.notes.push("no phases or counters: the capture did not give the offset between its clock (BOOTTIME) and the conductor's (MONOTONIC)".into());
        return tracks;
    };
    tracks.offset_ns = Some(offset);
    let at = |t: u64| boot(t, offset);
    let marks = phase_marks(run, memory);
    for w in marks.windows(2) {
        if w[1].t_ns > w[0].t_ns {
            tracks.phases.push(Span {
                name: w[0].name.clone(),
                begin: at(w[0].t_ns),
                end: at(w[1].t_ns),
            });
        }
    }
    let timeline = &memory.timeline;
    if timeline.iter().any(|s| s.cgroup_bytes.is_some()) {
        tracks.counters.push(Counter {
            name: "memory in use (charged to the run's cgroup)".into(),
            unit: CounterUnit::Bytes,
            points: timeline
                .iter()
                .filter_map(|s| Some((at(s.t_ns), s.cgroup_bytes? as i64)))
                .collect(),
        });
    } else if let Some(first) = timeline.first() {
        tracks.counters.push(Counter {
            name: "memory in use (MemAvailable's drop since the first sample)".into(),
            unit: CounterUnit::Bytes,
            points: timeline
                .iter()
                .map(|s| {
                    let drop_kb = first.mem_available_kb as i64 - s.mem_available_kb as i64;
                    (at(s.t_ns), drop_kb * 1024)
                })
                .collect(),
        });
    }
    let alive: Vec<(u64, i64)> = events
        .iter()
        .filter(|e| e["event"] == "progress")
        .filter_map(|e| Some((at(e["t_ns"].as_u64()?), e["alive"].as_i64()?)))
        .collect();
    if !alive.is_empty() {
        tracks.counters.push(Counter {
            name: "tasks alive (the workload's progress events)".into(),
            unit: CounterUnit::Count,
            points: alive,
        });
    }
    if let Some(c) = series {
        for (name, parts) in SERIES_COUNTERS {
            let of: Vec<&Vec<f64>> = c
                .series
                .iter()
                .filter(|(n, _)| parts.contains(&n.as_str()))
                .map(|(_, v)| v)
                .collect();
            let Some(len) = of.iter().map(|v| v.len()).max() else {
                continue;
            };
            let ms = c.bucket_ns / 1_000_000;
            tracks.counters.push(Counter {
                name: format!("{name} ({ms} ms)"),
                unit: CounterUnit::Count,
                points: (0..len)
                    .map(|i| {
                        let sum: f64 = of.iter().filter_map(|v| v.get(i)).sum();
                        (at(c.t0_ns + i as u64 * c.bucket_ns), sum as i64)
                    })
                    .collect(),
            });
        }
    }
    tracks
}
