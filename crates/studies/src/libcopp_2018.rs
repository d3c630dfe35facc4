//! libcopp 2018 (owent, "协程框架(libcopp)v2优化、自适应栈池和同类库的Benchmark对比"): the cost in ns
//! of creating and of switching stackful coroutines, at 1 coroutine (16 KB stack), 1,000 (2 MB)
//! and 30,000 (64 KB), with each stack mmap'd and guarded; its finding that the first-touch page
//! fault of a fresh stack costs about ten times the rest of a create, which a stack pool removes.
//! Ours: glibc's ucontext and Boost.Context's fcontext (fresh stacks, and pooled), in
//! examples/coroutines, and goroutines (hold for create, pingpong for switch) at the same N,
//! with what spawnscope sees of them: page faults per create, memory per coroutine, system time.

use crate::{no_flags, Asked, Study};
use analyse::comparisons::regression::spread;
use analyse::comparisons::reproduce::Reproduce;
use analyse::comparisons::run_point::RunPoint;
use measure::examples::{self, Example, How};
use measure::loadgen::LoadOptions;
use measure::sweep::CompareOptions;
use record::Plan;
use runtime::{Runtime, TaskKind, WorkloadKind};
use units::{bytes, count};

pub const STUDY: Study = Study {
    name: "libcopp-2018",
    about: "libcopp 2018: stackful coroutine create and switch in ns at 1 (16 KB stacks), 1,000 (2 MB) and 30,000 (64 KB): glibc ucontext and Boost.Context (fresh and pooled stacks) from examples/coroutines, and goroutines (hold, pingpong), beside the article's table, with page faults per create",
    source: "owent, \"协程框架(libcopp)v2优化、自适应栈池和同类库的Benchmark对比\" (2018; code: github.com/owt5008137/libcopp/tree/v2/sample): average ns per create and per switch, one thread, Linux 3.10.104 in Docker, E5-2630 v2 @ 2.60GHz, GCC 8.1 -O2, Go 1.10.2, Boost 1.67; stacks mmap'd 4 KiB-aligned with an mprotect'd guard page",
    plan: Some(plan),
    table: Some(table),
    published_csv: None,
};

/// The article's points: (coroutines, stack size in its words).
pub const POINTS: [(u64, &str); 3] = [(1, "16 KB"), (1_000, "2 MB"), (30_000, "64 KB")];

/// The line a coroutine program prints with all N alive: its memory is read there.
const PEAK: &str = "\"event\":\"peak\"";

/// Round trips per goroutine pair in pingpong: a round trip is a resume and its yield.
const ROUNDS: &str = "1000";

const fn coroutines(
    label: &'static str,
    article: &'static str,
    binary: &'static str,
    flags: &'static [&'static str],
    args: &'static [&'static str],
    needs: &'static str,
) -> Example {
    Example {
        label,
        article,
        task_kind: TaskKind::Task,
        task_lifetime: None,
        peak_when: Some(PEAK),
        most_tasks: None,
        how: How::Cpp {
            source: "coroutines/coroutines.cc",
            binary,
            flags,
            args,
            needs,
        },
    }
}

const BOOST: &[&str] = &["-DWITH_BOOST_CONTEXT", "-lboost_context"];
const BOOST_NEEDS: &str = "Boost.Context: Debian apt-get install libboost-context-dev";

/// Our programs, each beside the article's nearest row.
pub const EXAMPLES: [Example; 3] = [
    coroutines(
        "ucontext-coroutines",
        "linux ucontext",
        "coroutines-ucontext",
        &[],
        &["ucontext"],
        "a C++ compiler: Debian apt-get install g++",
    ),
    coroutines(
        "fcontext-coroutines",
        "libcopp",
        "coroutines-boost",
        BOOST,
        &["fcontext"],
        BOOST_NEEDS,
    ),
    coroutines(
        "fcontext-coroutines-pool",
        "libcopp + dynamic stack pool",
        "coroutines-boost",
        BOOST,
        &["fcontext", "--pool"],
        BOOST_NEEDS,
    ),
];

/// One published row: ns at (1: switch, 1,000: create, 1,000: switch, 30,000: create, 30,000:
/// switch); None where it printed "-".
pub struct Published {
    pub row: &'static str,
    pub ns: [Option<f64>; 5],
}

const fn published(row: &'static str, ns: [f64; 5]) -> Published {
    Published {
        row,
        ns: [
            Some(ns[0]),
            Some(ns[1]),
            Some(ns[2]),
            Some(ns[3]),
            Some(ns[4]),
        ],
    }
}

/// The article's table, in its order (the first four rows' names lost in the copy kept, read
/// from its charts).
pub const PUBLISHED: [Published; 12] = [
    published("libcopp", [60.0, 3_700.0, 91.0, 3_500.0, 239.0]),
    published(
        "libcopp + dynamic stack pool",
        [60.0, 109.0, 90.0, 261.0, 238.0],
    ),
    published(
        "libcopp + libcotask",
        [79.0, 4_200.0, 124.0, 3_800.0, 338.0],
    ),
    published(
        "libcopp + libcotask + dynamic stack pool",
        [80.0, 246.0, 126.0, 340.0, 335.0],
    ),
    published(
        "libco + static stack pool",
        [94.0, 7_100.0, 180.0, 5_700.0, 451.0],
    ),
    published(
        "libco (shared stack, 4 KB used)",
        [94.0, 3_800.0, 173.0, 4_000.0, 558.0],
    ),
    published(
        "libco (shared stack, 8 KB used)",
        [95.0, 3_800.0, 1_021.0, 3_800.0, 1_810.0],
    ),
    Published {
        row: "libco (shared stack, 32 KB used)",
        ns: [
            None,
            Some(3_800.0),
            Some(6_275.0),
            Some(4_000.0),
            Some(6_429.0),
        ],
    },
    published("libgo with boost", [197.0, 5_300.0, 124.0, 2_300.0, 441.0]),
    published(
        "libgo with ucontext",
        [539.0, 7_000.0, 482.0, 2_700.0, 921.0],
    ),
    published("goroutine", [464.0, 578.0, 538.0, 1_400.0, 799.0]),
    published("linux ucontext", [356.0, 4_000.0, 431.0, 4_500.0, 946.0]),
];

/// Why the article's other libraries have no row of ours.
const NOT_PACKAGED: &str = "published only: libco, libgo and libcopp are not packaged (Debian 12 has none of them; each builds from its own sources), so no program of ours runs them";

/// Our coroutine programs at the article's three points, and goroutines at the same N: `hold`
/// (what a create costs) and `pingpong` with one pair per coroutine (what a switch costs), on one
/// processor as the article's single thread.
fn plan(asked: &Asked) -> Result<CompareOptions, String> {
    no_flags(
        asked,
        STUDY.name,
        "runs the article's points (its stack sizes, one thread)",
    )?;
    let (commands, skipped) = examples::prepare(&EXAMPLES);
    for s in &skipped {
        eprintln!("spawnscope compare: skipping {}: {}", s.label, s.why);
    }
    let ns: Vec<u64> = POINTS.iter().map(|(n, _)| *n).collect();
    let cells = ns
        .iter()
        .flat_map(|&n| {
            [WorkloadKind::Hold, WorkloadKind::Pingpong]
                .map(|wl| (Runtime::Goroutines, wl, n, None))
        })
        .collect();
    Ok(CompareOptions {
        runtimes: vec![Runtime::Goroutines],
        ns,
        workloads: vec![WorkloadKind::Hold, WorkloadKind::Pingpong],
        repeats: asked.repeats.unwrap_or(1),
        out: asked.out.clone(),
        memory_limit: asked.memory_limit,
        flags: vec![
            ("--gomaxprocs".into(), "1".into()),
            ("--rounds".into(), ROUNDS.into()),
        ],
        reproduce: Some(STUDY.name.into()),
        cells: Some(cells),
        commands,
        skipped,
        load: LoadOptions::default(),
        cpus: None,
        cpu_counts: Vec::new(),
        perfetto: false,
        trace_max_bytes: None,
        runtime_trace: false,
    })
}

const COLUMNS: [&str; 8] = [
    "1 coroutine (16 KB stack): switch",
    "1,000 (2 MB): create",
    "1,000: switch",
    "30,000 (64 KB): create",
    "30,000: switch",
    "page faults per create, 1 / 1,000 / 30,000 (the whole run's per coroutine)",
    "memory per coroutine, 1,000 / 30,000",
    "system time, 1 / 1,000 / 30,000",
];

fn ns_cell(ns: Option<f64>) -> String {
    match ns {
        Some(v) if v >= 1_000.0 => format!("{:.1} us", v / 1_000.0),
        Some(v) => format!("{v:.0} ns"),
        None => "-".into(),
    }
}

/// Ours: "—" where it did not run (the article's "-" is its own).
fn ours_ns(ns: Option<f64>) -> String {
    ns.map_or("—".into(), |v| ns_cell(Some(v)))
}

/// The median over measured runs of one figure.
fn median(runs: &[&RunPoint], f: impl Fn(&RunPoint) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    spread(&values).map(|s| s.median)
}

/// Our runs of one program (or runtime and workload) at N.
fn runs_of<'a>(
    runs: &'a [RunPoint],
    label: &str,
    workload: Option<&str>,
    n: u64,
) -> Vec<&'a RunPoint> {
    runs.iter()
        .filter(|r| {
            r.measured
                && r.runtime.as_deref() == Some(label)
                && r.n == Some(n)
                && workload.is_none_or(|w| r.workload.as_deref() == Some(w))
        })
        .collect()
}

/// "a / b / c" of one figure at each of `ns`, "—" where it did not run.
fn at_each(ns: &[u64], f: impl Fn(u64) -> Option<String>) -> String {
    ns.iter()
        .map(|&n| f(n).unwrap_or_else(|| "—".into()))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn seconds(v: f64) -> String {
    format!("{v:.2} s")
}

/// A program's row: create and switch from its own result line; faults, memory and system time
/// as spawnscope measured them.
fn program_row(runs: &[RunPoint], ex: &Example) -> Vec<String> {
    let pooled = ex.label.ends_with("-pool");
    // A pooled program's create is that of its later rounds: stacks taken back from the pool.
    let (create, faults) = if pooled {
        ("create_ns_later_rounds", "minflt_per_create_later_rounds")
    } else {
        ("create_ns", "minflt_per_create")
    };
    let mine = |n| runs_of(runs, ex.label, None, n);
    let figure = |n, key: &str| median(&mine(n), |r| r.program.get(key).copied());
    let mut values = vec![
        ours_ns(figure(1, "switch_ns")),
        ours_ns(figure(1_000, create)),
        ours_ns(figure(1_000, "switch_ns")),
        ours_ns(figure(30_000, create)),
        ours_ns(figure(30_000, "switch_ns")),
    ];
    let all = [1, 1_000, 30_000];
    values.push(at_each(&all, |n| {
        let own = figure(n, faults)?;
        let run = median(&mine(n), |r| Some(r.minor_faults as f64 / n as f64));
        Some(format!(
            "{own:.2} ({})",
            run.map_or("?".into(), |v| format!("{v:.1}"))
        ))
    }));
    values.push(at_each(&[1_000, 30_000], |n| {
        median(&mine(n), |r| r.memory_per_task.as_ref().map(|m| m.total_kb))
            .map(|kb| bytes(kb * 1024.0))
    }));
    values.push(at_each(&all, |n| {
        median(&mine(n), |r| Some(r.sys_s)).map(seconds)
    }));
    values
}

/// Goroutines' row: create from hold's spawn time per goroutine, switch from pingpong's hops
/// (a round trip, two hops, is a resume and its yield).
fn goroutines_row(runs: &[RunPoint]) -> Vec<String> {
    let of = |wl: &str, n| runs_of(runs, "goroutines", Some(wl), n);
    let create = |n| {
        median(&of("hold", n), |r| {
            r.program.get("spawn_ns_per_task").copied()
        })
    };
    let switch = |n| {
        median(&of("pingpong", n), |r| {
            r.program
                .get("throughput_per_s")
                .filter(|&&hops| hops > 0.0)
                .map(|hops| 2e9 / hops)
        })
    };
    let all = [1, 1_000, 30_000];
    vec![
        ours_ns(switch(1)),
        ours_ns(create(1_000)),
        ours_ns(switch(1_000)),
        ours_ns(create(30_000)),
        ours_ns(switch(30_000)),
        at_each(&all, |n| {
            median(&of("hold", n), |r| Some(r.minor_faults as f64 / n as f64))
                .map(|v| format!("({v:.1})"))
        }),
        at_each(&[1_000, 30_000], |n| {
            median(&of("hold", n), |r| {
                r.memory_per_task.as_ref().map(|m| m.total_kb)
            })
            .map(|kb| bytes(kb * 1024.0))
        }),
        at_each(&all, |n| {
            median(&of("hold", n), |r| Some(r.sys_s)).map(seconds)
        }),
    ]
}

/// The article's rows, each followed by ours where we have one beside it.
pub fn table(runs: &[RunPoint], plan: &Plan) -> Reproduce {
    let mut rows = Vec::new();
    let mut caveats = Vec::new();
    let not_ours = || vec!["not measured".to_string(); 3];
    for p in &PUBLISHED {
        let mut values: Vec<String> = p.ns.iter().map(|&v| ns_cell(v)).collect();
        values.extend(not_ours());
        rows.push((format!("article: {}", p.row), values));
        for ex in EXAMPLES.iter().filter(|e| e.article == p.row) {
            let label = format!("here: {}", ex.label);
            match plan.skipped.iter().find(|s| s.label == ex.label) {
                Some(s) => {
                    let mut values = vec![format!("skipped here: {}", s.why)];
                    values.resize(COLUMNS.len(), "—".into());
                    rows.push((label, values));
                }
                None => rows.push((label, program_row(runs, ex))),
            }
        }
        if p.row == "goroutine" {
            rows.push((
                "here: goroutines (hold, pingpong)".into(),
                goroutines_row(runs),
            ));
        }
    }
    caveats.push(format!(
        "libco, libgo and libcopp rows: {NOT_PACKAGED}. Ours stand beside the nearest published row: fcontext-coroutines (Boost.Context's make_fcontext/jump_fcontext) beside libcopp, whose context switch is Boost.Context's fcontext assembly; fcontext-coroutines-pool beside its stack pool; ucontext-coroutines beside linux ucontext."
    ));
    caveats.push("Our create, as the article's benchmark: mmap a stack (and mprotect its guard page), make the context and switch into it once (its stack's first touch) and back; a pooled program's create is that of its later rounds, its stacks taken back from the pool. Switch: one resume and the yield that returns, round-robin over all N. Both are the program's own clock (its result line in each run's command.stdout).".into());
    caveats.push("Page faults per create: the program's own count of minor faults over its create loop, per coroutine (getrusage); in brackets the whole run's minor faults (spawnscope's, startup included) per coroutine. A fresh stack costs one fault at its first switch; a pooled one none, which is the article's point: that fault is most of a create.".into());
    // What a pool saves: a pooled program's first round creates on fresh stacks, its later
    // rounds on stacks taken back from the pool.
    for ex in EXAMPLES.iter().filter(|e| e.label.ends_with("-pool")) {
        for &(n, _) in &POINTS {
            let mine = runs_of(runs, ex.label, None, n);
            let own = median(&mine, |r| r.program.get("minflt_per_create").copied());
            let create = median(&mine, |r| r.program.get("create_ns").copied());
            let reused = median(&mine, |r| r.program.get("create_ns_later_rounds").copied());
            if let (Some(f), Some(c), Some(r)) = (own, create, reused) {
                caveats.push(format!(
                    "{} at {}: a create on a fresh stack (its first round) {} with {f:.2} page faults each; on a stack taken back from the pool {} ({:.1}× less)",
                    ex.label,
                    count(n),
                    ns_cell(Some(c)),
                    ns_cell(Some(r)),
                    c / r.max(1.0)
                ));
            }
        }
    }
    caveats.push(format!(
        "goroutines: create is hold's spawn time per goroutine; switch is 2 / pingpong's hops per second (one pair per coroutine, {ROUNDS} round trips each), both on one processor (--gomaxprocs 1) as the article's single thread; the article's Go 1.10 goroutine rows had no stack size of their own (goroutine stacks start at 2 KiB since Go 1.4, whatever the column says)."
    ));
    for c in &plan.commands {
        caveats.push(format!(
            "{} here: {}{}",
            c.label,
            c.command.join(" "),
            c.version
                .as_ref()
                .map_or(String::new(), |v| format!(" ({v})"))
        ));
    }
    for s in &plan.skipped {
        caveats.push(format!("{} skipped: {}", s.label, s.why));
    }
    Reproduce {
        title: "libcopp 2018".into(),
        source: STUDY.source.into(),
        columns: COLUMNS.iter().map(|c| c.to_string()).collect(),
        rows,
        caveats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyse::memory::per_task::MemoryPerTask;
    use analyse::test_support::run_point;
    use record::Skipped;

    fn coroutine_run(label: &str, n: u64, figures: &[(&str, f64)]) -> RunPoint {
        let mut r = run_point(label, "command", n);
        r.minor_faults = 2 * n + 100;
        r.sys_s = 0.25;
        r.memory_per_task = Some(MemoryPerTask {
            total_kb: 8.0,
            ..Default::default()
        });
        r.program = figures.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        r
    }

    fn row<'a>(rep: &'a Reproduce, label: &str) -> &'a [String] {
        &rep.rows
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no row {label}: {:?}", rep.rows))
            .1
    }

    #[test]
    fn every_published_row_stays_and_ours_stand_beside_the_nearest() {
        let fresh = [
            ("create_ns", 25_000.0),
            ("create_ns_later_rounds", 20_000.0),
            ("switch_ns", 150.0),
            ("minflt_per_create", 1.0),
            ("minflt_per_create_later_rounds", 1.0),
        ];
        let pooled = [
            ("create_ns", 30_000.0),
            ("create_ns_later_rounds", 90.0),
            ("switch_ns", 160.0),
            ("minflt_per_create", 1.0),
            ("minflt_per_create_later_rounds", 0.0),
        ];
        let mut hold = run_point("goroutines", "hold", 30_000);
        hold.program.insert("spawn_ns_per_task".into(), 1_400.0);
        let mut pingpong = run_point("goroutines", "pingpong", 1_000);
        pingpong.program.insert("throughput_per_s".into(), 4e6);
        let runs = vec![
            coroutine_run("fcontext-coroutines", 1_000, &fresh),
            coroutine_run("fcontext-coroutines-pool", 30_000, &pooled),
            hold,
            pingpong,
        ];
        let plan = Plan {
            skipped: vec![Skipped {
                label: "ucontext-coroutines".into(),
                why: "no C++ compiler on PATH".into(),
            }],
            ..Plan::default()
        };
        let rep = table(&runs, &plan);
        assert_eq!(rep.title, "libcopp 2018");
        assert!(rep.rows.iter().all(|(_, v)| v.len() == COLUMNS.len()));
        assert_eq!(
            rep.rows
                .iter()
                .filter(|(l, _)| l.starts_with("article: "))
                .count(),
            12
        );
        assert_eq!(
            row(&rep, "article: libcopp")[..5],
            ["60 ns", "3.7 us", "91 ns", "3.5 us", "239 ns"]
        );
        assert_eq!(
            row(&rep, "article: libco (shared stack, 32 KB used)")[0],
            "-"
        );
        assert_eq!(row(&rep, "article: goroutine")[5], "not measured");
        // Fresh stacks: the program's create and switch, its faults, spawnscope's memory.
        let ours = row(&rep, "here: fcontext-coroutines");
        assert_eq!(ours[1], "25.0 us");
        assert_eq!(ours[2], "150 ns");
        assert_eq!(ours[3], "—");
        assert_eq!(ours[5], "— / 1.00 (2.1) / —");
        assert_eq!(ours[6], "8.0 KiB / —");
        // Pooled: the create of its later rounds, and no fault.
        let pool = row(&rep, "here: fcontext-coroutines-pool");
        assert_eq!(pool[3], "90 ns");
        assert_eq!(pool[5], "— / — / 0.00 (2.0)");
        // Goroutines: hold's spawn time, 2 / hops per second.
        let go = row(&rep, "here: goroutines (hold, pingpong)");
        assert_eq!((go[3].as_str(), go[2].as_str()), ("1.4 us", "500 ns"));
        // A program that could not be built says why in its row.
        assert_eq!(
            row(&rep, "here: ucontext-coroutines")[0],
            "skipped here: no C++ compiler on PATH"
        );
        assert!(rep.caveats.iter().any(|c| c.contains("not packaged")));
        assert!(rep.caveats.iter().any(|c| c
            == "fcontext-coroutines-pool at 30,000: a create on a fresh stack (its first round) 30.0 us with 1.00 page faults each; on a stack taken back from the pool 90 ns (333.3× less)"));
        // A program without a pool creates on fresh stacks in every round: no such line.
        assert!(!rep
            .caveats
            .iter()
            .any(|c| c.starts_with("fcontext-coroutines at")));
    }
}
