//! report.html: one self-contained page that works offline — inline CSS, the charts as inline
//! SVG, the tables, the machines' fingerprints side by side, cross-checks per run, and each run's
//! flame graph (flame.svg) when there is one. No script, no font, no link leaves the file.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::chart_kit::Chart;
use crate::comparisons::compare;
use crate::comparisons::cpu_sweep;
use crate::table::{escape, Table};
use crate::time::repeats;
use crate::time::verdict;
use analyse::comparisons::compare::{Comparison, RunPoint};
use analyse::memory::resolution;
use record::Fingerprint;
use runtime::DESCRIPTORS;
use units::{bytes, count};

/// The `<svg …>…</svg>` element of an SVG document (without its XML prolog or doctype).
fn svg_element(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1240px;color:#222;line-height:1.4}\
h1{font-size:26px}h2{font-size:20px;margin-top:32px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}\
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}\
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}\
td.l{text-align:left}.ok{color:#1a7f37}.bad{color:#c62828}\
figure{margin:12px 0 24px}figcaption{font-size:13px;color:#555}\
.chart svg{max-width:100%;height:auto;border:1px solid #ddd}\
object.flame{width:100%;height:520px;border:1px solid #ddd}\
code{background:#f4f4f4;padding:1px 4px}ul{font-size:14px}";

/// The machines' fingerprints side by side: one column per machine, one row per field, then one
/// per sysctl any of them recorded.
pub fn machines_table(report: &Comparison) -> Table {
    type Field = fn(&Fingerprint) -> String;
    const FIELDS: &[(&str, Field)] = &[
        ("hostname", |f| f.hostname.clone()),
        ("CPU", |f| f.cpu_model.clone()),
        ("cores", |f| f.cores.to_string()),
        ("memory", |f| bytes(f.memory_total_bytes as f64)),
        ("kernel", |f| format!("{} ({})", f.kernel, f.arch)),
        ("virtualization", |f| f.virtualization.clone()),
        ("transparent hugepages", |f| f.transparent_hugepages.clone()),
        ("glibc", |f| f.glibc.clone()),
        ("Rust", |f| f.rust.clone().unwrap_or_default()),
        ("Go", |f| f.go.clone().unwrap_or_default()),
        ("cgroups", |f| f.cgroup.clone()),
    ];
    let fps: Vec<&Fingerprint> = report.machines.iter().map(|m| &m.fingerprint).collect();
    let mut t = Table::new(
        std::iter::once(String::new()).chain(
            report
                .machines
                .iter()
                .map(|m| format!("{} ({} runs)", m.id, m.runs)),
        ),
    );
    for (label, get) in FIELDS {
        t.row(std::iter::once(label.to_string()).chain(fps.iter().map(|f| get(f))));
    }
    let mut keys: Vec<&String> = fps.iter().flat_map(|f| f.sysctls.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        t.row(
            std::iter::once(k.clone()).chain(
                fps.iter()
                    .map(|f| f.sysctls.get(k).cloned().unwrap_or_default()),
            ),
        );
    }
    t
}

fn kb(v: f64) -> String {
    bytes(v * 1024.0)
}

/// A column of the cross-checks: its header and its cell for one run.
type CheckColumn = (&'static str, fn(&RunPoint) -> String);

/// The cross-checks' columns, one row per run.
const CHECK_COLUMNS: &[CheckColumn] = &[
    ("run", |r| r.label.clone()),
    ("outcome", |r| {
        r.outcome.split(':').next().unwrap_or("").to_string()
    }),
    ("alive at peak / N", |r| {
        format!(
            "{} / {}",
            r.alive_at_peak.map_or("?".into(), count),
            r.n.map_or("?".into(), count)
        )
    }),
    ("most alive", |r| r.alive_max.map_or("?".into(), count)),
    ("parts / task", |r| {
        r.memory_per_task
            .as_ref()
            .map_or("—".into(), |m| kb(m.total_kb))
    }),
    ("MemAvailable drop / task", |r| {
        r.memory_per_task
            .as_ref()
            .map_or("—".into(), |m| kb(m.mem_available_drop_kb))
    }),
    ("parts vs drop", |r| {
        r.memory_per_task.as_ref().map_or("—".into(), |m| {
            if !m.resolution.resolved {
                return format!(
                    "not resolved ({})",
                    crate::memory::per_task::percent_or_no_drop(m.difference_percent)
                );
            }
            format!(
                "{} {}",
                crate::memory::per_task::percent_or_no_drop(m.difference_percent),
                if m.adds_up { "✓" } else { "✗" }
            )
        })
    }),
    ("cgroup charge / task", |r| {
        r.memory_per_task
            .as_ref()
            .and_then(|m| m.cgroup_kb)
            .map_or("—".into(), kb)
    }),
    (VERDICT_COLUMN, |r| verdict::cell(r.verdict.as_ref())),
    ("probes' own cost", |r| {
        r.probe_cost_share
            .map_or("—".into(), |s| format!("{:.1} % of CPU", s * 100.0))
    }),
    ("sysctls restored", |r| {
        if r.sysctls_restored { "yes" } else { "NO" }.into()
    }),
    ("schema violations", |r| r.contract_violations.to_string()),
    ("collector", |r| {
        if r.has_collector { "yes" } else { "no" }.into()
    }),
    ("directory", |r| r.dir.clone()),
];

/// Cross-checks per run: memory parts against MemAvailable and the cgroup, tasks alive against
/// N, sysctls put back, the workload's output against the event schema.
pub fn checks_table(report: &Comparison) -> Table {
    // Runs recorded before verdicts existed keep the table they had.
    let judged = report.runs.iter().any(|r| r.verdict.is_some());
    let columns: Vec<&CheckColumn> = CHECK_COLUMNS
        .iter()
        .filter(|(h, _)| judged || *h != VERDICT_COLUMN)
        .collect();
    let mut t = Table::new(columns.iter().map(|(h, _)| *h));
    for r in &report.runs {
        t.row(columns.iter().map(|(_, cell)| cell(r)));
    }
    t
}

const VERDICT_COLUMN: &str = "time figures";

/// The page's title: one task of each runtime the report has runs of, in the descriptors' order
/// ("what one thread, one goroutine and one tokio task cost").
fn title(report: &Comparison) -> String {
    let tasks: Vec<String> = DESCRIPTORS
        .iter()
        .filter(|d| {
            report
                .runs
                .iter()
                .any(|r| r.runtime.as_deref() == Some(d.name))
        })
        .map(|d| format!("one {}", d.one_task))
        .collect();
    match tasks.as_slice() {
        [] => "spawnscope report".into(),
        [one] => format!("spawnscope: what {one} costs"),
        [first @ .., last] => format!("spawnscope: what {} and {last} cost", first.join(", ")),
    }
}

/// The page. `flames`: each run's flame.svg, by the run's directory as the report names it;
/// `swimlanes`: each traced run's swimlane, likewise.
pub fn page(
    report: &Comparison,
    charts: &[Chart],
    flames: &BTreeMap<String, Vec<u8>>,
    swimlanes: &BTreeMap<String, Chart>,
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\">\
<title>spawnscope report</title><style>{STYLE}</style></head><body>\n\
<h1>{}</h1>\n\
<p>{} runs on {} machine(s); rendered {} from the raw records on disk.</p>\n",
        escape(&title(report)),
        report.runs.len(),
        report.machines.len(),
        escape(&report.rendered_utc)
    );
    for line in report.headlines.iter().map(|hl| hl.line()) {
        let _ = writeln!(h, "<p class=\"headline\"><b>{}</b></p>", escape(&line));
    }
    for line in report.cpu_sweep.iter().flat_map(|s| &s.headlines) {
        let _ = writeln!(h, "<p class=\"headline\"><b>{}</b></p>", escape(line));
    }
    if let Some(line) = compare::times_line(&report.cells) {
        let _ = writeln!(h, "<p class=\"times\">{}</p>", escape(&line));
    }
    if let Some(plan) = &report.plan {
        let notes: Vec<&str> = plan
            .cells
            .iter()
            .filter_map(|c| c.note.as_deref())
            .collect();
        if !notes.is_empty() || plan.stopped.is_some() {
            h.push_str("<h2 id=\"plan\">Plan: what the preflight changed</h2><ul>");
            for n in notes {
                let _ = write!(h, "<li>{}</li>", escape(n));
            }
            if let Some(s) = &plan.stopped {
                let _ = write!(h, "<li class=\"bad\">stopped early: {}</li>", escape(s));
            }
            h.push_str("</ul>\n");
        }
    }
    if let Some(rep) = &report.reproduce {
        let _ = write!(
            h,
            "<h2 id=\"reproduce\">{}, reproduced</h2><p>Article figures: {}.</p>",
            escape(&rep.title),
            escape(&rep.source)
        );
        h.push_str(&compare::reproduce_table(rep).html("reproduce"));
        h.push_str("<ul>");
        for c in &rep.caveats {
            let _ = write!(h, "<li>{}</li>", escape(c));
        }
        h.push_str("</ul>\n");
    }
    let serving = crate::serving::sweep_table(&report.runs);
    if !serving.is_empty() {
        let _ = write!(
            h,
            "<h2 id=\"serving\">{}</h2><p>{}</p>",
            escape(compare::SERVING_TITLE),
            escape(compare::SERVING_NOTE)
        );
        h.push_str(&serving.html("serving"));
    }
    if let Some(table) = compare::scheduler_table(report) {
        let _ = write!(
            h,
            "<h2 id=\"scheduler\">{}</h2><p>{}</p>",
            escape(compare::SCHEDULER_TITLE),
            escape(compare::SCHEDULER_NOTE)
        );
        h.push_str(&table.html("scheduler"));
    }
    h.push_str(&crate::traces::runtime_latency::html(report));
    swimlanes_section(&mut h, report, swimlanes);
    h.push_str("<h2 id=\"runs\">Runs: median (min … max) over repeats</h2>\n");
    h.push_str(&compare::runs_table(report).html("cells"));
    if report.cells.iter().any(|c| c.memory_unresolved) {
        let _ = write!(h, "<p>{}</p>", escape(&compare::unresolved_note()));
    }
    if report.cells.iter().any(|c| c.cpu_emulated) {
        let _ = write!(h, "<p>{}</p>", escape(compare::EMULATED_NOTE));
    }
    if report.cells.iter().any(|c| c.counts_wrong_runs > 0) {
        let _ = write!(h, "<p>{}</p>", escape(compare::COUNTS_WRONG_NOTE));
    }
    if report.cells.iter().any(|c| c.times_from_suspect_runs > 0) {
        let _ = write!(h, "<p>{}</p>", escape(compare::SUSPECT_NOTE));
    }
    if !report.repeats.is_empty() {
        h.push_str("<h2 id=\"repeats\">Time over repeats: median (min … max)</h2>\n");
        h.push_str(&repeats::table(&report.repeats).html("repeats"));
        if let Some(line) = repeats::left_out_line(&report.repeats) {
            let _ = write!(h, "<p>{}</p>", escape(&line));
        }
        h.push_str("<ul>");
        for line in repeats::causes(&report.repeats) {
            let _ = write!(h, "<li>{}</li>", escape(&line));
        }
        h.push_str("</ul>\n");
    }
    if let Some(sweep) = &report.cpu_sweep {
        let _ = write!(
            h,
            "<h2 id=\"cpus\">{}</h2>\n<p>{}</p>\n",
            escape(cpu_sweep::TITLE),
            escape(&cpu_sweep::note(sweep))
        );
        let mut runtimes: Vec<&str> = Vec::new();
        for s in &sweep.series {
            if !runtimes.contains(&s.runtime.as_str()) {
                runtimes.push(&s.runtime);
            }
        }
        for runtime in runtimes {
            let _ = writeln!(h, "<h3>{}</h3>", escape(runtime));
            h.push_str(&cpu_sweep::table(sweep, runtime).html("cpus"));
        }
    }
    h.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for c in charts {
        let _ = writeln!(
            h,
            "<figure class=\"chart\" id=\"{}\">{}<figcaption><b>{}</b> — {}</figcaption></figure>",
            escape(c.file.trim_end_matches(".svg")),
            svg_element(&c.svg),
            escape(&c.title),
            escape(&c.note)
        );
    }
    h.push_str("<h2 id=\"fits\">Per task by regression over N</h2>\n<p>Slope = what one more task costs; intercept = the fixed cost. Memory is regressed on tasks alive at the peak, time and counts on tasks spawned; every completed repeat is a point. R² says how well a straight line explains them.</p>\n");
    if report.fits.iter().any(|f| !f.resolution.resolved) {
        let _ = writeln!(h, "<p>{}</p>", escape(resolution::RULE));
    }
    h.push_str(&compare::fits_table(report).html("fits"));
    let with_flame: Vec<&RunPoint> = report.runs.iter().filter(|r| r.has_flame).collect();
    if !with_flame.is_empty() {
        h.push_str("<h2 id=\"flames\">Flame graphs</h2>\n");
        for r in with_flame {
            if let Some(svg) = flames.get(&r.dir) {
                // An <object> keeps the flame graph's own script (zoom, search) in its own
                // document, apart from this page and from the other flame graphs.
                let _ = writeln!(
                    h,
                    "<figure><object class=\"flame\" type=\"image/svg+xml\" data=\"data:image/svg+xml;base64,{}\"></object><figcaption>{} — {}</figcaption></figure>",
                    base64(svg),
                    escape(&r.label),
                    escape(&r.dir)
                );
            }
        }
    }
    h.push_str("<h2 id=\"machines\">Machines</h2>\n");
    h.push_str(&machines_table(report).html("machines"));

    h.push_str("<h2 id=\"checks\">Cross-checks per run</h2>\n<p>Memory parts (RSS + kernel stack + page tables + slab) against how far MemAvailable fell and what the run's cgroup was charged; tasks alive at the peak against N; sysctls put back; the workload's output against the event schema.</p>\n");
    h.push_str(&checks_table(report).html("checks"));
    if !report.stopped_at_limit.is_empty() {
        h.push_str(
            "<h2>Runs that stopped at a limit (kept: their tasks alive were measured)</h2><ul>",
        );
        for e in &report.stopped_at_limit {
            let _ = write!(h, "<li>{}</li>", escape(e));
        }
        h.push_str("</ul>\n");
    }
    if !report.excluded.is_empty() {
        h.push_str("<h2>Runs with nothing measured (left out)</h2><ul>");
        for e in &report.excluded {
            let _ = write!(h, "<li>{}</li>", escape(e));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<p><small>Generated by spawnscope: <code>spawnscope report DIR…</code> renders this page again from the results directories.</small></p>\n</body></html>\n");
    h
}

/// Each traced run's swimlane under its run's name, in the runs' order.
fn swimlanes_section(h: &mut String, report: &Comparison, swimlanes: &BTreeMap<String, Chart>) {
    let traced: Vec<(&RunPoint, &Chart)> = report
        .runs
        .iter()
        .filter_map(|r| Some((r, swimlanes.get(&r.dir)?)))
        .collect();
    if traced.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"swimlanes\">Swimlanes: each traced run's threads and CPUs over time</h2>\n",
    );
    for (r, c) in traced {
        let _ = writeln!(
            h,
            "<h3>{}</h3><figure class=\"chart swimlane\" id=\"swimlane-{}\">{}<figcaption>{} In the run's directory: <code>{}/{}</code>; every thread in <code>{}/{}</code> (ui.perfetto.dev).</figcaption></figure>",
            escape(&r.label),
            escape(&r.dir),
            svg_element(&c.svg),
            escape(&c.note),
            escape(&r.dir),
            escape(&c.file),
            escape(&r.dir),
            record::PERFETTO_TRACE
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn escapes_and_strips_the_prolog() {
        assert_eq!(escape("<a & 'b'>"), "&lt;a &amp; &#39;b&#39;&gt;");
        assert_eq!(svg_element("<?xml version=\"1.0\"?>\n<svg x>"), "<svg x>");
    }

    #[test]
    fn the_page_has_every_table_built_once() {
        let mut report: Comparison = serde_json::from_str(include_str!(
            "../../../spawnscope/tests/fixtures/before-house/compare/compare.json"
        ))
        .unwrap();
        report.reproduce = Some(studies::hansen_2023::table(
            &report.runs,
            &record::Plan::default(),
        ));
        let html = page(&report, &[], &BTreeMap::new(), &BTreeMap::new());
        for (class, table) in [
            (
                "reproduce",
                compare::reproduce_table(report.reproduce.as_ref().unwrap()),
            ),
            ("cells", compare::runs_table(&report)),
            ("fits", compare::fits_table(&report)),
            ("machines", machines_table(&report)),
            ("checks", checks_table(&report)),
        ] {
            assert_eq!(
                html.matches(&format!("<table class=\"{class}\">")).count(),
                1
            );
            assert!(html.contains(&table.html(class)), "{class}");
        }
        assert_eq!(html.matches("<table ").count(), 5);
        let checks = checks_table(&report);
        assert_eq!(checks.rows.len(), report.runs.len());
        // Runs without a verdict (recorded before it existed): no "time figures" column.
        assert!(report.runs.iter().all(|r| r.verdict.is_none()));
        assert!(checks
            .rows
            .iter()
            .all(|r| r.len() == CHECK_COLUMNS.len() - 1));
        let mut judged = report.clone();
        judged.runs[0].verdict = Some(analyse::time::verdict::Verdict {
            trustworthy: true,
            findings: vec![],
            not_checked: vec![],
        });
        let checks = checks_table(&judged);
        assert!(checks.rows.iter().all(|r| r.len() == CHECK_COLUMNS.len()));
        let at = checks
            .header
            .iter()
            .position(|h| h.text() == VERDICT_COLUMN)
            .unwrap();
        assert_eq!(checks.rows[0][at].text(), "trustworthy");
        assert_eq!(checks.rows[1][at].text(), "not judged");
        assert_eq!(checks.rows[0][0].text(), report.runs[0].label);
        let machines = machines_table(&report);
        assert_eq!(machines.header.len(), 1 + report.machines.len());
        assert_eq!(machines.rows[0][0].text(), "hostname");
        assert!(html.contains("<h1>spawnscope: what one thread and one goroutine cost</h1>"));
    }

    #[test]
    fn the_title_names_one_task_of_each_runtime_measured() {
        let mut report: Comparison = serde_json::from_str(include_str!(
            "../../../spawnscope/tests/fixtures/before-house/compare/compare.json"
        ))
        .unwrap();
        let mut tokio = report.runs[0].clone();
        tokio.runtime = Some("tokio".into());
        report.runs.push(tokio);
        assert_eq!(
            title(&report),
            "spawnscope: what one thread, one goroutine and one tokio task cost"
        );
        report
            .runs
            .retain(|r| r.runtime.as_deref() == Some("tokio"));
        assert_eq!(title(&report), "spawnscope: what one tokio task costs");
        report.runs.clear();
        assert_eq!(title(&report), "spawnscope report");
    }
}
