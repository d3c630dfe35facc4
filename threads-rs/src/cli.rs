//! Command line of the workload. goroutines-go/cli.go accepts exactly the same workloads, flags,
//! defaults and bad input; schema/bad-input.tsv is the shared table of refusals.

use crate::units::{parse_bytes, parse_count, parse_duration_ns};

pub const PROGRAM: &str = "threads";

/// The largest N any workload accepts: far beyond what a machine can hold, below any overflow.
pub const MAX_N: u64 = 100_000_000;
const MAX_STACK: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Sleep,
    Hold,
    Churn,
    Pingpong,
    Chain,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Sleep => "sleep",
            Workload::Hold => "hold",
            Workload::Churn => "churn",
            Workload::Pingpong => "pingpong",
            Workload::Chain => "chain",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Workload::Sleep,
            Workload::Hold,
            Workload::Churn,
            Workload::Pingpong,
            Workload::Chain,
        ]
        .into_iter()
        .find(|w| w.name() == text)
    }

    fn default_n(self) -> u64 {
        match self {
            Workload::Sleep | Workload::Hold | Workload::Churn => 10_000,
            Workload::Pingpong => 1,
            Workload::Chain => 1_000,
        }
    }

    /// Tasks the workload spawns for a given --n (pingpong and chain spawn two per unit).
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
    pub stack_size: Option<u64>,
    /// None: the automatic reserve (see limits::Limits::auto_reserve).
    pub reserve: Option<u64>,
    /// Validate, print the `start` event, spawn nothing.
    pub dry_run: bool,
}

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
    ("--stack-size", None),
    ("--gomaxprocs", None),
    ("--reserve", None),
];

pub fn usage() -> String {
    format!(
        "usage: {PROGRAM} <workload> [flags]

Spawns OS threads (Rust std::thread) and prints what they cost as JSON Lines on stdout.

workloads:
  sleep      --n tasks each sleep --sleep, then all are joined (the 2023 experiment, exactly N tasks)
  hold       --n tasks stay alive together; `peak` when all are; released by a line or EOF on
             stdin, or after --hold-for
  churn      create and join --n tasks, at most --batch alive at once
  pingpong   --n pairs bounce --rounds round trips over channels (std mpsc)
  chain      --n receivers with bounded queues of --queue; --n senders each send --events
             events of --type; speed = events/s after spawning (bench-of-chan)

flags:
  --n N               tasks (pingpong: pairs; chain: receivers = senders), 1..{MAX_N}
                      [sleep, hold, churn: 10000; pingpong: 1; chain: 1000]
  --sleep DUR         sleep: how long each task sleeps [1s]
  --hold-for DUR      hold: release after DUR instead of waiting on stdin
  --batch B           churn: tasks alive at most [100]
  --rounds R          pingpong: round trips per pair [10000]
  --events M          chain: events per sender [1000]
  --queue Q           chain: capacity of each receiver's queue [16]
  --type T            chain: int, str, str_ptr or str_clone [int]
  --size S            chain: bytes per string event [16]
  --stack-size BYTES  stack of each thread, at least the platform minimum
                      [Rust's default: RUST_MIN_STACK or 2 MiB]
  --gomaxprocs N      goroutines only: refused here
  --reserve BYTES     stop spawning when free memory (MemAvailable or the cgroup's headroom)
                      falls below this; 0 = never [2% of usable memory, 32..512 MiB]
  --dry-run           check the arguments, print the `start` event, spawn nothing
  --help, --version

Durations need a unit: 500ms, 1s, 1m30s. Byte counts take an optional K, M or G (x1024).
Exit codes: 0 done; 1 output failed; 2 bad usage; 3 spawning stopped at a limit (see the result's
`failure`).
"
    )
}

/// Parses the arguments after the program name. Err carries the one-line reason (without usage).
pub fn parse(args: &[String]) -> Result<Command, String> {
    let Some(first) = args.first() else {
        return Err("missing workload (sleep, hold, churn, pingpong or chain)".into());
    };
    match first.as_str() {
        "--help" | "-h" => return Ok(Command::Help),
        "--version" => return Ok(Command::Version),
        _ => {}
    }
    let workload = match Workload::parse(first) {
        Some(w) => w,
        None if first.starts_with('-') => {
            return Err(format!(
                "missing workload before '{first}' (sleep, hold, churn, pingpong or chain)"
            ))
        }
        None => {
            return Err(format!(
                "unknown workload '{first}' (sleep, hold, churn, pingpong or chain)"
            ))
        }
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
        stack_size: None,
        reserve: None,
        dry_run: false,
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
        if arg == "--dry-run" {
            cfg.dry_run = true;
            continue;
        }
        let (flag, inline_value) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        if flag == "--dry-run" {
            return Err("flag '--dry-run' takes no value".into());
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
        if flag == "--gomaxprocs" {
            return Err("flag '--gomaxprocs' is not supported: it sets the Go scheduler's processor count, which OS threads do not have".into());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &str) -> Result<Config, String> {
        let args: Vec<String> = args.split_whitespace().map(String::from).collect();
        match parse(&args)? {
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
        assert!(run("sleep --batch 3")
            .unwrap_err()
            .contains("does not apply to sleep"));
        assert!(run("--n 3").unwrap_err().contains("missing workload"));
    }
}
