//! Why spawning stopped, diagnosed from what the process can read, and the guard that stops
//! spawning before a limit turns into a crash (goroutines-go/limits.go is the same logic).

use crate::json::Obj;
use crate::sys::{self, CgroupDir};

const MIB: u64 = 1 << 20;
const ENOMEM: i32 = 12;
const EAGAIN: i32 = 11;

/// Bytes that can still be allocated: MemAvailable, or less when the cgroup limit is nearer.
/// The cases are schema/limit-diagnosis.tsv (headroom column).
fn headroom(
    mem_available: Option<u64>,
    cgroup_limit: Option<u64>,
    cgroup_usage: Option<u64>,
) -> Option<u64> {
    let cgroup = cgroup_limit
        .zip(cgroup_usage)
        .map(|(l, u)| l.saturating_sub(u));
    match (mem_available, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// Everything readable about the limits on task creation, at one moment.
pub struct Readings {
    threads_max: Option<u64>,
    tasks_on_host: Option<u64>,
    pid_max: Option<u64>,
    max_map_count: Option<u64>,
    maps: Option<u64>,
    rlimit_nproc: Option<u64>,
    euid: u32,
    threads: Option<u64>,
    cgroup_pids_max: Option<u64>,
    cgroup_pids_current: Option<u64>,
    mem_available: Option<u64>,
    cgroup_mem_limit: Option<u64>,
    cgroup_mem_usage: Option<u64>,
}

impl Readings {
    fn to_obj(&self) -> Obj {
        Obj::new()
            .with("threads_max", self.threads_max)
            .with("tasks_on_host", self.tasks_on_host)
            .with("pid_max", self.pid_max)
            .with("max_map_count", self.max_map_count)
            .with("maps", self.maps)
            .with("rlimit_nproc", self.rlimit_nproc)
            .with("euid", self.euid)
            .with("threads", self.threads)
            .with("cgroup_pids_max", self.cgroup_pids_max)
            .with("cgroup_pids_current", self.cgroup_pids_current)
            .with("mem_available_bytes", self.mem_available)
            .with("cgroup_mem_limit_bytes", self.cgroup_mem_limit)
            .with("cgroup_mem_usage_bytes", self.cgroup_mem_usage)
    }

    fn headroom(&self) -> Option<u64> {
        headroom(
            self.mem_available,
            self.cgroup_mem_limit,
            self.cgroup_mem_usage,
        )
    }

    /// The first limit the readings show as reached; the cases are schema/limit-diagnosis.tsv.
    fn diagnose(&self, errno: i32, reserve: u64) -> &'static str {
        let at_least = |value: Option<u64>, limit: Option<u64>, slack: u64| match (value, limit) {
            (Some(v), Some(l)) => v + slack >= l,
            _ => false,
        };
        let headroom = self.headroom();
        if at_least(self.cgroup_pids_current, self.cgroup_pids_max, 0) {
            "cgroup pids.max"
        } else if at_least(self.tasks_on_host, self.threads_max, 1) {
            "kernel.threads-max"
        } else if at_least(self.tasks_on_host, self.pid_max, 512) {
            // Every thread takes a PID; a few hundred low PIDs are reserved and others are in flux.
            "kernel.pid_max"
        } else if at_least(self.maps, self.max_map_count, 4) {
            // A thread is four mappings: stack, guard page, signal stack and its guard.
            "vm.max_map_count"
        } else if errno == ENOMEM || headroom.is_some_and(|h| h < reserve.max(64 * MIB)) {
            "memory"
        } else if self.rlimit_nproc.is_some() && self.euid != 0 && errno == EAGAIN {
            // RLIMIT_NPROC counts all of the user's tasks, which this process cannot see; root
            // is exempt.
            "RLIMIT_NPROC"
        } else {
            "unknown"
        }
    }

    /// The numbers that bear on `limit`, in a sentence; the cases are schema/limit-diagnosis.tsv.
    fn detail(&self, limit: &str) -> String {
        let n = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        match limit {
            "cgroup pids.max" => format!(
                "the cgroup holds {} tasks, its pids.max is {}",
                n(self.cgroup_pids_current),
                n(self.cgroup_pids_max)
            ),
            "kernel.threads-max" => format!(
                "{} tasks on the host, kernel.threads-max is {}",
                n(self.tasks_on_host),
                n(self.threads_max)
            ),
            "kernel.pid_max" => format!(
                "{} tasks on the host use PIDs, kernel.pid_max is {}",
                n(self.tasks_on_host),
                n(self.pid_max)
            ),
            "vm.max_map_count" => format!(
                "the process has {} mappings, vm.max_map_count is {}",
                n(self.maps),
                n(self.max_map_count)
            ),
            "memory" => format!(
                "{} MiB can still be allocated (MemAvailable {} MiB, cgroup limit {}, usage {} MiB)",
                self.headroom().unwrap_or(0) / MIB,
                self.mem_available.unwrap_or(0) / MIB,
                self.cgroup_mem_limit.map_or("none".to_string(), |l| format!("{} MiB", l / MIB)),
                self.cgroup_mem_usage.unwrap_or(0) / MIB
            ),
            "RLIMIT_NPROC" => format!(
                "not root and RLIMIT_NPROC is {}; this process has {} threads and the user's other tasks count too",
                n(self.rlimit_nproc),
                n(self.threads)
            ),
            _ => "no readable limit was reached; see readings".to_string(),
        }
    }
}

/// The limits this process lives under; cgroup directories are looked up once.
pub struct Limits {
    memory_cgroup: Option<CgroupDir>,
    pids_cgroup: Option<CgroupDir>,
}

impl Limits {
    pub fn discover() -> Self {
        Limits {
            memory_cgroup: sys::cgroup_dir("memory"),
            pids_cgroup: sys::cgroup_dir("pids"),
        }
    }

    fn memory(&self) -> (Option<u64>, Option<u64>) {
        self.memory_cgroup
            .as_ref()
            .map_or((None, None), sys::cgroup_memory)
    }

    /// Only the memory readings: cheap enough for the guard to take while spawning.
    fn memory_readings(&self) -> (Option<u64>, Option<u64>, Option<u64>) {
        let (limit, usage) = self.memory();
        (sys::mem_available(), limit, usage)
    }

    fn read_headroom(&self) -> Option<u64> {
        let (mem_available, limit, usage) = self.memory_readings();
        headroom(mem_available, limit, usage)
    }

    /// Mappings this process may still create under vm.max_map_count.
    fn map_headroom() -> Option<u64> {
        Some(sys::sysctl("vm/max_map_count")?.saturating_sub(sys::map_count()?))
    }

    pub fn read(&self) -> Readings {
        let (pids_max, pids_current) = self
            .pids_cgroup
            .as_ref()
            .map_or((None, None), sys::cgroup_pids);
        let (mem_available, cgroup_mem_limit, cgroup_mem_usage) = self.memory_readings();
        Readings {
            threads_max: sys::sysctl("kernel/threads-max"),
            tasks_on_host: sys::tasks_on_host(),
            pid_max: sys::sysctl("kernel/pid_max"),
            max_map_count: sys::sysctl("vm/max_map_count"),
            maps: sys::map_count(),
            rlimit_nproc: sys::rlimit_nproc(),
            euid: sys::euid(),
            threads: Some(sys::thread_count()),
            cgroup_pids_max: pids_max,
            cgroup_pids_current: pids_current,
            mem_available,
            cgroup_mem_limit,
            cgroup_mem_usage,
        }
    }

    /// The default --reserve: 2 % of the memory this process may use, between 32 and 512 MiB.
    pub fn auto_reserve(&self) -> u64 {
        auto_reserve(sys::mem_total(), self.memory().0)
    }
}

/// The default --reserve from MemTotal and the cgroup's memory limit (None: unreadable or
/// unlimited); the cases are schema/auto-reserve.tsv.
fn auto_reserve(mem_total: Option<u64>, cgroup_limit: Option<u64>) -> u64 {
    let total = mem_total.unwrap_or(u64::MAX);
    let usable = cgroup_limit.map_or(total, |l| l.min(total));
    (usable / 50).clamp(32 * MIB, 512 * MIB)
}

/// Why spawning stopped: the `failure` object of the schema.
pub struct Failure {
    pub errno: i32,
    pub message: String,
    pub limit: &'static str,
    pub detail: String,
    pub readings: Readings,
}

impl Failure {
    /// A failed spawn call, diagnosed now, while the limit is still in force.
    pub fn from_errno(errno: i32, message: String, limits: &Limits, reserve: u64) -> Self {
        let readings = limits.read();
        let limit = readings.diagnose(errno, reserve);
        Failure {
            errno,
            message,
            limit,
            detail: readings.detail(limit),
            readings,
        }
    }

    /// Spawning stopped by the guard before `limit` was hit (as ENOMEM, what mmap would return).
    fn guarded(limit: &'static str, message: String, limits: &Limits) -> Self {
        let readings = limits.read();
        Failure {
            errno: ENOMEM,
            message,
            limit,
            detail: readings.detail(limit),
            readings,
        }
    }

    pub fn to_obj(&self) -> Obj {
        Obj::new()
            .with("errno", self.errno)
            .with("errno_name", sys::errno_name(self.errno))
            .with("message", self.message.as_str())
            .with("limit", self.limit)
            .with("detail", self.detail.as_str())
            .with("readings", self.readings.to_obj())
    }
}

/// Mappings kept free: a thread that got its stack still maps a signal stack and guard page from
/// inside itself (Rust std aborts the process if that fails), and threads spawned a moment ago may
/// not have done so yet.
const MAPS_RESERVE: u64 = 1024;

/// One resource that spawning uses up, read again only when the tasks spawned since the last read
/// could have used half of what was left, at the cost per task seen so far. A run far from a limit
/// reads /proc a handful of times; one near it reads more often the nearer it gets. The cases are
/// schema/spawn-budget.tsv.
struct Budget {
    reserve: u64,
    min_per_task: u64,
    next_check: u64,
    at_start: Option<u64>,
}

impl Budget {
    fn new(reserve: u64, min_per_task: u64, headroom_now: Option<u64>) -> Self {
        Budget {
            reserve,
            min_per_task,
            next_check: 64,
            at_start: headroom_now,
        }
    }

    /// Err(headroom) when what is left fell below the reserve.
    fn check(
        &mut self,
        spawned: u64,
        read_headroom: impl FnOnce() -> Option<u64>,
    ) -> Result<(), u64> {
        if self.reserve == 0 || self.at_start.is_none() || spawned < self.next_check {
            return Ok(());
        }
        let Some(headroom) = read_headroom() else {
            self.reserve = 0; // no longer readable: this budget cannot be watched
            return Ok(());
        };
        if headroom < self.reserve {
            return Err(headroom);
        }
        let used = self.at_start.unwrap_or(headroom).saturating_sub(headroom);
        let per_task = (used / spawned.max(1)).max(self.min_per_task);
        self.next_check = spawned + ((headroom - self.reserve) / 2 / per_task).clamp(1, 65_536);
        Ok(())
    }
}

/// Stops spawning before a limit would turn into a crash rather than an error: memory (the OOM
/// killer, or a Go runtime abort) and vm.max_map_count (a thread that cannot map its signal stack
/// aborts). --reserve sets the memory kept free; 0 turns the guard off.
pub struct SpawnGuard {
    memory: Budget,
    maps: Budget,
}

impl SpawnGuard {
    pub fn new(reserve: u64, limits: &Limits) -> Self {
        let enabled = reserve > 0;
        let memory_now = if enabled {
            limits.read_headroom()
        } else {
            None
        };
        let maps_now = if enabled {
            Limits::map_headroom()
        } else {
            None
        };
        SpawnGuard {
            memory: Budget::new(reserve, 1024, memory_now),
            maps: Budget::new(MAPS_RESERVE, 4, maps_now),
        }
    }

    /// Called before spawning task number `spawned`; Err when spawning must stop.
    pub fn check(&mut self, spawned: u64, limits: &Limits) -> Result<(), Box<Failure>> {
        let (limit, message) = if let Err(left) =
            self.memory.check(spawned, || limits.read_headroom())
        {
            let message = format!(
                "memory headroom {} MiB fell below the reserve of {} MiB (--reserve); spawning stopped",
                left / MIB,
                self.memory.reserve / MIB
            );
            ("memory", message)
        } else if let Err(left) = self.maps.check(spawned, Limits::map_headroom) {
            let message = format!(
                "only {left} memory mappings left under vm.max_map_count (reserve {MAPS_RESERVE}); spawning stopped before mmap fails"
            );
            ("vm.max_map_count", message)
        } else {
            return Ok(());
        };
        Err(Box::new(Failure::guarded(limit, message, limits)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables;

    /// Readings from a table's `key=value` list (keys as in the schema's `readings` object).
    fn readings(text: &str) -> Readings {
        let mut r = Readings {
            threads_max: None,
            tasks_on_host: None,
            pid_max: None,
            max_map_count: None,
            maps: None,
            rlimit_nproc: None,
            euid: 0,
            threads: None,
            cgroup_pids_max: None,
            cgroup_pids_current: None,
            mem_available: None,
            cgroup_mem_limit: None,
            cgroup_mem_usage: None,
        };
        for pair in text.split_whitespace() {
            let (key, value) = pair.split_once('=').expect("readings are key=value");
            let value: u64 = value.parse().unwrap();
            let slot = match key {
                "euid" => {
                    r.euid = value as u32;
                    continue;
                }
                "threads_max" => &mut r.threads_max,
                "tasks_on_host" => &mut r.tasks_on_host,
                "pid_max" => &mut r.pid_max,
                "max_map_count" => &mut r.max_map_count,
                "maps" => &mut r.maps,
                "rlimit_nproc" => &mut r.rlimit_nproc,
                "threads" => &mut r.threads,
                "cgroup_pids_max" => &mut r.cgroup_pids_max,
                "cgroup_pids_current" => &mut r.cgroup_pids_current,
                "mem_available_bytes" => &mut r.mem_available,
                "cgroup_mem_limit_bytes" => &mut r.cgroup_mem_limit,
                "cgroup_mem_usage_bytes" => &mut r.cgroup_mem_usage,
                other => panic!("limit-diagnosis.tsv: unknown reading {other:?}"),
            };
            *slot = Some(value);
        }
        r
    }

    /// Every row of schema/limit-diagnosis.tsv, which goroutines-go/limits_test.go checks too.
    #[test]
    fn diagnosis_table() {
        let mut failures = Vec::new();
        for row in tables::rows("limit-diagnosis.tsv", 6, 30) {
            let [errno, reserve, text, limit, headroom, detail] = &row[..] else {
                unreachable!()
            };
            let r = readings(text);
            let got = r.diagnose(errno.parse().unwrap(), reserve.parse().unwrap());
            if got != limit {
                failures.push(format!(
                    "errno {errno}, {text}: diagnosed {got:?}, want {limit:?}"
                ));
            }
            if r.headroom() != tables::optional(headroom) {
                failures.push(format!(
                    "{text}: headroom {:?}, want {headroom}",
                    r.headroom()
                ));
            }
            if r.detail(limit) != *detail {
                failures.push(format!(
                    "{text}: detail {:?}, want {detail:?}",
                    r.detail(limit)
                ));
            }
        }
        tables::assert_all("limit-diagnosis.tsv", &failures);
    }

    /// Every row of schema/auto-reserve.tsv, which goroutines-go/limits_test.go checks too.
    #[test]
    fn auto_reserve_table() {
        let mut failures = Vec::new();
        for row in tables::rows("auto-reserve.tsv", 3, 8) {
            let [total, limit, want] = &row[..] else {
                unreachable!()
            };
            let got = auto_reserve(tables::optional(total), tables::optional(limit));
            if got.to_string() != *want {
                failures.push(format!("{total} {limit}: {got}, want {want}"));
            }
        }
        tables::assert_all("auto-reserve.tsv", &failures);
    }

    /// Every row of schema/spawn-budget.tsv, which goroutines-go/limits_test.go checks too.
    #[test]
    fn spawn_budget_table() {
        let mut failures = Vec::new();
        for row in tables::rows("spawn-budget.tsv", 4, 8) {
            let [reserve, min_per_task, at_start, checks] = &row[..] else {
                unreachable!()
            };
            let mut budget = Budget::new(
                reserve.parse().unwrap(),
                min_per_task.parse().unwrap(),
                tables::optional(at_start),
            );
            for check in checks.split_whitespace() {
                let mut parts = check.split('/');
                let (spawned, reading, want) = (
                    parts.next().unwrap().parse::<u64>().unwrap(),
                    parts.next().expect("SPAWNED/READING/OUTCOME"),
                    parts.next().expect("SPAWNED/READING/OUTCOME"),
                );
                let mut read = false;
                let result = budget.check(spawned, || {
                    read = true;
                    assert_ne!(reading, ".", "{check}: read when it must not be");
                    tables::optional(reading)
                });
                let got = match result {
                    _ if !read => "skip".to_string(),
                    Err(left) => format!("stop={left}"),
                    Ok(()) if budget.reserve == 0 => "off".to_string(),
                    Ok(()) => format!("next={}", budget.next_check),
                };
                if got != want {
                    failures.push(format!(
                        "{reserve} {min_per_task} {at_start}: {check} gave {got}"
                    ));
                }
            }
        }
        tables::assert_all("spawn-budget.tsv", &failures);
    }
}
