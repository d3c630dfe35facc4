//! The kernel limits a run of many OS threads needs raised, and the state machine that raises only
//! what is too low and puts every value back: on a normal end, an error, a signal, a panic — and,
//! when the conductor itself was SIGKILLed, on the next invocation (the state file survives it).
//!
//! Layering: each raised key is one entry in the state file, tagged with who raised it (a run,
//! or `spawnscope sysctl apply` by hand). A run restores only its own entries; entries of a run
//! that is no longer alive are restored by whoever comes next; manual entries stay until
//! `spawnscope sysctl restore`.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::procfs;
pub use record::{Change, Entry, Owner};

pub const MAX_MAP_COUNT: &str = "vm.max_map_count";
pub const PID_MAX: &str = "kernel.pid_max";
pub const THREADS_MAX: &str = "kernel.threads-max";

/// What a server of many connections needs (a `serve` run): open files and the accept queue for
/// the server, ephemeral ports for the load generator's connections.
pub const NR_OPEN: &str = "fs.nr_open";
pub const FILE_MAX: &str = "fs.file-max";
pub const SOMAXCONN: &str = "net.core.somaxconn";
pub const SYN_BACKLOG: &str = "net.ipv4.tcp_max_syn_backlog";
/// Two numbers in the kernel ("32768 60999"), managed as one: the count of ephemeral ports it
/// leaves, raised by lowering its low end only (so the original pair is what a restore writes
/// back).
pub const PORT_RANGE: &str = "net.ipv4.ip_local_port_range";

/// The keys spawnscope manages, in the order it shows them.
pub const MANAGED: [&str; 8] = [
    MAX_MAP_COUNT,
    PID_MAX,
    THREADS_MAX,
    NR_OPEN,
    FILE_MAX,
    SOMAXCONN,
    SYN_BACKLOG,
    PORT_RANGE,
];

/// Connections one loopback address takes at most: each needs an ephemeral port of the load
/// generator's, connect(2) wants twice as many in the range (`needs_for_connections`), and the
/// range cannot start below 1024, the privileged ports: 2 × 30,000 + 1024 fits in 1024..65535.
pub const CONNECTIONS_PER_ADDRESS: u64 = 30_000;

/// The loopback addresses a server of `connections` listens on, unless told (--addrs).
pub fn addresses_for(connections: u64) -> u64 {
    connections.div_ceil(CONNECTIONS_PER_ADDRESS).max(1)
}
/// The lowest start of the ephemeral range spawnscope sets, and the highest port there is.
const FIRST_EPHEMERAL_PORT: u64 = 1024;
const LAST_PORT: u64 = 65535;
/// listen(2) backlogs are capped at 65535 by somaxconn's type in older kernels.
pub const BACKLOG_LIMIT: u64 = 65535;
/// Files kept open besides the connections: the processes' own, the rest of the host's.
const FILES_HEADROOM: u64 = 65_536;

/// PID_MAX_LIMIT on 64-bit kernels (4 Mi): kernel.pid_max cannot go higher, so neither can the
/// number of threads alive at once.
pub const PID_MAX_LIMIT: u64 = 4 * 1024 * 1024;
/// kernel.threads-max ceiling: thread IDs must fit FUTEX_TID_MASK (2^30 - 1). The 2023 article's
/// 2000000000 is refused by current kernels with EINVAL.
pub const THREADS_MAX_LIMIT: u64 = (1 << 30) - 1;
/// vm.max_map_count is an int.
pub const MAP_COUNT_LIMIT: u64 = i32::MAX as u64;

/// Mappings one thread adds: its stack and guard page (glibc), its signal stack and guard page
/// (Rust std installs one per thread).
pub const MAPS_PER_THREAD: u64 = 4;
/// Room kept above N for everything else: the process's own mappings, other tasks on the host.
const MAPS_HEADROOM: u64 = 65_536;
const TASKS_HEADROOM: u64 = 4_096;

/// A lower bound a run needs on one key, and why.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Need {
    pub key: String,
    pub min: u64,
    pub why: String,
}

/// What `threads` OS threads alive at once need, on a host already running `tasks_on_host` tasks.
/// Err when even the kernel's ceiling is too low (more threads than PIDs can exist).
pub fn needs_for_threads(threads: u64, tasks_on_host: u64) -> Result<Vec<Need>> {
    let tasks = threads + tasks_on_host + TASKS_HEADROOM;
    if tasks > PID_MAX_LIMIT {
        bail!(
            "{threads} threads cannot coexist: every thread takes a PID and kernel.pid_max cannot exceed {PID_MAX_LIMIT} \
             ({tasks_on_host} tasks already run here); the most is about {}",
            PID_MAX_LIMIT.saturating_sub(tasks_on_host + TASKS_HEADROOM)
        );
    }
    Ok(vec![
        Need {
            key: MAX_MAP_COUNT.into(),
            min: (threads * MAPS_PER_THREAD + MAPS_HEADROOM).min(MAP_COUNT_LIMIT),
            why: format!("{MAPS_PER_THREAD} mappings per thread (stack, guard, signal stack, guard) + {MAPS_HEADROOM}"),
        },
        Need {
            key: PID_MAX.into(),
            min: tasks,
            why: format!("one PID per thread + {tasks_on_host} tasks on the host + {TASKS_HEADROOM}"),
        },
        Need {
            key: THREADS_MAX.into(),
            min: tasks.min(THREADS_MAX_LIMIT),
            why: "threads on the whole host".into(),
        },
    ])
}

/// What a server holding `connections` at once over `addresses` loopback addresses needs, with
/// `files_open` files open on the host now (fs.file-nr). Each connection is two descriptors (the
/// server's socket and the load generator's), each process needs its share within its
/// RLIMIT_NOFILE (which fs.nr_open caps), wrk opens all of them at once (the accept queue), and
/// each of the generator's connections to one address takes an ephemeral port.
pub fn needs_for_connections(
    connections: u64,
    addresses: u64,
    backlog: u64,
    files_open: u64,
) -> Vec<Need> {
    let per_address = connections.div_ceil(addresses.max(1));
    // The queue the server asks for (--backlog), as far as the connections can fill it.
    let backlog = connections.min(backlog).min(BACKLOG_LIMIT);
    vec![
        Need {
            key: NR_OPEN.into(),
            min: crate::limits::nofile_for(connections),
            why: "RLIMIT_NOFILE of the server and of wrk: a descriptor per connection, as many \
                  again for wrk's threads (an epoll each), + 1024"
                .into(),
        },
        Need {
            key: FILE_MAX.into(),
            min: 3 * connections + files_open + FILES_HEADROOM,
            why: format!(
                "open files on the host: three per connection (server, wrk, wrk's thread at most) + {files_open} open now + {FILES_HEADROOM}"
            ),
        },
        Need {
            key: SOMAXCONN.into(),
            min: backlog,
            why: "the accept queue caps listen(2)'s backlog: wrk connects all at once".into(),
        },
        Need {
            key: SYN_BACKLOG.into(),
            min: backlog,
            why: "half-open connections queued while the server accepts".into(),
        },
        // connect(2) takes ports of one parity first (Linux 4.6+, leaving the others to
        // bind(2)); once that half is used up, every connect scans all of it before trying the
        // other: 19,000 connections took 2.5–5.5 s to open in the default 28,232 ports, 0.7 s
        // in twice as many.
        Need {
            key: PORT_RANGE.into(),
            min: (2 * per_address + 1024).min(LAST_PORT - FIRST_EPHEMERAL_PORT + 1),
            why: format!(
                "ephemeral ports (count): twice wrk's {per_address} connections to one address (connect takes one parity first) + 1024"
            ),
        },
    ]
}

/// Whether an entry's owner is a run still alive (its PID with the same start time).
pub fn is_live_run(owner: &Owner) -> bool {
    match owner {
        Owner::Run { pid, start_time } => procfs::is_alive(*pid, *start_time),
        Owner::Manual => false,
    }
}

/// This process, as the owner of what a run raises.
pub fn this_run() -> Owner {
    let pid = std::process::id();
    Owner::Run {
        pid,
        start_time: procfs::start_time(pid).unwrap_or(0),
    }
}

#[derive(schemars::JsonSchema, Debug, Default, Serialize, Deserialize)]
struct State {
    entries: Vec<Entry>,
}

/// The sysctls under a /proc/sys root and the state file recording what was raised. Tests point
/// both at a temporary directory.
pub struct SysctlStore {
    root: PathBuf,
    state_path: PathBuf,
}

impl SysctlStore {
    /// The real /proc/sys; the state file in $SPAWNSCOPE_STATE_DIR (tests) or /run/spawnscope,
    /// which is cleared at boot, when sysctls are back to their defaults anyway.
    pub fn system() -> Self {
        let dir = std::env::var_os("SPAWNSCOPE_STATE_DIR")
            .map_or_else(|| PathBuf::from("/run/spawnscope"), PathBuf::from);
        SysctlStore::at("/proc/sys", dir.join("sysctl-state.json"))
    }

    pub fn at(root: impl Into<PathBuf>, state_path: impl Into<PathBuf>) -> Self {
        SysctlStore {
            root: root.into(),
            state_path: state_path.into(),
        }
    }

    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key.replace('.', "/"))
    }

    pub fn read(&self, key: &str) -> Result<u64> {
        let path = self.path(key);
        let text = fs::read_to_string(&path)
            .with_context(|| format!("reading {key} ({})", path.display()))?;
        if key == PORT_RANGE {
            let (low, high) =
                port_range(&text).with_context(|| format!("{key} is not two ports: {text:?}"))?;
            return Ok(high + 1 - low);
        }
        text.trim()
            .parse()
            .with_context(|| format!("{key} is not a number: {text:?}"))
    }

    fn write(&self, key: &str, value: u64) -> Result<()> {
        let text = if key == PORT_RANGE {
            // The count of ports, from the range's end down: only the low end moves.
            let path = self.path(key);
            let now = fs::read_to_string(&path)
                .with_context(|| format!("reading {key} ({})", path.display()))?;
            let (_, high) =
                port_range(&now).with_context(|| format!("{key} is not two ports: {now:?}"))?;
            let low = (high + 1).saturating_sub(value).max(FIRST_EPHEMERAL_PORT);
            format!("{low} {high}\n")
        } else {
            format!("{value}\n")
        };
        fs::write(self.path(key), text).map_err(|err| {
            let hint = match err.raw_os_error() {
                Some(libc::EINVAL) => " (EINVAL: the kernel refuses this value; see its maximum)",
                Some(libc::EACCES) | Some(libc::EPERM) => " (permission denied: run as root)",
                _ => "",
            };
            anyhow::anyhow!("writing {key}={value}{hint}: {err}")
        })
    }

    fn load(&self) -> Result<State> {
        match fs::read_to_string(&self.state_path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| {
                format!(
                    "the sysctl state file {} is damaged",
                    self.state_path.display()
                )
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(err) => Err(err).with_context(|| format!("reading {}", self.state_path.display())),
        }
    }

    /// Serialises every read-change-write of the state file: two conductors started together (or a
    /// run and `sysctl restore`) would otherwise lose each other's entries or race on the rename.
    /// The lock goes when the returned file is closed.
    fn lock(&self) -> Result<fs::File> {
        let path = self.state_path.with_extension("lock");
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking {}", path.display()));
        }
        Ok(file)
    }

    /// Writes the state atomically (temp file, fsync, rename); an empty state removes the file.
    fn save(&self, state: &State) -> Result<()> {
        if state.entries.is_empty() {
            return match fs::remove_file(&self.state_path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err.into()),
                _ => Ok(()),
            };
        }
        if let Some(dir) = self.state_path.parent() {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let tmp = self.state_path.with_extension("tmp");
        let mut file =
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(serde_json::to_string_pretty(state)?.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &self.state_path)
            .with_context(|| format!("renaming {} into place", tmp.display()))?;
        Ok(())
    }

    /// What is raised now, by whom.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        Ok(self.load()?.entries)
    }

    /// The raises `needs` call for: only keys whose current value is too low.
    pub fn plan(&self, needs: &[Need]) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        for need in needs {
            let current = self.read(&need.key)?;
            if current < need.min {
                changes.push(Change {
                    key: need.key.clone(),
                    from: current,
                    to: need.min,
                    why: need.why.clone(),
                });
            }
        }
        Ok(changes)
    }

    /// Applies `changes` for `owner`: every original is in the state file before any value is
    /// written. If a write fails, what was written is put back and the error returned.
    pub fn apply(&self, changes: &[Change], owner: &Owner) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let _locked = self.lock()?;
        let mut state = self.load()?;
        if let Some(other) = state
            .entries
            .iter()
            .find(|e| e.owner != *owner && is_live_run(&e.owner))
        {
            bail!(
                "another spawnscope run ({:?}) holds raised sysctls: big runs go one at a time",
                other.owner
            );
        }
        for change in changes {
            let original = self.read(&change.key)?;
            state.entries.push(Entry {
                key: change.key.clone(),
                original,
                applied: change.to,
                owner: owner.clone(),
            });
        }
        self.save(&state)?;
        for (i, change) in changes.iter().enumerate() {
            if let Err(err) = self.write(&change.key, change.to) {
                // The keys from this one on were never written: forget them, undo the rest.
                let mut state = self.load()?;
                let unwritten = &changes[i..];
                state.entries.retain(|e| {
                    !(e.owner == *owner
                        && unwritten
                            .iter()
                            .any(|c| c.key == e.key && c.to == e.applied))
                });
                self.save(&state)?;
                let undo = self.restore_locked(|e| e == owner);
                return Err(err.context(match undo {
                    Ok(_) => "the values already raised were restored".to_string(),
                    Err(undo_err) => format!("and restoring failed too: {undo_err:#}"),
                }));
            }
        }
        Ok(())
    }

    /// Restores the entries whose owner matches, newest first (so stacked raises unwind in
    /// order), and drops them from the state file. Entries that cannot be written back stay.
    fn restore_where(&self, matches: impl Fn(&Owner) -> bool) -> Result<Vec<Entry>> {
        if !self.state_path.exists() {
            return Ok(Vec::new()); // nothing raised (and no lock to take, as a non-root user)
        }
        let _locked = self.lock()?;
        self.restore_locked(matches)
    }

    /// `restore_where` with the lock already held.
    fn restore_locked(&self, matches: impl Fn(&Owner) -> bool) -> Result<Vec<Entry>> {
        let mut state = self.load()?;
        let mut restored = Vec::new();
        let mut errors = Vec::new();
        let mut kept = Vec::new();
        for entry in state.entries.drain(..).rev() {
            if !matches(&entry.owner) {
                kept.push(entry);
                continue;
            }
            match self.write(&entry.key, entry.original) {
                Ok(()) => restored.push(entry),
                Err(err) => {
                    errors.push(format!("{err:#}"));
                    kept.push(entry);
                }
            }
        }
        kept.reverse();
        state.entries = kept;
        if !restored.is_empty() {
            self.save(&state)?;
        }
        if !errors.is_empty() {
            bail!("could not restore: {}", errors.join("; "));
        }
        Ok(restored)
    }

    /// A run's own restore.
    pub fn restore_run(&self, owner: &Owner) -> Result<Vec<Entry>> {
        self.restore_where(|o| o == owner)
    }

    /// Restores what runs that are no longer alive left raised (a SIGKILLed conductor).
    pub fn recover_stale(&self) -> Result<Vec<Entry>> {
        self.restore_where(|o| matches!(o, Owner::Run { .. }) && !is_live_run(o))
    }

    /// `spawnscope sysctl restore`: everything but a live run's entries.
    pub fn restore_all(&self) -> Result<Vec<Entry>> {
        self.restore_where(|o| !is_live_run(o))
    }
}

/// net.ipv4.ip_local_port_range's two ports ("32768\t60999").
fn port_range(text: &str) -> Option<(u64, u64)> {
    let mut ports = text.split_whitespace().map(str::parse::<u64>);
    match (ports.next(), ports.next(), ports.next()) {
        (Some(Ok(low)), Some(Ok(high)), None) if low <= high => Some((low, high)),
        _ => None,
    }
}

/// Restores a run's raised sysctls when dropped: the path taken on errors and panics. The normal
/// path calls `restore` itself to report what it did.
pub struct RaisedGuard<'a> {
    store: &'a SysctlStore,
    owner: Owner,
    armed: bool,
}

impl<'a> RaisedGuard<'a> {
    pub fn new(store: &'a SysctlStore, owner: Owner) -> Self {
        RaisedGuard {
            store,
            owner,
            armed: true,
        }
    }

    pub fn restore(mut self) -> Result<Vec<Entry>> {
        self.armed = false;
        self.store.restore_run(&self.owner)
    }
}

impl Drop for RaisedGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(err) = self.store.restore_run(&self.owner) {
                eprintln!("spawnscope: restoring sysctls failed: {err:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc/sys with the three managed keys at this VM's defaults.
    fn fake() -> (tempfile::TempDir, SysctlStore) {
        let dir = tempfile::tempdir().unwrap();
        for (key, value) in [
            (MAX_MAP_COUNT, 65530),
            (PID_MAX, 32768),
            (THREADS_MAX, 192730),
        ] {
            let path = dir.path().join("sys").join(key.replace('.', "/"));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, format!("{value}\n")).unwrap();
        }
        let store = SysctlStore::at(dir.path().join("sys"), dir.path().join("run/state.json"));
        (dir, store)
    }

    fn dead_run() -> Owner {
        // PID 0 is never a process: this owner is not alive.
        Owner::Run {
            pid: 0,
            start_time: 1,
        }
    }

    #[test]
    fn needs_scale_with_threads_and_refuse_past_pid_max_limit() {
        let needs = needs_for_threads(100_000, 200).unwrap();
        let min = |key: &str| needs.iter().find(|n| n.key == key).unwrap().min;
        assert_eq!(min(MAX_MAP_COUNT), 465_536);
        assert_eq!(min(PID_MAX), 104_296);
        assert_eq!(min(THREADS_MAX), 104_296);
        assert!(needs_for_threads(4_190_000, 200).is_ok());
        assert!(needs_for_threads(4_191_000, 200).is_err());
        let err = needs_for_threads(5_000_000, 0).unwrap_err().to_string();
        assert!(
            err.contains("kernel.pid_max cannot exceed 4194304"),
            "{err}"
        );
    }

    #[test]
    fn connections_need_files_backlog_and_ports_per_address() {
        let needs = needs_for_connections(100_000, 4, 100_000, 3_000);
        let min = |key: &str| needs.iter().find(|n| n.key == key).unwrap().min;
        assert_eq!(min(NR_OPEN), 201_024);
        assert_eq!(min(FILE_MAX), 300_000 + 3_000 + 65_536);
        assert_eq!(min(SOMAXCONN), 65_535, "capped: a backlog is at most 65535");
        assert_eq!(min(SYN_BACKLOG), 65_535);
        assert_eq!(
            min(PORT_RANGE),
            51_024,
            "twice the 25,000 connections to each address"
        );
        let one = needs_for_connections(1_000, 1, 4_096, 0);
        assert_eq!(one.iter().find(|n| n.key == SOMAXCONN).unwrap().min, 1_000);
        let queue = needs_for_connections(10_000, 1, 4_096, 0);
        assert_eq!(
            queue.iter().find(|n| n.key == SOMAXCONN).unwrap().min,
            4_096,
            "no more than the server's backlog asks for"
        );
        let all = needs_for_connections(200_000, 1, 65_535, 0);
        assert_eq!(
            all.iter().find(|n| n.key == PORT_RANGE).unwrap().min,
            64_512,
            "no more ports than 1024..65535"
        );
    }

    /// The port range is one managed value (its count of ports): raised by moving its low end,
    /// restored to the original pair exactly.
    #[test]
    fn the_port_range_moves_its_low_end_and_comes_back_exactly() {
        let (dir, store) = fake();
        let path = dir.path().join("sys/net/ipv4/ip_local_port_range");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "32768\t60999\n").unwrap();
        assert_eq!(store.read(PORT_RANGE).unwrap(), 28_232);
        let need = Need {
            key: PORT_RANGE.into(),
            min: 51_024,
            why: "test".into(),
        };
        let owner = this_run();
        let changes = store.plan(std::slice::from_ref(&need)).unwrap();
        assert_eq!((changes[0].from, changes[0].to), (28_232, 51_024));
        store.apply(&changes, &owner).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "9976 60999\n");
        store.restore_run(&owner).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "32768 60999\n");
        assert!(store.read("net.ipv4.nope").is_err());
        fs::write(&path, "60999\n").unwrap();
        assert!(format!("{:#}", store.read(PORT_RANGE).unwrap_err()).contains("two ports"));
    }

    #[test]
    fn plans_only_what_is_too_low() {
        let (_dir, store) = fake();
        let changes = store
            .plan(&needs_for_threads(20_000, 200).unwrap())
            .unwrap();
        let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [MAX_MAP_COUNT],
            "pid_max 32768 and threads-max 192730 already fit 20000"
        );
        assert_eq!(changes[0].from, 65530);
    }

    #[test]
    fn apply_records_originals_first_and_restore_puts_them_back() {
        let (_dir, store) = fake();
        let owner = this_run();
        let changes = store
            .plan(&needs_for_threads(100_000, 200).unwrap())
            .unwrap();
        store.apply(&changes, &owner).unwrap();
        assert_eq!(store.read(PID_MAX).unwrap(), 104_296);
        let entries = store.entries().unwrap();
        assert_eq!(entries.len(), 2, "max_map_count and pid_max");
        assert!(entries.iter().all(|e| e.owner == owner));
        let restored = store.restore_run(&owner).unwrap();
        assert_eq!(restored.len(), 2);
        assert_eq!(store.read(PID_MAX).unwrap(), 32768);
        assert_eq!(store.read(MAX_MAP_COUNT).unwrap(), 65530);
        assert!(
            !store.state_path().exists(),
            "nothing left to restore: no state file"
        );
    }

    #[test]
    fn a_dead_run_is_restored_by_the_next_invocation() {
        let (_dir, store) = fake();
        let changes = store
            .plan(&needs_for_threads(100_000, 200).unwrap())
            .unwrap();
        store.apply(&changes, &dead_run()).unwrap();
        assert_eq!(store.read(MAX_MAP_COUNT).unwrap(), 465_536);
        let restored = store.recover_stale().unwrap();
        assert_eq!(restored.len(), 2);
        assert_eq!(store.read(MAX_MAP_COUNT).unwrap(), 65530);
        assert!(store.entries().unwrap().is_empty());
    }

    #[test]
    fn concurrent_invocations_keep_every_entry_and_never_fail() {
        // Each "conductor" raises its own key by hand while others recover stale runs: without
        // the lock, read-change-write loses entries and the shared temp file's rename fails.
        let (dir, store) = fake();
        let root = dir.path().join("sys");
        const ROUNDS: usize = 25;
        let keys: Vec<String> = (0..8).map(|i| format!("test.key{i}")).collect();
        for key in &keys {
            let path = root.join(key.replace('.', "/"));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "1\n").unwrap();
        }
        std::thread::scope(|scope| {
            for key in &keys {
                let store = SysctlStore::at(&root, store.state_path());
                scope.spawn(move || {
                    let change = Change {
                        key: key.clone(),
                        from: 1,
                        to: 2,
                        why: String::new(),
                    };
                    for _ in 0..ROUNDS {
                        store
                            .apply(std::slice::from_ref(&change), &Owner::Manual)
                            .unwrap();
                        store.recover_stale().unwrap();
                    }
                });
            }
        });
        // Stacked raises of one key are all kept, so every apply leaves one entry.
        assert_eq!(store.entries().unwrap().len(), keys.len() * ROUNDS);
        assert_eq!(store.restore_all().unwrap().len(), keys.len() * ROUNDS);
        assert!(keys.iter().all(|k| store.read(k).unwrap() == 1));
    }

    #[test]
    fn a_live_run_is_left_alone_and_blocks_a_second_run() {
        let (_dir, store) = fake();
        let me = this_run();
        store
            .apply(
                &store
                    .plan(&needs_for_threads(20_000, 200).unwrap())
                    .unwrap(),
                &me,
            )
            .unwrap();
        assert!(
            store.recover_stale().unwrap().is_empty(),
            "this process is alive"
        );
        assert!(
            store.restore_all().unwrap().is_empty(),
            "restore never pulls values from under a live run"
        );
        let other = Owner::Run {
            pid: 1,
            start_time: 0,
        };
        let more = store
            .plan(&needs_for_threads(100_000, 200).unwrap())
            .unwrap();
        let err = store.apply(&more, &other).unwrap_err().to_string();
        assert!(err.contains("one at a time"), "{err}");
        store.restore_run(&me).unwrap();
    }

    #[test]
    fn stacked_raises_unwind_to_the_true_original() {
        let (_dir, store) = fake();
        store
            .apply(
                &store
                    .plan(&needs_for_threads(20_000, 200).unwrap())
                    .unwrap(),
                &Owner::Manual,
            )
            .unwrap();
        let run = this_run();
        store
            .apply(
                &store
                    .plan(&needs_for_threads(100_000, 200).unwrap())
                    .unwrap(),
                &run,
            )
            .unwrap();
        assert_eq!(store.read(MAX_MAP_COUNT).unwrap(), 465_536);
        store.restore_run(&run).unwrap();
        assert_eq!(
            store.read(MAX_MAP_COUNT).unwrap(),
            145_536,
            "back to the manual raise"
        );
        assert_eq!(
            store.read(PID_MAX).unwrap(),
            32768,
            "raised only by the run"
        );
        store.restore_all().unwrap();
        assert_eq!(store.read(MAX_MAP_COUNT).unwrap(), 65530);
    }

    #[test]
    fn a_failed_write_undoes_the_ones_before_it() {
        let (dir, store) = fake();
        // threads-max becomes a read-only sysctl (mode 0444: not even root may write it), so
        // writing it fails after max_map_count and pid_max were raised.
        let threads_max = dir.path().join("sys/kernel/threads-max");
        let changes = store
            .plan(&needs_for_threads(500_000, 200).unwrap())
            .unwrap();
        assert_eq!(changes.len(), 3);
        fs::remove_file(&threads_max).unwrap();
        std::os::unix::fs::symlink("/proc/sys/kernel/ngroups_max", &threads_max).unwrap();
        let err = store.apply(&changes, &this_run()).unwrap_err();
        assert!(format!("{err:#}").contains("restored"), "{err:#}");
        assert_eq!(store.read(MAX_MAP_COUNT).unwrap(), 65530);
        assert_eq!(store.read(PID_MAX).unwrap(), 32768);
    }

    #[test]
    fn the_guard_restores_on_drop() {
        let (_dir, store) = fake();
        let owner = this_run();
        store
            .apply(
                &store
                    .plan(&needs_for_threads(100_000, 200).unwrap())
                    .unwrap(),
                &owner,
            )
            .unwrap();
        {
            let _guard = RaisedGuard::new(&store, owner);
            // an error or a panic unwinds through here
        }
        assert_eq!(store.read(PID_MAX).unwrap(), 32768);
    }

    /// The connections drop-in names every key a serve run manages, each enough for 100,000
    /// connections over the four addresses a run gives them.
    #[test]
    fn the_connections_drop_in_fits_100000_connections() {
        let text = include_str!("../../../sysctl/99-spawnscope-connections.conf");
        let values: Vec<(String, String)> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.trim().to_string(), v.trim().to_string())
            })
            .collect();
        let needs = needs_for_connections(
            100_000,
            100_000_u64.div_ceil(CONNECTIONS_PER_ADDRESS),
            65_535,
            10_000,
        );
        assert_eq!(values.len(), needs.len());
        for need in &needs {
            let value = &values.iter().find(|(k, _)| *k == need.key).unwrap().1;
            let value = if need.key == PORT_RANGE {
                let (low, high) = port_range(value).unwrap();
                high + 1 - low
            } else {
                value.parse().unwrap()
            };
            assert!(value >= need.min, "{} {value} < {}", need.key, need.min);
        }
    }

    #[test]
    fn the_drop_in_file_fits_a_million_threads_within_the_kernel_ceilings() {
        let text = include_str!("../../../sysctl/99-spawnscope.conf");
        let values: Vec<(String, u64)> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.trim().to_string(), v.trim().parse().unwrap())
            })
            .collect();
        let needs = needs_for_threads(1_000_000, 1_000).unwrap();
        for need in &needs {
            let value = values.iter().find(|(k, _)| *k == need.key).map(|(_, v)| *v);
            assert!(
                value.is_some_and(|v| v >= need.min),
                "{} must be at least {}",
                need.key,
                need.min
            );
        }
        for (key, value) in &values {
            let ceiling = match key.as_str() {
                PID_MAX => PID_MAX_LIMIT,
                THREADS_MAX => THREADS_MAX_LIMIT,
                MAX_MAP_COUNT => MAP_COUNT_LIMIT,
                other => panic!("{other} in the drop-in is not a key spawnscope knows"),
            };
            assert!(
                *value <= ceiling,
                "{key}={value} is above the kernel's ceiling {ceiling}"
            );
        }
    }
}
