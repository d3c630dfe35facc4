//! `spawnscope report` over synthetic results directories whose figures follow known lines: the
//! per-task slopes, intercepts and R² must come out exactly; noise of a known size must give the
//! R² and standard error it implies; directories from two machines stay apart and their
//! fingerprints appear side by side. And one small real `compare` (root), which must leave the
//! machine as it found it.

mod common;

use std::path::Path;
use std::process::Command;

use common::synthetic::{self, Options, GOROUTINES, THREADS, TOKIO};
use common::*;
use serde_json::Value;

const NS: [u64; 3] = [1_000, 10_000, 100_000];

fn report(dirs: &[&Path], out: &Path) -> std::process::Output {
    let mut cmd = Command::new(spawnscope_bin());
    cmd.arg("report");
    for d in dirs {
        cmd.arg(d);
    }
    cmd.arg("--out").arg(out);
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn fit<'a>(compare: &'a Value, runtime: &str, metric: &str) -> &'a Value {
    compare["fits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["runtime"] == runtime && f["metric"] == metric && f["workload"] == "hold")
        .unwrap_or_else(|| panic!("no fit of {runtime} {metric}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn exact_lines_give_exact_slopes_intercepts_and_r2() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("sweep");
    synthetic::write_sweep(&sweep, &NS, 2);
    let out = tmp.path().join("out");
    report(&[&sweep], &out);
    let compare = read_json(out.join("compare.json"));
    assert_eq!(compare["runs"].as_array().unwrap().len(), 12);
    assert_eq!(compare["cells"].as_array().unwrap().len(), 6);
    for world in [THREADS, GOROUTINES] {
        let parts = [
            ("rss_kb", world.rss_kb),
            ("kernel_stack_kb", world.kernel_stack_kb),
            ("page_tables_kb", world.page_tables_kb),
            ("slab_kb", world.slab_kb),
            ("user_us", world.user_us),
            ("sys_us", world.sys_us),
            ("wall_us", world.wall_us),
            ("minor_faults", world.minor_faults),
            ("voluntary_switches", world.voluntary),
            ("involuntary_switches", world.involuntary),
        ];
        for (metric, line) in parts {
            let f = fit(&compare, world.runtime, metric);
            let what = format!("{} {metric}: {f}", world.runtime);
            assert!(
                close(f["slope"].as_f64().unwrap(), line.per_task),
                "slope of {what}"
            );
            assert!(
                (f["intercept"].as_f64().unwrap() - line.fixed).abs() < 1e-6 * line.fixed.max(1.0),
                "intercept of {what}"
            );
            // The largest N's first threads repeat is traced, its twin is not: a time figure there
            // comes from the untraced run alone (analyse/time/times_from.rs), so the time fits have one
            // point fewer; memory and counts take both.
            let traced_left_out =
                world.runtime == "threads" && matches!(metric, "user_us" | "sys_us" | "wall_us");
            let points = if traced_left_out { 5 } else { 6 };
            assert_eq!(f["points"], points, "{what}");
            assert_eq!(f["distinct_x"], 3, "{what}");
            if line.per_task != 0.0 {
                assert_eq!(f["r2"].as_f64().unwrap(), 1.0, "R² of {what}");
            }
            assert!(f["slope_stderr"].as_f64().unwrap() < 1e-6, "{what}");
            assert_eq!(f["resolved"], true, "{what}");
            assert!(f.get("resolution_note").is_none(), "{what}");
        }
        let total = fit(&compare, world.runtime, "memory_total_kb");
        let per_task = world.rss_kb.per_task
            + world.kernel_stack_kb.per_task
            + world.page_tables_kb.per_task
            + world.slab_kb.per_task;
        assert!(close(total["slope"].as_f64().unwrap(), per_task), "{total}");
    }
    // The exports are all there, and say the same.
    for f in [
        "compare.csv",
        "compare-fits.csv",
        "compare.md",
        "report.html",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(
        md.contains("| threads | hold | kernel stack | 16.0 KiB ± 0 B | 0 B | 1.0000 | 6 (3) |"),
        "{md}"
    );
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7, "a header and one row per cell");
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("M1 (synthetic-a),threads,hold,1000,2,2,2,"));
    let fits_csv = std::fs::read_to_string(out.join("compare-fits.csv")).unwrap();
    assert!(
        fits_csv.contains(",threads,hold,kernel_stack_kib,KiB,alive_at_peak,6,3,16,0,"),
        "{fits_csv}"
    );
}

#[test]
fn three_runtimes_stand_side_by_side_in_every_export() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("sweep");
    synthetic::write_sweep_of(&sweep, &[TOKIO, GOROUTINES, THREADS], &NS, 1);
    let out = tmp.path().join("out");
    report(&[&sweep], &out);
    let compare = read_json(out.join("compare.json"));
    assert_eq!(compare["runs"].as_array().unwrap().len(), 9);
    // Cells in the descriptors' order, whatever order the directories came in.
    let order: Vec<&str> = compare["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["n"] == 1000)
        .map(|c| c["runtime"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["threads", "goroutines", "tokio"]);
    let rss = fit(&compare, "tokio", "rss_kb");
    assert!(
        close(rss["slope"].as_f64().unwrap(), TOKIO.rss_kb.per_task),
        "{rss}"
    );
    // The headline: each runtime against the cheapest in memory, dearest first.
    let h = &compare["headlines"][0];
    assert_eq!(h["dearer"]["runtime"], "threads");
    assert_eq!(h["between"][0]["runtime"], "goroutines");
    assert_eq!(h["cheaper"]["runtime"], "tokio");
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let headline = md
        .lines()
        .find(|l| l.starts_with("**hold: "))
        .unwrap_or_else(|| panic!("no headline in {md}"));
    assert!(
        headline.starts_with("**hold: a thread costs ")
            && headline.contains("× a tokio task in memory")
            && headline.contains(", and a goroutine costs ")
            && headline.contains("tokio at N = 100,000 (1 run), medians**"),
        "{headline}"
    );
    assert!(md.contains("| tokio | hold | 1,000 |"), "{md}");
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 10, "a header and one row per cell");
    // The page: titled for the three, a timeline per runtime, the headline on top.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains(
            "<h1>spawnscope: what one thread, one goroutine and one tokio task cost</h1>"
        ),
        "{html}"
    );
    for runtime in ["threads", "goroutines", "tokio"] {
        assert!(
            html.contains(&format!("id=\"timeline-{runtime}-hold-100000\"")),
            "{runtime}"
        );
    }
    assert!(html.contains(&format!("<b>{}</b>", &headline[2..headline.len() - 2])));
    // The charts: a bar per runtime at each N, and tokio's own colours on the time chart.
    let charts = out.join("charts");
    let memory = std::fs::read_to_string(charts.join("memory-per-task-hold.svg")).unwrap();
    for runtime in ["threads", "goroutines", "tokio"] {
        assert_eq!(
            memory.matches(&format!("\n{runtime}\n")).count(),
            NS.len(),
            "{runtime}'s bars"
        );
    }
    let time = std::fs::read_to_string(charts.join("time-per-task-hold.svg")).unwrap();
    assert!(time.contains("tokio system") && time.contains("tokio user"));
    assert!(
        time.contains("#2CA02C") && time.contains("#98DF8A"),
        "tokio's green pair"
    );
}

/// Synthetic goroutine runs, two repeats at each of `ns` whose system time is `noise` µs above
/// and below the true line, reported into `root`/out: its compare.json.
fn noisy_goroutines(root: &Path, ns: &[u64], noise: f64) -> serde_json::Value {
    let mut dirs = Vec::new();
    for &n in ns {
        for (r, sign) in [1.0, -1.0].iter().enumerate() {
            let mut o = Options::new(GOROUTINES, n);
            o.sys_noise_us = sign * noise;
            dirs.push(synthetic::write_run(root, &format!("g-{n}-{r}"), &o));
        }
    }
    let out = root.join("out");
    let refs: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    report(&refs, &out);
    read_json(out.join("compare.json"))
}

#[test]
fn known_noise_gives_the_r2_and_standard_error_it_implies() {
    let tmp = tempfile::tempdir().unwrap();
    let noise = 2_000.0;
    let compare = noisy_goroutines(tmp.path(), &NS, noise);
    let f = fit(&compare, "goroutines", "sys_us");
    // The noise averages out at each N: the line is the true one.
    assert!(
        close(f["slope"].as_f64().unwrap(), GOROUTINES.sys_us.per_task),
        "{f}"
    );
    assert!(
        (f["intercept"].as_f64().unwrap() - GOROUTINES.sys_us.fixed).abs() < 1e-6,
        "{f}"
    );
    // SSE = 6 d²; SST = slope² Σ(x - x̄)² + 6 d²; se² = SSE / (6 - 2) / Σ(x - x̄)².
    let xs: Vec<f64> = NS.iter().flat_map(|&n| [n as f64, n as f64]).collect();
    let mean = xs.iter().sum::<f64>() / 6.0;
    let sxx: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    let sse = 6.0 * noise * noise;
    let sst = GOROUTINES.sys_us.per_task.powi(2) * sxx + sse;
    let r2 = f["r2"].as_f64().unwrap();
    assert!(close(r2, 1.0 - sse / sst), "R² {r2} vs {}", 1.0 - sse / sst);
    assert!(r2 < 1.0);
    let se = f["slope_stderr"].as_f64().unwrap();
    assert!(close(se, (sse / 4.0 / sxx).sqrt()), "{se}");
    // The cell shows the spread of the repeats: min / median / max.
    let cell = compare["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["n"] == 1000)
        .unwrap();
    let sys = GOROUTINES.sys_us.at(1000);
    assert!(close(
        cell["sys_s"]["min"].as_f64().unwrap(),
        (sys - noise) / 1e6
    ));
    assert!(close(cell["sys_s"]["median"].as_f64().unwrap(), sys / 1e6));
    assert!(close(
        cell["sys_s"]["max"].as_f64().unwrap(),
        (sys + noise) / 1e6
    ));
}

/// Two N close together and noise as large as the signal: the system time per task is not
/// resolved there, and every export says so and by about which N it would be; the exact lines
/// beside it stay figures.
#[test]
fn a_slope_below_what_these_n_resolve_is_said_so_with_the_n_that_would() {
    let tmp = tempfile::tempdir().unwrap();
    let noise = 1_500.0;
    let compare = noisy_goroutines(tmp.path(), &[1_000, 2_000], noise);
    let out = tmp.path().join("out");
    let sys = fit(&compare, "goroutines", "sys_us");
    let (slope, se) = (
        sys["slope"].as_f64().unwrap(),
        sys["slope_stderr"].as_f64().unwrap(),
    );
    // se = √(SSE / (4 - 2) / Sxx) = √(4 d² / 2 / (4 · 500²)): t = 3 / 2.12, between 1 and 4.
    assert!(close(slope, GOROUTINES.sys_us.per_task), "{sys}");
    assert!(close(se, (4.0 * noise * noise / 2.0 / 1e6).sqrt()), "{sys}");
    assert_eq!(sys["resolved"], false, "{sys}");
    assert_eq!(sys["unresolved"], "imprecise", "{sys}");
    // The sweep scaled until se ≤ slope / 4: 2,000 · 4 se / slope, rounded up to two figures.
    let want = 2_000.0 * 4.0 * se / slope;
    let at = sys["resolve_at_n"].as_u64().unwrap();
    assert!(
        at as f64 >= want && (at as f64) < want + 100.0,
        "{at} for {want}"
    );
    assert!(
        (2_000..10_000).contains(&at),
        "{at}: 4× the largest N at most"
    );
    let note = sys["resolution_note"].as_str().unwrap();
    assert!(
        note.starts_with("not resolved at N = 1,000–2,000: s.e. 71 % of the slope; needs ≈ N = ")
            && note.ends_with(&format!("{},{:03} (an estimate)", at / 1_000, at % 1_000)),
        "{note}"
    );
    // The exact lines are figures.
    let rss = fit(&compare, "goroutines", "rss_kb");
    assert_eq!(rss["resolved"], true, "{rss}");
    assert!(rss.get("resolve_at_n").is_none(), "{rss}");
    // compare.md (what compare prints on the terminal) and report.html: the verdict instead of
    // the figure, the fit after it; the rule stated once.
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let row = |label: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| goroutines | hold | {label} |")))
            .unwrap_or_else(|| panic!("no {label} row in {md}"))
            .to_string()
    };
    assert!(
        row("system time").contains(&format!("| {note}; fit: 3.00 µs ± 2.12 µs |")),
        "{}",
        row("system time")
    );
    for label in ["RSS", "user time", "wall time"] {
        assert!(!row(label).contains("not resolved"), "{}", row(label));
    }
    assert!(
        md.contains("is resolved at the N measured when its standard error is at most a quarter")
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(&format!("<td>{note}; fit: 3.00 µs ± 2.12 µs</td>")));
    // The CSV keeps the numbers and adds the verdict.
    let csv = std::fs::read_to_string(out.join("compare-fits.csv")).unwrap();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .ends_with(",resolved,resolve_at_n,resolution_note"));
    let line = csv.lines().find(|l| l.contains(",sys_us,")).unwrap();
    assert!(
        line.contains(&format!(",{slope},{se},"))
            && line.contains(&format!(",false,{at},\"not resolved at N")),
        "{line}"
    );
    // What is written is what the committed schema documents.
    assert_matches_schemas(&out);
}

#[test]
fn runs_from_two_machines_stay_apart_with_fingerprints_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let here = tmp.path().join("here");
    let there = tmp.path().join("copied-from-elsewhere");
    for (root, host) in [(&here, "synthetic-a"), (&there, "synthetic-b")] {
        for &n in &NS {
            let mut o = Options::new(THREADS, n);
            o.hostname = host;
            synthetic::write_run(root, &format!("threads-hold-{n}"), &o);
        }
    }
    let out = tmp.path().join("out");
    let printed = report(&[&here, &there], &out);
    let compare = read_json(out.join("compare.json"));
    let machines = compare["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 2, "{machines:?}");
    assert_eq!(machines[0]["id"], "M1 (synthetic-a)");
    assert_eq!(machines[1]["id"], "M2 (synthetic-b)");
    let fits: Vec<&Value> = compare["fits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["metric"] == "rss_kb")
        .collect();
    assert_eq!(fits.len(), 2, "one line per machine, never mixed");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("Synthetic CPU of synthetic-a")
            && html.contains("Synthetic CPU of synthetic-b")
    );
    assert!(html.contains("M2 (synthetic-b) (3 runs)"));
    assert!(out.join("charts/memory-per-task-hold-m2.svg").is_file());
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(
        stdout.contains("# spawnscope compare"),
        "compare dirs print compare.md: {stdout}"
    );
    // Re-rendering rewrote each run's summary from its raw records.
    assert!(here.join("threads-hold-1000/summary.json").is_file());
}

#[test]
fn a_collector_timeline_is_used_when_there_is_one_and_a_broken_file_is_tolerated() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("sweep");
    synthetic::write_sweep(&sweep, &NS, 1);
    let out = tmp.path().join("out");
    report(&[&sweep], &out);
    let charts = out.join("charts");
    let threads = std::fs::read_to_string(charts.join("timeline-threads-hold-100000.svg")).unwrap();
    assert!(
        threads.contains("page faults") && threads.contains("switches voluntary"),
        "from collector.json"
    );
    let goroutines =
        std::fs::read_to_string(charts.join("timeline-goroutines-hold-100000.svg")).unwrap();
    assert!(
        goroutines.contains("MemAvailable drop"),
        "from memory.json without a collector"
    );
    // A collector.json of another shape falls back to the memory timeline instead of failing.
    std::fs::write(
        sweep.join("threads-hold-100000-r0/collector.json"),
        "{\"series\": 3}",
    )
    .unwrap();
    report(&[&sweep], &out);
    let threads = std::fs::read_to_string(charts.join("timeline-threads-hold-100000.svg")).unwrap();
    assert!(threads.contains("MemAvailable drop"));
}

#[test]
fn a_small_real_compare_runs_the_matrix_and_restores_the_machine() {
    if skip_unless_root("a_small_real_compare_runs_the_matrix_and_restores_the_machine") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox.dir.path().join("cmp");
    let output = sandbox
        .command(&[
            "compare",
            "--runtimes",
            "threads,goroutines",
            "--n",
            "300,600",
            "--workloads",
            "hold",
            "--repeats",
            "2",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("run 8 of 8"), "{stderr}");
    assert!(stderr.contains("ETA"), "{stderr}");
    // Once per runtime, before any run: its memory (two short hold runs) and its probes (one
    // traced hold); no run calibrates again.
    assert_eq!(
        stderr.matches("compare: calibrating ").count(),
        2,
        "memory once per runtime: {stderr}"
    );
    assert_eq!(
        stderr.matches("calibrating the probes").count(),
        2,
        "probes once per runtime: {stderr}"
    );
    assert_eq!(
        stderr.matches("calibrating").count(),
        4,
        "nothing calibrated per run: {stderr}"
    );
    // Other root tests on the host may move the global sysctls meanwhile: what this run owns
    // is its state file, gone when everything it raised was put back.
    assert!(!sandbox.state_dir().join("sysctl-state.json").exists());
    assert_matches_schemas(&out);
    let compare = read_json(out.join("compare.json"));
    assert_eq!(compare["runs"].as_array().unwrap().len(), 8);
    assert!(compare["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["ok"] == true));
    let rss = fit(&compare, "threads", "rss_kb");
    assert_eq!(rss["distinct_x"], 2);
    let plan = read_json(out.join("plan.json"));
    assert_eq!(plan["cells"].as_array().unwrap().len(), 4);
    assert!(out.join("report.html").is_file());
    assert!(out.join("charts/memory-per-task-hold.svg").is_file());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("## Per task by regression over N"),
        "{stdout}"
    );
    // The result first, and the set's directory alone on the last line.
    assert!(
        stdout.contains("**hold: a thread costs"),
        "the headline: {stdout}"
    );
    assert_eq!(stdout.lines().last(), Some(out.to_str().unwrap()));
    // --json: compare.json on stdout, with where it is. (A cell re-run, its runs added to the
    // set: the same directory, read again.)
    let json = sandbox
        .command(&[
            "compare",
            "--runtimes",
            "goroutines",
            "--n",
            "300",
            "--workloads",
            "hold",
            "--repeats",
            "1",
            "--json",
            "--out",
            sandbox.dir.path().join("cmp-json").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON document ({e}): {}",
            String::from_utf8_lossy(&json.stdout)
        )
    });
    let written = read_json(sandbox.dir.path().join("cmp-json/compare.json"));
    assert_eq!(printed["runs"], written["runs"]);
    assert_eq!(
        printed["results_dir"],
        sandbox.dir.path().join("cmp-json").display().to_string()
    );
}

#[test]
fn sigint_stops_the_matrix_after_the_current_run_and_still_reports() {
    if skip_unless_root("sigint_stops_the_matrix_after_the_current_run_and_still_reports") {
        return;
    }
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox.dir.path().join("cmp");
    let mut child = sandbox
        .command(&[
            "compare",
            "--runtimes",
            "threads",
            "--n",
            "2000,4000",
            "--workloads",
            "hold",
            "--repeats",
            "2",
            "--hold-for",
            "60s",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let peaked = wait_until(std::time::Duration::from_secs(90), || {
        std::fs::read_dir(&out).is_ok_and(|d| {
            d.flatten()
                .any(|e| events_so_far(&e.path()).contains(r#""event":"peak""#))
        })
    });
    assert!(peaked, "the first run did not reach its peak");
    // SAFETY: kill has no memory-safety preconditions; the PID is our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_with_limit(&mut child, std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(128 + libc::SIGINT));
    let plan = read_json(out.join("plan.json"));
    let stopped = plan["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("SIGINT received"), "{stopped}");
    let compare = read_json(out.join("compare.json"));
    let runs = compare["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one run started, none after the signal");
    assert!(runs[0]["outcome"]
        .as_str()
        .unwrap()
        .starts_with("interrupted by SIGINT"));
    assert!(out.join("report.html").is_file());
    assert!(!sandbox.state_dir().join("sysctl-state.json").exists());
}

/// Each `compare` call is refused as bad input: exit 2, one stderr line containing its text,
/// nothing on stdout, nothing created where its results would go.
fn assert_compares_refused(sandbox: &Sandbox, cases: &[(&[&str], &str)]) {
    let out = sandbox.dir.path().join("refused");
    for (args, says) in cases {
        let mut full: Vec<&str> = vec!["compare", "--out", out.to_str().unwrap()];
        full.extend_from_slice(args);
        let output = sandbox.command(&full).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: one line: {stderr}"
        );
        assert!(!out.exists(), "{args:?} created {}", out.display());
    }
}

#[test]
fn bad_commands_and_labels_are_refused_before_anything_is_created() {
    let sandbox = Sandbox::new();
    assert_compares_refused(
        &sandbox,
        &[
            (&["--label", "x"][..], "--command <CMD>"),
            (&["--command", ""][..], "--command is empty"),
            (&["--command", "sleep 10"][..], "has no {n}"),
            (&["--command", "sleep '{n}"][..], "unbalanced quotes"),
            (
                &["--command", "sleep {n}", "--label", "a", "--label", "b"][..],
                "2 --label for 1 --command",
            ),
            (
                &["--command", "sleep {n}", "--label", "threads"][..],
                "is a runtime's name",
            ),
            (
                &[
                    "--command",
                    "/bin/sleep {n}",
                    "--command",
                    "/usr/bin/sleep {n}",
                ][..],
                "two commands are named sleep",
            ),
            (
                &["--command", "sleep {n}", "--workloads", "hold"][..],
                "--workloads and workload flags are for --runtimes",
            ),
            (
                &["--command", "spawnscope-no-such-program {n}"][..],
                "command not found: spawnscope-no-such-program",
            ),
            (
                &[
                    "--reproduce",
                    "async-runtimes-2024",
                    "--command",
                    "sleep {n}",
                ][..],
                "cannot be used with",
            ),
            (
                &["--reproduce", "async-runtimes-2024", "--sleep", "1s"][..],
                "workload flags do not apply",
            ),
            (&["--task-lifetime", "10s"][..], "--command <CMD>"),
        ],
    );
}

#[test]
fn a_command_is_swept_over_n_under_its_label_beside_nothing_else() {
    if skip_unless_root("a_command_is_swept_over_n_under_its_label_beside_nothing_else") {
        return;
    }
    let Some(program) = build_sleepers() else {
        eprintln!("SKIP a_command_is_swept_over_n_under_its_label_beside_nothing_else: go cannot build tests/programs/sleepers");
        return;
    };
    let _one = serial();
    let sandbox = Sandbox::new();
    let out = sandbox.dir.path().join("cmp");
    let command = format!("{} {{n}} 3s", program.display());
    let output = sandbox
        .command(&[
            "compare",
            "--command",
            &command,
            "--label",
            "sleepers",
            "--task-lifetime",
            "3s",
            "--n",
            "2000,4000",
            "--repeats",
            "1",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("calibrating sleepers: two short runs at N=2,000 and 20,000"),
        "{stderr}"
    );
    assert!(stderr.contains("run 2 of 2"), "{stderr}");
    assert!(!sandbox.state_dir().join("sysctl-state.json").exists());
    assert_matches_schemas(&out);
    // Its runs are named after the label, and its output is kept out of compare's stdout.
    for n in [2000, 4000] {
        let dir = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&format!("-cmd-sleepers-{n}")))
            .unwrap_or_else(|| panic!("no cmd-sleepers-{n} directory in {}", out.display()));
        assert_eq!(
            std::fs::read_to_string(dir.join("command.stdout")).unwrap(),
            format!("all {n} sleeping\n")
        );
        let run = read_json(dir.join("run.json"));
        assert_eq!(run["target"]["label"], "sleepers");
        assert_eq!(run["target"]["tasks"], n);
        assert_eq!(run["target"]["task_kind"], "task");
        assert_eq!(run["target"]["task_lifetime_ns"], 3_000_000_000u64);
        assert!(run["estimate"]["fits"].as_bool().unwrap(), "{run}");
    }
    assert!(!stdout.contains("sleeping"), "{stdout}");
    let plan = read_json(out.join("plan.json"));
    assert_eq!(plan["commands"][0]["label"], "sleepers");
    assert_eq!(plan["commands"][0]["command"][1], "{n}");
    assert_eq!(
        plan["cells"].as_array().unwrap().len(),
        2,
        "no runtime beside it"
    );
    let compare = read_json(out.join("compare.json"));
    let cells = compare["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for (cell, n) in cells.iter().zip([2000, 4000]) {
        assert_eq!(cell["runtime"], "sleepers");
        assert_eq!(cell["workload"], "command");
        assert_eq!(cell["n"], n);
        assert_eq!(cell["alive_at_peak"]["median"], n as f64);
        assert!(
            cell["memory_kb"]["median"].as_f64().unwrap() > 0.0,
            "{cell}"
        );
        assert!(cell["kernel_stack_kb"].is_object(), "{cell}");
    }
    for run in compare["runs"].as_array().unwrap() {
        let at = run["measured_at_s"].as_f64().unwrap();
        assert!(at < 3.0, "measured within the tasks' 3 s: {run}");
        assert_eq!(run["task_lifetime_s"], 3.0);
    }
    let rss = compare["fits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["runtime"] == "sleepers" && f["metric"] == "rss_kb")
        .expect("a line of the command's RSS over N");
    assert_eq!(rss["workload"], "command");
    assert_eq!(rss["distinct_x"], 2);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("| sleepers | command | 2,000 |"), "{md}");
    assert!(
        stdout.contains("| sleepers | command | 4,000 |"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some(out.to_str().unwrap()));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("sleepers"));
    let time = std::fs::read_to_string(out.join("charts/time-per-task-command.svg")).unwrap();
    assert!(
        time.contains("sleepers system"),
        "the command has its own line"
    );
    assert!(out.join("charts/memory-per-task-command.svg").is_file());
    let _ = std::fs::remove_file(program);
}
