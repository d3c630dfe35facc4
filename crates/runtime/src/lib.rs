//! The runtimes whose tasks spawnscope measures, and everything that differs between them, in one
//! table: adding a runtime is its workload binary plus one `Descriptor` here (and its build files).
//! Below it: the workloads every runtime runs, the contract their output follows, and any command
//! a sweep runs beside them.

pub mod command;
pub mod contract;
pub mod workload;

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

pub use contract::{result_event, Contract, Event, START_GATE_FLAG};
pub use workload::{Invocation, WorkloadKind};

#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Threads,
    Goroutines,
    Tokio,
    Processes,
}

/// What a command's `--tasks` counts: OS threads (each one a task the kernel schedules), or the
/// tasks of a user-space runtime (tokio, Node, asyncio, goroutines), which run on a few threads.
/// It decides what the run's tasks alive are counted from and whether the probes' "threads
/// created" check applies.
#[derive(
    schemars::JsonSchema,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    /// One OS thread per task: counted in the kernel, checked against the probes.
    #[default]
    Thread,
    /// Tasks of a user-space runtime: the kernel cannot count them; `--tasks` is the command's
    /// own word.
    Task,
}

/// How the kernel threads a workload creates relate to its tasks: what the probes' "threads
/// created" cross-check compares with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsThreads {
    /// One OS thread per task: the `result` event's `spawned`.
    OnePerTask,
    /// The runtime's own threads: `result.runtime_stats.os_threads_created`, less the main thread
    /// (exec made that one).
    FromRuntimeStats,
    /// None: each task is a process forked without CLONE_THREAD, one thread each, and the
    /// workload makes no thread of its own besides main (serve's stdin watcher has no check).
    /// Its new processes are the probes' `new_processes`, a row of the probe table.
    NoneBesidesMain,
}

/// OS threads a runtime whose tasks are not threads runs them on, at most (Go: GOMAXPROCS plus
/// the threads blocked in syscalls); what the collector sizes its per-thread tables for.
pub const RUNTIME_THREADS: u64 = 1024;

/// All that differs between runtimes.
pub struct Descriptor {
    pub runtime: Runtime,
    /// The name on the command line, in directory names and in reports.
    pub name: &'static str,
    /// One of its tasks, in words ("a thread costs 13.5× a goroutine", "a tokio task").
    pub one_task: &'static str,
    /// The workload binary's file name as cargo or go builds it, looked for beside spawnscope
    /// (target/release/).
    pub binary: &'static str,
    /// Its name where it is installed (Nix's bin/, a PATH directory): one no other program has,
    /// as `threads` is a common word. Looked for beside spawnscope first, and alone on PATH.
    pub installed_binary: &'static str,
    /// The environment variable that names the binary explicitly.
    pub binary_env: &'static str,
    /// The command that builds the binary, for the error that says it is missing.
    pub build_hint: &'static str,
    /// The two `hold` sizes the preflight calibrates with: big enough that one task's cost stands
    /// out of the noise of MemAvailable, small enough to take a second.
    pub calibration_sizes: [u64; 2],
    /// The workload flag of this runtime only that changes what one task costs (carried into the
    /// calibration; given to this runtime's runs only in a sweep). None: fork has no such knob.
    pub cost_flag: Option<&'static str>,
    /// Each task is an OS thread of the workload's process: the kernel's thread and map limits
    /// must fit N, and the process's thread count is its tasks alive.
    pub tasks_are_threads: bool,
    /// Each task is a process of its own (a forked child, one thread): a kernel task as a thread
    /// is (threads-max, pid_max, RLIMIT_NPROC and the probes' per-task tables must fit N), but
    /// not a thread of the workload's process, whose own count says nothing of them.
    pub tasks_are_processes: bool,
    pub os_threads: OsThreads,
    /// OS threads its workload has at its start gate, all its processes together: before its
    /// first task, so more says tasks had started when the base was read (analyse/run/summary.rs).
    /// None where the runtime starts threads of its own in numbers that vary (Go's scheduler,
    /// tokio's workers by --workers or the CPUs): not checked.
    pub threads_at_gate: Option<u64>,
    /// Memory per coexisting task measured on the project's development VM (`check`'s rough
    /// estimate before a run calibrates).
    pub rough_task_bytes: f64,
    /// perf's default call graph (`--perf-call-graph` syntax): Debian's glibc has no frame
    /// pointers and Rust's release builds omit them, so Rust's stacks need dwarf; Go keeps frame
    /// pointers.
    pub perf_call_graph: &'static str,
    /// Chart colours of its system and user time (RGB).
    pub colors: [(u8, u8, u8); 2],
    /// `run --runtime-trace`: the workload flag that records the runtime's own scheduler events
    /// to a file it names (Ok), or why this runtime has none (Err, said when refused).
    pub runtime_trace: Result<&'static str, &'static str>,
}

/// One row per runtime, in the order reports show them.
pub const DESCRIPTORS: [Descriptor; 4] = [
    Descriptor {
        runtime: Runtime::Threads,
        name: "threads",
        one_task: "thread",
        binary: "threads",
        installed_binary: "spawnscope-threads",
        binary_env: "SPAWNSCOPE_THREADS_BIN",
        build_hint: "cargo build --release -p threads",
        calibration_sizes: [500, 2_500],
        cost_flag: Some("--stack-size"),
        tasks_are_threads: true,
        tasks_are_processes: false,
        os_threads: OsThreads::OnePerTask,
        threads_at_gate: Some(1),
        rough_task_bytes: 37.4 * 1024.0,
        perf_call_graph: "dwarf,4096",
        runtime_trace: Err(
            "its tasks are OS threads: the kernel's trace (--perfetto) is their scheduler",
        ),
        colors: [(214, 39, 40), (255, 152, 150)],
    },
    Descriptor {
        runtime: Runtime::Goroutines,
        name: "goroutines",
        one_task: "goroutine",
        binary: "goroutines",
        installed_binary: "spawnscope-goroutines",
        binary_env: "SPAWNSCOPE_GOROUTINES_BIN",
        build_hint: "cd goroutines-go && CGO_ENABLED=0 go build -o ../target/release/goroutines .",
        calibration_sizes: [20_000, 100_000],
        cost_flag: Some("--gomaxprocs"),
        tasks_are_threads: false,
        tasks_are_processes: false,
        os_threads: OsThreads::FromRuntimeStats,
        threads_at_gate: None,
        rough_task_bytes: 2.7 * 1024.0,
        perf_call_graph: "fp",
        runtime_trace: Ok("--go-trace"),
        colors: [(31, 119, 180), (120, 170, 220)],
    },
    Descriptor {
        runtime: Runtime::Tokio,
        name: "tokio",
        one_task: "tokio task",
        binary: "tokio-tasks",
        installed_binary: "spawnscope-tokio-tasks",
        binary_env: "SPAWNSCOPE_TOKIO_BIN",
        build_hint: "cargo build --release -p tokio-tasks",
        // A task is a few hundred bytes, a fifth of a goroutine: five times the tasks for the
        // same signal, still well under a second of spawning.
        calibration_sizes: [100_000, 500_000],
        cost_flag: Some("--workers"),
        tasks_are_threads: false,
        tasks_are_processes: false,
        os_threads: OsThreads::FromRuntimeStats,
        threads_at_gate: None,
        rough_task_bytes: 0.44 * 1024.0,
        perf_call_graph: "dwarf,4096",
        // The hooks build's flag (tokio-tasks-hooks: measure/tokio_trace.rs runs it instead).
        runtime_trace: Ok("--tokio-trace"),
        colors: [(44, 160, 44), (152, 223, 138)],
    },
    Descriptor {
        runtime: Runtime::Processes,
        name: "processes",
        one_task: "process",
        binary: "processes",
        installed_binary: "spawnscope-processes",
        binary_env: "SPAWNSCOPE_PROCESSES_BIN",
        build_hint: "cargo build --release -p processes",
        // A process is its kernel task and its own page tables and memory map, about 120 KiB,
        // and a fork takes tens of microseconds: small sizes, as threads', for a short calibration.
        calibration_sizes: [500, 2_500],
        cost_flag: None,
        tasks_are_threads: false,
        tasks_are_processes: true,
        os_threads: OsThreads::NoneBesidesMain,
        threads_at_gate: Some(1),
        rough_task_bytes: ROUGH_PROCESS_BYTES,
        perf_call_graph: "dwarf,4096",
        runtime_trace: Err(
            "its tasks are processes: the kernel's trace (--perfetto) is their scheduler",
        ),
        colors: [(148, 103, 189), (197, 176, 213)],
    },
];

/// A process's memory, `rough_task_bytes` of processes: `run --runtime processes --workload hold
/// --n 1000` on the development VM charged its cgroup 120 KiB per process (MemAvailable fell
/// 122 KiB), 78 KiB of it slab (task_struct, mm_struct, the copied memory map, files, signal
/// handlers), the rest its kernel stack, page tables and the stack page it writes.
const ROUGH_PROCESS_BYTES: f64 = 120.0 * 1024.0;

impl Descriptor {
    /// Each task is a kernel task of its own (a thread or a process): N of them must fit the
    /// kernel's task limits, and the probes see N tasks.
    pub fn kernel_task_each(&self) -> bool {
        self.tasks_are_threads || self.tasks_are_processes
    }
}

impl Runtime {
    /// Every runtime, in report order: what a name is looked up among (colours, descriptors,
    /// labels no command may take).
    pub const ALL: [Runtime; 4] = [
        Runtime::Threads,
        Runtime::Goroutines,
        Runtime::Tokio,
        Runtime::Processes,
    ];

    /// The runtimes `compare` sweeps when none are named. Processes only on request: a
    /// process per task is the dearest of all, the default sweep's million would be clamped by
    /// the preflight anyway, and CI's time stays where it is.
    pub const DEFAULT_SWEEP: [Runtime; 3] = [Runtime::Threads, Runtime::Goroutines, Runtime::Tokio];

    pub fn describe(self) -> &'static Descriptor {
        DESCRIPTORS
            .iter()
            .find(|d| d.runtime == self)
            .expect("every runtime has a descriptor")
    }

    pub fn name(self) -> &'static str {
        self.describe().name
    }

    /// `--runtime-trace`: the workload flag that records this runtime's own scheduler, or why it
    /// has none ("threads: its tasks are OS threads: …"). `run` refuses by it and `compare` adds a
    /// runtime-traced run to the cells it allows: one rule for both.
    pub fn runtime_trace_flag(self) -> Result<&'static str, String> {
        let d = self.describe();
        d.runtime_trace.map_err(|why| format!("{}: {why}", d.name))
    }

    /// Where reports put a runtime among the others (unknown names last).
    pub fn order_of(name: &str) -> usize {
        DESCRIPTORS
            .iter()
            .position(|d| d.name == name)
            .unwrap_or(DESCRIPTORS.len() + 7)
    }

    /// The workload binary: $SPAWNSCOPE_<RUNTIME>_BIN, else beside this executable under its
    /// installed or its built name (result/bin/, target/release/), else on PATH under its
    /// installed name only: a `threads` on PATH may be anyone's program.
    pub fn binary(self) -> Result<PathBuf> {
        let d = self.describe();
        if let Some(path) = std::env::var_os(d.binary_env) {
            return Ok(PathBuf::from(path));
        }
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.to_path_buf()));
        let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).collect())
            .unwrap_or_default();
        find_binary(d, exe_dir.as_deref(), &path_dirs).ok_or_else(|| {
            anyhow!(
                "the {} workload binary was not found beside spawnscope ({} or {}), as {} on PATH, or in ${}: build it with `{}`",
                d.name,
                d.installed_binary,
                d.binary,
                d.installed_binary,
                d.binary_env,
                d.build_hint
            )
        })
    }
}

/// Where a runtime's workload binary is, given the conductor's directory and PATH's.
fn find_binary(
    d: &Descriptor,
    exe_dir: Option<&std::path::Path>,
    path_dirs: &[PathBuf],
) -> Option<PathBuf> {
    let beside = exe_dir.into_iter().flat_map(|dir| {
        [d.installed_binary, d.binary]
            .into_iter()
            .map(move |name| dir.join(name))
    });
    let on_path = path_dirs.iter().map(|dir| dir.join(d.installed_binary));
    beside.chain(on_path).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_runtime_has_one_descriptor_with_its_own_name() {
        for runtime in Runtime::ALL {
            let d = runtime.describe();
            assert_eq!(d.runtime, runtime);
            assert_eq!(Runtime::order_of(d.name), runtime as usize);
            // clap's value and serde's name are the descriptor's name.
            assert_eq!(
                runtime
                    .to_possible_value()
                    .map(|v| v.get_name().to_string()),
                Some(d.name.to_string())
            );
            assert_eq!(
                serde_json::to_value(runtime).unwrap(),
                serde_json::json!(d.name)
            );
        }
        assert_eq!(DESCRIPTORS.len(), Runtime::ALL.len());
        assert!(Runtime::order_of("threads") < Runtime::order_of("goroutines"));
        assert!(Runtime::order_of("goroutines") < Runtime::order_of("tokio"));
        assert!(Runtime::order_of("tokio") < Runtime::order_of("node"));
        // Processes are swept only when asked for.
        assert!(Runtime::DEFAULT_SWEEP
            .iter()
            .all(|r| Runtime::ALL.contains(r) && *r != Runtime::Processes));
    }

    #[test]
    fn what_tells_runtimes_apart_is_never_shared() {
        // Each of these picks one runtime out of the others: a binary, its variable, the flag
        // given to it alone in a sweep, its colours on a chart.
        let all = || DESCRIPTORS.iter();
        for (i, d) in all().enumerate() {
            for e in all().skip(i + 1) {
                for (what, a, b) in [
                    ("name", d.name, e.name),
                    ("one task", d.one_task, e.one_task),
                    ("binary", d.binary, e.binary),
                    ("installed binary", d.installed_binary, e.installed_binary),
                    ("environment variable", d.binary_env, e.binary_env),
                ] {
                    assert_ne!(a, b, "{} and {} share their {what}", d.name, e.name);
                }
                if let (Some(a), Some(b)) = (d.cost_flag, e.cost_flag) {
                    assert_ne!(a, b, "{} and {} share their cost flag", d.name, e.name);
                }
                for c in d.colors {
                    assert!(
                        !e.colors.contains(&c),
                        "{} and {} share a colour",
                        d.name,
                        e.name
                    );
                }
            }
            assert!(
                d.calibration_sizes[0] < d.calibration_sizes[1],
                "{}",
                d.name
            );
            assert!(d.build_hint.contains(d.binary), "{}", d.name);
            assert!(d.installed_binary.starts_with("spawnscope-"), "{}", d.name);
            // OS threads are counted one per task exactly when tasks are threads, none besides
            // main exactly when tasks are processes; a task is never both.
            assert_eq!(
                d.tasks_are_threads,
                d.os_threads == OsThreads::OnePerTask,
                "{}",
                d.name
            );
            assert_eq!(
                d.tasks_are_processes,
                d.os_threads == OsThreads::NoneBesidesMain,
                "{}",
                d.name
            );
            assert!(
                !(d.tasks_are_threads && d.tasks_are_processes),
                "{}",
                d.name
            );
        }
    }

    #[test]
    fn a_workload_binary_is_found_on_path_only_under_its_installed_name() {
        let d = Runtime::Threads.describe();
        let tmp = std::env::temp_dir().join(format!("spawnscope-find-{}", std::process::id()));
        let (exe_dir, foreign, ours) = (tmp.join("exe"), tmp.join("foreign"), tmp.join("ours"));
        for dir in [&exe_dir, &foreign, &ours] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // Somebody else's `threads` on PATH is not ours.
        std::fs::write(foreign.join("threads"), "").unwrap();
        assert_eq!(
            find_binary(d, Some(&exe_dir), std::slice::from_ref(&foreign)),
            None
        );
        std::fs::write(ours.join("spawnscope-threads"), "").unwrap();
        assert_eq!(
            find_binary(d, Some(&exe_dir), &[foreign.clone(), ours.clone()]),
            Some(ours.join("spawnscope-threads"))
        );
        // Beside the conductor, cargo's name counts (target/release/), before PATH.
        std::fs::write(exe_dir.join("threads"), "").unwrap();
        assert_eq!(
            find_binary(d, Some(&exe_dir), std::slice::from_ref(&ours)),
            Some(exe_dir.join("threads"))
        );
        // ... and the installed name first (Nix's result/bin/).
        std::fs::write(exe_dir.join("spawnscope-threads"), "").unwrap();
        assert_eq!(
            find_binary(d, Some(&exe_dir), &[]),
            Some(exe_dir.join("spawnscope-threads"))
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
