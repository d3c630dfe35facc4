//! report.html as a person sees it: built by `spawnscope report` from synthetic results
//! directories, opened offline in headless Chromium (Debian's `chromium`), screenshotted, and the
//! picture checked: not blank, and the charts' own colours are on it (so the inline SVG rendered).

mod common;

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::browser::{chromium, count_colour, screenshot};
use common::synthetic;
use common::*;

fn build_report(tmp: &Path) -> PathBuf {
    let sweep = tmp.join("sweep");
    synthetic::write_sweep(&sweep, &[1_000, 10_000, 100_000], 2);
    let out = tmp.join("out");
    let output = Command::new(spawnscope_bin())
        .arg("report")
        .arg(&sweep)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out.join("report.html")
}

#[test]
fn the_page_is_self_contained_and_has_its_charts_and_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let html = fs::read_to_string(build_report(tmp.path())).unwrap();
    // Offline: nothing is fetched (the SVG namespace is a name, not a request).
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    for forbidden in [
        "http://", "https://", "<script", "<link", "@import", "src=\"",
    ] {
        assert!(
            !without_ns.contains(forbidden),
            "report.html contains {forbidden}"
        );
    }
    // 2 charts for hold (memory, time) + 2 timelines, inline; the flame graph as a data: object.
    assert_eq!(html.matches("<figure class=\"chart\"").count(), 4);
    assert!(html.matches("<svg").count() >= 4);
    for id in [
        "id=\"memory-per-task-hold\"",
        "id=\"time-per-task-hold\"",
        "id=\"timeline-threads-hold-100000\"",
        "id=\"timeline-goroutines-hold-100000\"",
        "id=\"fits\"",
        "id=\"machines\"",
        "id=\"checks\"",
        "id=\"flames\"",
        "data:image/svg+xml;base64,",
    ] {
        assert!(html.contains(id), "missing {id}");
    }
    assert!(html.contains("<td>kernel stack</td><td>16.0 KiB ± 0 B</td>"));
}

/// report.html in headless Chromium: the screenshot checked not blank and showing the memory
/// chart's stacked bars. `name` names the screenshot kept with SPAWNSCOPE_KEEP_SCREENSHOT.
fn renders_with_its_charts(browser: &Path, page: &Path, tmp: &Path, name: &str) {
    let shot = screenshot(browser, page, tmp, name, (1280, 2600));
    let pixels = &shot.pixels;
    let channels = shot.channels;
    let total = (shot.width * shot.height) as usize;
    let white = count_colour(pixels, channels, [255, 255, 255]);
    assert!(
        white < total * 97 / 100,
        "the page is blank: {white} of {total} pixels white"
    );
    let colours: HashSet<&[u8]> = pixels.chunks(channels).collect();
    assert!(colours.len() > 50, "{} colours only", colours.len());
    // The memory chart's stacked bars: RSS steel blue and kernel-stack red, in blocks.
    let rss = count_colour(pixels, channels, [70, 130, 180]);
    let stack = count_colour(pixels, channels, [214, 39, 40]);
    assert!(rss > 2_000, "RSS bars not drawn: {rss} pixels");
    assert!(stack > 2_000, "kernel-stack bars not drawn: {stack} pixels");
    // Kept for a person to look at when the test runs with --nocapture.
    println!("screenshot: {}", shot.png.display());
    let keep = std::env::var_os("SPAWNSCOPE_KEEP_SCREENSHOT").map(PathBuf::from);
    if let Some(path) = keep {
        fs::copy(&shot.png, path).unwrap();
    }
}

#[test]
fn chromium_renders_the_charts() {
    let Some(browser) = chromium() else {
        println!("SKIP: chromium is not installed (apt-get install chromium; scripts/test.sh installs it)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let page = build_report(tmp.path());
    renders_with_its_charts(&browser, &page, tmp.path(), "report");
}

/// docs/example-results: a small real results set shipped with the project (runs included), so
/// that `report`, `flame` and the HTML page can be tried in seconds, without root.
#[test]
fn the_shipped_example_results_render_without_root() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let example = tmp.path().join("example");
    copy_tree(&common::repo_root().join("docs/example-results"), &example);
    let out = tmp.path().join("out");
    // As nobody when this test runs as root (setpriv, util-linux) and nobody may run the binary
    // where it was built: nothing here needs privileges.
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let as_nobody = is_root()
        && Command::new("/usr/bin/setpriv")
            .args(nobody)
            .arg(spawnscope_bin())
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    println!(
        "running report and flame as {}",
        if as_nobody { "nobody" } else { "this user" }
    );
    let spawnscope = |args: &[&str]| {
        let mut cmd = if as_nobody {
            let mut c = Command::new("/usr/bin/setpriv");
            c.args(nobody).arg(spawnscope_bin());
            c
        } else {
            Command::new(spawnscope_bin())
        };
        let output = cmd.args(args).output().unwrap();
        assert!(
            output.status.success(),
            "spawnscope {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    let compare = example.join("compare");
    let report = spawnscope(&[
        "report",
        compare.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = String::from_utf8_lossy(&report.stdout);
    assert!(said.contains("**hold: a thread costs"), "{said}");
    let page = out.join("report.html");
    assert!(page.is_file());
    let single = fs::read_dir(example.join("single"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("perf.folded").is_file())
        .expect("a run recorded with --perf, perf.folded kept");
    let svg = out.join("flame.svg");
    spawnscope(&[
        "flame",
        single.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(fs::read_to_string(&svg).unwrap().contains("<svg"));
    let Some(browser) = chromium() else {
        println!("SKIP (the picture only): chromium is not installed");
        return;
    };
    renders_with_its_charts(&browser, &page, tmp.path(), "example");
}

/// tests/fixtures/three-runtimes: a real `compare` of threads, goroutines and tokio (hold, N =
/// 10,000 and 30,000, one repeat; raw records only). `report` puts tokio beside the others in
/// every export: the cells in the descriptors' order, the headline of each runtime against the
/// cheapest, a timeline and bars per runtime, the page's title, and tokio's OS threads checked
/// against the runtime's own count.
#[test]
fn a_recorded_set_of_three_runtimes_reports_tokio_beside_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    copy_tree(
        &common::repo_root().join("spawnscope/tests/fixtures/three-runtimes"),
        &set,
    );
    let out = tmp.path().join("out");
    let output = Command::new(spawnscope_bin())
        .arg("report")
        .arg(&set)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let runtimes = ["threads", "goroutines", "tokio"];
    let compare = read_json(out.join("compare.json"));
    let cells = compare["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6);
    for n in [10_000, 30_000] {
        let order: Vec<&str> = cells
            .iter()
            .filter(|c| c["n"] == n)
            .map(|c| c["runtime"].as_str().unwrap())
            .collect();
        assert_eq!(
            order, runtimes,
            "N = {n}: the cells in the descriptors' order"
        );
    }
    // The headline names all three: the cheapest is the base of both factors.
    let h = &compare["headlines"][0];
    let (dearer, between, cheaper) = (&h["dearer"], &h["between"][0], &h["cheaper"]);
    let memory = |side: &serde_json::Value| side["memory_kib"].as_f64().unwrap();
    assert!(memory(dearer) >= memory(between) && memory(between) >= memory(cheaper));
    let mut named: Vec<&str> = [dearer, between, cheaper]
        .iter()
        .map(|s| s["runtime"].as_str().unwrap())
        .collect();
    named.sort_by_key(|r| runtimes.iter().position(|x| x == r));
    assert_eq!(named, runtimes);
    let md = fs::read_to_string(out.join("compare.md")).unwrap();
    let one_task = |r: &str| match r {
        "threads" => "thread",
        "goroutines" => "goroutine",
        _ => "tokio task",
    };
    let base = one_task(cheaper["runtime"].as_str().unwrap());
    for side in [dearer, between] {
        let clause = format!("a {} costs ", one_task(side["runtime"].as_str().unwrap()));
        let at = md
            .find(&clause)
            .unwrap_or_else(|| panic!("{clause} in {md}"));
        assert!(md[at..].contains(&format!("× a {base} in memory")), "{md}");
    }
    // The runs of tokio: its OS threads counted from the runtime's own figure, and checked.
    for run in compare["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["runtime"] == "tokio")
    {
        let summary = read_json(set.join(run["dir"].as_str().unwrap()).join("summary.json"));
        let threads = summary["probes"]["cross_checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "threads created vs spawned")
            .expect("the threads-created check");
        assert_eq!(threads["verdict"], "pass", "{threads}");
    }
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html
        .contains("<h1>spawnscope: what one thread, one goroutine and one tokio task cost</h1>"));
    for runtime in runtimes {
        assert!(
            html.contains(&format!("id=\"timeline-{runtime}-hold-30000\"")),
            "{runtime}'s timeline"
        );
        assert!(
            html.contains(&format!("<td>{runtime}</td>")),
            "{runtime}'s cells"
        );
    }
    let bars = fs::read_to_string(out.join("charts/memory-per-task-hold.svg")).unwrap();
    for runtime in runtimes {
        assert_eq!(
            bars.matches(&format!("\n{runtime}\n")).count(),
            2,
            "{runtime}'s bars"
        );
    }
    if let Some(browser) = chromium() {
        renders_with_its_charts(&browser, &out.join("report.html"), tmp.path(), "three");
    }
}

/// A copy of a directory tree anyone may write (the test's unprivileged user writes beside it).
fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(to).unwrap();
    fs::set_permissions(to, fs::Permissions::from_mode(0o777)).unwrap();
    for entry in fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
            fs::set_permissions(&target, fs::Permissions::from_mode(0o666)).unwrap();
        }
    }
}
