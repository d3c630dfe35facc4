//! `completions`, `man` and `docs`: what clap knows of the command line, for shells, man(1) and
//! the manual; and the project's pages kept true to what they show — the figures of README.md
//! and the manual rendered from the results sets under docs/ (render/pages.rs), the man page and
//! the reference pages generated from clap, and no dead link inside the rendered book.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{usage_error, Cli, DocsAction};
use analyse::comparisons::compare::Comparison;
use render::{pages, values};

pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    clap_complete::generate(
        shell,
        &mut Cli::command(),
        "spawnscope",
        &mut std::io::stdout(),
    );
    ExitCode::SUCCESS
}

/// The manual page, roff.
fn man_page() -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    Ok(page)
}

pub fn man() -> ExitCode {
    match man_page().and_then(|page| std::io::stdout().write_all(&page)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("spawnscope: man: {err}");
            ExitCode::from(1)
        }
    }
}

pub fn command(action: DocsAction) -> ExitCode {
    match action {
        DocsAction::Render { check, root } => render(&root, check),
        DocsAction::Links { dir } => links(&dir),
    }
}

/// Where the generated files go, under the repository root.
pub const MAN_PAGE: &str = "docs/man/spawnscope.1";
pub const REFERENCE_DIR: &str = "docs/reference/cli";

/// The pages whose figures are rendered: README.md and every Markdown page of the manual.
fn pages_of(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// Every file `docs render` writes, with what it should hold: pages with their figures, the man
/// page, the reference pages.
fn wanted(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    // Each set's compare.json, read once: figures take it as a Comparison, prose values as it
    // is written.
    let mut sets: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    let mut out = Vec::new();
    for page in pages_of(root) {
        let Ok(text) = std::fs::read_to_string(&page) else {
            continue;
        };
        if !text.contains(pages::OPEN) && !text.contains(values::OPEN) {
            continue;
        }
        let (filled, _) = pages::fill(&text, |set| {
            serde_json::from_value::<Comparison>(read_set(root, &mut sets, set)?)
                .map_err(|e| format!("results set {set}: {e}"))
        })
        .map_err(|e| format!("{}: {e}", page.display()))?;
        let (filled, _) = values::fill(&filled, |set| read_set(root, &mut sets, set))
            .map_err(|e| format!("{}: {e}", page.display()))?;
        out.push((page, filled));
    }
    let man = man_page().map_err(|e| format!("man page: {e}"))?;
    out.push((
        root.join(MAN_PAGE),
        String::from_utf8_lossy(&man).into_owned(),
    ));
    for (name, text) in reference_pages() {
        out.push((root.join(REFERENCE_DIR).join(name), text));
    }
    Ok(out)
}

/// docs/SET/compare.json — or, for a value, docs/SET when it names a .json, .tsv or .csv file of a
/// results directory ([`values::parse_file`]) — read once into `sets`.
fn read_set(
    root: &Path,
    sets: &mut std::collections::BTreeMap<String, serde_json::Value>,
    set: &str,
) -> Result<serde_json::Value, String> {
    if let Some(v) = sets.get(set) {
        return Ok(v.clone());
    }
    let named = root.join("docs").join(set);
    let path = if named.is_file() {
        named
    } else {
        named.join(record::COMPARE_JSON)
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("results set {}: {e}", path.display()))?;
    let parsed = if path.ends_with(record::COMPARE_JSON) {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    } else {
        values::parse_file(set, &text)
    }
    .map_err(|e| format!("results set {}: {e}", path.display()))?;
    sets.insert(set.into(), parsed.clone());
    Ok(parsed)
}

/// `docs render [--check]`: writes what is stale, or (--check) names it and exits 1.
fn render(root: &Path, check: bool) -> ExitCode {
    if !root.join("docs").is_dir() {
        return usage_error(format!(
            "{} has no docs/: give the repository's root (--root)",
            root.display()
        ));
    }
    let files = match wanted(root) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("spawnscope docs: {err}");
            return ExitCode::from(1);
        }
    };
    let mut stale = Vec::new();
    for (path, text) in &files {
        let now = std::fs::read_to_string(path).unwrap_or_default();
        if now == *text {
            continue;
        }
        let shown = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        // A page says which of its figures differ from their sets.
        let which = stale_blocks(&now, text);
        stale.push(if which.is_empty() {
            shown
        } else {
            format!("{shown} ({which})")
        });
        if !check {
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(path, text));
            if let Err(err) = written {
                eprintln!("spawnscope docs: {}: {err}", path.display());
                return ExitCode::from(1);
            }
        }
    }
    let dead = readme_dead_links(root);
    for d in &dead {
        eprintln!("spawnscope docs: README.md links to {d}, which does not exist");
    }
    match (check, stale.is_empty()) {
        (_, true) => {
            eprintln!(
                "spawnscope docs: {} files up to date (pages' figures, {MAN_PAGE}, {REFERENCE_DIR}/)",
                files.len()
            );
        }
        (true, false) => {
            for s in &stale {
                eprintln!("spawnscope docs: stale: {s}");
            }
            eprintln!("spawnscope docs: run `spawnscope docs render` to render them again");
            return ExitCode::from(1);
        }
        (false, false) => {
            for s in &stale {
                eprintln!("spawnscope docs: rendered {s}");
            }
        }
    }
    if dead.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The figures of a page that differ from what their sets give, as "line N: KIND SET".
fn stale_blocks(now: &str, wanted: &str) -> String {
    let (Ok(a), Ok(b)) = (pages::blocks(now), pages::blocks(wanted)) else {
        return String::new();
    };
    let (Ok(c), Ok(d)) = (values::quotes(now), values::quotes(wanted)) else {
        return String::new();
    };
    a.iter()
        .zip(&b)
        .filter(|(x, y)| now[x.body.clone()] != wanted[y.body.clone()])
        .map(|(x, _)| format!("line {}: figure {}", x.line, x.spec))
        .chain(
            c.iter()
                .zip(&d)
                .filter(|(x, y)| now[x.body.clone()] != wanted[y.body.clone()])
                .map(|(x, _)| format!("line {}: value {} {}", x.line, x.set, x.path)),
        )
        .collect::<Vec<_>>()
        .join("; ")
}

/// Relative links of README.md (outside the book) whose file is missing.
fn readme_dead_links(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").expect("a valid pattern");
    link.captures_iter(&text)
        .map(|c| c[1].to_string())
        .filter(|t| !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .filter(|t| {
            let file = t.split('#').next().unwrap_or(t);
            !root.join(file).exists()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The reference pages, one per subcommand, from clap.

fn arg_name(arg: &clap::Arg) -> String {
    match (arg.get_long(), arg.get_short()) {
        (Some(long), Some(short)) => format!("-{short}, --{long}"),
        (Some(long), None) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => format!(
            "<{}>",
            arg.get_value_names().and_then(|v| v.first()).map_or_else(
                || arg.get_id().to_string().to_uppercase(),
                |v| v.to_string()
            )
        ),
    }
}

fn value_part(arg: &clap::Arg) -> String {
    if arg.get_long().is_none() && arg.get_short().is_none() {
        return String::new();
    }
    if !arg.get_action().takes_values() {
        return String::new();
    }
    let name = arg.get_value_names().and_then(|v| v.first()).map_or_else(
        || arg.get_id().to_string().to_uppercase(),
        |v| v.to_string(),
    );
    format!(" <{name}>")
}

/// Help text for Markdown: `<` and `>` outside code spans escaped, so that a `<DIR>` in prose is
/// not taken for an HTML tag.
fn escape_outside_code(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                part.to_string()
            } else {
                part.replace('<', "&lt;").replace('>', "&gt;")
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// One argument as a list item: its name, what it does, its values and default.
fn arg_item(arg: &clap::Arg) -> String {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string().replace('\n', " "))
        .unwrap_or_default();
    let mut item = format!("- `{}{}`", arg_name(arg), value_part(arg));
    if !help.is_empty() {
        item.push_str(" — ");
        item.push_str(&escape_outside_code(help.trim()));
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && arg.get_action().takes_values() {
        item.push_str(&format!(" Values: {}.", values.join(", ")));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        item.push_str(&format!(" Default: `{}`.", defaults.join(",")));
    }
    let aliases: Vec<String> = arg
        .get_visible_aliases()
        .unwrap_or_default()
        .iter()
        .map(|a| format!("`--{a}`"))
        .collect();
    if !aliases.is_empty() {
        item.push_str(&format!(" Also {}.", aliases.join(", ")));
    }
    item
}

/// A subcommand's section: what it does, its usage and every argument, then its own
/// subcommands one level down.
fn command_section(cmd: &mut clap::Command, path: &str, depth: usize, out: &mut String) {
    let hashes = "#".repeat(depth);
    out.push_str(&format!("{hashes} `{path}`\n\n"));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        out.push_str(&format!(
            "{}\n\n",
            escape_outside_code(about.to_string().trim())
        ));
    }
    let usage = cmd.render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    out.push_str(&format!("```text\n{usage}\n```\n\n"));
    let mut headings: Vec<Option<String>> = Vec::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let h = arg.get_help_heading().map(str::to_string);
        if !headings.contains(&h) {
            headings.push(h);
        }
    }
    for heading in headings {
        let items: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_help_heading().map(str::to_string) == heading)
            .map(arg_item)
            .collect();
        if let Some(h) = &heading {
            out.push_str(&format!("{h}:\n\n"));
        }
        out.push_str(&items.join("\n"));
        out.push_str("\n\n");
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        if let Some(sub) = cmd.find_subcommand_mut(&name) {
            command_section(sub, &format!("{path} {name}"), depth + 1, out);
        }
    }
}

const GENERATED: &str =
    "<!-- Generated by `spawnscope docs render` from the command line's definition (cli.rs); edit that, not this. -->\n\n";

/// The reference pages: `README.md` (one line per subcommand) and `<subcommand>.md` each.
pub fn reference_pages() -> Vec<(String, String)> {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let mut index = format!("{GENERATED}# Commands\n\n");
    if let Some(about) = root.get_about() {
        index.push_str(&format!("spawnscope — {about}\n\n"));
    }
    let mut pages = Vec::new();
    let names: Vec<String> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = root.find_subcommand_mut(&name).expect("listed just above");
        let about = sub
            .get_about()
            .map(|a| a.to_string().replace('\n', " "))
            .unwrap_or_default();
        index.push_str(&format!(
            "- [`spawnscope {name}`]({name}.md) — {}\n",
            escape_outside_code(&about)
        ));
        let mut page = String::from(GENERATED);
        command_section(sub, &format!("spawnscope {name}"), 1, &mut page);
        pages.push((format!("{name}.md"), page.trim_end().to_string() + "\n"));
    }
    if let Some(after) = root.get_after_help() {
        index.push_str(&format!("\n{}\n", after.to_string().replace('\n', " ")));
    }
    pages.insert(0, ("README.md".into(), index));
    pages
}

// ---------------------------------------------------------------------------------------------
// Dead internal links in a rendered book.

/// `docs links DIR`: every relative href and src of every HTML page under DIR must name a file
/// there, and a `#fragment` into a page an id of that page.
fn links(dir: &Path) -> ExitCode {
    if !dir.is_dir() {
        return usage_error(format!(
            "{} is not a directory (give mdbook's output, e.g. target/book)",
            dir.display()
        ));
    }
    let dead = dead_links(dir);
    for d in &dead {
        eprintln!("spawnscope docs links: {d}");
    }
    if dead.is_empty() {
        eprintln!(
            "spawnscope docs links: no dead internal link under {}",
            dir.display()
        );
        ExitCode::SUCCESS
    } else {
        eprintln!("spawnscope docs links: {} dead internal links", dead.len());
        ExitCode::from(1)
    }
}

fn html_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "html") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn ids_of(html: &str) -> BTreeSet<String> {
    let id = regex::Regex::new(r#"\b(?:id|name)="([^"]+)""#).expect("a valid pattern");
    id.captures_iter(html).map(|c| c[1].to_string()).collect()
}

/// "page: target (why)" for each dead link under `dir`.
pub fn dead_links(dir: &Path) -> Vec<String> {
    let link = regex::Regex::new(r#"\b(?:href|src)="([^"]*)""#).expect("a valid pattern");
    let mut ids: std::collections::HashMap<PathBuf, BTreeSet<String>> = Default::default();
    let mut dead = Vec::new();
    for page in html_files(dir) {
        let Ok(html) = std::fs::read_to_string(&page) else {
            continue;
        };
        let here = page.parent().unwrap_or(dir);
        for c in link.captures_iter(&html) {
            let target = c[1].replace("&amp;", "&");
            if target.is_empty()
                || target.contains(':') && !target.starts_with('#')
                || target.starts_with("//")
            {
                continue; // another site, mailto:, data:, javascript:
            }
            let (file, fragment) = match target.split_once('#') {
                Some((f, frag)) => (f, Some(frag)),
                None => (target.as_str(), None),
            };
            let file = file.split('?').next().unwrap_or(file);
            let path = if file.is_empty() {
                page.clone()
            } else if let Some(abs) = file.strip_prefix('/') {
                dir.join(abs)
            } else {
                here.join(file)
            };
            let path = if file.ends_with('/') || path.is_dir() {
                path.join("index.html")
            } else {
                path
            };
            let shown = page
                .strip_prefix(dir)
                .unwrap_or(&page)
                .display()
                .to_string();
            if !path.is_file() {
                dead.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            let Some(fragment) = fragment.filter(|f| !f.is_empty()) else {
                continue;
            };
            if path.extension().is_none_or(|e| e != "html") {
                continue;
            }
            let known = ids
                .entry(path.clone())
                .or_insert_with(|| ids_of(&std::fs::read_to_string(&path).unwrap_or_default()));
            if !known.contains(fragment) {
                dead.push(format!("{shown}: {target} (no id '{fragment}' there)"));
            }
        }
    }
    dead
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_know_every_subcommand_and_the_man_page_names_them() {
        let mut bash = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "spawnscope",
            &mut bash,
        );
        let bash = String::from_utf8(bash).unwrap();
        for sub in [
            "check",
            "run",
            "sysctl",
            "compare",
            "report",
            "flame",
            "completions",
            "docs",
        ] {
            assert!(bash.contains(sub), "{sub} in the bash completion");
        }
        assert!(bash.contains("--runtime"), "run's options too");
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH spawnscope"),
            "{page}"
        );
        assert!(page.contains("compare"), "{page}");
    }

    #[test]
    fn the_reference_has_a_page_per_subcommand_with_its_flags_values_and_defaults() {
        let pages = reference_pages();
        let page = |name: &str| {
            pages
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| {
                    panic!(
                        "{name} in {:?}",
                        pages.iter().map(|p| &p.0).collect::<Vec<_>>()
                    )
                })
        };
        let run = page("run.md");
        assert!(run.contains("- `-r, --runtime <RUNTIME>`"), "{run}");
        assert!(run.contains("Values: `thread`, `task`."), "{run}");
        assert!(run.contains("Default: `lean`."), "{run}");
        assert!(run.contains("Limits:"), "{run}");
        let sysctl = page("sysctl.md");
        assert!(sysctl.contains("## `spawnscope sysctl apply`"), "{sysctl}");
        let index = page("README.md");
        assert!(
            index.contains("[`spawnscope compare`](compare.md)"),
            "{index}"
        );
        assert!(index.contains("Exit codes"), "{index}");
    }

    fn committed(path: &str) -> String {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
    }

    #[test]
    fn the_committed_man_page_is_what_spawnscope_man_prints() {
        assert!(
            committed(MAN_PAGE) == String::from_utf8(man_page().unwrap()).unwrap(),
            "{MAN_PAGE} is stale: run `spawnscope docs render`"
        );
    }

    /// Every flag and positional argument of every subcommand, with the top-level subcommand
    /// whose reference page must name it.
    fn every_argument(cmd: &clap::Command, top: Option<&str>, out: &mut Vec<(String, String)>) {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(top) = top {
                let shown = match arg.get_long() {
                    Some(long) => format!("--{long}"),
                    None => arg_name(arg),
                };
                if shown != "--help" && shown != "--version" {
                    out.push((top.to_string(), shown));
                }
            }
        }
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            every_argument(sub, Some(top.unwrap_or(sub.get_name())), out);
        }
    }

    #[test]
    fn every_flag_of_every_subcommand_has_its_entry_in_the_committed_reference() {
        let mut cli = Cli::command();
        cli.build();
        let mut args = Vec::new();
        every_argument(&cli, None, &mut args);
        assert!(args.len() > 60, "{args:?}");
        assert!(args.contains(&("run".into(), "--perf-call-graph".into())));
        assert!(args.contains(&("sysctl".into(), "--n".into())));
        let mut missing = Vec::new();
        for (top, flag) in &args {
            let page = committed(&format!("{REFERENCE_DIR}/{top}.md"));
            if !page.contains(&format!("`{flag}")) && !page.contains(&format!(", {flag}")) {
                missing.push(format!("{top} {flag}"));
            }
        }
        assert!(missing.is_empty(), "not in {REFERENCE_DIR}: {missing:?}");
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_dead_link_or_anchor_is_found_and_live_ones_pass() {
        let book = tree(&[
            (
                "index.html",
                r##"<a href="a/b.html#part">x</a> <a href="https://example.org/x">e</a> <img src="fig.svg"> <a href="#top">t</a><h1 id="top">"##,
            ),
            (
                "a/b.html",
                r#"<h2 id="part">p</h2><a href="../index.html">up</a>"#,
            ),
            ("fig.svg", "<svg/>"),
        ]);
        assert_eq!(dead_links(book.path()), Vec::<String>::new());
        std::fs::write(
            book.path().join("a/b.html"),
            r#"<h2 id="part">p</h2><a href="../gone.html">x</a><a href="../index.html#nowhere">y</a>"#,
        )
        .unwrap();
        let dead = dead_links(book.path());
        assert_eq!(dead.len(), 2, "{dead:?}");
        assert!(dead[0].contains("gone.html (no such file)"), "{dead:?}");
        assert!(dead[1].contains("no id 'nowhere'"), "{dead:?}");
    }
}
