//! A serve run for people: the load wrk put on it, what one connection and one request cost, and
//! what happened (terminal lines and summary.md's section).

pub mod charts;

use std::fmt::Write;

use crate::table::Table;
use analyse::serving::ServeFigures;
use units::count;

/// wrk's figures in one line: requests/s, latency, errors.
pub fn load_line(f: &ServeFigures) -> String {
    let l = &f.load;
    let latency = l.latency_ms.as_ref().map_or("no response".into(), |lat| {
        format!(
            "latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.0} ms{}",
            lat.p50,
            lat.p90,
            lat.p99,
            lat.max,
            if l.latency_exact {
                ""
            } else {
                " (quantiles averaged over the wrk processes)"
            }
        )
    });
    let e = &l.errors;
    format!(
        "{} connections, {:.0} s: {} requests, {:.1} requests/s, {}/s; {latency}; errors: connect {}, read {}, write {}, timeout {}, status {}",
        count(f.connections),
        l.duration_s,
        count(l.requests),
        l.requests_per_s,
        units::bytes(l.bytes_per_s),
        e.connect,
        e.read,
        e.write,
        e.timeout,
        e.status
    )
}

/// Per connection and per request, as (figure, value) rows.
pub fn cost_table(f: &ServeFigures) -> Table {
    let kib = |v: Option<f64>| v.map_or("not measured".into(), |v| format!("{v:.1} KiB"));
    let mut t = Table::new(["figure", "value"]);
    if let Some(c) = &f.per_connection {
        t.row([
            format!("memory per open connection ({} open)", count(c.open)),
            kib(c.memory_kib),
        ]);
        t.row([
            "… charged to the server's cgroup".to_string(),
            kib(c.charged_kib),
        ]);
        t.row([
            "… the kernel's socket buffers (outside RSS)".to_string(),
            kib(c.socket_kib),
        ]);
    }
    if let Some(r) = &f.per_request {
        let us = |v: Option<f64>| v.map_or("not measured".into(), |v| format!("{v:.1} µs"));
        t.row([
            format!(
                "user time per request ({} served in the load)",
                count(r.requests)
            ),
            us(r.user_us),
        ]);
        t.row(["system time per request".to_string(), us(r.sys_us)]);
        for k in &r.kernel {
            t.row([
                format!("{} per request", k.metric.replace('_', " ")),
                format!("{:.2}", k.per_request),
            ]);
        }
    }
    t
}

fn happened_line(f: &ServeFigures) -> String {
    if f.happened.is_empty() {
        "served every connection through the load".into()
    } else {
        f.happened.join("; ")
    }
}

pub fn terminal(out: &mut String, f: &ServeFigures) {
    let _ = writeln!(out, "  load: {}", load_line(f));
    let _ = writeln!(out, "  what happened: {}", happened_line(f));
    for row in &cost_table(f).rows {
        let _ = writeln!(out, "\t{:<44} {}", row[0].text(), row[1].text());
    }
}

pub fn markdown(md: &mut String, f: &ServeFigures) {
    let _ = writeln!(md, "\n## Serving\n");
    let _ = writeln!(md, "- Load ({}): {}", f.load.tool, load_line(f));
    let _ = writeln!(md, "- What happened: {}", happened_line(f));
    if let Some(s) = &f.server {
        let _ = writeln!(
            md,
            "- The server: {} connections accepted, {} open at most, {} responses{} ({}), {} bad requests, {} failed accepts, {} still open at the end",
            count(s.connections_accepted),
            count(s.connections_max_open),
            count(s.requests),
            s.requests_in_load
                .filter(|&n| n != s.requests)
                .map_or(String::new(), |n| format!(" ({} by the release)", count(n))),
            units::bytes(s.response_bytes as f64),
            s.bad_requests,
            s.accept_errors,
            s.open_at_end
        );
    }
    let table = cost_table(f);
    if !table.is_empty() {
        let _ = writeln!(md);
        md.push_str(&table.markdown());
    }
}

/// A comparison's serve runs, one row each (repeats apart: a server that fell over in one repeat
/// only shows it): the load, what a connection and a request cost, what happened.
pub fn sweep_table(runs: &[analyse::comparisons::compare::RunPoint]) -> Table {
    let mut t = Table::new([
        "runtime",
        "C",
        "memory limit",
        "requests/s",
        "latency p50",
        "latency p99",
        "memory / connection",
        "socket buffers / connection",
        "system / request",
        "user / request",
        "voluntary switches / request",
        "what happened",
    ])
    .right_aligned(1..=10);
    // A runtime-traced run's figures carry its tracer's cost: not the runtime's (listed apart).
    let mut serve: Vec<_> = runs
        .iter()
        .filter(|r| !r.runtime_traced)
        .filter_map(|r| Some((r, r.serve.as_ref()?)))
        .collect();
    let order = analyse::comparisons::compare::ordered_runtimes(
        serve.iter().filter_map(|(r, _)| r.runtime.as_deref()),
    );
    serve.sort_by_key(|(r, f)| {
        (
            order.iter().position(|o| Some(*o) == r.runtime.as_deref()),
            f.connections,
            r.memory_limit_bytes,
            r.started_utc.clone(),
        )
    });
    let ms = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.1} ms"));
    let us = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.1} µs"));
    let kib = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.1} KiB"));
    for (run, f) in serve {
        let latency = f.load.latency_ms.as_ref();
        let conn = f.per_connection.as_ref();
        let request = f.per_request.as_ref();
        let switches = request
            .and_then(|r| r.kernel.iter().find(|k| k.metric == "switches_voluntary"))
            .map_or("—".into(), |k| format!("{:.2}", k.per_request));
        t.row([
            run.runtime.clone().unwrap_or_default(),
            count(f.connections),
            run.memory_limit_bytes
                .map_or("—".into(), |b| units::bytes(b as f64)),
            format!("{:.0}", f.load.requests_per_s),
            ms(latency.map(|l| l.p50)),
            ms(latency.map(|l| l.p99)),
            kib(conn.and_then(|c| c.memory_kib)),
            kib(conn.and_then(|c| c.socket_kib)),
            us(request.and_then(|r| r.sys_us)),
            us(request.and_then(|r| r.user_us)),
            switches,
            happened_line(f),
        ]);
    }
    t
}
