//! Readers for the noise sentinels: what else the machine did while a run was measured. All of
//! them only read (/proc/stat, /proc/loadavg, /proc/vmstat, a cgroup's CPU counter, the page
//! reporting module's parameters, cpufreq, the kernel threads' /proc/PID/stat); nothing on the machine is changed to get them. Each
//! parser takes the file's text so it is tested on contents recorded on real machines.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::{clock, procfs};
use record::{KernelThreadTime, KernelThreads, MachineCpu, ProcessCpu, RunCpuSource};

/// The `cpu ` line of /proc/stat (all CPUs), in USER_HZ ticks, and `procs_running`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub cpu: MachineCpu,
    /// The `cpuN` lines `cpu` sums (every online CPU, or those of `cpus` found).
    pub cpus: u32,
    pub procs_running: Option<u64>,
}

/// Parses /proc/stat. Columns the kernel does not print (old kernels stop before steal) read 0.
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    parse_proc_stat_over(text, None)
}

/// Parses /proc/stat, its CPU times summed over `cpus` (their `cpuN` lines: a run held to K
/// CPUs is judged over those), else the `cpu` line of all of them.
pub fn parse_proc_stat_over(text: &str, cpus: Option<&[usize]>) -> Option<ProcStat> {
    let mut stat = ProcStat::default();
    let mut found_cpu = false;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let first = words.next();
        let per_cpu = first
            .and_then(|w| w.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok());
        if per_cpu.is_some_and(|n| cpus.is_none_or(|cpus| cpus.contains(&n))) {
            stat.cpus += 1;
        }
        let wanted = match (first, cpus) {
            (Some("cpu"), None) => true,
            (Some(name), Some(cpus)) => name
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| cpus.contains(&n)),
            _ => false,
        };
        match first {
            Some(_) if wanted => {
                let v: Vec<u64> = words.map(|w| w.parse().unwrap_or(0)).collect();
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                let c = &mut stat.cpu;
                c.user += at(0);
                c.nice += at(1);
                c.system += at(2);
                c.idle += at(3);
                c.iowait += at(4);
                c.irq += at(5);
                c.softirq += at(6);
                c.steal += at(7);
                c.guest += at(8);
                c.guest_nice += at(9);
                found_cpu = true;
            }
            Some("procs_running") => stat.procs_running = words.next().and_then(|w| w.parse().ok()),
            _ => {}
        }
    }
    found_cpu.then_some(stat)
}

pub fn proc_stat() -> Option<ProcStat> {
    parse_proc_stat(&fs::read_to_string("/proc/stat").ok()?)
}

/// /proc/stat with the CPU times of `cpus` alone (all of them: None).
pub fn proc_stat_over(cpus: Option<&[usize]>) -> Option<ProcStat> {
    parse_proc_stat_over(&fs::read_to_string("/proc/stat").ok()?, cpus)
}

/// /proc/loadavg: the 1-minute load and the running-tasks field ("2/86": 2 runnable).
pub fn parse_loadavg(text: &str) -> Option<(f64, u64)> {
    let mut words = text.split_whitespace();
    let load1 = words.next()?.parse().ok()?;
    let running = words.nth(2)?.split('/').next()?.parse().ok()?;
    Some((load1, running))
}

pub fn loadavg() -> Option<(f64, u64)> {
    parse_loadavg(&fs::read_to_string("/proc/loadavg").ok()?)
}

/// The /proc/vmstat counters that reveal the kernel working for memory: direct reclaim,
/// compaction, transparent huge pages, the balloon, page faults. (Exact per-event counts come
/// from the collector's tracepoints; these deltas are the cheap read-only companion.)
pub const VMSTAT_PREFIXES: [&str; 9] = [
    "allocstall_",
    "pgscan_direct",
    "pgsteal_direct",
    "compact_",
    "thp_",
    "balloon_",
    "nr_balloon_pages",
    "pgfault",
    "pgmajfault",
];

/// `name value` lines of /proc/vmstat, only the counters named by `VMSTAT_PREFIXES`.
pub fn parse_vmstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(' ')?;
            VMSTAT_PREFIXES
                .iter()
                .any(|p| name.starts_with(p))
                .then_some(())?;
            Some((name.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

pub fn vmstat() -> BTreeMap<String, u64> {
    parse_vmstat(&fs::read_to_string("/proc/vmstat").unwrap_or_default())
}

/// Pressure stall information: the `total=` µs of each /proc/pressure file's lines, as
/// `cpu_some_us`, `memory_full_us`… (time some or all non-idle tasks stalled on the resource).
pub fn parse_pressure(resource: &str, text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let kind = words.next()?;
            let total = words.find_map(|w| w.strip_prefix("total="))?;
            Some((format!("{resource}_{kind}_us"), total.parse().ok()?))
        })
        .collect()
}

/// /proc/pressure/{cpu,memory,io}; None where the kernel has no PSI (or it is off: psi=0).
pub fn pressure() -> Option<BTreeMap<String, u64>> {
    let mut all = BTreeMap::new();
    for resource in ["cpu", "memory", "io"] {
        let text = fs::read_to_string(format!("/proc/pressure/{resource}")).ok()?;
        all.extend(parse_pressure(resource, &text));
    }
    Some(all)
}

/// cgroup v2 `cpu.stat`: `usage_usec` (every v2 cgroup has it, cpu controller enabled or not),
/// in ns.
pub fn parse_cpu_stat_usage_ns(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix("usage_usec ")?;
        Some(v.trim().parse::<u64>().ok()? * 1000)
    })
}

/// cgroup v1 `cpuacct.usage`: one number, ns.
pub fn parse_cpuacct_usage_ns(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Where the run's own CPU time is read.
#[derive(Clone, Debug)]
pub enum RunCpuReader {
    /// A v2 cgroup directory (cpu.stat).
    CgroupV2(PathBuf),
    /// A v1 cpuacct cgroup directory (cpuacct.usage).
    CpuacctV1(PathBuf),
    /// No CPU-accounting cgroup: the workload process's utime+stime (/proc/PID/stat sums its
    /// live and exited threads); tick-grained, and gone once the process is reaped.
    Process(u32),
}

impl RunCpuReader {
    pub fn source(&self) -> RunCpuSource {
        match self {
            RunCpuReader::CgroupV2(_) => RunCpuSource::CgroupV2CpuStat,
            RunCpuReader::CpuacctV1(_) => RunCpuSource::CgroupV1Cpuacct,
            RunCpuReader::Process(_) => RunCpuSource::ProcessStat,
        }
    }

    /// The run's CPU time so far, ns.
    pub fn read_ns(&self) -> Option<u64> {
        match self {
            RunCpuReader::CgroupV2(dir) => {
                parse_cpu_stat_usage_ns(&fs::read_to_string(dir.join("cpu.stat")).ok()?)
            }
            RunCpuReader::CpuacctV1(dir) => {
                parse_cpuacct_usage_ns(&fs::read_to_string(dir.join("cpuacct.usage")).ok()?)
            }
            RunCpuReader::Process(pid) => {
                let cpu = procfs::process_cpu(*pid)?;
                Some((cpu.user_us + cpu.sys_us) * 1000)
            }
        }
    }
}

/// PF_KTHREAD, the flag (/proc/PID/stat field 9) of a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// kthreadd: the kernel thread every other one is forked from, so its children are all of them.
const KTHREADD: u32 = 2;

/// The fields of /proc/PID/stat the kernel threads' sentinel reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStat {
    pub pid: u32,
    pub comm: String,
    pub ppid: u32,
    pub flags: u64,
    /// utime + stime (fields 14 and 15), clock ticks.
    pub cpu_ticks: u64,
    /// cutime + cstime (fields 16 and 17): children that ended and were waited for.
    pub children_ticks: u64,
    /// Field 22, clock ticks since boot.
    pub start_ticks: u64,
}

impl TaskStat {
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

/// Parses a /proc/PID/stat line. The name is everything between the first `(` and the last `)`:
/// a name may hold spaces and parentheses of its own.
pub fn parse_task_stat(text: &str) -> Option<TaskStat> {
    let (open, close) = (text.find('(')?, text.rfind(')')?);
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // The man page numbers fields from 1, the pid and the name being 1 and 2.
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some(TaskStat {
        pid,
        comm,
        ppid: u32::try_from(field(4)?).ok()?,
        flags: field(9)?,
        cpu_ticks: field(14)? + field(15)?,
        children_ticks: field(16)? + field(17)?,
        start_ticks: field(22)?,
    })
}

fn task_stat(pid: u32) -> Option<TaskStat> {
    parse_task_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process's CPU time now (/proc/PID/stat, every thread of it together), kernel threads
/// and the PIDs `skip` names left out — `skip` is asked before a process is read, so that the
/// run's processes (one with 100,000 threads sums them all in its stat) are never read here.
/// None when /proc cannot be listed.
pub fn processes_cpu(skip: impl Fn(u32) -> bool) -> Option<Vec<ProcessCpu>> {
    let listed = fs::read_dir("/proc").ok()?;
    let processes = listed
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != KTHREADD && !skip(pid))
        .filter_map(task_stat)
        .filter(|t| !t.is_kernel_thread() && t.ppid != KTHREADD)
        .map(|t| ProcessCpu {
            pid: t.pid,
            ppid: t.ppid,
            start_ticks: t.start_ticks,
            cpu_ticks: t.cpu_ticks,
            children_ticks: t.children_ticks,
            comm: t.comm,
        })
        .collect();
    Some(processes)
}

/// The PIDs listed in a /proc/PID/task/TID/children file.
pub fn parse_children(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Every kernel thread's CPU time now. The threads are kthreadd's children (one small file,
/// whatever the number of processes on the machine); without that file (a kernel without
/// CONFIG_PROC_CHILDREN) every process's stat is read and PF_KTHREAD picks them. Each is checked
/// for PF_KTHREAD, a PID reused since it was listed left out. A thread that exits between two
/// marks takes its time with it: that time stays with other programs (conservative). None where
/// kthreadd is not visible (a PID namespace other than the machine's).
pub fn kernel_threads() -> Option<KernelThreads> {
    let began = std::time::Instant::now();
    let ns_per_tick = 1_000_000_000 / procfs::clock_ticks_per_second().max(1);
    let boot_ticks = clock::boottime_ns() / ns_per_tick;
    let kthreadd = task_stat(KTHREADD).filter(TaskStat::is_kernel_thread)?;
    let listed = fs::read_to_string(format!("/proc/{KTHREADD}/task/{KTHREADD}/children"));
    let others: Vec<TaskStat> = match listed {
        Ok(text) => parse_children(&text)
            .into_iter()
            .filter_map(task_stat)
            .collect(),
        Err(_) => fs::read_dir("/proc")
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != KTHREADD)
            .filter_map(task_stat)
            .collect(),
    };
    let threads = std::iter::once(kthreadd)
        .chain(others)
        .filter(TaskStat::is_kernel_thread)
        .map(|t| KernelThreadTime {
            pid: t.pid,
            start_ticks: t.start_ticks,
            cpu_ticks: t.cpu_ticks,
            comm: t.comm,
        })
        .collect();
    Some(KernelThreads {
        boot_ticks,
        read_us: began.elapsed().as_micros() as u64,
        threads,
    })
}

const PAGE_REPORTING: &str = "/sys/module/page_reporting/parameters";

/// The page_reporting module's parameters as name -> text (page_reporting_order on every kernel
/// with free page reporting; some kernels add counters such as reported_kib, passes, walked).
/// None when the kernel has no free page reporting.
pub fn read_parameters(dir: &Path) -> Option<BTreeMap<String, String>> {
    let entries = fs::read_dir(dir).ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|e| {
                let value = fs::read_to_string(e.path()).ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    value.trim().to_string(),
                ))
            })
            .collect(),
    )
}

pub fn page_reporting_parameters() -> Option<BTreeMap<String, String>> {
    read_parameters(Path::new(PAGE_REPORTING))
}

/// The numeric parameters only (counters and the order), for deltas.
pub fn numeric(parameters: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
    parameters
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
        .collect()
}

/// The counter of memory reported free to the host, kB, when this kernel publishes one.
pub const REPORTED_KIB: &str = "reported_kib";

/// Virtio balloon devices bound to the driver (virtio0…); empty when there is none.
pub fn balloon_devices() -> Vec<String> {
    let Ok(entries) = fs::read_dir("/sys/bus/virtio/drivers/virtio_balloon") else {
        return Vec::new();
    };
    let mut devices: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("virtio"))
        .collect();
    devices.sort();
    devices
}

/// Every CPU's scaling_cur_freq, kHz; empty when cpufreq is not exposed (most VMs).
pub fn cpu_frequencies_khz() -> Vec<u64> {
    let Ok(entries) = fs::read_dir("/sys/devices/system/cpu") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| {
            let text = fs::read_to_string(e.path().join("cpufreq/scaling_cur_freq")).ok()?;
            text.trim().parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/stat of the project's dev VM (2 vCPUs, kernel 6.18), intr and softirq lines cut.
    const PROC_STAT_DEV_VM: &str = "cpu  610872 205 213211 741967 5012 0 1305 541 0 0
cpu0 290482 93 103260 390889 1067 0 437 270 0 0
cpu1 320390 111 109951 351078 3945 0 867 270 0 0
ctxt 31989512
btime 1795409905
processes 5692826
procs_running 10
procs_blocked 0
";

    #[test]
    fn proc_stat_gives_the_all_cpu_line_and_runnable_tasks() {
        let s = parse_proc_stat(PROC_STAT_DEV_VM).unwrap();
        assert_eq!(s.cpu.user, 610_872);
        assert_eq!(s.cpu.steal, 541);
        assert_eq!(s.cpu.idle, 741_967);
        assert_eq!(s.cpu.busy(), 610_872 + 205 + 213_211 + 1305);
        assert_eq!(s.procs_running, Some(10));
        assert_eq!(s.cpus, 2, "the cpuN lines summed");
        // A kernel that prints no steal column (before 2.6.11) reads it as 0, not garbage.
        let old = parse_proc_stat("cpu  1 2 3 4\nprocs_running 1\n").unwrap();
        assert_eq!((old.cpu.system, old.cpu.steal), (3, 0));
        assert!(parse_proc_stat("not /proc/stat").is_none());
        // Over some CPUs: their lines summed, the machine's line left out.
        let text = "cpu  30 0 6 90 0 0 0 9\ncpu0 10 0 2 30 0 0 0 3\ncpu1 20 0 4 60 0 0 0 6\nprocs_running 2\n";
        let one = parse_proc_stat_over(text, Some(&[1])).unwrap();
        assert_eq!((one.cpu.user, one.cpu.system, one.cpu.steal), (20, 4, 6));
        assert_eq!(one.cpus, 1);
        let both = parse_proc_stat_over(text, Some(&[0, 1])).unwrap();
        assert_eq!(both.cpu, parse_proc_stat(text).unwrap().cpu);
        assert!(
            parse_proc_stat_over(text, Some(&[5])).is_none(),
            "a CPU not listed"
        );
        assert!(proc_stat().is_some(), "this machine's /proc/stat");
    }

    #[test]
    fn loadavg_gives_load_and_running() {
        assert_eq!(
            parse_loadavg("0.43 50.26 168.74 2/86 29080\n"),
            Some((0.43, 2))
        );
        assert!(parse_loadavg("garbage").is_none());
        assert!(loadavg().is_some());
    }

    #[test]
    fn vmstat_keeps_the_reclaim_compaction_thp_and_balloon_counters() {
        // From the dev VM's /proc/vmstat (kernel 6.18, balloon compiled in).
        let text = "nr_free_pages 5757135\nnr_balloon_pages 0\nallocstall_normal 3\n\
                    allocstall_movable 0\npgfault 183081159\npgmajfault 46804\n\
                    pgsteal_direct 17\npgscan_direct 40\npgscan_direct_throttle 0\n\
                    compact_stall 2\ncompact_fail 1\nthp_fault_alloc 5\n\
                    thp_collapse_alloc 0\nballoon_inflate 0\nballoon_deflate 0\n\
                    balloon_migrate 0\nworkingset_refault_anon 9\n";
        let v = parse_vmstat(text);
        assert_eq!(v["allocstall_normal"], 3);
        assert_eq!(v["pgscan_direct"], 40);
        assert_eq!(v["compact_stall"], 2);
        assert_eq!(v["thp_fault_alloc"], 5);
        assert_eq!(v["balloon_inflate"], 0);
        assert_eq!(v["pgfault"], 183_081_159);
        assert!(!v.contains_key("nr_free_pages") && !v.contains_key("workingset_refault_anon"));
        assert!(vmstat().contains_key("pgfault"));
    }

    #[test]
    fn cgroup_cpu_counters_in_ns() {
        // cgroup v2 cpu.stat with the cpu controller enabled (a systemd host's user slice).
        let v2 = "usage_usec 8152787433\nuser_usec 6032189312\nsystem_usec 2120598120\n\
                  nice_usec 2058363\ncore_sched.force_idle_usec 0\nnr_periods 0\n\
                  nr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(parse_cpu_stat_usage_ns(v2), Some(8_152_787_433_000));
        assert_eq!(parse_cpu_stat_usage_ns("nr_periods 0\n"), None);
        // cgroup v1 cpuacct.usage on the dev VM.
        assert_eq!(
            parse_cpuacct_usage_ns("8293502144301\n"),
            Some(8_293_502_144_301)
        );
        let me = RunCpuReader::Process(std::process::id());
        assert_eq!(me.source(), RunCpuSource::ProcessStat);
        assert!(me.read_ns().is_some());
    }

    #[test]
    fn pressure_totals_by_resource_and_kind() {
        let text = "some avg10=99.65 avg60=99.29 avg300=98.55 total=7292640719\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        let p = parse_pressure("cpu", text);
        assert_eq!(p["cpu_some_us"], 7_292_640_719);
        assert_eq!(p["cpu_full_us"], 0);
        assert_eq!(p.len(), 2);
        // This kernel has PSI on (the machines' facts): every resource's some line.
        if let Some(all) = pressure() {
            for key in [
                "cpu_some_us",
                "memory_some_us",
                "memory_full_us",
                "io_some_us",
            ] {
                assert!(all.contains_key(key), "{key} in {all:?}");
            }
        }
    }

    #[test]
    fn task_stat_lines_with_any_name() {
        // The dev VM's kthreadd, and a kworker whose name carries its workqueue (kernel 6.18).
        let kthreadd = parse_task_stat(
            "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 20 0 1 0 30 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        assert_eq!(kthreadd.pid, 2);
        assert_eq!(kthreadd.comm, "kthreadd");
        assert_eq!((kthreadd.ppid, kthreadd.flags), (0, 2_129_984));
        assert!(
            kthreadd.is_kernel_thread(),
            "2129984 = 0x208040 has PF_KTHREAD"
        );
        assert_eq!((kthreadd.cpu_ticks, kthreadd.start_ticks), (3, 30));
        let kworker = parse_task_stat(
            "1234 (kworker/u4:2-events_unbound) I 2 0 0 0 -1 69238880 0 0 0 0 0 187 0 0 20 0 1 \
             0 9123 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0",
        )
        .unwrap();
        assert_eq!(kworker.comm, "kworker/u4:2-events_unbound");
        assert_eq!(kworker.ppid, 2);
        assert!(kworker.is_kernel_thread());
        assert_eq!((kworker.cpu_ticks, kworker.start_ticks), (187, 9123));
        // A user program may name itself anything, spaces and parentheses included: the name
        // ends at the last `)`. utime 250 + stime 41; flags 0x400100, no
        // PF_KTHREAD.
        let odd = parse_task_stat(
            "4242 ((a b) c)) S 1 4242 4242 0 -1 4194560 120 0 0 0 250 41 0 0 20 0 1 0 55000 \
             8192000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0",
        )
        .unwrap();
        assert_eq!(odd.comm, "(a b) c)");
        assert_eq!((odd.ppid, odd.cpu_ticks, odd.start_ticks), (1, 291, 55_000));
        assert_eq!(odd.children_ticks, 0);
        let shell = parse_task_stat(
            "77 (bash) S 1 77 77 0 -1 4194560 120 0 0 0 5 3 700 90 20 0 1 0 1000 \
             8192000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0",
        )
        .unwrap();
        assert_eq!(
            (shell.cpu_ticks, shell.children_ticks),
            (8, 790),
            "cutime + cstime: its children that ended"
        );
        assert!(!odd.is_kernel_thread());
        assert!(parse_task_stat("4242 (cut short) S 1").is_none());
        assert!(parse_task_stat("no parentheses").is_none());
        assert_eq!(parse_children("3 4 5 7 \n"), [3, 4, 5, 7]);
        assert!(parse_children("").is_empty());
    }

    /// A child that burns CPU is listed with its time, its parent named; a PID `skip` names is
    /// never read, and no kernel thread is listed.
    #[test]
    fn every_process_s_cpu_is_read_but_those_skipped() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        let me = std::process::id();
        // Until the loop has run long enough to be counted (clock ticks).
        let mut seen = None;
        for _ in 0..100 {
            let all = processes_cpu(|_| false).unwrap();
            if let Some(p) = all.iter().find(|p| p.pid == pid && p.cpu_ticks > 0) {
                seen = Some(p.clone());
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let skipped = processes_cpu(|p| p == pid).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let seen = seen.expect("the busy child with its CPU time");
        assert_eq!((seen.ppid, seen.comm.as_str()), (me, "sh"));
        assert!(skipped.iter().all(|p| p.pid != pid));
        assert!(skipped.iter().any(|p| p.pid == me), "this test process");
        if let Some(k) = kernel_threads() {
            let kernel: std::collections::HashSet<u32> = k.threads.iter().map(|t| t.pid).collect();
            assert!(skipped.iter().all(|p| !kernel.contains(&p.pid)));
        }
    }

    #[test]
    fn this_machine_s_kernel_threads_are_read() {
        // In the machine's PID namespace (the tests run as the project's VMs do) kthreadd is
        // visible; elsewhere there is nothing to read.
        let Some(k) = kernel_threads() else {
            assert!(task_stat(KTHREADD).is_none_or(|t| !t.is_kernel_thread()));
            return;
        };
        assert_eq!(k.threads[0].pid, KTHREADD);
        assert!(k.threads.len() > 1, "kthreadd has children: {k:?}");
        assert!(k.threads.iter().any(|t| t.comm.starts_with("ksoftirqd/")));
        // Not this test process: it is no kernel thread.
        assert!(k.threads.iter().all(|t| t.pid != std::process::id()));
    }

    #[test]
    fn page_reporting_parameters_as_found_or_absent() {
        let dir = tempfile::tempdir().unwrap();
        // The dev VM's kernel: the order plus its reported-pages counters.
        for (name, value) in [
            ("page_reporting_order", "9\n"),
            ("reported_kib", "23659260\n"),
            ("passes", "774\n"),
            ("free_bitmap_enable", "Y\n"),
        ] {
            fs::write(dir.path().join(name), value).unwrap();
        }
        let p = read_parameters(dir.path()).unwrap();
        assert_eq!(p["free_bitmap_enable"], "Y");
        let n = numeric(&p);
        assert_eq!(n[REPORTED_KIB], 23_659_260);
        assert_eq!(n["page_reporting_order"], 9);
        assert!(!n.contains_key("free_bitmap_enable"));
        // A host without free page reporting has no module directory: None, not zeros.
        assert!(read_parameters(&dir.path().join("absent")).is_none());
    }
}
