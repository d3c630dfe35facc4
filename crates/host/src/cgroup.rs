//! A cgroup per run: the workload's memory and PIDs are accounted there (RSS *and* the kernel
//! memory — stacks, page tables, slab — that RSS leaves out), and a memory limit below what the
//! host can spare makes an over-large run die alone, OOM-killed in its own cgroup.
//!
//! Works on cgroup v2 (most hosts), v1 and hybrid hosts (this project's dev VM: v1 memory and
//! pids, an empty v2 hierarchy beside them). Run cgroups are named after the conductor's PID and
//! start time, so one left behind by a killed conductor can be recognised and cleaned up.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::procfs;
use crate::sentinels::RunCpuReader;
use record::{CgroupStats as Stats, CgroupVersion as Version};

const PARENT: &str = "spawnscope";

/// Where a controller lives on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    pub mount: PathBuf,
}

/// The mounts of the cgroup hierarchies: (fs type, mount point, super options).
fn cgroup_mounts() -> Vec<(String, PathBuf, String)> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let point = pre.split(' ').nth(4)?;
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let options = post.nth(1)?;
            fstype.starts_with("cgroup").then(|| {
                (
                    fstype.to_string(),
                    PathBuf::from(point),
                    options.to_string(),
                )
            })
        })
        .collect()
}

/// The hierarchy that has `controller` (memory, pids): a v1 mount naming it, else a v2 mount
/// whose root offers it.
pub fn find(controller: &str) -> Option<Hierarchy> {
    let mounts = cgroup_mounts();
    if let Some((_, mount, _)) = mounts
        .iter()
        .find(|(fs, _, opts)| fs == "cgroup" && opts.split(',').any(|o| o == controller))
    {
        return Some(Hierarchy {
            version: Version::V1,
            mount: mount.clone(),
        });
    }
    mounts.iter().find_map(|(fs, mount, _)| {
        let available = fs::read_to_string(mount.join("cgroup.controllers")).ok()?;
        (fs == "cgroup2" && available.split_whitespace().any(|c| c == controller)).then(|| {
            Hierarchy {
                version: Version::V2,
                mount: mount.clone(),
            }
        })
    })
}

/// Where perf's cgroup filter (`perf record -G`) looks: a v1 hierarchy mounted with perf_event,
/// else the v2 hierarchy, where perf_event is implicit (it is never listed in cgroup.controllers).
pub fn perf_event_hierarchy() -> Option<Hierarchy> {
    let mounts = cgroup_mounts();
    let v1 = mounts
        .iter()
        .find(|(fs, _, opts)| fs == "cgroup" && opts.split(',').any(|o| o == "perf_event"));
    let v2 = mounts.iter().find(|(fs, _, _)| fs == "cgroup2");
    match (v1, v2) {
        (Some((_, mount, _)), _) => Some(Hierarchy {
            version: Version::V1,
            mount: mount.clone(),
        }),
        (None, Some((_, mount, _))) => Some(Hierarchy {
            version: Version::V2,
            mount: mount.clone(),
        }),
        _ => None,
    }
}

/// The v2 (unified) hierarchy's mount, whatever its controllers: on a hybrid host it holds none,
/// yet a directory there gives the run a v2 cgroup id, which is how the probes select the run's
/// tasks (`bpf_get_current_cgroup_id` reads the v2 cgroup, whatever the v1 ones are).
fn unified_hierarchy() -> Option<Hierarchy> {
    cgroup_mounts()
        .into_iter()
        .find(|(fs, _, _)| fs == "cgroup2")
        .map(|(_, mount, _)| Hierarchy {
            version: Version::V2,
            mount,
        })
}

/// A short description for `check`: "v2", "v1", or "hybrid (memory: v1, pids: v1, unified mounted)".
pub fn describe_host() -> String {
    let mounts = cgroup_mounts();
    let has_v2 = mounts.iter().any(|(fs, _, _)| fs == "cgroup2");
    let has_v1 = mounts.iter().any(|(fs, _, _)| fs == "cgroup");
    let version = |c: &str| match find(c) {
        Some(Hierarchy {
            version: Version::V1,
            ..
        }) => "v1",
        Some(Hierarchy {
            version: Version::V2,
            ..
        }) => "v2",
        None => "missing",
    };
    match (has_v1, has_v2) {
        (true, true) => format!(
            "hybrid (memory: {}, pids: {})",
            version("memory"),
            version("pids")
        ),
        (true, false) => "v1".into(),
        (false, true) => "v2".into(),
        (false, false) => "none mounted".into(),
    }
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_kv(path: &Path) -> BTreeMap<String, u64> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Makes sure `dir` exists and, on v2, that it hands `controllers` down to its children.
fn prepare_parent(hierarchy: &Hierarchy, controllers: &[&str]) -> Result<PathBuf> {
    let dir = hierarchy.mount.join(PARENT);
    if hierarchy.version == Version::V2 {
        let enable: String = controllers.iter().map(|c| format!("+{c} ")).collect();
        write(
            &hierarchy.mount.join("cgroup.subtree_control"),
            enable.trim(),
        )?;
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        write(&dir.join("cgroup.subtree_control"), enable.trim())?;
    } else {
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(dir)
}

/// The run's cgroup (one directory per hierarchy on v1).
#[derive(Clone)]
pub struct RunCgroup {
    memory: Option<(Hierarchy, PathBuf)>,
    pids: Option<(Hierarchy, PathBuf)>,
    /// On v1 hosts with a cpuacct hierarchy: the run's CPU time, for the noise sentinels
    /// (accounting only, no limit). On v2 the memory directory's cpu.stat gives it.
    cpuacct: Option<(Hierarchy, PathBuf)>,
    /// Only for `run --perf`: the directory `perf record -G` filters on.
    perf_event: Option<(Hierarchy, PathBuf)>,
    /// On v1 hosts with a freezer hierarchy: lets [`RunCgroup::kill_all`] stop a forking command
    /// before killing it (v2 has cgroup.kill and cgroup.freeze in the memory directory).
    freezer: Option<(Hierarchy, PathBuf)>,
    /// On hybrid hosts (memory and pids on v1): the run's directory in the v2 hierarchy, no
    /// controller in it, so that the run has a v2 cgroup id (see [`RunCgroup::v2_id`]).
    unified: Option<(Hierarchy, PathBuf)>,
    /// Only for `run --cpu-count`: the v1 cpuset directory holding the run to its CPUs (on v2
    /// cpuset.cpus is written in the run's v2 directory, and this stays None).
    cpuset: Option<(Hierarchy, PathBuf)>,
    memory_limit: Option<u64>,
    /// Whether the kernel charges the run's socket buffers to it (v2 always; v1 once a TCP limit
    /// is written, see [`RunCgroup::count_sockets`]).
    sockets_counted: bool,
}

impl RunCgroup {
    /// Creates `spawnscope/run-<pid>-<start time>` with a memory limit (bytes) and no PID limit.
    pub fn create(memory_limit: Option<u64>) -> Result<Self> {
        let pid = std::process::id();
        let name = format!("run-{pid}-{}", procfs::start_time(pid).unwrap_or(0));
        let memory_h = find("memory");
        let pids_h = find("pids");
        if memory_h.is_none() && pids_h.is_none() {
            bail!("no memory or pids cgroup controller on this host");
        }
        let mut group = RunCgroup {
            memory: None,
            pids: None,
            cpuacct: None,
            perf_event: None,
            freezer: None,
            unified: None,
            cpuset: None,
            memory_limit,
            sockets_counted: memory_h.as_ref().is_some_and(|h| h.version == Version::V2),
        };
        // On v2 one directory carries both controllers.
        for (controller, h) in [("memory", memory_h), ("pids", pids_h)] {
            let Some(h) = h else { continue };
            let wanted: &[&str] = if h.version == Version::V2 {
                &["memory", "pids"]
            } else {
                &[controller]
            };
            let dir = prepare_parent(&h, wanted)?.join(&name);
            if !dir.exists() {
                fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            if controller == "memory" {
                group.memory = Some((h, dir));
            } else {
                group.pids = Some((h, dir));
            }
        }
        if let Some((h, dir)) = &group.memory {
            if let Some(limit) = memory_limit {
                match h.version {
                    Version::V2 => {
                        write(&dir.join("memory.max"), &limit.to_string())?;
                        // The whole workload dies together when one task is OOM-killed.
                        let _ = write(&dir.join("memory.oom.group"), "1");
                        let _ = write(&dir.join("memory.swap.max"), "0");
                    }
                    Version::V1 => {
                        write(&dir.join("memory.limit_in_bytes"), &limit.to_string())?;
                        let _ = write(&dir.join("memory.memsw.limit_in_bytes"), &limit.to_string());
                    }
                }
            }
        }
        if let Some((_, dir)) = &group.pids {
            write(&dir.join("pids.max"), "max")?;
        }
        // A separate v1 cpuacct hierarchy: one more directory, so the run's CPU time is counted
        // apart from everything else. Without it the sentinels fall back to the process's stat.
        for (controller, slot) in [
            ("cpuacct", &mut group.cpuacct),
            ("freezer", &mut group.freezer),
        ] {
            if let Some(h) = find(controller).filter(|h| h.version == Version::V1) {
                if let Ok(parent) = prepare_parent(&h, &[controller]) {
                    let dir = parent.join(&name);
                    if dir.exists() || fs::create_dir(&dir).is_ok() {
                        *slot = Some((h, dir));
                    }
                }
            }
        }
        // A hybrid host: a v2 directory of its own, for the v2 cgroup id alone.
        let has_v2 = [&group.memory, &group.pids]
            .into_iter()
            .flatten()
            .any(|(h, _)| h.version == Version::V2);
        if !has_v2 {
            if let Some(h) = unified_hierarchy() {
                let dir = h.mount.join(PARENT).join(&name);
                if fs::create_dir_all(&dir).is_ok() {
                    group.unified = Some((h, dir));
                }
            }
        }
        Ok(group)
    }

    /// The run's cgroup on the v2 hierarchy, by id (its directory's inode number: what the
    /// kernel's `cgroup_id` and `bpf_get_current_cgroup_id` give): the memory or pids directory on
    /// a v2 host, the controller-less one on a hybrid host. The probes count its tasks — every
    /// process the command starts. None on a host without a v2 hierarchy: the probes then follow
    /// the launched process's forks.
    pub fn v2_id(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        [&self.memory, &self.pids, &self.unified]
            .into_iter()
            .flatten()
            .find(|(h, _)| h.version == Version::V2)
            .and_then(|(_, dir)| fs::metadata(dir).ok())
            .map(|m| m.ino())
    }

    /// Holds the run to `cpus` through a cpuset: on v2, cpuset.cpus in the run's v2 directory
    /// (the controller enabled in the subtree_control of the hierarchy's root and of spawnscope/
    /// as needed); on v1, a directory of its own in the cpuset hierarchy (cpuset.mems copied from
    /// its parent: a v1 cpuset takes no task before both are set). Returns which one; an error
    /// where the host has neither (the caller pins the workload's affinity instead). The tasks
    /// join it with the others, through [`RunCgroup::procs_files`].
    pub fn confine_cpus(&mut self, cpus: &[usize]) -> Result<Version> {
        let list = crate::limits::cpu_list(cpus);
        let h = find("cpuset").context("no cpuset cgroup controller on this host")?;
        match h.version {
            Version::V2 => {
                let dir = [&self.memory, &self.pids, &self.unified]
                    .into_iter()
                    .flatten()
                    .find(|(h, _)| h.version == Version::V2)
                    .map(|(_, d)| d.clone())
                    .context("the run has no v2 cgroup to hold a cpuset")?;
                for parent in [h.mount.clone(), h.mount.join(PARENT)] {
                    write(&parent.join("cgroup.subtree_control"), "+cpuset")?;
                }
                write(&dir.join("cpuset.cpus"), &list)?;
            }
            Version::V1 => {
                let parent = prepare_parent(&h, &["cpuset"])?;
                // A fresh v1 cpuset is empty: spawnscope/ takes the root's CPUs and memory nodes.
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let here = fs::read_to_string(parent.join(file)).unwrap_or_default();
                    if here.trim().is_empty() {
                        let root = fs::read_to_string(h.mount.join(file))
                            .with_context(|| format!("reading {}", h.mount.join(file).display()))?;
                        write(&parent.join(file), root.trim())?;
                    }
                }
                let name = self
                    .dirs()
                    .first()
                    .and_then(|d| d.file_name().map(|n| n.to_owned()))
                    .context("the run has no cgroup")?;
                let dir = parent.join(name);
                if !dir.exists() {
                    fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
                }
                // The run's from now on, so that remove() takes it away even if a write fails.
                self.cpuset = Some((h.clone(), dir.clone()));
                let mems = fs::read_to_string(parent.join("cpuset.mems"))
                    .with_context(|| format!("reading {}/cpuset.mems", parent.display()))?;
                write(&dir.join("cpuset.cpus"), &list)?;
                write(&dir.join("cpuset.mems"), mems.trim())?;
            }
        }
        Ok(h.version)
    }

    /// Has the kernel count the run's TCP socket buffers. v2 counts them always (memory.stat
    /// `sock`, inside memory.current and memory.max). v1 keeps them apart, in
    /// memory.kmem.tcp.usage_in_bytes, and only for a cgroup whose kmem.tcp limit was ever
    /// written: "-1" (no limit) turns the counting on. The kernel logs that this v1 file is
    /// deprecated. Sockets created before stay uncounted. Returns whether they are counted.
    pub fn count_sockets(&mut self) -> Result<bool> {
        if let Some((h, dir)) = &self.memory {
            if h.version == Version::V1 && !self.sockets_counted {
                write(&dir.join("memory.kmem.tcp.limit_in_bytes"), "-1")?;
                self.sockets_counted = true;
            }
        }
        Ok(self.sockets_counted)
    }

    /// Sets pids.max: forks and clones in the run fail with EAGAIN beyond `limit` tasks (threads
    /// count), so a runaway command stops at its own limit while the host can still start
    /// processes. Returns false when the host has no pids controller.
    pub fn set_pids_max(&self, limit: u64) -> Result<bool> {
        let Some((_, dir)) = &self.pids else {
            return Ok(false);
        };
        write(&dir.join("pids.max"), &limit.to_string())?;
        Ok(true)
    }

    /// How many forks or clones pids.max has refused so far (pids.events `max`, v1 and v2).
    pub fn pids_max_refusals(&self) -> u64 {
        self.pids.as_ref().map_or(0, |(_, dir)| {
            read_kv(&dir.join("pids.events"))
                .get("max")
                .copied()
                .unwrap_or(0)
        })
    }

    /// The directory whose cgroup.procs lists the run's processes (v1: memory's, else pids').
    fn procs_dir(&self) -> Option<&(Hierarchy, PathBuf)> {
        self.memory.as_ref().or(self.pids.as_ref())
    }

    /// The processes in the run's cgroup now (a command's children and their children too).
    pub fn processes(&self) -> Vec<i32> {
        self.procs_dir()
            .map_or_else(Vec::new, |(_, dir)| pids_in(dir))
    }

    /// The tasks (threads) in the run's cgroup now: pids.current, one small counter. None
    /// without the pids controller.
    pub fn tasks(&self) -> Option<u64> {
        let (_, dir) = self.pids.as_ref()?;
        fs::read_to_string(dir.join("pids.current"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The processes in the run's cgroup, cheaply where `pid` is the only one: when the cgroup
    /// holds as many tasks as `pid` has threads (`threads`, its status read just before), its
    /// processes are `pid` alone. Listing cgroup.procs walks every task of the cgroup and sorts
    /// them (a 100,000-thread workload: milliseconds of the conductor's CPU at each reading);
    /// the counter is one read. Where they differ (a child, or threads starting between the
    /// two reads), the list.
    pub fn processes_of(&self, pid: u32, threads: Option<u64>) -> Vec<i32> {
        let alone = threads.is_some_and(|t| t > 0 && self.tasks() == Some(t));
        match i32::try_from(pid) {
            Ok(pid) if alone => vec![pid],
            _ => self.processes(),
        }
    }

    /// Kills every task in the run's cgroup, including those a fork bomb is starting right now:
    /// v2 cgroup.kill (one atomic write, kernel 5.14+); else the cgroup is frozen (v2
    /// cgroup.freeze or the v1 freezer) so nothing forks while it is SIGKILLed, then thawed so
    /// the kills land; else SIGKILL until it is empty. Waits up to 10 s for it to empty.
    pub fn kill_all(&self) -> Result<()> {
        let Some((h, dir)) = self.procs_dir() else {
            return Ok(());
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let kill_file = dir.join("cgroup.kill");
        if h.version == Version::V2 && kill_file.exists() && write(&kill_file, "1").is_ok() {
            return wait_empty(dir, deadline);
        }
        let freeze = match (h.version, &self.freezer) {
            (Version::V2, _) => Some((dir.join("cgroup.freeze"), "1", "0")),
            (Version::V1, Some((_, freezer))) => {
                Some((freezer.join("freezer.state"), "FROZEN", "THAWED"))
            }
            (Version::V1, None) => None,
        };
        let frozen = freeze
            .as_ref()
            .is_some_and(|(file, on, _)| write(file, on).is_ok());
        while sigkill_listed(dir) && Instant::now() < deadline {
            if let (true, Some((file, _, off))) = (frozen, &freeze) {
                // Frozen tasks die only once thawed; nothing unkilled is left to fork by now.
                let _ = write(file, off);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_empty(dir, deadline)
    }

    /// Puts the run in the perf_event hierarchy too (the same directory on a v2 host), so that
    /// `perf record -a -G` samples exactly the run's tasks. Returns the name perf wants: the
    /// path below the hierarchy's mount.
    pub fn add_perf_event(&mut self) -> Result<String> {
        let h = perf_event_hierarchy().context("no cgroup hierarchy offers perf_event")?;
        let name = self
            .dirs()
            .first()
            .and_then(|d| d.file_name().map(|n| n.to_owned()))
            .context("the run has no cgroup")?;
        let dir = h.mount.join(PARENT).join(name);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let relative = dir
            .strip_prefix(&h.mount)
            .unwrap_or(&dir)
            .to_string_lossy()
            .into_owned();
        self.perf_event = Some((h, dir));
        Ok(relative)
    }

    /// The cgroup.procs files a child writes "0" to, joining the cgroup before it execs. As
    /// C strings made before fork: the child may not allocate.
    pub fn procs_files(&self) -> Vec<CString> {
        let mut dirs: Vec<&PathBuf> = self
            .memory
            .iter()
            .chain(self.pids.iter())
            .chain(self.cpuacct.iter())
            .chain(self.freezer.iter())
            .chain(self.perf_event.iter())
            .chain(self.unified.iter())
            .chain(self.cpuset.iter())
            .map(|(_, d)| d)
            .collect();
        dirs.dedup();
        dirs.iter()
            .filter_map(|d| CString::new(d.join("cgroup.procs").to_string_lossy().as_bytes()).ok())
            .collect()
    }

    /// Memory in use now (cheap: one file), for the sampler.
    pub fn memory_current(&self) -> Option<u64> {
        let (h, dir) = self.memory.as_ref()?;
        match h.version {
            Version::V2 => read_u64(&dir.join("memory.current")),
            Version::V1 => read_u64(&dir.join("memory.usage_in_bytes")),
        }
    }

    /// Where the run's CPU time is counted: its v2 directory's cpu.stat, else its v1 cpuacct
    /// directory. None when the run has neither.
    pub fn cpu_reader(&self) -> Option<RunCpuReader> {
        if let Some((_, dir)) = [&self.memory, &self.pids]
            .into_iter()
            .flatten()
            .find(|(h, _)| h.version == Version::V2)
        {
            return Some(RunCpuReader::CgroupV2(dir.clone()));
        }
        self.cpuacct
            .as_ref()
            .map(|(_, dir)| RunCpuReader::CpuacctV1(dir.clone()))
    }

    pub fn stats(&self) -> Stats {
        let mut stats = Stats {
            memory_limit_bytes: self.memory_limit,
            ..Stats::default()
        };
        if let Some((h, dir)) = &self.memory {
            stats.version = Some(h.version);
            match h.version {
                Version::V2 => {
                    stats.memory_stat = read_kv(&dir.join("memory.stat"));
                    stats.memory_current_bytes = read_u64(&dir.join("memory.current"));
                    stats.memory_peak_bytes = read_u64(&dir.join("memory.peak"));
                    let kernel: u64 = ["kernel_stack", "pagetables", "slab", "percpu", "sock"]
                        .iter()
                        .filter_map(|k| stats.memory_stat.get(*k))
                        .sum();
                    stats.kernel_bytes = Some(kernel);
                    stats.socket_bytes = stats.memory_stat.get("sock").copied();
                    stats.oom_kills = read_kv(&dir.join("memory.events"))
                        .get("oom_kill")
                        .copied()
                        .unwrap_or(0);
                }
                Version::V1 => {
                    // The charge and kmem first: a snapshot reads the process's status just
                    // before, and memory.stat is long to read.
                    stats.memory_current_bytes = read_u64(&dir.join("memory.usage_in_bytes"));
                    stats.kernel_bytes = read_u64(&dir.join("memory.kmem.usage_in_bytes"));
                    stats.memory_peak_bytes = read_u64(&dir.join("memory.max_usage_in_bytes"));
                    stats.memory_stat = read_kv(&dir.join("memory.stat"));
                    if self.sockets_counted {
                        stats.socket_bytes = read_u64(&dir.join("memory.kmem.tcp.usage_in_bytes"));
                    }
                    stats.oom_kills = read_kv(&dir.join("memory.oom_control"))
                        .get("oom_kill")
                        .copied()
                        .unwrap_or(0);
                }
            }
        }
        if let Some((_, dir)) = &self.pids {
            stats.pids_current = read_u64(&dir.join("pids.current"));
            stats.pids_peak = read_u64(&dir.join("pids.peak"));
        }
        stats
    }

    fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .memory
            .iter()
            .chain(self.pids.iter())
            .chain(self.cpuacct.iter())
            .chain(self.freezer.iter())
            .chain(self.perf_event.iter())
            .chain(self.unified.iter())
            .chain(self.cpuset.iter())
            .map(|(_, d)| d.clone())
            .collect();
        dirs.dedup();
        dirs
    }

    /// Kills what is still in the cgroup (only the run's own workload can be there) and removes
    /// it. Waits a little for the kernel to let go of the dying tasks.
    pub fn remove(self) -> Result<()> {
        remove_dirs(&self.dirs())
    }
}

/// The PIDs in one cgroup directory (cgroup.procs: processes, not their threads).
fn pids_in(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// SIGKILLs every process `dir` lists (only the run's own workload can be there); false when it
/// lists none.
fn sigkill_listed(dir: &Path) -> bool {
    let pids = pids_in(dir);
    for &pid in &pids {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    !pids.is_empty()
}

/// Waits until `dir` holds no process (killed tasks take a moment to be reaped).
fn wait_empty(dir: &Path, deadline: Instant) -> Result<()> {
    loop {
        let left = pids_in(dir).len();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{left} processes still in {} after SIGKILL", dir.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn remove_dirs(dirs: &[PathBuf]) -> Result<()> {
    for dir in dirs {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            sigkill_listed(dir);
            match fs::remove_dir(dir) {
                Ok(()) => break,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => break,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(err) => {
                    return Err(err).with_context(|| format!("removing cgroup {}", dir.display()))
                }
            }
        }
    }
    Ok(())
}

/// Removes run cgroups whose conductor is gone (SIGKILLed), killing what they still hold: those
/// processes are workloads a spawnscope run started. Returns the cgroups removed.
pub fn remove_stale() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let hierarchies = ["memory", "pids", "cpuacct", "freezer", "cpuset"]
        .iter()
        .map(|c| find(c))
        .chain([perf_event_hierarchy(), unified_hierarchy()]);
    for h in hierarchies {
        let Some(h) = h else { continue };
        let Ok(entries) = fs::read_dir(h.mount.join(PARENT)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let owner = name.strip_prefix("run-").and_then(|rest| {
                let (pid, start) = rest.split_once('-')?;
                Some((pid.parse::<u32>().ok()?, start.parse::<u64>().ok()?))
            });
            if let Some((pid, start)) = owner {
                if !procfs::is_alive(pid, start) && remove_dirs(&[entry.path()]).is_ok() {
                    removed.push(entry.path());
                }
            }
        }
    }
    removed
}
