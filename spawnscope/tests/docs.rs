//! The pages say what their results sets say: `spawnscope docs render --check` passes on the
//! repository as committed, and fails, naming the figure, when a page's figure is edited by hand.

mod common;

use std::process::Command;

fn check(root: &std::path::Path) -> (bool, String) {
    let out = Command::new(common::spawnscope_bin())
        .args(["docs", "render", "--check", "--root"])
        .arg(root)
        .output()
        .expect("spawnscope runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A scratch repository root with these sets' compare.json and the generated man and reference
/// pages as committed; its pages are the test's to write.
fn scratch_docs(sets: &[&str]) -> tempfile::TempDir {
    let repo = common::repo_root();
    let root = tempfile::tempdir().unwrap();
    let docs = root.path().join("docs");
    for set in sets {
        std::fs::create_dir_all(docs.join(set)).unwrap();
        std::fs::copy(
            repo.join("docs").join(set).join("compare.json"),
            docs.join(set).join("compare.json"),
        )
        .unwrap();
    }
    for dir in ["man", "reference/cli"] {
        std::fs::create_dir_all(docs.join(dir)).unwrap();
        for entry in std::fs::read_dir(repo.join("docs").join(dir)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), docs.join(dir).join(entry.file_name())).unwrap();
        }
    }
    root
}

#[test]
fn every_figure_page_man_page_and_reference_page_is_as_rendered_from_its_source() {
    let (ok, said) = check(&common::repo_root());
    assert!(ok, "{said}");
    assert!(said.contains("up to date"), "{said}");
}

#[test]
fn a_figure_edited_by_hand_is_found_and_named() {
    let repo = common::repo_root();
    let root = scratch_docs(&["compare", "example-results/compare", "main-job"]);
    // README.md links to files beside it; they are not what this test is about.
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let links = regex::Regex::new(r"\]\([^)#]+\)").unwrap();
    let readme = links.replace_all(&readme, "](README.md)").into_owned();
    std::fs::write(root.path().join("README.md"), &readme).unwrap();
    let (ok, said) = check(root.path());
    assert!(ok, "the copy as committed passes: {said}");

    let line = readme
        .lines()
        .find(|l| l.starts_with("| total memory (RSS + kernel) |"))
        .expect("the front page's per-task table has a total row");
    let edited = line.replacen("36.5 KiB", "36.4 KiB", 1);
    assert_ne!(line, edited, "the front page says a thread costs 36.5 KiB");
    std::fs::write(
        root.path().join("README.md"),
        readme.replacen(line, &edited, 1),
    )
    .unwrap();
    let (ok, said) = check(root.path());
    assert!(!ok, "an edited figure must fail the check: {said}");
    assert!(said.contains("figure pertask compare hold"), "{said}");
    assert!(said.contains("stale: README.md"), "{said}");
}

#[test]
fn a_value_quoted_in_prose_and_edited_by_hand_is_found_and_named() {
    let repo = common::repo_root();
    let root = scratch_docs(&["reproduce-async-runtimes-2024"]);
    std::fs::write(root.path().join("README.md"), "# x\n").unwrap();
    let page = "docs/manual/studies/async-runtimes-2024.md";
    let text = std::fs::read_to_string(repo.join(page)).unwrap();
    std::fs::create_dir_all(root.path().join("docs/manual/studies")).unwrap();
    std::fs::write(root.path().join(page), &text).unwrap();
    let (ok, said) = check(root.path());
    assert!(ok, "the page as committed passes: {said}");

    // The page quotes tokio's max RSS at a million from its set; a hand edit of it is found.
    let quoted = "reproduce.rows[3].1[2] text -->437.0<!-- /value -->";
    assert!(text.contains(quoted), "the page quotes tokio's 437.0 MB");
    std::fs::write(
        root.path().join(page),
        text.replacen(quoted, &quoted.replace("437.0", "430.0"), 1),
    )
    .unwrap();
    let (ok, said) = check(root.path());
    assert!(!ok, "an edited value must fail the check: {said}");
    assert!(
        said.contains("value reproduce-async-runtimes-2024 reproduce.rows[3].1[2]"),
        "{said}"
    );
}
