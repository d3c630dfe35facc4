//! The command line: `check`, `run`, `compare`, `sysctl`, `report`, `flame` (clap's types), and
//! the exit-code table every command answers with.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use measure::leash::{parse_pids_limit, parse_timeout, PidsLimitArg};
use measure::probes::{ProbeDetail, ProbeTimes};
use measure::run::RunError;
use record::perf::CallGraph;
use runtime::{Runtime, TaskKind, WorkloadKind};

#[derive(Parser, Debug)]
#[command(
    name = "spawnscope",
    version,
    about = "What does one OS thread, one goroutine or one tokio task cost, and where does the time go?",
    after_help = "Exit codes: 0 done; 1 failed (the machine was restored); 2 bad arguments (nothing changed);\n\
                  3 refused by the preflight (nothing changed); 4 the workload failed, hit a limit or was stopped by\n\
                  --timeout or --pids-limit (results written); 5 the run completed but its counts disagree with the\n\
                  kernel's (a cross-check failed; results written; 4 wins over 5);\n\
                  128+N interrupted by signal N (the machine was restored)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// What this host can do, and the exact fix for each missing piece.
    Check(CheckArgs),
    /// One run: tune, cgroup, run, measure from outside, restore, report per-task costs.
    Run(Box<RunArgs>),
    /// Show, raise or restore the kernel limits a run of many threads needs.
    Sysctl {
        #[command(subcommand)]
        action: SysctlAction,
    },
    /// Sweeps: runtimes × N × workloads × repeats; per-task costs by regression, charts, report.html.
    Compare(Box<CompareArgs>),
    /// Before a set's counted runs: calibrate each workload once, and write every page of as much
    /// memory as the largest will use, then give it back — the first big run after boot or an
    /// idle spell otherwise pays for memory used for the first time (trace.sh and the benchmarks
    /// start with it). Writes DIR/warmup.json, which `run --calibration-from DIR` reads.
    WarmUp(WarmUpArgs),
    /// Re-render summaries from results directories already on disk (no re-run); for several
    /// runs or a compare directory, also the compare exports, charts and report.html.
    Report {
        /// Results directories (results/<time>-<runtime>-<workload>-<n>/) and/or compare
        /// directories (results/compare-<time>/), from this machine or others.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where compare.{json,csv,md}, charts/ and report.html go [default: the compare
        /// directory given, else the directories' common parent]; with --perfetto, the cut
        /// trace's file [default: in the run directory, named by the cut].
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        cut: PerfettoCutArgs,
    },
    /// Flame graph of a run recorded with --perf, or two runs side by side on one CPU-time scale
    /// (e.g. threads and goroutines), or as a differential (--diff).
    Flame {
        /// One or two results directories recorded with `run --perf`.
        #[arg(required = true, num_args = 1..=2)]
        dirs: Vec<PathBuf>,
        /// The SVG to write.
        #[arg(short, long)]
        out: PathBuf,
        /// Two runs as a differential flame graph (the second's stacks, coloured by how their
        /// share changed from the first) instead of side by side.
        #[arg(long)]
        diff: bool,
    },
    /// The figures of a benchmark's alternating traced/untraced pairs (scripts/bench-overhead.sh's
    /// pairs.csv) as one JSON object on stdout: the wall and CPU ratios traced/untraced as the mean
    /// of the per-pair ratios with a 95 % t-interval, the CPU difference, the BPF programs' own
    /// time and the part of the difference it does not explain.
    Pairs {
        /// The CSV: workload,pair,first,untraced_wall_s,untraced_cpu_s,traced_wall_s,traced_cpu_s,bpf_s.
        csv: PathBuf,
        /// The workload whose pairs are read (the CSV's `workload` column).
        #[arg(long)]
        workload: String,
        /// Pair numbers to leave out (e.g. the benchmark's outliers), comma-separated.
        #[arg(long, value_delimiter = ',')]
        exclude: Vec<u32>,
        /// The margin the CPU ratio's half-width must be below, as a ratio (0.01: one
        /// percentage point).
        #[arg(long, default_value_t = 0.01)]
        margin: f64,
        /// The benchmark's programs.csv (workload,pair,program,tracepoint,events,filtered_out,
        /// total_ns): with it, the unexplained CPU time per program run of each traced run.
        #[arg(long)]
        programs: Option<PathBuf>,
        /// `probe-cost --json`'s output: the CPU difference checked against the band its figures
        /// predict for the traced runs' own events (analyse/probes/overhead_band.rs), in `band`.
        #[arg(long, requires = "programs")]
        band: Option<PathBuf>,
    },
    /// What each probe program costs an event of its hook, against the floor of that hook (a
    /// program doing one per-CPU array increment): for each hook the lean probes use, a loop that
    /// fires it, timed untraced and with each program attached, the kernel's BPF run-time
    /// statistics off and on, in interleaved cycles (root; scripts/bench-probe-cost.sh). Also
    /// listed: the program filtering out another run's events, the full probes' and the trace's.
    #[command(alias = "syscall-cost")]
    ProbeCost {
        /// Cycles: each times every hook's loop untraced, then with each program attached (the
        /// statistics off, then on). Each state's figure is its rounds' median.
        #[arg(long, alias = "cycles", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
        rounds: u32,
        /// About how long the rounds take in all, in seconds (loading the programs comes on top:
        /// about a second a cycle and hook).
        #[arg(long, default_value_t = 60.0, value_parser = parse_seconds)]
        seconds: f64,
        /// Only these hooks (category:name, comma-separated; `probe-cost --hooks help` lists
        /// them).
        #[arg(long, value_delimiter = ',')]
        hooks: Vec<String>,
        /// The raw rounds and the figures as one JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// The loops of probe-cost, run on its orders (stdin): not for people.
    #[command(hide = true)]
    ProbeLoop,
    /// Shell completions on stdout, e.g. `spawnscope completions bash >
    /// /usr/share/bash-completion/completions/spawnscope`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The JSON Schema of a results file on stdout (the same as the repository's
    /// schema/FILE.schema.json), e.g. `spawnscope schema summary > summary.schema.json`.
    Schema {
        #[arg(value_enum)]
        file: record::Documented,
    },
    /// The manual page (roff) on stdout, e.g. `spawnscope man > spawnscope.1; man ./spawnscope.1`.
    Man,
    /// A study's published figures on stdout: its source line (`# …`), then its table as CSV
    /// where it has one in the article's own shape (bench-of-chan: what scripts/bench-chan.sh
    /// sets beside its rows).
    Published {
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(studies::STUDIES.map(|s| s.name)))]
        study: String,
    },
    /// The project's own pages: render README.md's and the manual's figures from the results
    /// sets under docs/, the man page and the reference pages; check a rendered book's links.
    Docs {
        #[command(subcommand)]
        action: DocsAction,
    },
}

/// `report DIR --perfetto`: a cut of a traced run's Perfetto trace, for one larger than the UI
/// opens (the full trace.perfetto-trace is left as it is).
#[derive(Args, Debug, Default)]
pub struct PerfettoCutArgs {
    /// Write a cut of the run's Perfetto trace from its raw records (one run directory recorded
    /// with --perfetto): a time window and/or a sample of threads, as the options below say;
    /// only the cut is written.
    #[arg(long)]
    pub perfetto: bool,
    /// The window's start, in seconds from the trace's first record (CLOCK_BOOTTIME; where
    /// swimlane.svg and the full trace's timeline begin) [default: 0].
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "perfetto",
        allow_negative_numbers = true
    )]
    pub from: Option<f64>,
    /// The window's end, in seconds from the trace's first record [default: the run's end].
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "perfetto",
        allow_negative_numbers = true
    )]
    pub to: Option<f64>,
    /// The window: one of the run's phases (e.g. spawn), from its start to the next's.
    #[arg(long, value_name = "PHASE", requires = "perfetto", conflicts_with_all = ["from", "to"])]
    pub window: Option<String>,
    /// Keep K threads, chosen as the swimlane chooses them (the spawning thread always in) among
    /// those alive in the window [default: every thread alive in the window].
    #[arg(long, value_name = "K", requires = "perfetto")]
    pub threads: Option<usize>,
    /// Keep exactly these threads (comma-separated TIDs).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "perfetto",
        conflicts_with = "threads"
    )]
    pub tids: Vec<u32>,
}

#[derive(Subcommand, Debug)]
pub enum DocsAction {
    /// Fill every `<!-- figure: KIND SET … -->` block of README.md and docs/**/*.md, and every
    /// value quoted inline in their prose (a `value: SET PATH FORMAT` mark), from
    /// docs/SET/compare.json, and write docs/man/spawnscope.1 and docs/reference/cli/*.md from
    /// the command line's definition; exit 1 when README.md links to a file that is missing.
    Render {
        /// Write nothing: name every stale file and figure, and exit 1 if there is one.
        #[arg(long)]
        check: bool,
        /// The repository's root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Exit 1, naming each, when an HTML page under DIR (mdbook's output) links to a file that
    /// is not there or to an id its target lacks; links to other sites are not followed.
    Links {
        /// The rendered book, e.g. target/book.
        dir: PathBuf,
    },
}

/// clap's error in one line that still names what is wrong: the missing argument, the valid
/// values, clap's suggestion — everything but the usage and the help hint — and where help is.
pub fn one_line(err: &clap::Error) -> String {
    use clap::error::ErrorKind;
    if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = <Cli as clap::CommandFactory>::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        return format!(
            "a command is needed: {} (see spawnscope --help)",
            names.join(", ")
        );
    }
    let text = err.render().to_string();
    let said: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .take_while(|l| !l.starts_with("Usage:"))
        .collect();
    let line = said.join(" ");
    let line = line.trim_start_matches("error: ");
    // The subcommand the error is about, for its own --help.
    let command: Vec<&str> = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
        .map(|u| {
            u.split_whitespace()
                .take_while(|w| !w.starts_with(['-', '<', '[']))
                .collect()
        })
        .unwrap_or_else(|| vec!["spawnscope"]);
    format!("{line} (see {} --help)", command.join(" "))
}

/// Bad arguments: one line, exit 2, nothing changed.
pub fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("spawnscope: {message}");
    ExitCode::from(2)
}

/// How a run, or a sweep's runs, ended, as the exit code tells it (a sweep: its worst run's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Completed, and the counts agree with the kernel's or were not checked: 0.
    Done,
    /// Completed, but a cross-check failed: the counts disagree with the kernel's (5).
    CountsWrong,
    /// The workload failed, hit a limit or was stopped by the leash (4). The stronger news: a
    /// run that did not complete exits 4 whatever its counts, and so does a sweep with one.
    NotComplete,
}

impl Ended {
    /// One run, or a sweep: whether it (every run) completed, and whether its counts (a run's)
    /// are wrong.
    pub fn of_run(completed: bool, counts_wrong: bool) -> Ended {
        match (completed, counts_wrong) {
            (false, _) => Ended::NotComplete,
            (true, true) => Ended::CountsWrong,
            (true, false) => Ended::Done,
        }
    }
}

/// The exit code of a run or a sweep, as the help's table says: Ok carries the interrupting
/// signal, if any, and how the runs ended (a signal wins over both).
pub fn exit_code(result: Result<(Option<i32>, Ended), RunError>) -> ExitCode {
    match result {
        Ok((Some(sig), _)) => ExitCode::from(128 + sig as u8),
        Ok((None, Ended::Done)) => ExitCode::SUCCESS,
        Ok((None, Ended::NotComplete)) => ExitCode::from(4),
        Ok((None, Ended::CountsWrong)) => ExitCode::from(5),
        Err(RunError::Usage(message)) => usage_error(message),
        Err(RunError::Refused(message)) => {
            eprintln!("spawnscope: refused: {message}");
            ExitCode::from(3)
        }
        Err(RunError::Failed(err)) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.1..=3600.0).contains(&s) => Ok(s),
        _ => Err(format!("seconds from 0.1 to 3600, not {text:?}")),
    }
}

fn parse_hz(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(hz) if (1..=100_000).contains(&hz) => Ok(hz),
        _ => Err(format!("'{text}' is not a sampling rate of 1..100000 Hz")),
    }
}

/// N: a whole number of at least 1.
pub fn parse_n(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("'{text}' is not a whole number of at least 1")),
    }
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    units::parse_bytes(text)
}

#[derive(Args, Debug)]
pub struct WarmUpArgs {
    /// The runs the set will make, as RUNTIME:WORKLOAD:N (e.g. goroutines:hold:1000000).
    #[arg(required = true, value_name = "RUNTIME:WORKLOAD:N", value_parser = parse_run_spec)]
    pub runs: Vec<RunSpec>,
    /// The directory warmup.json is written to (made if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The probes the set's traced runs will load: each program's ns per run is calibrated here
    /// (one short traced hold per workload, root only), so that those runs leave the kernel's
    /// run-time statistics off.
    #[arg(long, value_enum, default_value = "lean", conflicts_with = "no_probes")]
    pub probes: ProbeDetail,
    /// No run of the set will be traced: no probes' calibration.
    #[arg(long)]
    pub no_probes: bool,
}

/// One run named on the command line as RUNTIME:WORKLOAD:N.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub runtime: Runtime,
    pub workload: WorkloadKind,
    pub n: u64,
}

fn parse_run_spec(text: &str) -> Result<RunSpec, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [runtime, workload, n] = parts[..] else {
        return Err(format!(
            "'{text}' is not RUNTIME:WORKLOAD:N (e.g. threads:hold:100000)"
        ));
    };
    Ok(RunSpec {
        runtime: Runtime::from_str(runtime, true)
            .map_err(|_| format!("'{runtime}' is not a runtime"))?,
        workload: WorkloadKind::from_str(workload, true)
            .map_err(|_| format!("'{workload}' is not a workload"))?,
        n: parse_n(n)?,
    })
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Check the sysctls and memory for this many tasks too.
    #[arg(long, value_parser = parse_n)]
    pub n: Option<u64>,
    #[arg(long, value_enum, default_value = "threads")]
    pub runtime: Runtime,
    /// Print only the home of the JDK of at least this major version that a reproduction would
    /// use (JAVA_HOME, PATH's javac, /usr/lib/jvm highest first), for scripts; exit 1 with why
    /// when there is none.
    #[arg(long, value_name = "MAJOR", value_parser = clap::value_parser!(u32).range(1..))]
    pub jdk_home: Option<u32>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// threads (Rust std::thread), goroutines, tokio (tasks on tokio's multi-threaded runtime), or
    /// processes (one forked process per task).
    #[arg(short, long, value_enum, help_heading = "What to run")]
    pub runtime: Option<Runtime>,
    #[arg(short, long, value_enum, help_heading = "What to run")]
    pub workload: Option<WorkloadKind>,
    /// Tasks (pingpong: pairs; chain: receivers = senders).
    #[arg(short, long, value_parser = parse_n, help_heading = "What to run")]
    pub n: Option<u64>,
    /// For a command after --: how many tasks it runs, for per-task figures.
    #[arg(long, value_parser = parse_n, help_heading = "What to run")]
    pub tasks: Option<u64>,
    /// For a command: what --tasks counts — `thread`: OS threads (counted alive in the kernel,
    /// checked against the probes); `task`: tasks of a user-space runtime (tokio, Node, asyncio,
    /// goroutines), which the kernel cannot see [default: thread, unless the command runs fewer
    /// than a tenth as many OS threads as --tasks at the moment measured: then task, said so].
    #[arg(long, value_enum, help_heading = "What to run")]
    pub task_kind: Option<TaskKind>,
    /// For a command: measure memory at the first line of its stdout matching this regular
    /// expression (e.g. 'all .* sleeping') [default: the moment of most memory in use, sampled
    /// every 100 ms].
    #[arg(long, value_name = "REGEX", help_heading = "What to run")]
    pub peak_when: Option<String>,
    /// Where results directories go.
    #[arg(short, long, default_value = "results", help_heading = "Output")]
    pub out: PathBuf,
    /// Take the memory preflight's calibration from an earlier run of the same runtime and
    /// workload flags (its results directory), or from a `warm-up` directory (its warmup.json),
    /// instead of two short hold runs now: repeats calibrate once (trace.sh's counted runs take
    /// their warm-up's).
    #[arg(long, value_name = "DIR", help_heading = "Limits")]
    pub calibration_from: Option<PathBuf>,
    /// Run even when the preflight says it will not fit (inside the cgroup memory limit).
    #[arg(long, help_heading = "Limits")]
    pub force: bool,
    /// Leave the eBPF collector out (e.g. to measure its overhead).
    #[arg(long, conflicts_with = "probes", help_heading = "Measuring")]
    pub no_probes: bool,
    /// Where each probe program's time comes from: `calibrated`, its runs in this run at its ns
    /// per run in a short traced calibration run (or the warm-up's, `--calibration-from`), the
    /// kernel's run-time statistics off here so that their clock reads stay out of this run's
    /// times; `in-run`, the statistics on for the whole run: exact, at two clock reads per
    /// program run inside every time figure.
    #[arg(
        long,
        value_enum,
        default_value = "calibrated",
        conflicts_with = "no_probes",
        help_heading = "Measuring"
    )]
    pub probe_times: ProbeTimes,
    /// What the eBPF collector keeps: `lean` counters, series and cross-checks; `full` adds
    /// per-thread state — on-CPU, run-queue, futex and clone times with their latency quantiles,
    /// RSS over time — and page faults by kind, at about 2.5 times lean's cost. Every run
    /// measures what its probes cost ("What the probes cost" in summary.md).
    #[arg(long, value_enum, default_value = "lean", help_heading = "Measuring")]
    pub probes: ProbeDetail,
    /// Kill the run after this long (e.g. 30s, 5m, 1h30m): its whole cgroup, the command and all
    /// it started; the outcome says so and the machine is restored [default: no limit].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, help_heading = "Limits")]
    pub timeout: Option<Duration>,
    /// pids.max of the run's cgroup (root): a number of tasks (threads count), or max. A command
    /// that reaches it is stopped there, its cgroup killed [default for a command: its --tasks
    /// threads + max(64, 10 %), else half the PIDs the host has left; none for a workload].
    #[arg(long, value_name = "N|max", value_parser = parse_pids_limit, help_heading = "Limits")]
    pub pids_limit: Option<PidsLimitArg>,
    /// The run's cgroup memory limit (e.g. 8G) [default: MemAvailable less max(1 GiB, 5 % of RAM)].
    #[arg(long, value_parser = parse_bytes, help_heading = "Limits")]
    pub memory_limit: Option<u64>,
    /// Record CPU samples with perf (root): flame.svg and where the system time went, by phase.
    #[arg(long, help_heading = "Measuring")]
    pub perf: bool,
    /// Stream the run's scheduler events (every switch of its tasks, their wakeups, creation,
    /// renames and exits, their futex, mmap_lock, clone and lock waits) through a BPF ring buffer
    /// into trace-events.bin, raw, for a Perfetto trace of the run (root; the eBPF probes).
    #[arg(long, help_heading = "Measuring")]
    pub perfetto: bool,
    /// The most trace-events.bin may hold (e.g. 2G, 500M): past it the records are counted, not
    /// written, and the trace's figures cover the time up to the cap [default: the smaller of
    /// 4 GiB and half the results filesystem's free space; a traced run with under 256 MiB free
    /// there is refused].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, help_heading = "Measuring")]
    pub trace_max_size: Option<u64>,
    /// Record the runtime's own scheduler too (goroutines: the Go execution trace, reduced by
    /// gotrace-reduce; tokio: its task hooks, by the workload's hooks build tokio-tasks-hooks):
    /// goroutines' running slices or tokio's polls on their OS threads in the Perfetto trace, the
    /// runtime's counts and readied→running (scheduled→polled) in the summary. Implies
    /// --perfetto (root). The tracer adds memory and time: such a run is runtime-traced, its
    /// memory and time figures not the runtime's own. Not for threads and processes (the
    /// kernel's trace is theirs). A command after -- is given $SPAWNSCOPE_GO_TRACE, a file in
    /// the run directory: a Go program that starts runtime/trace on it gets the same view.
    #[arg(long, conflicts_with = "no_probes", help_heading = "Measuring")]
    pub runtime_trace: bool,
    /// perf's sampling rate, Hz [default: a fixed sample budget over the CPU time the
    /// calibration predicts, at most 999].
    #[arg(long, value_parser = parse_hz, help_heading = "Measuring")]
    pub perf_freq: Option<u32>,
    /// perf's call graph: fp, dwarf or dwarf,BYTES [default: dwarf,4096 for threads and tokio
    /// (Rust; Debian's glibc has no frame pointers), fp for goroutines and commands].
    #[arg(long, value_parser = CallGraph::parse, help_heading = "Measuring")]
    pub perf_call_graph: Option<CallGraph>,
    #[command(flatten, next_help_heading = "Passed to the workload")]
    pub workload_flags: WorkloadFlags,
    #[command(flatten, next_help_heading = "Load (serve)")]
    pub load: LoadArgs,
    /// Pin the workload to these CPUs (a list as taskset takes it: 0-1, 0,2,4-7); its threads
    /// inherit the mask [default: every CPU].
    #[arg(long, value_name = "LIST", help_heading = "Limits")]
    pub cpus: Option<String>,
    /// Hold the run to K CPUs: one CPU per physical core first, SMT siblings after, the first K
    /// of those this process may use; through the run's cgroup cpuset (v1 or v2, root), else the
    /// workload's affinity. run.json records K, the CPUs, how, and the CPUs the workload was
    /// given. GOMAXPROCS and tokio's workers follow what the runtime sees (K) unless
    /// --gomaxprocs/--workers say otherwise. Not with --cpus (refused, exit 2: give one).
    #[arg(long, value_name = "K", conflicts_with = "cpus", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Limits")]
    pub cpu_count: Option<u32>,
    /// Print the run's summary as JSON on stdout (summary.json, with `results_dir`) instead of the
    /// terminal view.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Any command to measure instead of a workload: spawnscope run --tasks N -- CMD ARGS…
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// Passed to the workload as given; the workload validates them (`--dry-run`) before anything runs.
#[derive(Args, Debug, Default)]
pub struct WorkloadFlags {
    /// sleep: how long each task sleeps (e.g. 1s).
    #[arg(long)]
    pub sleep: Option<String>,
    /// hold: release after this long instead of right after the peak snapshot.
    #[arg(long)]
    pub hold_for: Option<String>,
    /// churn: tasks alive at most.
    #[arg(long)]
    pub batch: Option<String>,
    /// pingpong: round trips per pair.
    #[arg(long)]
    pub rounds: Option<String>,
    /// chain: events per sender.
    #[arg(long)]
    pub events: Option<String>,
    /// chain: capacity of each receiver's queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// chain: int, str, str_ptr or str_clone.
    #[arg(long = "type")]
    pub event_type: Option<String>,
    /// chain: bytes per string event.
    #[arg(long)]
    pub size: Option<String>,
    /// threads: stack size of each thread (e.g. 64K).
    #[arg(long)]
    pub stack_size: Option<String>,
    /// goroutines: GOMAXPROCS.
    #[arg(long)]
    pub gomaxprocs: Option<String>,
    /// tokio: worker threads of the runtime.
    #[arg(long)]
    pub workers: Option<String>,
    /// The workload's own memory reserve (0 turns its guard off).
    #[arg(long)]
    pub reserve: Option<String>,
    /// serve: what each request does, KIND=VALUE,… of spin=DUR (CPU), sleep=DUR (waiting),
    /// body=BYTES (the response) [spin=0s,sleep=0s,body=128].
    #[arg(long)]
    pub work: Option<String>,
    /// serve: the port [0: one the kernel picks].
    #[arg(long)]
    pub port: Option<String>,
    /// serve: listen on 127.0.0.1 … 127.0.0.K [one per 30,000 connections].
    #[arg(long)]
    pub addrs: Option<String>,
    /// serve: listen(2) backlog (the kernel caps it at net.core.somaxconn) [4096].
    #[arg(long)]
    pub backlog: Option<String>,
}

/// The load wrk puts on a `serve` run: --n connections held open for --duration.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// How long wrk loads the server (wrk -d) [10s; rust-http-2023: 30s, the article's].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub duration: Option<Duration>,
    /// wrk threads in all (wrk -t) [default: one per CPU, at most one per connection].
    #[arg(long, value_parser = parse_n)]
    pub load_threads: Option<u64>,
    /// A request unanswered this long is a timeout (wrk --timeout) [2s, wrk's; rust-http-2023:
    /// 15s, the article's].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub load_timeout: Option<Duration>,
}

impl LoadArgs {
    /// The load as given, `defaults` where a flag was not.
    pub fn options_over(
        &self,
        defaults: measure::loadgen::LoadOptions,
    ) -> measure::loadgen::LoadOptions {
        measure::loadgen::LoadOptions {
            duration: self.duration.unwrap_or(defaults.duration),
            threads: self.load_threads.or(defaults.threads),
            thread_per_connection: defaults.thread_per_connection && self.load_threads.is_none(),
            timeout: self.load_timeout.unwrap_or(defaults.timeout),
        }
    }

    pub fn options(&self) -> measure::loadgen::LoadOptions {
        self.options_over(Default::default())
    }
}

impl WorkloadFlags {
    /// (flag, value) pairs in a fixed order.
    pub fn pairs(&self) -> Vec<(String, String)> {
        [
            ("--sleep", &self.sleep),
            ("--hold-for", &self.hold_for),
            ("--batch", &self.batch),
            ("--rounds", &self.rounds),
            ("--events", &self.events),
            ("--queue", &self.queue),
            ("--type", &self.event_type),
            ("--size", &self.size),
            ("--stack-size", &self.stack_size),
            ("--gomaxprocs", &self.gomaxprocs),
            ("--workers", &self.workers),
            ("--reserve", &self.reserve),
            ("--work", &self.work),
            ("--port", &self.port),
            ("--addrs", &self.addrs),
            ("--backlog", &self.backlog),
        ]
        .into_iter()
        .filter_map(|(flag, value)| Some((flag.to_string(), value.clone()?)))
        .collect()
    }
}

#[derive(Subcommand, Debug)]
pub enum SysctlAction {
    /// The managed keys now, what N threads need, and what is recorded as raised.
    Show {
        #[arg(long, value_parser = parse_n)]
        n: Option<u64>,
    },
    /// Raise what N threads need and keep it until `sysctl restore` (originals are recorded).
    Apply {
        #[arg(long, value_parser = parse_n)]
        n: u64,
    },
    /// Put back every value spawnscope raised (by hand, or left by an interrupted run).
    Restore,
}

// ---------------------------------------------------------------------------------------------
// spawnscope compare

/// `--reproduce`'s values: the studies with a plan (studies/, `STUDIES`), each with its help.
fn studies_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        studies::runnable().map(|s| clap::builder::PossibleValue::new(s.name).help(s.about)),
    )
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Runtimes to compare, comma-separated or repeated [default: threads,goroutines,tokio;
    /// processes on request].
    #[arg(long, visible_alias = "runtime", value_enum, value_delimiter = ',')]
    pub runtimes: Vec<Runtime>,
    /// N values of the sweep, each clamped by the preflight to what fits [default: 1000,10000,100000,1000000].
    #[arg(long, value_delimiter = ',', value_parser = parse_n)]
    pub n: Vec<u64>,
    /// Workloads, comma-separated or repeated [default: hold,sleep; churn, pingpong, chain on
    /// request].
    #[arg(long, visible_alias = "workload", value_enum, value_delimiter = ',')]
    pub workloads: Vec<WorkloadKind>,
    /// Runs of each cell: min / median / max over them [default: 3; 1 with --reproduce].
    #[arg(long)]
    pub repeats: Option<u32>,
    /// Directory for the runs and the exports [default: results/compare-<UTC time>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the comparison as JSON on stdout (compare.json, with `results_dir`) instead of
    /// compare.md.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Each run's cgroup memory limit, and the budget the preflight clamps N to (e.g. 8G).
    #[arg(long, value_parser = parse_bytes)]
    pub memory_limit: Option<u64>,
    /// Run a published experiment instead of a sweep, beside its published figures.
    #[arg(
        long,
        value_name = "STUDY",
        value_parser = studies_parser(),
        conflicts_with_all = ["runtimes", "n", "workloads", "commands", "labels", "task_kind", "task_lifetime"]
    )]
    pub reproduce: Option<String>,
    /// Any program to sweep over --n as well, its words with {N} where N goes (e.g. --command
    /// 'node examples/node/sleepers.js {N}'; {N} may be written in lower case); repeatable. Each
    /// point runs as `run --tasks N --task-kind task -- CMD` runs it, with the same calibration,
    /// preflight and report; only the --runtimes given run beside it.
    #[arg(long = "command", value_name = "CMD", help_heading = "Commands")]
    pub commands: Vec<String>,
    /// The name of the --command in the same place, in reports and directory names [default:
    /// its program's file name].
    #[arg(
        long = "label",
        value_name = "NAME",
        requires = "commands",
        help_heading = "Commands"
    )]
    pub labels: Vec<String>,
    /// What a --command's N counts, as `run --task-kind` [default: task].
    #[arg(long, value_enum, requires = "commands", help_heading = "Commands")]
    pub task_kind: Option<TaskKind>,
    /// How long each of a --command's tasks lives, where known (e.g. 10s for tasks sleeping
    /// 10 s): memory is then measured before any task can have ended [default: at the most
    /// memory in use].
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_timeout,
        requires = "commands",
        help_heading = "Commands"
    )]
    pub task_lifetime: Option<Duration>,
    /// Passed to the workloads each applies to (e.g. --sleep to sleep, --stack-size to threads,
    /// --workers to tokio).
    #[command(flatten)]
    pub workload_flags: WorkloadFlags,
    #[command(flatten, next_help_heading = "Load (serve)")]
    pub load: LoadArgs,
    /// Pin every run's workload to these CPUs (as taskset takes them: 0-1).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Sweep the number of CPUs too: every cell run at each K as `run --cpu-count K` holds it
    /// (comma-separated: 1,2,4). K is a cell dimension like N; compare.md, report.html and
    /// compare.json then give the figures per task against K. Not with --cpus (refused).
    #[arg(long, value_name = "K,…", value_delimiter = ',', conflicts_with = "cpus", value_parser = clap::value_parser!(u32).range(1..))]
    pub cpu_counts: Vec<u32>,
    /// Every run streams its scheduler events into its trace-events.bin, raw, for a Perfetto
    /// trace of it (root; as `run --perfetto`).
    #[arg(long)]
    pub perfetto: bool,
    /// The most each run's trace-events.bin may hold (e.g. 2G, 500M), as `run --trace-max-size`
    /// [default: each run's, the smaller of 4 GiB and half the free space at its start].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub trace_max_size: Option<u64>,
    /// Add to each cell of a runtime that has a runtime trace (goroutines, tokio) one runtime-traced run
    /// (`run --runtime-trace`) beside its ordinary runs: the runtime's readied→running beside the
    /// kernel's wake-to-run in the headline of pingpong and chain and in a table per workload × N.
    /// Its memory, fault and time figures are left out of the comparison's (the tracer's cost).
    /// Implies --perfetto (root).
    #[arg(long)]
    pub runtime_trace: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_failed_workload_is_stronger_news_than_wrong_counts() {
        assert_eq!(Ended::of_run(true, false), Ended::Done);
        assert_eq!(Ended::of_run(true, true), Ended::CountsWrong);
        assert_eq!(Ended::of_run(false, true), Ended::NotComplete);
        assert_eq!(Ended::of_run(false, false), Ended::NotComplete);
        assert_eq!(exit_code(Ok((None, Ended::Done))), ExitCode::SUCCESS);
        assert_eq!(exit_code(Ok((None, Ended::NotComplete))), ExitCode::from(4));
        assert_eq!(exit_code(Ok((None, Ended::CountsWrong))), ExitCode::from(5));
        // A signal wins over both.
        assert_eq!(
            exit_code(Ok((Some(2), Ended::CountsWrong))),
            ExitCode::from(130)
        );
    }

    #[test]
    fn the_help_names_every_exit_code() {
        let help = Cli::command().render_long_help().to_string();
        for code in [
            "0 done",
            "1 failed",
            "2 bad arguments",
            "3 refused",
            "4 the workload failed",
            "5 the run completed but its counts disagree",
            "128+N",
        ] {
            assert!(help.contains(code), "{code}: {help}");
        }
    }

    #[test]
    fn run_help_groups_its_options_under_headings_with_short_flags() {
        use clap::CommandFactory;
        let help = Cli::command()
            .find_subcommand_mut("run")
            .expect("a run subcommand")
            .render_help()
            .to_string();
        for heading in [
            "What to run:",
            "Measuring:",
            "Limits:",
            "Output:",
            "Passed to the workload:",
        ] {
            assert!(help.contains(heading), "{heading} in\n{help}");
        }
        for flag in ["-r, --runtime", "-w, --workload", "-n, --n", "-o, --out"] {
            assert!(help.contains(flag), "{flag} in\n{help}");
        }
        assert!(help.contains("[default: lean]"), "{help}");
    }

    #[test]
    fn compare_takes_runtimes_and_workloads_listed_or_repeated() {
        let parse = |args: &[&str]| {
            let argv = ["spawnscope", "compare"]
                .into_iter()
                .chain(args.iter().copied());
            match Cli::try_parse_from(argv).unwrap().command {
                Command::Compare(c) => (c.runtimes, c.workloads),
                other => panic!("{other:?}"),
            }
        };
        let want = (
            vec![Runtime::Threads, Runtime::Goroutines, Runtime::Tokio],
            vec![WorkloadKind::Hold, WorkloadKind::Sleep],
        );
        assert_eq!(
            parse(&[
                "--runtimes",
                "threads,goroutines,tokio",
                "--workloads",
                "hold,sleep"
            ]),
            want
        );
        assert_eq!(
            parse(&[
                "--runtime",
                "threads",
                "--runtime",
                "goroutines",
                "--runtime",
                "tokio",
                "--workload",
                "hold",
                "--workload",
                "sleep",
            ]),
            want
        );
        assert_eq!(
            parse(&[]),
            (vec![], vec![]),
            "the defaults are the command's"
        );
    }

    fn error_of(args: &[&str]) -> String {
        let argv = std::iter::once("spawnscope").chain(args.iter().copied());
        one_line(&Cli::try_parse_from(argv).unwrap_err())
    }

    #[test]
    fn errors_name_the_missing_argument_and_the_valid_values_in_one_line() {
        let missing = error_of(&["sysctl", "apply"]);
        assert!(missing.contains("--n <N>"), "{missing}");
        assert!(
            missing.ends_with("(see spawnscope sysctl apply --help)"),
            "{missing}"
        );
        let report = error_of(&["report"]);
        assert!(report.contains("<DIRS>"), "{report}");
        let flame = error_of(&["flame", "x"]);
        assert!(flame.contains("--out <OUT>"), "{flame}");
        let values = error_of(&["run", "--runtime", "java"]);
        assert!(
            values.contains("java") && values.contains("threads") && values.contains("goroutines"),
            "{values}"
        );
        let tip = error_of(&["run", "--runtime", "thread"]);
        assert!(
            tip.contains("'threads'"),
            "clap's suggestion is kept: {tip}"
        );
        let none = error_of(&[]);
        assert!(none.contains("check") && none.contains("compare"), "{none}");
        for line in [missing, report, flame, values, tip, none] {
            assert!(!line.contains('\n') && !line.contains("Usage:"), "{line}");
        }
    }
}
