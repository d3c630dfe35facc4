//! Command line of the Rust workloads (`threads`, `tokio-tasks`). goroutines-go/cli.go accepts
//! exactly the same workloads, flags, defaults and bad input; schema/bad-input.tsv is the shared
//! table of refusals. What differs between runtimes (the flags only one of them takes) is in its
//! [`Program`].

use crate::units::{parse_bytes, parse_count, parse_duration_ns};
use crate::Program;

/// The largest N any workload accepts: far beyond what a machine can hold, below any overflow.
pub const MAX_N: u64 = 100_000_000;
const MAX_STACK: u64 = 1 << 30;
/// The most worker threads --workers takes (goroutines' --gomaxprocs has the same bound).
pub const MAX_WORKERS: u64 = 1024;
/// serve: the loopback addresses it listens on at most (127.0.0.1 to 127.0.0.64).
pub const MAX_ADDRS: u64 = 64;
/// serve: the largest listen(2) backlog --backlog takes (the kernel caps it at somaxconn).
pub const MAX_BACKLOG: u64 = 1 << 20;
/// serve: the largest response body --work takes.
pub const MAX_BODY: u64 = 16 << 20;

/// A flag that only some runtimes take: its usage line where taken, the reason where refused.
#[derive(Clone, Copy, Debug)]
pub enum RuntimeFlag {
    Takes(&'static str),
    Refuses(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Sleep,
    Hold,
    Churn,
    Pingpong,
    Chain,
    Serve,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Sleep => "sleep",
            Workload::Hold => "hold",
            Workload::Churn => "churn",
            Workload::Pingpong => "pingpong",
            Workload::Chain => "chain",
            Workload::Serve => "serve",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Workload::Sleep,
            Workload::Hold,
            Workload::Churn,
            Workload::Pingpong,
            Workload::Chain,
            Workload::Serve,
        ]
        .into_iter()
        .find(|w| w.name() == text)
    }

    fn default_n(self) -> u64 {
        match self {
            Workload::Sleep | Workload::Hold | Workload::Churn => 10_000,
            Workload::Pingpong => 1,
            Workload::Chain => 1_000,
            Workload::Serve => 100,
        }
    }

    /// Tasks the workload spawns for a given --n (pingpong and chain spawn two per unit; serve,
    /// one per connection).
    pub fn tasks(self, n: u64) -> u64 {
        match self {
            Workload::Pingpong | Workload::Chain => 2 * n,
            _ => n,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Int,
    Str,
    StrPtr,
    StrClone,
}

impl EventType {
    pub fn name(self) -> &'static str {
        match self {
            EventType::Int => "int",
            EventType::Str => "str",
            EventType::StrPtr => "str_ptr",
            EventType::StrClone => "str_clone",
        }
    }
}

/// serve: what each request does (--work): spin, then sleep, then respond with the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    pub spin_ns: u64,
    pub sleep_ns: u64,
    pub body_bytes: u64,
}

impl Default for Work {
    fn default() -> Self {
        Work {
            spin_ns: 0,
            sleep_ns: 0,
            body_bytes: 128,
        }
    }
}

/// Everything a run needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    pub workload: Workload,
    pub n: u64,
    pub sleep_ns: u64,
    pub hold_for_ns: Option<u64>,
    pub batch: u64,
    pub rounds: u64,
    pub events: u64,
    pub queue: u64,
    pub event_type: EventType,
    pub size: u64,
    /// serve: the TCP port (0: the kernel picks a free one).
    pub port: u16,
    /// serve: listens on 127.0.0.1 to 127.0.0.`addrs`, all on one port.
    pub addrs: u64,
    pub backlog: u64,
    /// serve: drains after this long; None: on a line or EOF on stdin.
    pub serve_for_ns: Option<u64>,
    pub work: Work,
    pub stack_size: Option<u64>,
    /// tokio's worker threads (None: the runtime's default, one per CPU).
    pub workers: Option<u64>,
    /// None: the automatic reserve (see limits::Limits::auto_reserve).
    pub reserve: Option<u64>,
    /// --tokio-trace: where the hooks build writes its task events (None: no hooks set).
    pub tokio_trace: Option<String>,
    /// Validate, print the `start` event, spawn nothing.
    pub dry_run: bool,
    /// The start gate: after `start`, wait for a line (or EOF) on stdin before the first phase,
    /// so that whoever measures reads its base with nothing of the run started.
    pub wait_to_start: bool,
}

/// What a flag without a value sets.
type Switch = fn(&mut Config);

/// The flags that take no value, and what each sets.
const SWITCHES: &[(&str, Switch)] = &[
    ("--dry-run", |c| c.dry_run = true),
    ("--wait-to-start", |c| c.wait_to_start = true),
];

// Parsed once per process: boxing the run's Config would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    Run(Config),
    Help,
    Version,
}

/// Flags, and the workloads each applies to (None: all of them).
const FLAGS: &[(&str, Option<Workload>)] = &[
    ("--n", None),
    ("--sleep", Some(Workload::Sleep)),
    ("--hold-for", Some(Workload::Hold)),
    ("--batch", Some(Workload::Churn)),
    ("--rounds", Some(Workload::Pingpong)),
    ("--events", Some(Workload::Chain)),
    ("--queue", Some(Workload::Chain)),
    ("--type", Some(Workload::Chain)),
    ("--size", Some(Workload::Chain)),
    ("--port", Some(Workload::Serve)),
    ("--addrs", Some(Workload::Serve)),
    ("--backlog", Some(Workload::Serve)),
    ("--work", Some(Workload::Serve)),
    ("--serve-for", Some(Workload::Serve)),
    ("--stack-size", None),
    ("--gomaxprocs", None),
    ("--workers", None),
    ("--reserve", None),
    ("--go-trace", None),
    ("--tokio-trace", None),
];

/// Why the Rust workloads refuse --go-trace (goroutines' runtime/trace).
const GO_TRACE_REFUSAL: &str = "it writes the Go runtime's execution trace (runtime/trace)";

/// The usage lines of the flags that differ between runtimes, as `program` has them.
fn runtime_flag_lines(program: &Program) -> String {
    let line =
        |flag: &str, arg: &str, text: &str| format!("  {:<20}{text}\n", format!("{flag} {arg}"));
    let takes_or = |spec: RuntimeFlag, flag: &str, arg: &str, elsewhere: &str| match spec {
        RuntimeFlag::Takes(text) => line(flag, arg, text),
        RuntimeFlag::Refuses(_) => line(flag, arg, &format!("{elsewhere} only: refused here")),
    };
    [
        takes_or(program.stack_size, "--stack-size", "BYTES", "threads"),
        line("--gomaxprocs", "N", "goroutines only: refused here"),
        takes_or(program.workers, "--workers", "N", "tokio-tasks"),
        line("--go-trace", "FILE", "goroutines only: refused here"),
        takes_or(
            program.tokio_trace,
            "--tokio-trace",
            "FILE",
            "tokio-tasks-hooks",
        ),
    ]
    .concat()
}

pub fn usage(program: &Program) -> String {
    let name = program.name;
    let about = program.about;
    let channels = program.channels;
    let runtime_flags = runtime_flag_lines(program);
    format!(
        "usage: {name} <workload> [flags]

{about} and prints what they cost as JSON Lines on stdout.

workloads:
  sleep      --n tasks each sleep --sleep, then all are joined (the 2023 experiment, exactly N tasks)
  hold       --n tasks stay alive together; `peak` when all are; released by a line or EOF on
             stdin, or after --hold-for
  churn      create and join --n tasks, at most --batch alive at once
  pingpong   --n pairs bounce --rounds round trips over channels ({channels})
  chain      --n receivers with bounded queues of --queue; --n senders each send --events
             events of --type; speed = events/s after spawning (bench-of-chan)
  serve      an HTTP/1.1 keep-alive server on the loopback, a task per connection; `peak`
             when --n connections are open at once; drains on a line or EOF on stdin, or after
             --serve-for

flags:
  --n N               tasks (pingpong: pairs; chain: receivers = senders; serve: connections),
                      1..{MAX_N} [sleep, hold, churn: 10000; pingpong: 1; chain: 1000; serve: 100]
  --sleep DUR         sleep: how long each task sleeps [1s]
  --hold-for DUR      hold: release after DUR instead of waiting on stdin
  --batch B           churn: tasks alive at most [100]
  --rounds R          pingpong: round trips per pair [10000]
  --events M          chain: events per sender [1000]
  --queue Q           chain: capacity of each receiver's queue [16]
  --type T            chain: int, str, str_ptr or str_clone [int]
  --size S            chain: bytes per string event [16]
  --port P            serve: TCP port, 0..65535; 0 = a free one the kernel picks [0]
  --addrs K           serve: listen on 127.0.0.1 to 127.0.0.K, all on one port, 1..{MAX_ADDRS} [1]
  --backlog B         serve: listen(2) backlog, 1..{MAX_BACKLOG}, capped by net.core.somaxconn [4096]
  --work LIST         serve: what each request does, comma-separated: spin=DUR (busy loop),
                      sleep=DUR (wait without CPU), body=BYTES (response body, 0..16M)
                      [spin=0s,sleep=0s,body=128]
  --serve-for DUR     serve: drain after DUR instead of waiting on stdin
{runtime_flags}  --reserve BYTES     stop spawning when free memory (MemAvailable or the cgroup's headroom)
                      falls below this; 0 = never [2% of usable memory, 32..512 MiB]
  --dry-run           check the arguments, print the `start` event, spawn nothing
  --wait-to-start     after the `start` event, wait for a line or EOF on stdin before spawning
                      (the start gate: a conductor reads its base meanwhile; hold's and serve's
                      release is the line after it)
  --help, --version

Durations need a unit: 500ms, 1s, 1m30s. Byte counts take an optional K, M or G (x1024).
Exit codes: 0 done; 1 output failed; 2 bad usage; 3 spawning stopped at a limit (see the result's
`failure`).
"
    )
}

const WORKLOADS: &str = "(sleep, hold, churn, pingpong, chain or serve)";

/// Parses the arguments after the program name. Err carries the one-line reason (without usage).
pub fn parse(program: &Program, args: &[String]) -> Result<Command, String> {
    let Some(first) = args.first() else {
        return Err(format!("missing workload {WORKLOADS}"));
    };
    match first.as_str() {
        "--help" | "-h" => return Ok(Command::Help),
        "--version" => return Ok(Command::Version),
        _ => {}
    }
    let workload = match Workload::parse(first) {
        Some(w) => w,
        None if first.starts_with('-') => {
            return Err(format!("missing workload before '{first}' {WORKLOADS}"))
        }
        None => return Err(format!("unknown workload '{first}' {WORKLOADS}")),
    };
    let mut cfg = Config {
        workload,
        n: workload.default_n(),
        sleep_ns: 1_000_000_000,
        hold_for_ns: None,
        batch: 100,
        rounds: 10_000,
        events: 1_000,
        queue: 16,
        event_type: EventType::Int,
        size: 16,
        port: 0,
        addrs: 1,
        backlog: 4096,
        serve_for_ns: None,
        work: Work::default(),
        stack_size: None,
        workers: None,
        reserve: None,
        tokio_trace: None,
        dry_run: false,
        wait_to_start: false,
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--help" || arg == "-h" {
            return Ok(Command::Help);
        }
        if !arg.starts_with("--") {
            return Err(format!("unexpected argument '{arg}'"));
        }
        if let Some((_, set)) = SWITCHES.iter().find(|(name, _)| *name == arg.as_str()) {
            set(&mut cfg);
            continue;
        }
        let (flag, inline_value) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        if let Some((switch, _)) = SWITCHES.iter().find(|(name, _)| *name == flag) {
            return Err(format!("flag '{switch}' takes no value"));
        }
        let Some(&(flag, applies_to)) = FLAGS.iter().find(|(name, _)| *name == flag) else {
            return Err(format!("unknown flag '{flag}' for {}", workload.name()));
        };
        if applies_to.is_some_and(|w| w != workload) {
            return Err(format!(
                "flag '{flag}' does not apply to {}",
                workload.name()
            ));
        }
        let refused = match flag {
            "--gomaxprocs" => Some(program.gomaxprocs_refusal),
            "--go-trace" => Some(GO_TRACE_REFUSAL),
            "--stack-size" => refusal(program.stack_size),
            "--workers" => refusal(program.workers),
            "--tokio-trace" => refusal(program.tokio_trace),
            _ => None,
        };
        if let Some(reason) = refused {
            return Err(format!("flag '{flag}' is not supported: {reason}"));
        }
        if seen.contains(&flag) {
            return Err(format!("flag '{flag}' given twice"));
        }
        seen.push(flag);
        let Some(value) = inline_value.or_else(|| rest.next().cloned()) else {
            return Err(format!("flag '{flag}' needs a value"));
        };
        let bad = |why: String| format!("{flag} '{value}': {why}");
        match flag {
            "--n" => cfg.n = parse_count(&value, 1, MAX_N).map_err(bad)?,
            "--sleep" => cfg.sleep_ns = parse_duration_ns(&value).map_err(bad)?,
            "--hold-for" => cfg.hold_for_ns = Some(parse_duration_ns(&value).map_err(bad)?),
            "--batch" => cfg.batch = parse_count(&value, 1, MAX_N).map_err(bad)?,
            "--rounds" => cfg.rounds = parse_count(&value, 1, 1_000_000_000).map_err(bad)?,
            "--events" => cfg.events = parse_count(&value, 1, 1_000_000_000).map_err(bad)?,
            "--queue" => cfg.queue = parse_count(&value, 1, 1_000_000).map_err(bad)?,
            "--size" => cfg.size = parse_count(&value, 1, 1 << 24).map_err(bad)?,
            "--port" => cfg.port = parse_count(&value, 0, 65535).map_err(bad)? as u16,
            "--addrs" => cfg.addrs = parse_count(&value, 1, MAX_ADDRS).map_err(bad)?,
            "--backlog" => cfg.backlog = parse_count(&value, 1, MAX_BACKLOG).map_err(bad)?,
            "--work" => cfg.work = parse_work(&value).map_err(bad)?,
            "--serve-for" => cfg.serve_for_ns = Some(parse_duration_ns(&value).map_err(bad)?),
            "--type" => {
                cfg.event_type = match value.as_str() {
                    "int" => EventType::Int,
                    "str" => EventType::Str,
                    "str_ptr" => EventType::StrPtr,
                    "str_clone" => EventType::StrClone,
                    _ => return Err(bad("must be int, str, str_ptr or str_clone".into())),
                }
            }
            "--stack-size" => {
                let bytes = parse_bytes(&value, MAX_STACK).map_err(bad)?;
                let min = crate::sys::min_stack_size();
                if bytes < min {
                    return Err(bad(format!(
                        "is below the platform minimum of {min} bytes (PTHREAD_STACK_MIN)"
                    )));
                }
                cfg.stack_size = Some(bytes);
            }
            "--workers" => cfg.workers = Some(parse_count(&value, 1, MAX_WORKERS).map_err(bad)?),
            // Whether FILE can be written is the hooks build's to check (it opens it).
            "--tokio-trace" => cfg.tokio_trace = Some(value),
            "--reserve" => {
                cfg.reserve = match value.as_str() {
                    "auto" => None,
                    _ => Some(parse_bytes(&value, u64::MAX).map_err(bad)?),
                }
            }
            _ => unreachable!("every flag in FLAGS is handled"),
        }
    }
    Ok(Command::Run(cfg))
}

/// --work's comma-separated KIND=VALUE list; kinds not given keep their default.
fn parse_work(list: &str) -> Result<Work, String> {
    let mut work = Work::default();
    let mut seen: Vec<&str> = Vec::new();
    for item in list.split(',') {
        let (kind, value) = item.split_once('=').unwrap_or((item, ""));
        if !["spin", "sleep", "body"].contains(&kind) {
            return Err(format!("unknown kind '{kind}' (spin, sleep or body)"));
        }
        if !item.contains('=') {
            let example = if kind == "body" { "1K" } else { "1ms" };
            return Err(format!("'{kind}' needs a value, like {kind}={example}"));
        }
        if seen.contains(&kind) {
            return Err(format!("'{kind}' given twice"));
        }
        seen.push(kind);
        let bad = |why: String| format!("{kind} '{value}' {why}");
        match kind {
            "spin" => work.spin_ns = parse_duration_ns(value).map_err(bad)?,
            "sleep" => work.sleep_ns = parse_duration_ns(value).map_err(bad)?,
            _ => work.body_bytes = parse_bytes(value, MAX_BODY).map_err(bad)?,
        }
    }
    Ok(work)
}

/// The run the process's arguments ask for. Help and version are printed here (None: nothing to
/// run); bad usage prints its one line and the usage on stderr and exits 2.
pub fn config_or_exit(program: &Program) -> Option<Config> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(program, &args) {
        Ok(Command::Run(cfg)) => Some(cfg),
        Ok(Command::Help) => {
            print!("{}", usage(program));
            None
        }
        Ok(Command::Version) => {
            println!(
                "{} {} ({})",
                program.name,
                env!("CARGO_PKG_VERSION"),
                program.runtime_version
            );
            None
        }
        Err(reason) => exit_bad_usage(program, &reason),
    }
}

/// Bad usage: the one-line reason and the usage on stderr, nothing on stdout, exit 2.
pub fn exit_bad_usage(program: &Program, reason: &str) -> ! {
    eprintln!("{}: {reason}", program.name);
    eprint!("{}", usage(program));
    std::process::exit(2);
}

fn refusal(spec: RuntimeFlag) -> Option<&'static str> {
    match spec {
        RuntimeFlag::Takes(_) => None,
        RuntimeFlag::Refuses(reason) => Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that takes --stack-size (as `threads` does) and refuses --workers.
    const THREADS_LIKE: Program = Program {
        name: "threads",
        runtime: "threads",
        runtime_version: "test",
        about: "Spawns OS threads",
        channels: "std mpsc",
        stack_size: RuntimeFlag::Takes("stack of each thread"),
        workers: RuntimeFlag::Refuses("OS threads have no worker pool"),
        gomaxprocs_refusal: "not Go",
        tokio_trace: RuntimeFlag::Refuses("not the hooks build"),
    };
    /// One that takes --workers (as `tokio-tasks` does).
    const TOKIO_LIKE: Program = Program {
        name: "tokio-tasks",
        runtime: "tokio",
        stack_size: RuntimeFlag::Refuses("tasks have no stacks"),
        workers: RuntimeFlag::Takes("worker threads"),
        ..THREADS_LIKE
    };

    fn run(args: &str) -> Result<Config, String> {
        run_as(&THREADS_LIKE, args)
    }

    fn run_as(program: &Program, args: &str) -> Result<Config, String> {
        let args: Vec<String> = args.split_whitespace().map(String::from).collect();
        match parse(program, &args)? {
            Command::Run(cfg) => Ok(cfg),
            _ => Err("not a run".into()),
        }
    }

    #[test]
    fn defaults_per_workload() {
        assert_eq!(run("hold").unwrap().n, 10_000);
        assert_eq!(run("pingpong").unwrap().n, 1);
        assert_eq!(run("chain").unwrap().n, 1_000);
        let sleep = run("sleep").unwrap();
        assert_eq!(sleep.sleep_ns, 1_000_000_000);
        assert_eq!(sleep.stack_size, None);
    }

    #[test]
    fn both_value_forms() {
        let cfg = run("chain --n=5 --type str_clone --size=64 --stack-size 64K").unwrap();
        assert_eq!(
            (cfg.n, cfg.event_type, cfg.size, cfg.stack_size),
            (5, EventType::StrClone, 64, Some(65536))
        );
        assert_eq!(
            run("hold --hold-for 1m30s").unwrap().hold_for_ns,
            Some(90_000_000_000)
        );
        assert_eq!(run("hold --reserve 0").unwrap().reserve, Some(0));
        assert!(run("hold --dry-run").unwrap().dry_run);
        assert!(
            run("hold --dry-run=yes").is_err(),
            "--dry-run takes no value"
        );
        assert!(!run("hold").unwrap().wait_to_start);
        let gated = run("serve --wait-to-start --dry-run").unwrap();
        assert!(gated.wait_to_start && gated.dry_run);
        assert_eq!(
            run("hold --wait-to-start=1").unwrap_err(),
            "flag '--wait-to-start' takes no value"
        );
    }

    #[test]
    fn refusals_name_the_value() {
        assert!(run("hold --n abc").unwrap_err().contains("'abc'"));
        assert!(run("hold --stack-size 4096")
            .unwrap_err()
            .contains("PTHREAD_STACK_MIN"));
        assert!(run("hold --gomaxprocs 2")
            .unwrap_err()
            .contains("--gomaxprocs"));
        assert!(run("hold --go-trace /tmp/go.trace")
            .unwrap_err()
            .contains("'--go-trace' is not supported"));
        assert!(run("sleep --batch 3")
            .unwrap_err()
            .contains("does not apply to sleep"));
        assert!(run("--n 3").unwrap_err().contains("missing workload"));
    }

    /// --tokio-trace: the hooks build takes it (its FILE kept as given), every other refuses it.
    #[test]
    fn tokio_trace_is_the_hooks_builds() {
        assert!(run("hold --tokio-trace /tmp/t.bin")
            .unwrap_err()
            .contains("'--tokio-trace' is not supported: not the hooks build"));
        let hooks = Program {
            tokio_trace: RuntimeFlag::Takes("record the hooks"),
            ..TOKIO_LIKE
        };
        let cfg = run_as(&hooks, "pingpong --tokio-trace /tmp/t.bin").unwrap();
        assert_eq!(cfg.tokio_trace.as_deref(), Some("/tmp/t.bin"));
        assert_eq!(run_as(&hooks, "hold").unwrap().tokio_trace, None);
        assert!(run_as(&hooks, "hold --tokio-trace")
            .unwrap_err()
            .contains("needs a value"));
        assert!(usage(&hooks).contains("--tokio-trace FILE  record the hooks"));
        assert!(usage(&TOKIO_LIKE).contains("tokio-tasks-hooks only: refused here"));
    }

    #[test]
    fn serve_defaults_and_flags() {
        let cfg = run("serve").unwrap();
        assert_eq!(
            (cfg.n, cfg.port, cfg.addrs, cfg.backlog, cfg.serve_for_ns),
            (100, 0, 1, 4096, None)
        );
        assert_eq!(cfg.work, Work::default());
        assert_eq!(cfg.work.body_bytes, 128);
        assert_eq!(cfg.workload.tasks(cfg.n), 100, "a task per connection");
        let cfg = run("serve --port 65535 --addrs 64 --backlog 1048576 --serve-for 1m").unwrap();
        assert_eq!(
            (cfg.port, cfg.addrs, cfg.backlog, cfg.serve_for_ns),
            (65535, 64, 1 << 20, Some(60_000_000_000))
        );
    }

    #[test]
    fn work_kinds_keep_their_default_unless_given() {
        let work = |list: &str| run(&format!("serve --work {list}")).map(|c| c.work);
        assert_eq!(
            work("sleep=200ms").unwrap(),
            Work {
                sleep_ns: 200_000_000,
                ..Work::default()
            }
        );
        assert_eq!(
            work("body=16M,spin=1.5ms,sleep=0s").unwrap(),
            Work {
                spin_ns: 1_500_000,
                sleep_ns: 0,
                body_bytes: 16 << 20
            }
        );
        assert_eq!(work("body=0").unwrap().body_bytes, 0);
    }

    #[test]
    fn serve_refusals_name_the_value() {
        let refused = |args: &str| run(args).unwrap_err();
        assert_eq!(
            refused("serve --work nap=1s"),
            "--work 'nap=1s': unknown kind 'nap' (spin, sleep or body)"
        );
        assert_eq!(
            refused("serve --work spin"),
            "--work 'spin': 'spin' needs a value, like spin=1ms"
        );
        assert_eq!(
            refused("serve --work spin=1s,spin=2s"),
            "--work 'spin=1s,spin=2s': 'spin' given twice"
        );
        assert_eq!(
            refused("serve --work body=17M"),
            "--work 'body=17M': body '17M' is larger than 16777216 bytes"
        );
        assert!(refused("serve --work body=-1").contains("body '-1' must be a byte count"));
        assert!(refused("serve --work sleep=5").contains("sleep '5' must be a duration"));
        assert!(refused("serve --work=").contains("unknown kind ''"));
        assert!(refused("serve --n 0").contains("'0'"));
        assert!(refused("serve --port 70000").contains("'70000'"));
        assert!(refused("serve --addrs 65").contains("from 1 to 64"));
        assert!(refused("serve --backlog 0").contains("--backlog '0'"));
        assert!(refused("serve --serve-for 5").contains("--serve-for '5'"));
        assert_eq!(
            refused("hold --port 80"),
            "flag '--port' does not apply to hold"
        );
        assert!(refused("serve --hold-for 1s").contains("does not apply to serve"));
    }

    #[test]
    fn runtime_flags_are_taken_or_refused_as_the_program_says() {
        assert_eq!(
            run_as(&TOKIO_LIKE, "hold --workers 3").unwrap().workers,
            Some(3)
        );
        assert!(run_as(&TOKIO_LIKE, "hold --workers 0")
            .unwrap_err()
            .contains("'0'"));
        assert!(run_as(&TOKIO_LIKE, "hold --stack-size 64K")
            .unwrap_err()
            .contains("tasks have no stacks"));
        assert!(run("hold --workers 2")
            .unwrap_err()
            .contains("no worker pool"));
        assert!(run_as(&TOKIO_LIKE, "hold --gomaxprocs 2")
            .unwrap_err()
            .contains("not Go"));
        let usage = usage(&TOKIO_LIKE);
        assert!(
            usage.contains("--workers N         worker threads"),
            "{usage}"
        );
        assert!(
            usage.contains("--stack-size BYTES  threads only: refused here"),
            "{usage}"
        );
        assert!(usage.starts_with("usage: tokio-tasks <workload>"));
    }
}
