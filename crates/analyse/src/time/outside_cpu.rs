//! The CPU outside the run between two sentinel marks, and who took it.
//!
//! Each mark reads three CPU figures back to back (record::CpuRead): spawnscope's own
//! (CLOCK_PROCESS_CPUTIME_ID, exact), the run's (its cgroup's ns counter) and /proc/stat. The
//! machine's busy time is taken from what its CPUs did *not* do: capacity (CPUs × wall) less
//! idle, iowait and steal. Those three are clocked exactly on a tickless kernel (idle and iowait
//! from the idle entry and exit times, steal from the hypervisor's steal clock), where user,
//! system, irq and softirq are sampled at the scheduler tick: on the 2-core development VM a
//! busy phase of 100,000 thread creations lost 4–11 % of its ticks, enough to make the run use
//! "more CPU than the machine" between two marks (evidence/false-alarms). So:
//!
//!   outside = (CPUs × wall − idle − iowait − steal) − run − spawnscope
//!
//! kept signed (`balance`): how far below zero it goes is the reading's error, and the error's
//! bound is stated (`resolution_ns`): /proc/stat prints each column in whole USER_HZ units (a
//! difference of two truncated readings is off by less than one unit, for each of the three
//! columns), the run's counter lags a task on a CPU by up to one scheduler tick (10 ms at HZ=100,
//! the slowest: less than a tick each CPU, the two ends' lags taken one from the other), and the
//! three readings of a mark are `span_ns` apart at most (each CPU, each end).
//!
//! Who took it: every process's utime+stime at the marks (the run's and spawnscope's left out),
//! with its children's that ended (cutime+cstime): a process that began and ended between two
//! marks is found in its parent's. A child present at the first mark and gone at the second is
//! counted in its parent's children's time from its birth: its time before the first mark is
//! taken off the parent's. spawnscope's children outside the run (perf, the load generator) are
//! spawnscope's own work. What no process and no kernel thread accounts for is unattributed: an
//! interrupt on an idle CPU, a process whose parent ended too.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use record::{ProcessCpu, SentinelMark};

/// A scheduler tick at the slowest HZ (100): how long a cgroup's CPU counter may lag a task
/// running on a CPU (it is brought up to date at each tick and each switch).
const TICK_BOUND_NS: u64 = 10_000_000;

/// Processes named per phase in summary.json, most CPU first.
const PROCESSES_KEPT: usize = 5;

/// A process's CPU outside the run in one phase.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessShare {
    pub pid: u32,
    /// Its name (/proc/PID/stat's comm).
    pub comm: String,
    /// Its own CPU time and its children's that ended in the phase, ns (clock-tick grained).
    pub cpu_ns: u64,
}

impl ProcessShare {
    /// "stress-ng-cpu (PID 4321)".
    pub fn label(&self) -> String {
        format!("{} (PID {})", self.comm, self.pid)
    }
}

/// The CPU balance of one phase, from two marks that read it as one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Balance {
    /// CPUs × wall less idle, iowait and steal, ns.
    pub machine_busy_ns: u64,
    /// spawnscope's conductor (exact) and its children outside the run (ticks), ns.
    pub spawnscope_ns: u64,
    /// Busy less the run less spawnscope, ns: negative within `resolution_ns` is rounding.
    pub outside_ns: i64,
    pub resolution_ns: u64,
    /// The processes outside the run by CPU, most first (`PROCESSES_KEPT`), and all of them
    /// together.
    pub processes: Vec<ProcessShare>,
    pub processes_ns: Option<u64>,
}

/// The phase's balance, where both marks read their CPU as one (records from before lack it:
/// None, and the phase is read from /proc/stat's busy columns as it was then). `run_ns`: the
/// run's CPU in the phase.
pub fn balance(
    m0: &SentinelMark,
    m1: &SentinelMark,
    run_ns: u64,
    ticks_per_second: u64,
    conductor_pid: Option<u32>,
) -> Option<Balance> {
    let (r0, r1) = (m0.cpu_read.as_ref()?, m1.cpu_read.as_ref()?);
    let (c0, c1) = (m0.machine_cpu?, m1.machine_cpu?);
    if r0.cpus != r1.cpus {
        // A CPU went on or off line between the marks: the capacity is not known.
        return None;
    }
    let tick_ns = 1_000_000_000 / ticks_per_second.max(1);
    let not_busy = |c: &record::MachineCpu| c.idle + c.iowait + c.steal;
    let wall_ns = m1.t_ns.saturating_sub(m0.t_ns);
    let cpus = u64::from(r0.cpus);
    let capacity = cpus * wall_ns;
    let machine_busy_ns =
        capacity.saturating_sub(not_busy(&c1).saturating_sub(not_busy(&c0)) * tick_ns);
    let conductor_ns = m1.conductor_cpu_ns?.saturating_sub(m0.conductor_cpu_ns?);
    let shares = m0
        .processes
        .as_deref()
        .zip(m1.processes.as_deref())
        .map(|(a, b)| process_shares(a, b, tick_ns, conductor_pid));
    let (children_ns, mut processes) = shares.unwrap_or_default();
    let spawnscope_ns = conductor_ns + children_ns;
    let outside_ns = machine_busy_ns as i64 - run_ns as i64 - spawnscope_ns as i64;
    let resolution_ns = 3 * tick_ns + cpus * TICK_BOUND_NS + cpus * (r0.span_ns + r1.span_ns);
    let processes_ns = shares_total(&processes, m0.processes.is_some() && m1.processes.is_some());
    processes.truncate(PROCESSES_KEPT);
    Some(Balance {
        machine_busy_ns,
        spawnscope_ns,
        outside_ns,
        resolution_ns,
        processes,
        processes_ns,
    })
}

fn shares_total(all: &[ProcessShare], read: bool) -> Option<u64> {
    read.then(|| all.iter().map(|p| p.cpu_ns).sum())
}

/// Each process's CPU between two readings (own and ended children's), spawnscope's
/// descendants apart: (their total, ns; the others by CPU, most first, those with none left out).
fn process_shares(
    before: &[ProcessCpu],
    after: &[ProcessCpu],
    tick_ns: u64,
    conductor_pid: Option<u32>,
) -> (u64, Vec<ProcessShare>) {
    let key = |p: &ProcessCpu| (p.pid, p.start_ticks);
    let then: HashMap<(u32, u64), &ProcessCpu> = before.iter().map(|p| (key(p), p)).collect();
    let now: HashMap<(u32, u64), &ProcessCpu> = after.iter().map(|p| (key(p), p)).collect();
    let mut grew: BTreeMap<u32, u64> = BTreeMap::new();
    for p in after {
        let total = |q: &ProcessCpu| q.cpu_ticks + q.children_ticks;
        let ticks = match then.get(&key(p)) {
            Some(was) => total(p).saturating_sub(total(was)),
            // Began between the marks: all of its time is the phase's.
            None => total(p),
        };
        *grew.entry(p.pid).or_insert(0) += ticks;
    }
    // A process gone since the first reading: its parent's children's time took all of it in,
    // the part from before the first reading too.
    for gone in before.iter().filter(|p| !now.contains_key(&key(p))) {
        if let Some(parent) = grew.get_mut(&gone.ppid) {
            *parent = parent.saturating_sub(gone.cpu_ticks + gone.children_ticks);
        }
    }
    let parent_of: HashMap<u32, u32> = after.iter().map(|p| (p.pid, p.ppid)).collect();
    let is_spawnscope = |mut pid: u32| {
        let Some(conductor) = conductor_pid else {
            return false;
        };
        // Up the parents (a bounded walk: PIDs are reused, a loop is possible).
        for _ in 0..64 {
            match parent_of.get(&pid) {
                Some(&ppid) if ppid == conductor => return true,
                Some(&ppid) if ppid > 1 => pid = ppid,
                _ => return false,
            }
        }
        false
    };
    let comm: HashMap<u32, &str> = after.iter().map(|p| (p.pid, p.comm.as_str())).collect();
    let mut spawnscope_ns = 0;
    let mut shares = Vec::new();
    for (pid, ticks) in grew {
        let ns = ticks * tick_ns;
        if is_spawnscope(pid) {
            spawnscope_ns += ns;
        } else if ns > 0 {
            shares.push(ProcessShare {
                pid,
                comm: comm.get(&pid).copied().unwrap_or("?").to_string(),
                cpu_ns: ns,
            });
        }
    }
    shares.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.pid.cmp(&b.pid)));
    (spawnscope_ns, shares)
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::{CpuRead, MachineCpu};

    fn process(pid: u32, ppid: u32, cpu: u64, children: u64, comm: &str) -> ProcessCpu {
        ProcessCpu {
            pid,
            ppid,
            start_ticks: u64::from(pid) * 10,
            cpu_ticks: cpu,
            children_ticks: children,
            comm: comm.into(),
        }
    }

    fn mark(t_ms: u64, idle: u64, conductor_ms: u64, processes: Vec<ProcessCpu>) -> SentinelMark {
        SentinelMark {
            name: "m".into(),
            t_ns: t_ms * 1_000_000,
            machine_cpu: Some(MachineCpu {
                idle,
                // The busy columns are not read: ticks they lost do not matter.
                system: 3,
                ..Default::default()
            }),
            conductor_cpu_ns: Some(conductor_ms * 1_000_000),
            cpu_read: Some(CpuRead {
                span_ns: 50_000,
                cpus: 2,
            }),
            processes: Some(processes),
            ..Default::default()
        }
    }

    /// The 0:35:15 run's steady→join (evidence/false-alarms): /proc/stat's busy columns said
    /// 1,340 ms, the run used 1,461 ms — "−121 ms outside". Read from idle instead, the machine
    /// was busy 1,682 ms of 2 × 861 ms (40 ms idle): the run's 1,461 and spawnscope's 200 ms
    /// leave 21 ms, inside the reading's resolution.
    #[test]
    fn busy_time_is_what_idle_leaves_and_spawnscope_is_not_outside() {
        let m0 = mark(0, 1000, 100, vec![]);
        let m1 = mark(861, 1004, 300, vec![]);
        let b = balance(&m0, &m1, 1_461_000_000, 100, Some(7)).unwrap();
        assert_eq!(b.machine_busy_ns, 1_722_000_000 - 40_000_000);
        assert_eq!(b.spawnscope_ns, 200_000_000);
        assert_eq!(b.outside_ns, 1_682_000_000 - 1_461_000_000 - 200_000_000);
        // 3 columns × 10 ms, 2 CPUs × a 10-ms tick, 2 CPUs × 2 ends × 50 µs.
        assert_eq!(b.resolution_ns, 30_000_000 + 20_000_000 + 200_000);
        assert!(b.outside_ns.unsigned_abs() < b.resolution_ns);
        // Marks from before the CPU was read as one: no balance.
        let old = SentinelMark {
            cpu_read: None,
            ..m1.clone()
        };
        assert!(balance(&m0, &old, 0, 100, None).is_none());
        // A CPU taken off line between the marks: the capacity is unknown.
        let mut offline = m1;
        offline.cpu_read.as_mut().unwrap().cpus = 1;
        assert!(balance(&m0, &offline, 0, 100, None).is_none());
    }

    #[test]
    fn processes_are_named_by_their_cpu_and_spawnscope_s_children_are_its_own() {
        let conductor = 100;
        let before = vec![
            process(10, 1, 500, 0, "stress-ng-cpu"),
            // A shell whose child is running at the first mark and gone by the second.
            process(20, 1, 5, 40, "bash"),
            process(21, 20, 30, 0, "dd"),
            process(30, 1, 7, 0, "idle-daemon"),
            process(40, conductor, 2, 0, "perf"),
        ];
        let after = vec![
            process(10, 1, 580, 0, "stress-ng-cpu"),
            // dd ended at 45 ticks and was waited for; another child began and ended meanwhile
            // (12 ticks): the shell's children's time grew by both.
            process(20, 1, 6, 40 + 45 + 12, "bash"),
            process(30, 1, 7, 0, "idle-daemon"),
            process(40, conductor, 9, 0, "perf"),
            process(41, 40, 3, 0, "perf-helper"),
            process(50, 1, 4, 0, "cron"),
        ];
        let (spawnscope, shares) = process_shares(&before, &after, 10_000_000, Some(conductor));
        // perf and its child: 7 + 3 ticks.
        assert_eq!(spawnscope, 100_000_000);
        let got: Vec<(u32, u64)> = shares
            .iter()
            .map(|s| (s.pid, s.cpu_ns / 1_000_000))
            .collect();
        // The shell: 1 tick of its own, dd's 45 − 30 seen before, and the short child's 12.
        assert_eq!(got, [(10, 800), (20, 280), (50, 40)]);
        assert_eq!(shares[0].label(), "stress-ng-cpu (PID 10)");
    }
}
