//! `run --runtime tokio --runtime-trace`: the workload's hooks build (tokio-tasks-hooks, built
//! with `--cfg tokio_unstable` by scripts/build-tokio-hooks.sh) runs in the default binary's
//! place and records tokio's task hooks into the run directory (its `--tokio-trace`,
//! record::TOKIO_SCHED and, beside it, record::TOKIO_SCHED_SUMMARY: raw, nothing to reduce). It is
//! found as the workloads are: $SPAWNSCOPE_TOKIO_HOOKS_BIN, else beside spawnscope.

use runtime::Invocation;
use std::path::{Path, PathBuf};

pub const HOOKS_ENV: &str = "SPAWNSCOPE_TOKIO_HOOKS_BIN";
const HOOKS: &str = "tokio-tasks-hooks";
const BUILD_HINT: &str = "./scripts/build-tokio-hooks.sh target/release/tokio-tasks-hooks";

/// The hooks build's binary, or why there is none (said before anything runs).
pub fn hooks_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(HOOKS_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "${HOOKS_ENV} names {}, which is not a file: build it with `{BUILD_HINT}`",
                path.display()
            ))
        };
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(HOOKS)))
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            format!("--runtime-trace on tokio needs the tokio workload's hooks build, {HOOKS}, beside spawnscope or in ${HOOKS_ENV}: build it with `{BUILD_HINT}`")
        })
}

/// The workload flag and the file it writes, for a run directory (the JSON beside it is named by
/// the workload: the file's name with the extension .json, record::TOKIO_SCHED_SUMMARY).
pub fn workload_args(flag: &str, dir: &Path) -> [String; 2] {
    [
        flag.to_string(),
        dir.join(record::TOKIO_SCHED).to_string_lossy().into_owned(),
    ]
}

/// The hooks build's own check of the run's arguments with its flag (`--dry-run`, a file in the
/// temporary directory it removes again): a binary older than the flag refuses it here.
pub fn validate(inv: &Invocation, flag: &str, hooks: &Path) -> Result<(), String> {
    let mut checked = inv.clone();
    let path = std::env::temp_dir().join(format!(
        "spawnscope-tokio-trace-check-{}.bin",
        std::process::id()
    ));
    checked
        .flags
        .push((flag.to_string(), path.to_string_lossy().into_owned()));
    checked.validate(hooks).map(|_| ()).map_err(|refusal| {
        if refusal.contains(&format!("'{flag}'")) {
            format!(
                "{refusal} — {} is not the hooks build or predates it: rebuild it ({BUILD_HINT})",
                hooks.display()
            )
        } else {
            refusal
        }
    })
}

/// After the run: whether the workload wrote both files (Err says which is missing; the run goes
/// on without the runtime's figures).
pub fn written(dir: &Path) -> Result<(), String> {
    for name in [record::TOKIO_SCHED, record::TOKIO_SCHED_SUMMARY] {
        if !dir.join(name).is_file() {
            return Err(format!("the hooks build wrote no {name}"));
        }
    }
    Ok(())
}
