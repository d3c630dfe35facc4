//! Any program swept over N beside the runtimes (`compare --command 'CMD … {n} …'`): its words,
//! where N goes, and the name reports give it. Checked here, before anything runs; how a command
//! is run and measured is `run -- CMD`'s (measure/run.rs).

use std::path::Path;
use std::time::Duration;

use crate::{Runtime, TaskKind};

/// What stands for N in a command's words.
pub const N_MARK: &str = "{n}";

/// The same, as `--help` can show it: clap turns every `{n}` of a help text into a line break.
const N_MARK_UPPER: &str = "{N}";

/// The workload name reports give a command's runs: it runs as it is, not one of ours.
pub const COMMAND_WORKLOAD: &str = "command";

/// The two N a command is calibrated at (measure/preflight.rs): far enough apart that what a task
/// costs stands out of a runtime's own start-up (Node's is ~40 MiB) — the 2024 article's runtimes
/// took 0.2–2.6 KB per task at a million, so 18,000 more tasks move memory by 4–47 MB — and few
/// enough that each starts in well under a second.
pub const CALIBRATION_SIZES: [u64; 2] = [2_000, 20_000];

/// One program to sweep over N.
#[derive(Clone, Debug, PartialEq)]
pub struct SweptCommand {
    /// Its name in reports and directory names (its "runtime").
    pub label: String,
    /// Its words as a shell would split them, `{n}` where N goes.
    pub words: Vec<String>,
    /// What N counts (`run --task-kind`).
    pub task_kind: TaskKind,
    /// How long each task lives, where the program's author says (a sleeping task's sleep):
    /// memory is then measured while no task can have ended yet.
    pub task_lifetime: Option<Duration>,
    /// The stdout line that marks its moment measured (`run --peak-when`), where it prints one.
    pub peak_when: Option<String>,
    /// The most N it is run at, and why (a sweep clamps larger N to it, saying so).
    pub most_tasks: Option<(u64, String)>,
    /// What its runtime says of its version (`node --version`…), where known.
    pub version: Option<String>,
}

impl SweptCommand {
    /// `text` split as a shell would (quotes kept together), with a label given or its program's
    /// file name. Err: one line saying what is wrong.
    pub fn parse(text: &str, label: Option<&str>) -> Result<Self, String> {
        let words =
            shlex::split(text).ok_or_else(|| format!("--command '{text}': unbalanced quotes"))?;
        if words.is_empty() {
            return Err(
                "--command is empty: give the program and its arguments, with {n} where N goes"
                    .into(),
            );
        }
        if !words
            .iter()
            .any(|w| w.contains(N_MARK) || w.contains(N_MARK_UPPER))
        {
            return Err(format!(
                "--command '{text}' has no {N_MARK}: say where N goes (e.g. '{text} {N_MARK}')"
            ));
        }
        let label = match label {
            Some(l) if l.trim().is_empty() => return Err("--label is empty".into()),
            Some(l) => l.to_string(),
            None => default_label(&words[0]),
        };
        if Runtime::ALL.iter().any(|r| r.name() == label) {
            return Err(format!(
                "--label {label} is a runtime's name: give the command another (--label)"
            ));
        }
        Ok(SweptCommand {
            label,
            words,
            task_kind: TaskKind::Task,
            task_lifetime: None,
            peak_when: None,
            most_tasks: None,
            version: None,
        })
    }

    /// The command line at N.
    pub fn argv(&self, n: u64) -> Vec<String> {
        let n = n.to_string();
        self.words
            .iter()
            .map(|w| w.replace(N_MARK, &n).replace(N_MARK_UPPER, &n))
            .collect()
    }
}

/// A program's file name: `node` for `/usr/bin/node`.
fn default_label(program: &str) -> String {
    Path::new(program)
        .file_name()
        .map_or_else(|| program.to_string(), |f| f.to_string_lossy().into_owned())
}

/// Commands with labels, paired in order (a command without one is named after its program).
/// Err: one line — more labels than commands, or two commands under one name.
pub fn pair(texts: &[String], labels: &[String]) -> Result<Vec<SweptCommand>, String> {
    if labels.len() > texts.len() {
        return Err(format!(
            "{} --label for {} --command: each label names the --command in the same place",
            labels.len(),
            texts.len()
        ));
    }
    let mut commands: Vec<SweptCommand> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let command = SweptCommand::parse(text, labels.get(i).map(String::as_str))?;
        if commands.iter().any(|c| c.label == command.label) {
            return Err(format!(
                "two commands are named {}: give each its own --label",
                command.label
            ));
        }
        commands.push(command);
    }
    Ok(commands)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_goes_where_it_is_marked_and_quotes_keep_words_together() {
        let c = SweptCommand::parse("node 'my dir/sleepers.js' {n} --size={n}k", None).unwrap();
        assert_eq!(c.label, "node");
        assert_eq!(
            c.argv(10),
            ["node", "my dir/sleepers.js", "10", "--size=10k"]
        );
        let named = SweptCommand::parse("/opt/bin/sleepers {N}", Some("mine")).unwrap();
        assert_eq!(named.label, "mine");
        assert_eq!(
            named.argv(7),
            ["/opt/bin/sleepers", "7"],
            "{{N}} as --help shows it"
        );
        assert_eq!(
            SweptCommand::parse("/opt/bin/sleepers {n}", None)
                .unwrap()
                .label,
            "sleepers"
        );
    }

    #[test]
    fn bad_commands_say_why_in_one_line() {
        for (text, label, says) in [
            ("", None, "--command is empty"),
            ("   ", None, "--command is empty"),
            ("node sleepers.js", None, "has no {n}"),
            ("node 'sleepers.js {n}", None, "unbalanced quotes"),
            ("prog {n}", Some(""), "--label is empty"),
            ("prog {n}", Some("threads"), "a runtime's name"),
        ] {
            let err = SweptCommand::parse(text, label).unwrap_err();
            assert!(err.contains(says), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let texts = ["a {n}".to_string(), "b {n}".to_string()];
        assert!(pair(&texts[..1], &["x".into(), "y".into()])
            .unwrap_err()
            .contains("2 --label for 1 --command"));
        let same = ["/x/prog {n}".to_string(), "/y/prog {n}".to_string()];
        assert!(pair(&same, &[])
            .unwrap_err()
            .contains("two commands are named prog"));
        let paired = pair(&texts, &["first".into()]).unwrap();
        assert_eq!(
            paired.iter().map(|c| c.label.as_str()).collect::<Vec<_>>(),
            ["first", "b"]
        );
    }
}
