//! The trace's capture (`Config::trace`): a thread that drains the BPF ring buffer
//! `trace_events` into the raw file as the records come, each record's bytes unchanged (their
//! layout: trace_events.rs), through a bounded buffer; and the report's `trace` section — what
//! was kept and lost, the ring, the clocks lined up, and what this kernel's probes leave out.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use libbpf_rs::{MapHandle, RingBufferBuilder};

use crate::layout::trace_cpu;
use crate::model::{Attach, ProbeStatus, ProgramCost, Trace, TraceGap};
use crate::trace_events::RECORD_BYTES;

/// The file's buffer: what the capture holds in memory however long the run. Small, since its
/// pages are the conductor's, first touched while the run goes: a run's memory drop on the host
/// (MemAvailable) sees them.
const BUFFER_BYTES: usize = 64 << 10;
/// How often the drain takes what the ring holds. The programs wake it only once the ring is
/// half full (trace.bpf.c): woken at every record it would preempt the run's tasks to take one
/// at a time, each of its switches a record again.
const POLL: Duration = Duration::from_millis(100);

/// The draining thread. Dropped without `finish` (a launch that failed, a panic), it is stopped
/// and joined all the same, so that it lets go of the ring (up to 1 GiB of kernel memory) and its
/// file — a sweep's next run must not inherit them.
pub(crate) struct Capture {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Drained>>,
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            let _ = thread.join();
        }
    }
}

/// The drain's real-time priority (SCHED_FIFO, as `perf record -r` and `chrt` give one): low,
/// above every normal task. At normal priority the drain is one runnable task among the run's:
/// 2,000 pingpong threads on 2 CPUs gave it so little CPU that the ring (16 MiB, woken at half
/// full) overflowed with 50 M records lost of 81 M. Woken at half full, it now runs at once.
const DRAIN_FIFO_PRIORITY: i32 = 10;

/// What the drain did.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    /// Records taken from the ring.
    pub taken: u64,
    /// Records taken once the file held its cap: counted, not written.
    pub past_cap: u64,
    /// Past the cap, the earliest stamp of the last record kept and of every record not kept
    /// (CLOCK_BOOTTIME ns): every record stamped before it is in the file (`Trace::kept_until_ns`).
    pub kept_until_ns: Option<u64>,
    /// The priority it drained at, in words (`Trace::drain_priority`).
    pub priority: String,
    /// The first write error; nothing is written after it.
    pub error: Option<String>,
}

impl Capture {
    /// Makes (or empties) `path` and starts draining `ring` into it, at most `max_bytes` of
    /// whole records (None: no cap).
    pub fn start(ring: MapHandle, path: &Path, max_bytes: Option<u64>) -> Result<Capture, String> {
        let file = File::create(path).map_err(|err| format!("making {}: {err}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("trace-drain".into())
            .spawn(move || drain(&ring, file, Cap::of(max_bytes), &stopping))
            .map_err(|err| format!("starting the trace's drain: {err}"))?;
        Ok(Capture {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }

    /// Once the programs are detached: takes what is left in the ring, flushes, and says what
    /// the file holds. A file cut short by a write error keeps its whole records.
    pub fn finish(mut self) -> (Drained, u64) {
        self.stop.store(true, Ordering::Release);
        let joined = self.thread.take().map(JoinHandle::join);
        let mut drained = match joined {
            Some(Ok(drained)) => drained,
            _ => Drained {
                error: Some("the trace's drain panicked".into()),
                ..Drained::default()
            },
        };
        let records = match whole_records(&self.path) {
            Ok(n) => n,
            Err(err) => {
                drained.error.get_or_insert(err);
                0
            }
        };
        (drained, records)
    }
}

/// The file's cap, in records, and where the records past it begin.
///
/// The ring is one for every CPU, its records in the order their programs reserved room in it
/// (the reservation takes the ring's lock); each program stamps its record right after reserving
/// (trace.bpf.c). So the ring is in time order but for two records reserved on two CPUs within
/// one reserve-to-stamp window of each other (a few instructions; longer only if an interrupt's
/// program comes in between), and a record past the cap may be stamped a little before the last
/// one kept: the time up to which the file is whole is the earliest stamp of the last kept
/// record and every one past the cap — a record read each, no more.
#[derive(Debug)]
struct Cap {
    records: u64,
    /// The last kept record's stamp.
    last_kept_ns: u64,
}

impl Cap {
    fn of(max_bytes: Option<u64>) -> Cap {
        Cap {
            records: max_bytes.map_or(u64::MAX, |b| b / RECORD_BYTES as u64),
            last_kept_ns: 0,
        }
    }

    /// Counts a record taken from the ring: true when it goes in the file.
    fn keep(&mut self, drained: &mut Drained, bytes: &[u8]) -> bool {
        let ts = stamp(bytes);
        drained.taken += 1;
        if drained.taken <= self.records {
            self.last_kept_ns = ts;
            return true;
        }
        drained.past_cap += 1;
        let until = drained.kept_until_ns.unwrap_or(self.last_kept_ns);
        drained.kept_until_ns = Some(until.min(ts));
        false
    }
}

/// A raw record's timestamp (trace_events.rs: the first slot, little-endian); 0 for a record
/// too short to hold one (the ring gives whole records).
fn stamp(bytes: &[u8]) -> u64 {
    let at = crate::layout::trace_field::TS * 8;
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Polls the ring until asked to stop, then takes what is left: the programs are detached by
/// then, so nothing more comes. Past the cap the records are still taken, so that the ring
/// never fills and the programs lose none for that, but only counted.
fn drain(ring: &MapHandle, file: File, mut cap: Cap, stop: &AtomicBool) -> Drained {
    let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
    let mut drained = Drained {
        priority: raise_priority(),
        ..Drained::default()
    };
    let consumed = {
        let mut builder = RingBufferBuilder::new();
        let added = builder.add(ring, |bytes: &[u8]| {
            if cap.keep(&mut drained, bytes) && drained.error.is_none() {
                if let Err(err) = out.write_all(bytes) {
                    drained.error = Some(format!("writing the trace: {err}"));
                }
            }
            0
        });
        let built = match added {
            Ok(_) => builder.build(),
            Err(err) => Err(err),
        };
        let ring = match built {
            Ok(ring) => ring,
            Err(err) => {
                return Drained {
                    error: Some(format!("the ring buffer's consumer: {err}")),
                    ..Drained::default()
                }
            }
        };
        let mut consumed = Ok(());
        while !stop.load(Ordering::Acquire) && consumed.is_ok() {
            // Returns at once when woken, else after POLL having taken nothing: the records
            // come without a wake-up. EINTR (a signal to the conductor) is only a wake-up.
            let _ = ring.poll(POLL);
            consumed = ring.consume();
        }
        consumed.and_then(|()| ring.consume())
    };
    if let Err(err) = consumed {
        drained
            .error
            .get_or_insert(format!("draining the ring: {err}"));
    }
    if drained.error.is_none() {
        if let Err(err) = out.flush() {
            drained.error = Some(format!("writing the trace: {err}"));
        }
    }
    // A failed write may leave a buffer the BufWriter would retry on drop: drop it unwritten.
    let (file, _unwritten) = out.into_parts();
    drop(file);
    drained
}

/// Puts the calling thread at SCHED_FIFO DRAIN_FIFO_PRIORITY, else at nice −20, and says which
/// (and why not the first).
fn raise_priority() -> String {
    let param = libc::sched_param {
        sched_priority: DRAIN_FIFO_PRIORITY,
    };
    // SAFETY: sched_setscheduler and setpriority read only the arguments given (0: this thread).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        return format!("SCHED_FIFO {DRAIN_FIFO_PRIORITY}");
    }
    let fifo = std::io::Error::last_os_error();
    // SAFETY: as above.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) } == 0 {
        return format!("nice -20 (SCHED_FIFO refused: {fifo})");
    }
    format!(
        "the conductor's own (SCHED_FIFO refused: {fifo}; nice -20 refused: {})",
        std::io::Error::last_os_error()
    )
}

/// The whole records in the file; a partial one at its end (a write cut short) is cut off.
fn whole_records(path: &Path) -> Result<u64, String> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|err| format!("{}: {err}", path.display()))?;
    let len = file
        .metadata()
        .map_err(|err| format!("{}: {err}", path.display()))?
        .len();
    let whole = len - len % RECORD_BYTES as u64;
    if whole != len {
        file.set_len(whole)
            .map_err(|err| format!("cutting {} to whole records: {err}", path.display()))?;
    }
    Ok(whole / RECORD_BYTES as u64)
}

/// The report's section: `trace_cpu` is the kernel's per-CPU words summed.
pub(crate) struct Section<'a> {
    pub path: &'a Path,
    pub max_bytes: Option<u64>,
    pub max_rule: &'a str,
    pub ring_bytes: u64,
    pub ring_rule: &'a str,
    pub clock: (u64, u64),
    pub probes: &'a [ProbeStatus],
    pub program_costs: &'a [ProgramCost],
    pub per_thread: bool,
    pub task_storage: bool,
}

impl Section<'_> {
    /// The section, from the drain (`None`: the kernel makes no ring buffer, `why`).
    pub fn report(
        &self,
        drained: Result<(Drained, u64), String>,
        trace_cpu_words: &[u64],
    ) -> Trace {
        let emitted = trace_cpu_words[trace_cpu::EMITTED];
        let lost = trace_cpu_words[trace_cpu::LOST];
        let (records, error, drain_priority, past_cap, kept_until_ns) = match drained {
            Ok((d, records)) => (records, d.error, d.priority, d.past_cap, d.kept_until_ns),
            Err(why) => (0, Some(why), String::new(), 0, None),
        };
        let lost_writing = emitted.saturating_sub(records + past_cap);
        Trace {
            file: self
                .path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            records,
            lost,
            emitted,
            lost_writing,
            max_bytes: self.max_bytes,
            max_rule: self.max_rule.to_string(),
            past_cap,
            kept_until_ns,
            switches_unseen: trace_cpu_words[trace_cpu::UNSEEN],
            runs_skipped: self
                .program_costs
                .iter()
                .filter(|p| HOOKS.iter().any(|(hook, _)| *hook == p.tracepoint))
                .map(|p| p.recursion_misses)
                .sum(),
            ring_bytes: self.ring_bytes,
            ring_rule: self.ring_rule.to_string(),
            drain_priority,
            boottime_minus_monotonic_ns: self.clock.0,
            clock_offset_uncertainty_ns: self.clock.1,
            gaps: gaps(self.probes, self.per_thread, self.task_storage),
            complete: error.is_none() && lost == 0 && lost_writing == 0 && past_cap == 0,
            error,
            memory: format!(
                "the trace moves no memory figure: its ring buffer ({} MiB, kernel pages) is made when the probes load, before the run's base reading, and its file's page cache is written by the conductor, outside the run's cgroup, and counted as available",
                self.ring_bytes >> 20
            ),
        }
    }
}

/// The tracepoints the trace's records come from, and which records each gives.
const HOOKS: &[(&str, &str)] = &[
    ("sched:sched_switch", "switch"),
    ("sched:sched_wakeup", "wakeup"),
    ("sched:sched_wakeup_new", "wakeup_new"),
    ("task:task_newtask", "newtask"),
    ("task:task_rename", "rename"),
    ("sched:sched_process_exit", "exit"),
    ("raw_syscalls:sys_enter", "wait_begin futex, clone"),
    ("raw_syscalls:sys_exit", "wait_end futex, clone"),
    ("lock:contention_begin", "wait_begin mmap_lock, lock"),
    ("lock:contention_end", "wait_end mmap_lock, lock"),
];

/// What the records leave out with these probes: a hook not attached loses its records; a
/// classic twin's record lacks what task_struct would tell.
pub(crate) fn gaps(probes: &[ProbeStatus], per_thread: bool, task_storage: bool) -> Vec<TraceGap> {
    let mut gaps = Vec::new();
    let mut gap = |hook: &str, records: &str, why: String| {
        gaps.push(TraceGap {
            hook: hook.into(),
            records: records.into(),
            why,
        })
    };
    for &(hook, records) in HOOKS {
        let Some(status) = probes.iter().find(|p| p.probe == hook) else {
            continue;
        };
        match (status.attach, hook) {
            (None, _) => gap(
                hook,
                records,
                format!(
                    "none: the tracepoint is not attached ({})",
                    status.note.as_deref().unwrap_or("missing")
                ),
            ),
            (Some(Attach::Tracepoint), "sched:sched_switch") => gap(
                hook,
                records,
                if per_thread {
                    "classic record: next's tgid is 0".into()
                } else {
                    "classic record: next's tgid is 0, and a switch from a task outside the run to one of its tasks is not recorded (known by its per-thread entry only: --probes full)".into()
                },
            ),
            (Some(Attach::Tracepoint), "sched:sched_wakeup" | "sched:sched_wakeup_new") => gap(
                hook,
                records,
                if per_thread {
                    "classic record: the woken task's tgid is 0".into()
                } else {
                    "none: the classic program knows the run's tasks by their per-thread entry only (--probes full)".into()
                },
            ),
            (Some(Attach::Tracepoint), "task:task_newtask") => {
                gap(hook, records, "classic record: prios are 0".into())
            }
            (Some(Attach::Tracepoint), "task:task_rename") => gap(
                hook,
                records,
                "classic record: only a task renaming itself is recorded".into(),
            ),
            _ => {}
        }
    }
    if !per_thread && !task_storage {
        gap(
            "raw_syscalls:sys_exit",
            "wait futex",
            "none: without per-thread state or task storage (kernel BTF) a futex call's exit does not know it waited".into(),
        );
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(probe: &str, attach: Option<Attach>) -> ProbeStatus {
        ProbeStatus {
            probe: probe.into(),
            attach,
            note: attach.is_none().then(|| "hidden".to_string()),
        }
    }

    #[test]
    fn every_hook_attached_as_tp_btf_leaves_no_gap() {
        let probes: Vec<ProbeStatus> = HOOKS
            .iter()
            .map(|(h, _)| status(h, Some(Attach::TpBtf)))
            .collect();
        assert_eq!(gaps(&probes, false, true), []);
    }

    #[test]
    fn a_missing_hook_and_classic_twins_are_each_said() {
        let probes = vec![
            status("task:task_rename", None),
            status("sched:sched_switch", Some(Attach::Tracepoint)),
            status("sched:sched_wakeup", Some(Attach::Tracepoint)),
            status("sched:sched_process_exit", Some(Attach::TpBtf)),
        ];
        let said = gaps(&probes, false, false);
        let hooks: Vec<&str> = said.iter().map(|g| g.hook.as_str()).collect();
        assert_eq!(
            hooks,
            [
                "sched:sched_switch",
                "sched:sched_wakeup",
                "task:task_rename",
                "raw_syscalls:sys_exit"
            ]
        );
        assert!(said[2].why.contains("hidden"), "{:?}", said[2]);
        assert!(said[1].why.starts_with("none"), "{:?}", said[1]);
        assert!(gaps(&probes, true, false)[1].why.contains("tgid is 0"));
    }

    fn record(ts: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; RECORD_BYTES];
        let at = crate::layout::trace_field::TS * 8;
        bytes[at..at + 8].copy_from_slice(&ts.to_le_bytes());
        bytes
    }

    #[test]
    fn past_the_cap_records_are_counted_and_the_whole_window_ends_at_the_earliest_not_kept() {
        // Room for two records and a half: two kept.
        let mut cap = Cap::of(Some(2 * RECORD_BYTES as u64 + 10));
        let mut drained = Drained::default();
        let kept: Vec<bool> = [100, 200, 300, 150, 400]
            .iter()
            .map(|&ts| cap.keep(&mut drained, &record(ts)))
            .collect();
        assert_eq!(kept, [true, true, false, false, false]);
        assert_eq!((drained.taken, drained.past_cap), (5, 3));
        // 150, past the cap, was stamped before 200, the last kept: the file is whole to 150.
        assert_eq!(drained.kept_until_ns, Some(150));
        let mut uncapped = Cap::of(None);
        let mut drained = Drained::default();
        assert!(cap_all(&mut uncapped, &mut drained, 1000));
        assert_eq!((drained.past_cap, drained.kept_until_ns), (0, None));
    }

    fn cap_all(cap: &mut Cap, drained: &mut Drained, n: u64) -> bool {
        (0..n).all(|ts| cap.keep(drained, &record(ts)))
    }

    #[test]
    fn a_file_cut_mid_record_keeps_its_whole_records() {
        let path = std::env::temp_dir().join(format!("sc-capture-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 3 * RECORD_BYTES + 10]).unwrap();
        assert_eq!(whole_records(&path), Ok(3));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            3 * RECORD_BYTES as u64
        );
        std::fs::remove_file(&path).unwrap();
    }
}
