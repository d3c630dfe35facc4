//! The house rules of ARCHITECTURE.md. What Cargo holds is checked against the list below: the
//! layer crates and the only crates each may depend on (`cargo metadata`, every kind of
//! dependency, tests' too), and ARCHITECTURE.md's drawing of that graph is the one cargo gives.
//! What Cargo cannot hold is checked on the source: no module circle inside a crate (nor in the
//! collector), the binary's command line below its commands, analyse, studies and render
//! neither spawn a process nor touch a file, and no source file passes 900 lines outside its tests. A change that breaks a rule fails here, in CI,
//! naming the crate, or the file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The conductor's crates, lowest first, each with the only workspace crates it may depend on
/// (by package name; `collector` is spawnscope-collector, the eBPF collector, whose record types
/// — collector.json's `Report`, the trace's `TraceEvent` — the layers that read raw records use).
const LAYERS: [(&str, &[&str]); 9] = [
    ("spawnscope-units", &[]),
    ("spawnscope-runtime", &["units"]),
    ("spawnscope-record", &["runtime", "units", "collector"]),
    (
        "spawnscope-host",
        &["record", "runtime", "units", "collector"],
    ),
    (
        "spawnscope-measure",
        &["host", "record", "runtime", "units", "collector"],
    ),
    (
        "spawnscope-analyse",
        &["record", "runtime", "units", "collector"],
    ),
    (
        "spawnscope-studies",
        &["measure", "analyse", "record", "runtime", "units"],
    ),
    (
        "spawnscope-render",
        &[
            "studies",
            "analyse",
            "record",
            "runtime",
            "units",
            "collector",
        ],
    ),
    (
        "spawnscope",
        &[
            "render",
            "studies",
            "analyse",
            "measure",
            "host",
            "record",
            "runtime",
            "units",
            "collector",
        ],
    ),
];

/// The modules of the binary, lowest first: a module of room i imports from rooms 0..=i.
const BINARY_ROOMS: [&str; 3] = ["cli", "commands", "main"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A layer's short name, as its code names it: spawnscope-analyse → analyse.
fn short(package: &str) -> &str {
    package.strip_prefix("spawnscope-").unwrap_or(package)
}

/// `cargo metadata` of the workspace (its members only: the graph is what they declare).
fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Package → (workspace crate it depends on, kind: "normal", "dev", "build"), for every
/// spawnscope package of the metadata.
fn crate_graph(meta: &Value) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut graph = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if !name.starts_with("spawnscope") {
            continue;
        }
        let deps = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            // A workspace crate is a path dependency (the workloads' crates too, never allowed).
            .filter(|d| d["path"].is_string())
            .map(|d| {
                let kind = d["kind"].as_str().unwrap_or("normal").to_string();
                (d["name"].as_str().unwrap().to_string(), kind)
            })
            .collect();
        graph.insert(name.to_string(), deps);
    }
    graph
}

/// Every dependency a layer crate has that LAYERS does not give it, in words; and every layer of
/// LAYERS missing from the graph.
fn layer_violations(graph: &BTreeMap<String, BTreeSet<(String, String)>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (layer, allowed) in LAYERS {
        let Some(deps) = graph.get(layer) else {
            wrong.push(format!("{layer}: no such crate in the workspace"));
            continue;
        };
        for (dep, kind) in deps {
            if !allowed.contains(&short(dep)) {
                wrong.push(format!(
                    "{layer} depends on {dep} ({kind}): not one of the crates its layer may use ({})",
                    allowed.join(", ")
                ));
            }
        }
    }
    // The collector and the workloads' shared crate stand outside the conductor.
    let outside = ["spawnscope-collector", "spawnscope-workload"];
    for package in graph.keys() {
        if !LAYERS.iter().any(|(l, _)| l == package) && !outside.contains(&package.as_str()) {
            wrong.push(format!("{package}: a crate in no layer of ARCHITECTURE.md"));
        }
    }
    wrong
}

/// The crate graph as ARCHITECTURE.md draws it: one line a layer, highest first, what it uses.
fn drawn(graph: &BTreeMap<String, BTreeSet<(String, String)>>) -> String {
    let mut out = String::from("```text\n");
    let width = LAYERS.iter().map(|(l, _)| l.len()).max().unwrap();
    for (layer, _) in LAYERS.iter().rev() {
        let deps = &graph[*layer];
        // In the order of LAYERS, highest first, as the line reads.
        let order = |kind: &str| -> Vec<&str> {
            let mut names: Vec<&str> = deps
                .iter()
                .filter(|(_, k)| k == kind)
                .map(|(d, _)| short(d))
                .collect();
            names.sort_by_key(|n| {
                std::cmp::Reverse(
                    LAYERS
                        .iter()
                        .position(|(l, _)| short(l) == *n)
                        .map_or(-1, |p| p as i64),
                )
            });
            names.dedup();
            names
        };
        let normal = order("normal");
        // Test-only arrows not already drawn as the crate's own.
        let dev: Vec<&str> = order("dev")
            .into_iter()
            .filter(|d| !normal.contains(d))
            .collect();
        let mut line = format!(
            "{layer:width$} → {}",
            if normal.is_empty() {
                "nothing".to_string()
            } else {
                normal.join(", ")
            }
        );
        if !dev.is_empty() {
            line.push_str(&format!(" (tests also: {})", dev.join(", ")));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str("```\n");
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` → `a::b`; `a/mod.rs` → `a`; `main.rs` / `lib.rs` → `` (the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "main" || parts[0] == "lib") {
        parts.clear();
    }
    parts.join("::")
}

/// The code of a file without its comments and without its `#[cfg(test)] mod tests` (tests may
/// build fixtures from any room).
fn code_of(text: &str) -> String {
    let tests = ["#[cfg(test)]\nmod tests", "#[cfg(test)]\npub mod tests"]
        .iter()
        .filter_map(|m| text.find(m))
        .min();
    let text = tests.map_or(text, |i| &text[..i]);
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::path` a file names, as the longest module path among `modules`, with its line:
/// `use crate::a::b::C`, `crate::a::f()`, and use trees, nested and over several lines —
/// `use crate::{a, b::c}`, `use crate::measure::{perf, preflight}` (measure::perf and
/// measure::preflight, not measure: read as the room, such a group hid a circle between two of
/// its modules).
fn imports(code: &str, modules: &BTreeSet<String>) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("crate::") {
        let at = from + i;
        from = at + "crate::".len();
        let line = code[..at].matches('\n').count() + 1;
        for p in use_paths("", &code[from..]) {
            let segments: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
            let best = (1..=segments.len())
                .rev()
                .map(|k| segments[..k].join("::"))
                .find(|m| modules.contains(m));
            if let Some(m) = best {
                found.push((m, line));
            }
        }
    }
    found
}

/// The paths a use tree names, `prefix` before each, from the text just after `crate::` (or
/// after a group's `{`): `a::b`, `a::{b, c::{d, e}}`, `{a, b::c}`.
fn use_paths(prefix: &str, rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        return group_items(group)
            .into_iter()
            .flat_map(|item| use_paths(prefix, item))
            .collect();
    }
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    let path = &rest[..end];
    if path.ends_with("::") && rest[end..].starts_with('{') {
        use_paths(&format!("{prefix}{path}"), &rest[end..])
    } else {
        vec![format!("{prefix}{path}")]
    }
}

/// The items of a group whose `{` was just read, split at its own commas, up to its `}`.
fn group_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items.into_iter().filter(|s| !s.trim().is_empty()).collect();
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

struct Graph {
    /// module → (imported module, file, line)
    edges: BTreeMap<String, Vec<(String, String, usize)>>,
}

fn graph(crate_dir: &str) -> Graph {
    let src = workspace().join(crate_dir).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let code = code_of(&fs::read_to_string(file).unwrap());
        let name = file.strip_prefix(&src).unwrap().display().to_string();
        let targets: Vec<(String, String, usize)> = imports(&code, &modules)
            .into_iter()
            .filter(|(m, _)| *m != module && !m.is_empty())
            .map(|(m, line)| (m, name.clone(), line))
            .collect();
        edges.insert(module, targets);
    }
    Graph { edges }
}

/// A circle among the modules, if there is one (as the modules along it).
fn find_circle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for (to, _, _) in g.edges.get(m).into_iter().flatten() {
            // Importing a module's parent (its `mod.rs` re-exports) is part of the same room.
            if m.starts_with(&format!("{to}::")) {
                continue;
            }
            match state.get(to.as_str()) {
                Some(1) => {
                    let start = path.iter().position(|p| p == to).unwrap();
                    let mut circle = path[start..].to_vec();
                    circle.push(to.clone());
                    return Some(circle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(g, to, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.edges.keys() {
        if !state.contains_key(m) {
            if let Some(c) = visit(g, m, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn room(module: &str) -> Option<usize> {
    let top = if module.is_empty() {
        "main"
    } else {
        module.split("::").next().unwrap()
    };
    BINARY_ROOMS.iter().position(|r| *r == top)
}

/// The source folders checked module by module: every layer crate, the binary, the collector.
fn crate_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = LAYERS
        .iter()
        .filter(|(l, _)| *l != "spawnscope")
        .map(|(l, _)| format!("crates/{}", short(l)))
        .collect();
    dirs.push("spawnscope".into());
    dirs.push("collector".into());
    dirs
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let graph = crate_graph(&metadata());
    let wrong = layer_violations(&graph);
    assert!(wrong.is_empty(), "layer rule broken:\n{}", wrong.join("\n"));
}

#[test]
fn a_dependency_up_the_layers_is_refused() {
    // The check above passes only if it sees what it looks for: the real graph with analyse
    // given the host (an upward arrow), and render a test-only dependency on measure.
    let mut meta = metadata();
    for p in meta["packages"].as_array_mut().unwrap() {
        let planted = match p["name"].as_str().unwrap() {
            "spawnscope-analyse" => {
                serde_json::json!({"name": "spawnscope-host", "kind": null, "path": "crates/host"})
            }
            "spawnscope-render" => {
                serde_json::json!({"name": "spawnscope-measure", "kind": "dev", "path": "crates/measure"})
            }
            _ => continue,
        };
        p["dependencies"].as_array_mut().unwrap().push(planted);
    }
    let wrong = layer_violations(&crate_graph(&meta));
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].starts_with("spawnscope-analyse depends on spawnscope-host (normal)"));
    assert!(wrong[1].starts_with("spawnscope-render depends on spawnscope-measure (dev)"));
}

#[test]
fn architecture_md_draws_the_crate_graph_cargo_gives() {
    // Redrawn with UPDATE_ARCHITECTURE=1 (the block between the two marks is replaced).
    let graph = crate_graph(&metadata());
    let path = workspace().join("ARCHITECTURE.md");
    let text = fs::read_to_string(&path).unwrap();
    let (open, close) = (
        "<!-- crate-graph: drawn by spawnscope/tests/layers.rs -->\n",
        "<!-- /crate-graph -->",
    );
    let start = text
        .find(open)
        .expect("ARCHITECTURE.md has the crate-graph mark")
        + open.len();
    let end = start + text[start..].find(close).expect("and its end mark");
    let want = drawn(&graph);
    if text[start..end] != want {
        if std::env::var_os("UPDATE_ARCHITECTURE").is_some() {
            fs::write(&path, format!("{}{want}{}", &text[..start], &text[end..])).unwrap();
        } else {
            panic!(
                "ARCHITECTURE.md's crate graph is not cargo's; it should read:\n{want}\n(UPDATE_ARCHITECTURE=1 cargo test -p spawnscope --test layers redraws it)"
            );
        }
    }
}

#[test]
fn the_binary_s_command_line_is_below_its_commands() {
    let g = graph("spawnscope");
    let mut wrong = Vec::new();
    for (module, targets) in &g.edges {
        let Some(from) = room(module) else {
            wrong.push(format!(
                "{module}: in no room of the binary ({BINARY_ROOMS:?})"
            ));
            continue;
        };
        for (to, file, line) in targets {
            let to_room = room(to).unwrap_or(usize::MAX);
            if to_room > from {
                wrong.push(format!(
                    "{file}:{line}: {} imports {to}, a room above it",
                    BINARY_ROOMS[from]
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "layer rule broken:\n{}", wrong.join("\n"));
    assert!(
        g.edges.len() > 10,
        "the scan found only {} modules",
        g.edges.len()
    );
}

#[test]
fn no_module_circle_inside_any_crate() {
    for dir in crate_dirs() {
        let g = graph(&dir);
        assert!(!g.edges.is_empty(), "{dir}: the scan found no module");
        if let Some(circle) = find_circle(&g) {
            panic!("{dir}: import circle: {}", circle.join(" → "));
        }
    }
}

#[test]
fn analyse_studies_and_render_neither_spawn_nor_touch_files() {
    let mut files = Vec::new();
    for layer in ["analyse", "studies", "render"] {
        rust_files(
            &workspace().join("crates").join(layer).join("src"),
            &mut files,
        );
    }
    let forbidden = [
        "std::fs",
        "fs::",
        "File::",
        "Command::new",
        "std::process",
        "read_dir",
        "OpenOptions",
    ];
    let mut wrong = Vec::new();
    for file in &files {
        let code = code_of(&fs::read_to_string(file).unwrap());
        for (n, line) in code.lines().enumerate() {
            for f in forbidden {
                if line.contains(f) {
                    wrong.push(format!("{}:{}: {f}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        files.len() > 60,
        "found too few analyse/studies/render files"
    );
    assert!(
        wrong.is_empty(),
        "analyse, studies and render must stay pure:\n{}",
        wrong.join("\n")
    );
}

/// The most lines a source file holds outside its test module: past it, a file does several
/// things and is cut by what they are (ARCHITECTURE.md).
const MOST_LINES: usize = 900;

#[test]
fn no_source_file_passes_900_lines_outside_its_tests() {
    let mut files = Vec::new();
    for dir in crate_dirs() {
        rust_files(&workspace().join(dir).join("src"), &mut files);
    }
    let wrong: Vec<String> = files
        .iter()
        .filter_map(|f| {
            // code_of keeps every line before the test module (its comments blanked).
            let lines = code_of(&fs::read_to_string(f).unwrap()).lines().count();
            (lines > MOST_LINES).then(|| format!("{}: {lines} lines", f.display()))
        })
        .collect();
    assert!(files.len() > 150, "found too few source files");
    assert!(
        wrong.is_empty(),
        "over {MOST_LINES} lines outside the tests:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scanner_sees_a_planted_upward_import_and_circle() {
    // The checks above pass only if the scanner can see what it looks for.
    let modules: BTreeSet<String> = [
        "record",
        "render::table",
        "render",
        "analyse::comparisons::compare",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let code = "use crate::render::table::Table;\nlet x = crate::analyse::comparisons::compare::compare_runs();\nuse crate::{record::Plan, render};";
    let found: Vec<String> = imports(code, &modules)
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(
        found,
        [
            "render::table",
            "analyse::comparisons::compare",
            "record",
            "render"
        ]
    );
    let g = Graph {
        edges: BTreeMap::from([
            (
                "a".to_string(),
                vec![("b".to_string(), "a.rs".to_string(), 1)],
            ),
            (
                "b".to_string(),
                vec![("a".to_string(), "b.rs".to_string(), 1)],
            ),
        ]),
    };
    assert_eq!(find_circle(&g).unwrap(), ["a", "b", "a"]);
    // A circle hidden in grouped imports, one of them over several lines, as rustfmt writes it.
    let modules: BTreeSet<String> = [
        "measure",
        "measure::run",
        "measure::preflight",
        "measure::perf",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = "use crate::measure::{perf, preflight};";
    let preflight =
        "use crate::{\n    measure::{\n        run::RUNTIME_THREADS,\n    },\n    units,\n};";
    assert_eq!(
        imports(run, &modules),
        [
            ("measure::perf".to_string(), 1),
            ("measure::preflight".to_string(), 1)
        ]
    );
    assert_eq!(
        imports(preflight, &modules),
        [("measure::run".to_string(), 1)]
    );
    let edges = |code: &str| {
        imports(code, &modules)
            .into_iter()
            .map(|(m, line)| (m, "fixture.rs".to_string(), line))
            .collect()
    };
    let g = Graph {
        edges: BTreeMap::from([
            ("measure::run".to_string(), edges(run)),
            ("measure::preflight".to_string(), edges(preflight)),
        ]),
    };
    assert_eq!(
        find_circle(&g).unwrap(),
        ["measure::preflight", "measure::run", "measure::preflight"]
    );
    assert_eq!(room("commands::run"), Some(1));
    assert!(room("cli") < room("commands::run"));
    assert_eq!(room("record"), None);
}
