//! `run --runtime-trace` on goroutines: the workload writes the Go runtime's execution trace into
//! the run directory (its `--go-trace`, record::GO_TRACE, raw) and, once it has exited,
//! gotrace-reduce turns it into the raw records the figures are derived from (record::GO_SCHED,
//! record::GO_SCHED_SUMMARY, and the Ps' record::GO_PROCS), the trace's first MAX_RECORDS changes
//! kept (the Ps' changes of the same window) and every change counted. The reducer is its own Go
//! module (gotrace-reduce/), found as the
//! workloads are: $SPAWNSCOPE_GOTRACE_REDUCE_BIN, else beside spawnscope. A command is given the
//! same file in `$SPAWNSCOPE_GO_TRACE` (ENV): a Go program that starts runtime/trace on it gets the
//! same view; one that does not is said in the run's left-out list, not failed.

use runtime::Invocation;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const REDUCER_ENV: &str = "SPAWNSCOPE_GOTRACE_REDUCE_BIN";
const REDUCER: &str = "gotrace-reduce";
/// The variable a command is given with `--runtime-trace`: the path of record::GO_TRACE in its run
/// directory. Its whole process tree inherits it; the first Go process that creates the file
/// (O_EXCL, as docs/manual/measuring-any-program.md shows) is the one traced.
pub const ENV: &str = "SPAWNSCOPE_GO_TRACE";
/// A command given ENV that wrote nothing there (not a Go program, or one that does not start
/// runtime/trace on it): its run stands, without the runtime's figures.
pub const NO_TRACE_FROM_COMMAND: &str = "--runtime-trace: the command wrote no Go execution trace to $SPAWNSCOPE_GO_TRACE: no runtime figures (a Go program starts runtime/trace on that file itself, see the manual's 'Measuring any program')";
/// The records gotrace-reduce keeps (`--max-records`): the trace's first 2^24 goroutine changes,
/// 671 MB of go-sched.bin (40 bytes each), the rest counted in go-sched.json. A pingpong of
/// 10,000 pairs at its default 10,000 rounds makes about 400 M changes (16 GB uncut); the cap
/// keeps go-sched.bin under 1 GiB at any length, and the running slices the kept records draw
/// (one per start, about one change in three) in a Perfetto trace the UI still opens beside the
/// kernel's packets.
pub const MAX_RECORDS: u64 = 1 << 24;
const BUILD_HINT: &str = "./scripts/build-gotrace-reduce.sh target/release/gotrace-reduce";

/// The reducer's binary, or why there is none (said before anything runs).
pub fn reducer() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(REDUCER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "${REDUCER_ENV} names {}, which is not a file: build it with `{BUILD_HINT}` (Go 1.26)",
                path.display()
            ))
        };
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(REDUCER)))
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            format!("--runtime-trace needs {REDUCER} beside spawnscope or in ${REDUCER_ENV}: build it with `{BUILD_HINT}` (Go 1.26)")
        })
}

/// The workload flag and the file it writes, for a run directory.
pub fn workload_args(flag: &str, dir: &Path) -> [String; 2] {
    [
        flag.to_string(),
        dir.join(record::GO_TRACE).to_string_lossy().into_owned(),
    ]
}

/// A command's `ENV=…` for a run directory.
pub fn command_env(dir: &Path) -> (String, std::ffi::OsString) {
    (ENV.to_string(), dir.join(record::GO_TRACE).into_os_string())
}

/// The workload's own check of its trace flag (`--dry-run`, a file in the temporary directory it
/// creates and removes): a binary older than the flag refuses it here, with a rebuild hint.
pub fn validate(inv: &Invocation, flag: &str, binary: &Path) -> Result<(), String> {
    let mut checked = inv.clone();
    let path =
        std::env::temp_dir().join(format!("spawnscope-go-trace-check-{}", std::process::id()));
    checked
        .flags
        .push((flag.to_string(), path.to_string_lossy().into_owned()));
    checked.validate(binary).map(|_| ()).map_err(|refusal| {
        if refusal.contains(&format!("unknown flag '{flag}'")) {
            format!(
                "{refusal} — {} predates --runtime-trace: rebuild it ({})",
                binary.display(),
                inv.runtime.describe().build_hint
            )
        } else {
            refusal
        }
    })
}

/// Reduces the run's trace into its records; Err says why not (the run goes on without them, its
/// trace kept).
pub fn reduce(reducer: &Path, dir: &Path) -> Result<(), String> {
    let trace = dir.join(record::GO_TRACE);
    if !trace.is_file() {
        return Err(format!("the workload wrote no {}", record::GO_TRACE));
    }
    let out = Command::new(reducer)
        .arg(format!("--max-records={MAX_RECORDS}"))
        .arg(&trace)
        .arg(dir.join(record::GO_SCHED))
        .arg(dir.join(record::GO_SCHED_SUMMARY))
        .arg(dir.join(record::GO_PROCS))
        .output()
        .map_err(|e| format!("running {}: {e}", reducer.display()))?;
    if out.status.success() {
        return Ok(());
    }
    // Half-written records would pass for a whole reduction.
    let _ = std::fs::remove_file(dir.join(record::GO_SCHED));
    let _ = std::fs::remove_file(dir.join(record::GO_SCHED_SUMMARY));
    let _ = std::fs::remove_file(dir.join(record::GO_PROCS));
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "{REDUCER} failed ({}): {}",
        out.status,
        stderr.lines().next().unwrap_or("")
    ))
}
