//! Taking the noise sentinels during a run (sentinels.json): a mark at the release, at each
//! `phase` event and after the reap, and a tick with every memory sample. Read only: what is
//! missing on this host is recorded as unavailable, with why, never as zeros.

use std::collections::BTreeMap;

use host::cgroup::RunCgroup;
use host::clock::{monotonic_ns, process_cpu_ns};
use host::procfs;
use host::sentinels::{self as read, RunCpuReader};
use record::sentinels::{
    BALLOON, FREQUENCY, KERNEL_THREADS, OUTSIDE_CPU, PAGE_REPORTING, PRESSURE, PROCESSES, RUNNABLE,
    STEAL, VMSTAT,
};
use record::{CpuRead, SentinelMark, SentinelTick, SentinelsRecord};

/// The sentinels of one run, being taken.
pub struct SentinelWatch {
    reader: RunCpuReader,
    /// A run held to K CPUs: CPU time outside the run and steal are read over these alone.
    cpus: Option<Vec<usize>>,
    /// The run, whose processes the per-process reading leaves out (its own CPU is `reader`'s).
    cgroup: Option<RunCgroup>,
    pid: u32,
    record: SentinelsRecord,
}

/// What this host cannot give, found once before the run.
fn unavailable_here() -> BTreeMap<String, String> {
    let mut missing = BTreeMap::new();
    let mut say = |name: &str, why: String| {
        missing.insert(name.to_string(), why);
    };
    let stat = read::proc_stat();
    if stat.is_none() {
        say(STEAL, "/proc/stat is unreadable".into());
        say(OUTSIDE_CPU, "/proc/stat is unreadable".into());
    }
    if stat.and_then(|s| s.procs_running).is_none() {
        say(RUNNABLE, "/proc/stat has no procs_running".into());
    }
    match read::page_reporting_parameters() {
        None => say(
            PAGE_REPORTING,
            "no /sys/module/page_reporting: this kernel has no free page reporting".into(),
        ),
        Some(p) if !p.contains_key(read::REPORTED_KIB) => say(
            PAGE_REPORTING,
            format!(
                "free page reporting is present (order {}) but this kernel publishes no count of reported pages",
                p.get("page_reporting_order").map_or("?", String::as_str)
            ),
        ),
        Some(_) => {}
    }
    let vmstat = read::vmstat();
    if vmstat.is_empty() {
        say(VMSTAT, "/proc/vmstat is unreadable".into());
    }
    if !vmstat.contains_key("balloon_inflate") {
        say(
            BALLOON,
            "no balloon counters in /proc/vmstat (kernel without CONFIG_MEMORY_BALLOON)".into(),
        );
    } else if read::balloon_devices().is_empty() {
        say(
            BALLOON,
            "no virtio balloon device (/sys/bus/virtio/drivers/virtio_balloon)".into(),
        );
    }
    if read::pressure().is_none() {
        say(
            PRESSURE,
            "no /proc/pressure: this kernel has no pressure stall information (or psi=0)".into(),
        );
    }
    if read::kernel_threads().is_none() {
        say(
            KERNEL_THREADS,
            "kthreadd (PID 2) is not visible as a kernel thread: a PID namespace other than the machine's".into(),
        );
    }
    if read::processes_cpu(|_| true).is_none() {
        say(PROCESSES, "/proc cannot be listed".into());
    }
    if read::cpu_frequencies_khz().is_empty() {
        say(
            FREQUENCY,
            "no /sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq (usual in a VM)".into(),
        );
    }
    missing
}

impl SentinelWatch {
    /// Before the release: decides where the run's CPU time is read (its cgroup, else the
    /// process) and what this host cannot give.
    /// `cpus`: the K CPUs a run is held to (None: the whole machine).
    pub fn new(cgroup: Option<&RunCgroup>, pid: u32, cpus: Option<Vec<usize>>) -> Self {
        let reader = cgroup
            .and_then(RunCgroup::cpu_reader)
            .unwrap_or(RunCpuReader::Process(pid));
        let record = SentinelsRecord {
            schema: 1,
            ticks_per_second: procfs::clock_ticks_per_second(),
            run_cpu_source: Some(reader.source()),
            unavailable: unavailable_here(),
            boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .map(|id| id.trim().to_string()),
            cpus: cpus.as_deref().map(host::limits::cpu_list),
            conductor_pid: Some(std::process::id()),
            ..Default::default()
        };
        SentinelWatch {
            reader,
            cpus,
            cgroup: cgroup.cloned(),
            pid,
            record,
        }
    }

    /// What the sampler reads the run's CPU time with at each tick.
    pub fn reader(&self) -> RunCpuReader {
        self.reader.clone()
    }

    /// Readings at an edge between phases (`start`, a phase mark's name).
    pub fn mark(&mut self, name: &str) {
        let reader = self.reader.clone();
        self.push_mark(name, || reader.read_ns());
    }

    /// The mark right after the reap. `reaped_cpu_ns`: the run's CPU time from wait4's rusage,
    /// for when the process was the source (its /proc entry is gone by now). Taken before the
    /// conductor's own teardown (the probes' report, perf's end), which is not the run's exit.
    pub fn mark_reaped(&mut self, reaped_cpu_ns: Option<u64>) {
        let reader = self.reader.clone();
        self.push_mark("reaped", move || match reader {
            RunCpuReader::Process(_) => reaped_cpu_ns,
            _ => reader.read_ns(),
        });
    }

    /// The record, with the sampler's ticks.
    pub fn finish(mut self, ticks: Vec<SentinelTick>) -> SentinelsRecord {
        self.record.ticks = ticks;
        self.record
    }

    /// The run's processes now: its cgroup's, else its process and descendants.
    fn run_pids(&self) -> Vec<u32> {
        let threads = procfs::read_key_values(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|s| s.get("Threads").copied());
        let listed: Vec<u32> = self
            .cgroup
            .as_ref()
            .map(|c| c.processes_of(self.pid, threads))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .collect();
        if !listed.is_empty() {
            return listed;
        }
        std::iter::once(self.pid)
            .chain(procfs::descendants(self.pid))
            .collect()
    }

    fn push_mark(&mut self, name: &str, run_cpu: impl FnOnce() -> Option<u64>) {
        let cpus = self.cpus.as_deref();
        // The three CPU readings back to back, cheapest first: what the machine did outside
        // the run is the machine's busy time less the other two, so they must cover one window.
        let t_ns = monotonic_ns();
        let conductor_cpu_ns = process_cpu_ns();
        let run_cpu_ns = run_cpu();
        let stat = read::proc_stat_over(cpus);
        let span_ns = monotonic_ns().saturating_sub(t_ns);
        let mut run_pids = self.run_pids();
        run_pids.push(std::process::id());
        run_pids.sort_unstable();
        let mark = SentinelMark {
            name: name.to_string(),
            t_ns,
            machine_cpu: stat.map(|s| s.cpu),
            cpu_read: stat.map(|s| CpuRead {
                span_ns,
                cpus: s.cpus,
            }),
            conductor_cpu_ns,
            run_cpu_ns,
            kernel_threads: read::kernel_threads(),
            processes: read::processes_cpu(|pid| run_pids.binary_search(&pid).is_ok()),
            vmstat: read::vmstat(),
            page_reporting: read::page_reporting_parameters().map(|p| read::numeric(&p)),
            uninitialized_kb: procfs::uninitialized_kb(),
            pressure_us: read::pressure(),
        };
        self.record.marks.push(mark);
    }
}

/// One sampler tick: runnable tasks, load, the run's CPU time, CPU frequencies.
pub fn tick(reader: &RunCpuReader) -> SentinelTick {
    let freqs = read::cpu_frequencies_khz();
    SentinelTick {
        t_ns: monotonic_ns(),
        procs_running: read::proc_stat().and_then(|s| s.procs_running),
        load1: read::loadavg().map(|(load1, _)| load1),
        run_cpu_ns: reader.read_ns(),
        freq_khz_min: freqs.iter().min().copied(),
        freq_khz_max: freqs.iter().max().copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_on_this_process_marks_and_ticks() {
        let me = std::process::id();
        let mut watch = SentinelWatch::new(None, me, None);
        watch.mark("start");
        let t = tick(&watch.reader());
        watch.mark("spawn");
        watch.mark_reaped(Some(5));
        let record = watch.finish(vec![t]);
        let names: Vec<&str> = record.marks.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["start", "spawn", "reaped"]);
        assert!(record.marks[0].machine_cpu.is_some());
        // Every mark reads the kernel threads where they are visible.
        let visible = !record.unavailable.contains_key(KERNEL_THREADS);
        assert!(record
            .marks
            .iter()
            .all(|m| m.kernel_threads.is_some() == visible));
        assert!(record.marks[1].run_cpu_ns.is_some());
        // spawnscope's own CPU, read with the others, and grown by what it did between.
        let own = |i: usize| record.marks[i].conductor_cpu_ns.unwrap();
        assert!(own(0) > 0 && own(1) >= own(0));
        assert_eq!(record.conductor_pid, Some(me));
        let read = record.marks[0].cpu_read.as_ref().unwrap();
        assert!(read.cpus >= 1 && read.span_ns < 1_000_000_000);
        // The per-process reading leaves out the run (here this very process) and lists others.
        let listed = record.marks[1].processes.as_ref().unwrap();
        assert!(listed.iter().all(|p| p.pid != me) && !listed.is_empty());
        assert_eq!(
            record.marks[2].run_cpu_ns,
            Some(5),
            "a reaped process: rusage"
        );
        assert!(record.ticks[0].procs_running.is_some_and(|r| r >= 1));
        // Whatever this host lacks has a reason; nothing else is listed.
        assert!(record.unavailable.values().all(|why| !why.is_empty()));
    }
}
