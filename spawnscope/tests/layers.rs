//! The house rules of ARCHITECTURE.md, checked on the source: every module of the conductor lives in
//! a room, a room imports only from rooms below it, and no two files of either crate import each
//! other in a circle. A new import that breaks a rule fails here, in CI, naming the file and line.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The conductor's rooms, lowest first. A file in room i may import from rooms 0..=i.
const ROOMS: [&str; 11] = [
    "units", "runtime", "record", "host", "measure", "analyse", "studies", "render", "cli",
    "commands", "main",
];

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
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
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
    ROOMS.iter().position(|r| *r == top)
}

#[test]
fn every_conductor_module_is_in_a_room_and_imports_only_downwards() {
    let g = graph("spawnscope");
    let mut wrong = Vec::new();
    for (module, targets) in &g.edges {
        let Some(from) = room(module) else {
            wrong.push(format!("{module}: in no room of ARCHITECTURE.md"));
            continue;
        };
        for (to, file, line) in targets {
            let to_room = room(to).unwrap_or(usize::MAX);
            if to_room > from {
                wrong.push(format!(
                    "{file}:{line}: {} imports {to}, a room above it ({})",
                    ROOMS[from],
                    ROOMS.get(to_room).unwrap_or(&"?")
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "layer rule broken:\n{}", wrong.join("\n"));
    assert!(
        g.edges.len() > 30,
        "the scan found only {} modules: is it reading the source?",
        g.edges.len()
    );
}

#[test]
fn no_import_circle_in_the_conductor() {
    let g = graph("spawnscope");
    if let Some(circle) = find_circle(&g) {
        panic!("import circle: {}", circle.join(" → "));
    }
}

#[test]
fn no_import_circle_in_the_collector() {
    let g = graph("collector");
    assert!(
        g.edges.len() > 3,
        "the scan found too few collector modules"
    );
    if let Some(circle) = find_circle(&g) {
        panic!("import circle: {}", circle.join(" → "));
    }
}

#[test]
fn analyse_studies_and_render_neither_spawn_nor_touch_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("analyse"), &mut files);
    rust_files(&src.join("studies"), &mut files);
    rust_files(&src.join("render"), &mut files);
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
    assert!(files.len() > 8, "found too few analyse/render files");
    assert!(
        wrong.is_empty(),
        "analyse/, studies/ and render/ must stay pure:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn analyse_reads_no_raw_record_from_measure() {
    // Raw records live in record/: analyse/ derives figures from them, never from what measure/
    // holds (ARCHITECTURE.md, the rooms).
    let g = graph("spawnscope");
    let wrong: Vec<String> = g
        .edges
        .iter()
        .filter(|(module, _)| module.starts_with("analyse"))
        .flat_map(|(module, targets)| {
            targets
                .iter()
                .filter(|(to, _, _)| to.starts_with("measure"))
                .map(move |(to, file, line)| format!("{file}:{line}: {module} imports {to}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "analyse/ imports from measure/:\n{}",
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
    let code = "use crate::render::table::Table;\nlet x = crate::analyse::compare::compare_runs();\nuse crate::{record::Plan, render};";
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
    assert_eq!(room("record::perf"), Some(2));
    assert!(room("record") < room("measure::run"));
}
