//! Starting the eBPF collector (the spawnscope-collector crate) on a workload held at its gate.

use std::path::Path;

use spawnscope_collector::{
    Collector, Config as CollectorConfig, FaultKinds, ProgramRates, ProgramStats, Trace,
    TraceConfig, MAX_RING_BYTES,
};

use crate::trace_cap::TraceCap;
use host::procfs;
use host::tracefs;
use record::TraceCalibration;
use units::{bytes, count};

/// What the collector keeps (`run --probes`); its cost grows with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeDetail {
    /// Counters, series and cross-checks.
    Lean,
    /// Also per-thread state (on-CPU, run-queue, futex and clone times, RSS over time) and the
    /// kinds of page faults.
    Full,
}

/// Where each probe program's time comes from (`run --probe-times`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeTimes {
    /// Its runs in this run at its ns per run in a short traced calibration run (the kernel's
    /// run-time statistics off in this run: their clock reads stay out of its times).
    #[default]
    Calibrated,
    /// The kernel's run-time statistics on for the whole run: each program's exact time here, at
    /// two clock reads per program run, in every time figure of the run.
    InRun,
}

impl ProbeDetail {
    /// As `--probes` takes it.
    pub fn name(self) -> &'static str {
        match self {
            ProbeDetail::Lean => "lean",
            ProbeDetail::Full => "full",
        }
    }
}

/// The collector's configuration for `detail` on `pid`, sized for `threads` OS threads: what a
/// run loads (`start`), and what `probe-cost` loads (one hook at a time) with the statistics left to itself.
pub fn config(pid: u32, threads: u64, detail: ProbeDetail) -> CollectorConfig {
    let full = detail == ProbeDetail::Full;
    let mut config = CollectorConfig::new(pid, threads.max(1));
    config.per_thread = full;
    config.fault_kinds = if full {
        FaultKinds::StackHeap
    } else {
        FaultKinds::Off
    };
    config
}

/// Records per task assumed where no calibration counted them (a command; `--probe-times
/// in-run`): about four times what a thread of `threads hold` makes (its creation, first
/// wakeup, a few switches and waits, its exit: 12 to 22 at 2,000 threads here).
const RECORDS_PER_TASK_UNCALIBRATED: u64 = 64;
/// The ring for a run of unknown size (a command without `--tasks`).
const RING_UNSIZED: u64 = 256 << 20;
/// The least ring: what the runtime and the launch make around the tasks' own records, and
/// what a workload whose records come per round rather than per task (pingpong, chain: ~800,000
/// records a second at 1,000 pairs here) fills while the drain, woken at half full and running
/// at a real-time priority (collector/src/capture.rs), gets to it: half of it is 233,016
/// records.
const RING_FLOOR: u64 = 32 << 20;
/// How far a run may make more records per task than its calibration did: threads hold 2,500
/// counted 8.2 to 22.7 a task from one calibration to the next here (how many switches and lock
/// waits its threads happened to meet), and 100,000 threads then made 21 to 22. (The kernel's
/// power of two then rounds the ring up, by as much again at worst.)
const CALIBRATED_MARGIN: f64 = 3.0;

/// The trace's ring buffer for a run of `tasks` tasks, and its rule in words. The ring holds
/// all the run's records, not a window of them: on 2 CPUs, with 100,000 threads runnable, the
/// thread that drains it may not run until they are done, and a record the ring has no room for
/// is lost. So: the records per task the probes' calibration counted (`calibration`, else
/// RECORDS_PER_TASK_UNCALIBRATED), CALIBRATED_MARGIN times over, × N × 72 bytes (a record and
/// the ring's own header before it), plus
/// RING_FLOOR; at most MAX_RING_BYTES and a
/// sixteenth of the host's memory (the ring's pages are the kernel's, held from the start). The
/// collector rounds it up to a power of two of pages, as the kernel requires.
pub fn trace_ring(calibration: Option<&TraceCalibration>, tasks: Option<u64>) -> (u64, String) {
    let host = procfs::meminfo()
        .ok()
        .and_then(|m| m.get("MemTotal").copied())
        .map(|kb| kb * 1024);
    ring_for(calibration, tasks, host)
}

/// `trace_ring` on a host of `host_bytes` (None: not known).
fn ring_for(
    calibration: Option<&TraceCalibration>,
    tasks: Option<u64>,
    host_bytes: Option<u64>,
) -> (u64, String) {
    let record = (spawnscope_collector::trace_events::RECORD_BYTES + RINGBUF_HEADER_BYTES) as f64;
    // A power of two, as the ring will be: rounded up after this, a cap that is not one could
    // grow to twice itself.
    let cap = MAX_RING_BYTES.min(host_bytes.map_or(MAX_RING_BYTES, |b| prev_power_of_two(b / 16)));
    let (wanted, why) = match (tasks, calibration) {
        (None, _) => (
            RING_UNSIZED,
            format!("{} for a run of unknown size", bytes(RING_UNSIZED as f64)),
        ),
        (Some(n), Some(cal)) if cal.tasks > 0 => {
            let per_task = cal.records as f64 / cal.tasks as f64;
            (
                (CALIBRATED_MARGIN * per_task * n as f64 * record) as u64 + RING_FLOOR,
                format!(
                    "{CALIBRATED_MARGIN} × {per_task:.1} records per task (the probes' calibration: {} records at N = {}) × N = {n} × 72 B (a record and its ring header) + {}",
                    cal.records,
                    cal.tasks,
                    bytes(RING_FLOOR as f64)
                ),
            )
        }
        (Some(n), _) => (
            RECORDS_PER_TASK_UNCALIBRATED * n * record as u64 + RING_FLOOR,
            format!(
                "{RECORDS_PER_TASK_UNCALIBRATED} records per task (no calibration counted them) × N = {n} × 72 B (a record and its ring header) + {}",
                bytes(RING_FLOOR as f64)
            ),
        ),
    };
    let ring = wanted.min(cap);
    let capped = if ring < wanted {
        format!(
            ", capped at {} (the most, or a sixteenth of the host's memory)",
            bytes(cap as f64)
        )
    } else {
        String::new()
    };
    (
        ring,
        format!(
            "{why}{capped}: every record of the run held, should the drain not run until its end"
        ),
    )
}

/// What the ring holds before each record (BPF_RINGBUF_HDR_SZ: its length and flags).
const RINGBUF_HEADER_BYTES: usize = 8;

/// The largest power of two at most `x` (1 for 0).
fn prev_power_of_two(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

/// The trace's configuration: its records to `path`, its ring sized by `trace_ring`, the file
/// capped by `cap` (None: a calibration's short run, uncapped).
pub fn trace_config(
    path: &Path,
    calibration: Option<&TraceCalibration>,
    tasks: Option<u64>,
    cap: Option<&TraceCap>,
) -> TraceConfig {
    let (ring_bytes, ring_rule) = trace_ring(calibration, tasks);
    TraceConfig {
        path: path.to_path_buf(),
        ring_bytes,
        ring_rule,
        max_bytes: cap.map(|c| c.bytes),
        max_rule: cap.map_or_else(|| "none".into(), |c| c.rule.clone()),
    }
}

/// What a run's trace did not keep, in the run's words (its "left out"): records past its cap,
/// lost or not written, hooks this kernel lacks, switches no program saw. `t0_ns`: the run's
/// start (collector.json's, MONOTONIC), for where the kept window ends.
pub fn trace_left_out(trace: &Trace, t0_ns: u64) -> Vec<String> {
    let mut said = Vec::new();
    if trace.past_cap > 0 {
        said.push(past_cap_said(trace, t0_ns));
    }
    if trace.lost > 0 {
        said.push(format!(
            "trace: {} of {} records lost, the ring ({}) full",
            trace.lost,
            trace.emitted + trace.lost,
            bytes(trace.ring_bytes as f64)
        ));
    }
    match &trace.error {
        Some(error) if trace.emitted == 0 => said.push(format!("trace: none: {error}")),
        Some(error) => said.push(format!(
            "trace: {error}; {} records kept, {} not written",
            trace.records, trace.lost_writing
        )),
        None => {}
    }
    if trace.runs_skipped > 0 {
        said.push(format!(
            "trace: {} runs of its programs skipped by the kernel (one already running on that CPU): their records never made",
            trace.runs_skipped
        ));
    }
    if trace.switches_unseen > 0 {
        said.push(format!(
            "trace: {} switches of the run's tasks reached no probe (counted, not recorded)",
            trace.switches_unseen
        ));
    }
    for gap in &trace.gaps {
        said.push(format!(
            "trace: {} ({}): {}",
            gap.records, gap.hook, gap.why
        ));
    }
    said
}

/// The left-out line of a trace capped: what was kept, up to when, what went past, and why that
/// cap.
fn past_cap_said(trace: &Trace, t0_ns: u64) -> String {
    let until = match trace.kept_until_ns {
        Some(boot_ns) => format!(
            "up to {:.3} s into the run",
            kept_until_s(boot_ns, trace.boottime_minus_monotonic_ns, t0_ns)
        ),
        None => "up to an unknown time".into(),
    };
    format!(
        "trace: {} records kept {until}, {} past the cap ({}, {}): the figures from the trace cover that window",
        count(trace.records),
        count(trace.past_cap),
        bytes(trace.max_bytes.unwrap_or(0) as f64),
        trace.max_rule
    )
}

/// Seconds from the run's start (MONOTONIC `t0_ns`) to a record's stamp (BOOTTIME `boot_ns`).
pub fn kept_until_s(boot_ns: u64, boottime_minus_monotonic_ns: u64, t0_ns: u64) -> f64 {
    (boot_ns as f64 - boottime_minus_monotonic_ns as f64 - t0_ns as f64) / 1e9
}

/// Loads the eBPF collector for the workload's PID, sized for `threads` OS threads, keeping what
/// `detail` says; `net_syscalls` also counts the syscalls that serve requests (accept, reads,
/// writes, epoll and poll, close, shutdown: for `serve`, false for every other run — their
/// tracepoints fire for every process's reads and writes). `rates`: each program's ns per run from
/// a calibration of the same probes, so that the kernel's run-time statistics stay off; None:
/// they are on for the whole run. `run_cgroup`: the run's v2 cgroup id, whose tasks the probes
/// count (every process the workload or command starts); None: the probes follow `pid`'s forks.
/// `trace`: stream the run's scheduler events to a raw file (`--perfetto`). What cannot be
/// loaded is said, not fatal.
#[allow(clippy::too_many_arguments)]
pub fn start(
    pid: u32,
    run_cgroup: Option<u64>,
    threads: u64,
    detail: ProbeDetail,
    net_syscalls: bool,
    rates: Option<ProgramRates>,
    trace: Option<TraceConfig>,
    left_out: &mut Vec<String>,
) -> Option<Collector> {
    // libbpf finds tracepoints through tracefs.
    tracefs::mount_if_missing();
    let mut config = config(pid, threads, detail);
    config.run_cgroup_id = run_cgroup;
    config.net_syscalls = net_syscalls;
    config.program_stats = ProgramStats::Always;
    config.program_rates = rates;
    config.trace = trace;
    match Collector::start(&config) {
        Ok(collector) => {
            // Probes left out by choice are said once, below, not one by one.
            for missing in collector
                .missing()
                .iter()
                .filter(|m| m.reason != spawnscope_collector::PER_THREAD_ONLY)
            {
                left_out.push(format!(
                    "probe {} not loaded: {}",
                    missing.probe, missing.reason
                ));
            }
            if detail == ProbeDetail::Lean {
                left_out.push("eBPF probes: per-thread figures (on-CPU, run-queue, futex and clone times, RSS over time) and page faults by kind not kept: --probes full keeps them, at about 2.5 times the cost".into());
            }
            Some(collector)
        }
        Err(err) => {
            left_out.push(format!("eBPF probes: {err}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_holds_the_calibrated_records_of_the_run_with_a_margin_and_says_so() {
        let cal = TraceCalibration {
            records: 52_500,
            tasks: 2_500,
        };
        // 21 records a task: 3 × 21 × 100,000 × 72 B + 32 MiB.
        let host = Some(24 << 30);
        let (ring, rule) = ring_for(Some(&cal), Some(100_000), host);
        assert_eq!(ring, 3 * 21 * 100_000 * 72 + (32 << 20));
        assert!(rule.contains("21.0 records per task"), "{rule}");
        assert!(rule.contains("52500 records at N = 2500"), "{rule}");
        // Without a calibration: the assumed rate, said.
        let (ring, rule) = ring_for(None, Some(1_000), host);
        assert_eq!(ring, 64 * 1_000 * 72 + (32 << 20));
        assert!(rule.contains("no calibration"), "{rule}");
        // A command of unknown size.
        let (ring, rule) = ring_for(None, None, host);
        assert_eq!(ring, 256 << 20);
        assert!(rule.contains("unknown size"), "{rule}");
    }

    #[test]
    fn the_ring_is_capped_and_says_it() {
        let cal = TraceCalibration {
            records: 100_000,
            tasks: 1_000,
        };
        let (ring, rule) = ring_for(Some(&cal), Some(10_000_000), Some(64 << 30));
        assert_eq!(ring, MAX_RING_BYTES);
        assert!(rule.contains("capped at 1.0 GiB"), "{rule}");
        // A small host: a sixteenth of its memory.
        let (ring, _) = ring_for(Some(&cal), Some(10_000_000), Some(2 << 30));
        assert_eq!(ring, 128 << 20);
        // ... never more once rounded to a power of two: 3 GiB → 128 MiB, not 192 → 256 MiB.
        let (ring, _) = ring_for(Some(&cal), Some(10_000_000), Some(3 << 30));
        assert_eq!(ring, 128 << 20);
    }

    #[test]
    fn what_a_trace_did_not_keep_is_said() {
        let mut trace = Trace {
            records: 90,
            emitted: 100,
            lost: 5,
            lost_writing: 10,
            ring_bytes: 1 << 20,
            error: Some("writing the trace: No space left on device".into()),
            ..Trace::default()
        };
        let said = trace_left_out(&trace, 0);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("5 of 105 records lost"), "{said:?}");
        assert!(
            said[1].contains("90 records kept, 10 not written"),
            "{said:?}"
        );
        trace = Trace::default();
        assert!(trace_left_out(&trace, 0).is_empty());
        trace.error = Some("this kernel makes no BPF ring buffer".into());
        assert_eq!(
            trace_left_out(&trace, 0),
            ["trace: none: this kernel makes no BPF ring buffer"]
        );
    }

    #[test]
    fn a_capped_trace_says_what_it_kept_up_to_when_and_why_that_cap() {
        let trace = Trace {
            records: 16_384,
            emitted: 20_000,
            past_cap: 3_616,
            max_bytes: Some(1 << 20),
            max_rule: "given by --trace-max-size".into(),
            // Stamped on BOOTTIME, 5 s ahead of MONOTONIC; the run began at 10 s.
            kept_until_ns: Some(15_250_000_000),
            boottime_minus_monotonic_ns: 5_000_000_000,
            ..Trace::default()
        };
        assert_eq!(
            trace_left_out(&trace, 10_000_000_000),
            ["trace: 16,384 records kept up to 0.250 s into the run, 3,616 past the cap (1.0 MiB, given by --trace-max-size): the figures from the trace cover that window"]
        );
    }
}
