//! The sleeping-task programs of the repository's examples/, as async-runtimes-benchmarks-2024
//! ("Take 2", hez2010) published them: which of them this host can run, the command that runs
//! each at N, and why one is skipped. Every program starts N tasks that each sleep `TASK_SLEEP`
//! and awaits them all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::host::binary;
use crate::record::{self, Skipped};
use crate::runtime::command::{SweptCommand, N_MARK};
use crate::runtime::TaskKind;

/// The reproduction's name (`--reproduce async-runtimes-2024`, plan.json's `reproduce`).
pub const ASYNC_2024: &str = "async-runtimes-2024";

/// The article's N.
pub const ASYNC_2024_NS: [u64; 4] = [1, 10_000, 100_000, 1_000_000];

/// Each task's sleep, in the article's programs and ours (none of them has a knob for it).
pub const TASK_SLEEP: Duration = Duration::from_secs(10);

/// How an example runs.
enum How {
    /// A script run by an interpreter found on PATH: `interpreter examples/<script> N`.
    Script {
        interpreter: &'static str,
        script: &'static str,
        /// The Debian package that has the interpreter.
        package: &'static str,
    },
    /// A Go program in examples/<dir>, built with `go build` beside spawnscope
    /// (target/release/examples/<binary>), where cargo puts its examples.
    Go {
        dir: &'static str,
        binary: &'static str,
    },
    /// A cargo example, built beside spawnscope by another engineer's crate: used when built.
    Cargo {
        binary: &'static str,
        build: &'static str,
    },
}

/// One of the article's programs.
pub struct Example {
    /// Its name in reports (its "runtime"): a program's name, never a runtime's.
    pub label: &'static str,
    /// The row of the article's table it reproduces (analyse/reproduce.rs, `ASYNC_2024_TABLE`).
    pub article: &'static str,
    how: How,
}

/// The programs, in the order the article's table lists their runtimes.
pub const EXAMPLES: [Example; 4] = [
    Example {
        label: "tokio-sleepers",
        article: "Rust tokio",
        how: How::Cargo {
            binary: "tokio-sleepers",
            build: "cargo build --release -p tokio-tasks --example tokio-sleepers",
        },
    },
    Example {
        label: "go-sleepers",
        article: "Go",
        how: How::Go {
            dir: "go",
            binary: "go-sleepers",
        },
    },
    Example {
        label: "node-sleepers",
        article: "Node 23",
        how: How::Script {
            interpreter: "node",
            script: "node/sleepers.js",
            package: "nodejs",
        },
    },
    Example {
        label: "python-sleepers",
        article: "Python 3.13",
        how: How::Script {
            interpreter: "python3",
            script: "python/sleepers.py",
            package: "python3",
        },
    },
];

/// The directory beside spawnscope where built examples go: target/release/examples/.
fn built_dir() -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.parent()?.join("examples"))
}

/// The repository's examples/: $SPAWNSCOPE_EXAMPLES_DIR, else two levels above spawnscope
/// (target/release/ in a checkout), else ./examples.
fn source_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SPAWNSCOPE_EXAMPLES_DIR") {
        return Some(PathBuf::from(dir));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("examples")));
    beside
        .into_iter()
        .chain([PathBuf::from("examples")])
        .find(|d| d.join("README.md").is_file())
        .and_then(|d| d.canonicalize().ok())
}

/// The first line a `--version` prints (on stdout or stderr).
fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = [out.stdout, out.stderr].concat();
    let line = String::from_utf8_lossy(&text)
        .lines()
        .next()?
        .trim()
        .to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// Builds the Go example beside spawnscope; Err: why it could not be.
fn go_build(go: &Path, source: &Path, out: &Path) -> Result<(), String> {
    if let Some(dir) = out.parent() {
        let made = !dir.exists();
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        if made {
            // cargo writes its examples here too, as the user who ran sudo.
            record::give_to_invoking_user(dir);
        }
    }
    let built = Command::new(go)
        .args(["build", "-trimpath", "-o"])
        .arg(out)
        .arg(".")
        .current_dir(source)
        .output()
        .map_err(|e| format!("running go build: {e}"))?;
    if !built.status.success() {
        let why = String::from_utf8_lossy(&built.stderr);
        return Err(format!(
            "go build in {} failed: {}",
            source.display(),
            why.lines().next().unwrap_or("")
        ));
    }
    record::give_to_invoking_user(out);
    Ok(())
}

/// One example as a command, or why this host cannot run it.
fn prepare_one(
    ex: &Example,
    source: Option<&Path>,
    built: Option<&Path>,
) -> Result<SweptCommand, String> {
    let source_missing = || {
        "the repository's examples/ was not found (run spawnscope from the repository, or set SPAWNSCOPE_EXAMPLES_DIR)".to_string()
    };
    let (words, version) = match &ex.how {
        How::Script {
            interpreter,
            script,
            package,
        } => {
            let program = binary::resolve_program(interpreter).ok_or_else(|| {
                format!("{interpreter} is not on PATH (Debian: apt-get install {package})")
            })?;
            let script = source.ok_or_else(source_missing)?.join(script);
            if !script.is_file() {
                return Err(format!("{} is missing", script.display()));
            }
            let words = vec![
                interpreter.to_string(),
                script.display().to_string(),
                N_MARK.into(),
            ];
            (words, version_of(&program, &["--version"]))
        }
        How::Go { dir, binary: name } => {
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join(name);
            match (binary::resolve_program("go"), source) {
                (Some(go), Some(source)) => go_build(&go, &source.join(dir), &out)?,
                _ if out.is_file() => {}
                (None, _) => {
                    return Err(format!(
                        "go is not on PATH (Debian: apt-get install golang-go) and {} is not built",
                        out.display()
                    ))
                }
                (_, None) => return Err(source_missing()),
            }
            let words = vec![out.display().to_string(), N_MARK.into()];
            (words, binary::go_version(&out))
        }
        How::Cargo {
            binary: name,
            build,
        } => {
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join(name);
            if !out.is_file() {
                return Err(format!("{} is not built (`{build}`)", out.display()));
            }
            let words = vec![out.display().to_string(), N_MARK.into()];
            (words, binary::rust_version(&out))
        }
    };
    Ok(SweptCommand {
        label: ex.label.into(),
        words,
        task_kind: TaskKind::Task,
        task_lifetime: Some(TASK_SLEEP),
        version,
    })
}

/// The examples this host can run, as commands, and those it cannot, with why.
pub fn prepare() -> (Vec<SweptCommand>, Vec<Skipped>) {
    let source = source_dir();
    let built = built_dir();
    let mut commands = Vec::new();
    let mut skipped = Vec::new();
    for ex in &EXAMPLES {
        match prepare_one(ex, source.as_deref(), built.as_deref()) {
            Ok(command) => commands.push(command),
            Err(why) => skipped.push(Skipped {
                label: ex.label.into(),
                why,
            }),
        }
    }
    (commands, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interpreter_or_build_is_skipped_with_what_to_do() {
        let script = Example {
            label: "x-sleepers",
            article: "X",
            how: How::Script {
                interpreter: "spawnscope-no-such-interpreter",
                script: "x/sleepers.x",
                package: "x-lang",
            },
        };
        let why = prepare_one(&script, None, None).unwrap_err();
        assert_eq!(
            why,
            "spawnscope-no-such-interpreter is not on PATH (Debian: apt-get install x-lang)"
        );
        let tmp = std::env::temp_dir().join(format!("spawnscope-examples-{}", std::process::id()));
        let cargo = Example {
            label: "y-sleepers",
            article: "Y",
            how: How::Cargo {
                binary: "y-sleepers",
                build: "cargo build --example y-sleepers",
            },
        };
        let why = prepare_one(&cargo, None, Some(&tmp)).unwrap_err();
        assert!(
            why.ends_with("y-sleepers is not built (`cargo build --example y-sleepers`)"),
            "{why}"
        );
    }

    #[test]
    fn a_script_runs_under_its_interpreter_with_n_last_and_its_sleep_declared() {
        // `sh` stands in for an interpreter every host has.
        let tmp =
            std::env::temp_dir().join(format!("spawnscope-examples-sh-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("sh")).unwrap();
        std::fs::write(tmp.join("sh/sleepers.sh"), "").unwrap();
        let ex = Example {
            label: "sh-sleepers",
            article: "sh",
            how: How::Script {
                interpreter: "sh",
                script: "sh/sleepers.sh",
                package: "dash",
            },
        };
        let command = prepare_one(&ex, Some(&tmp), None).unwrap();
        assert_eq!(
            command.argv(10_000),
            [
                "sh",
                &tmp.join("sh/sleepers.sh").display().to_string(),
                "10000"
            ]
        );
        assert_eq!(command.task_kind, TaskKind::Task);
        assert_eq!(command.task_lifetime, Some(Duration::from_secs(10)));
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn every_example_has_its_own_label_and_is_no_runtime() {
        for (i, ex) in EXAMPLES.iter().enumerate() {
            assert!(
                crate::runtime::command::SweptCommand::parse("x {n}", Some(ex.label)).is_ok(),
                "{}",
                ex.label
            );
            assert!(EXAMPLES[..i].iter().all(|e| e.label != ex.label));
        }
    }
}
