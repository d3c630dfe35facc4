package main

// Command line of the workload. threads-rs/src/cli.rs accepts exactly the same workloads, flags,
// defaults and bad input; schema/bad-input.tsv is the shared table of refusals.

import (
	"errors"
	"fmt"
	"strings"
)

const program = "goroutines"

// maxN is the largest N any workload accepts: far beyond what a machine can hold, below overflow.
const maxN = 100_000_000

// maxGomaxprocs is the Go runtime's own ceiling on GOMAXPROCS.
const maxGomaxprocs = 1024

type workload string

const (
	sleepWorkload    workload = "sleep"
	holdWorkload     workload = "hold"
	churnWorkload    workload = "churn"
	pingpongWorkload workload = "pingpong"
	chainWorkload    workload = "chain"
	serveWorkload    workload = "serve"
)

var workloads = []workload{sleepWorkload, holdWorkload, churnWorkload, pingpongWorkload, chainWorkload, serveWorkload}

func (w workload) defaultN() uint64 {
	switch w {
	case pingpongWorkload:
		return 1
	case chainWorkload:
		return 1_000
	case serveWorkload:
		return 100
	default:
		return 10_000
	}
}

// tasks is how many goroutines the workload spawns for a given --n (pingpong and chain: two each).
func (w workload) tasks(n uint64) uint64 {
	if w == pingpongWorkload || w == chainWorkload {
		return 2 * n
	}
	return n
}

// config is everything a run needs, validated.
type config struct {
	workload   workload
	n          uint64
	sleepNs    uint64
	holdForNs  *uint64
	batch      uint64
	rounds     uint64
	events     uint64
	queue      uint64
	eventType  string
	size       uint64
	port       uint64
	addrs      uint64
	backlog    uint64
	serveForNs *uint64 // nil: serve until a line or EOF on stdin
	work       work
	gomaxprocs *uint64
	reserve    *uint64 // nil: the automatic reserve (see limits.autoReserve)
	dryRun     bool    // validate, print the `start` event, spawn nothing
	// waitToStart: the start gate. After `start`, wait for a line or EOF on stdin before the
	// first phase, so that whoever measures reads its base with nothing of the run started.
	waitToStart bool
	// goTrace: --go-trace, a file for the runtime's execution trace (runtime/trace); "" = none.
	goTrace string
}

// switches: the flags that take no value, and what each sets.
var switches = map[string]func(*config){
	"--dry-run":       func(c *config) { c.dryRun = true },
	"--wait-to-start": func(c *config) { c.waitToStart = true },
}

// flags, and the workload each applies to ("" = all).
var flags = []struct {
	name      string
	appliesTo workload
}{
	{"--n", ""}, {"--sleep", sleepWorkload}, {"--hold-for", holdWorkload}, {"--batch", churnWorkload},
	{"--rounds", pingpongWorkload}, {"--events", chainWorkload}, {"--queue", chainWorkload},
	{"--type", chainWorkload}, {"--size", chainWorkload}, {"--port", serveWorkload},
	{"--addrs", serveWorkload}, {"--backlog", serveWorkload}, {"--work", serveWorkload},
	{"--serve-for", serveWorkload}, {"--stack-size", ""}, {"--gomaxprocs", ""}, {"--workers", ""},
	{"--reserve", ""}, {"--go-trace", ""}, {"--tokio-trace", ""},
}

func usage() string {
	return fmt.Sprintf(`usage: %[1]s <workload> [flags]

Spawns goroutines and prints what they cost as JSON Lines on stdout.

workloads:
  sleep      --n tasks each sleep --sleep, then all are joined (the 2023 experiment, exactly N tasks)
  hold       --n tasks stay alive together; `+"`peak`"+` when all are; released by a line or EOF on
             stdin, or after --hold-for
  churn      create and join --n tasks, at most --batch alive at once
  pingpong   --n pairs bounce --rounds round trips over channels (chan)
  chain      --n receivers with bounded queues of --queue; --n senders each send --events
             events of --type; speed = events/s after spawning (bench-of-chan)
  serve      an HTTP/1.1 keep-alive server on the loopback, a task per connection; `+"`peak`"+`
             when --n connections are open at once; drains on a line or EOF on stdin, or after
             --serve-for

flags:
  --n N               tasks (pingpong: pairs; chain: receivers = senders; serve: connections),
                      1..%[2]d [sleep, hold, churn: 10000; pingpong: 1; chain: 1000; serve: 100]
  --sleep DUR         sleep: how long each task sleeps [1s]
  --hold-for DUR      hold: release after DUR instead of waiting on stdin
  --batch B           churn: tasks alive at most [100]
  --rounds R          pingpong: round trips per pair [10000]
  --events M          chain: events per sender [1000]
  --queue Q           chain: capacity of each receiver's queue [16]
  --type T            chain: int, str, str_ptr or str_clone [int]
  --size S            chain: bytes per string event [16]
  --port P            serve: TCP port, 0..65535; 0 = a free one the kernel picks [0]
  --addrs K           serve: listen on 127.0.0.1 to 127.0.0.K, all on one port, 1..64 [1]
  --backlog B         serve: listen(2) backlog, 1..1048576, capped by net.core.somaxconn [4096]
  --work LIST         serve: what each request does, comma-separated: spin=DUR (busy loop),
                      sleep=DUR (wait without CPU), body=BYTES (response body, 0..16M)
                      [spin=0s,sleep=0s,body=128]
  --serve-for DUR     serve: drain after DUR instead of waiting on stdin
  --stack-size BYTES  threads only: refused here (goroutine stacks start small and grow)
  --gomaxprocs N      GOMAXPROCS for the run, 1..%[3]d [the runtime's default]
  --workers N         tokio-tasks only: refused here (use --gomaxprocs)
  --go-trace FILE     write the Go runtime's execution trace (runtime/trace) of the run to FILE:
                      from the `+"`start`"+` event to after the `+"`result`"+`
  --tokio-trace FILE  tokio-tasks-hooks only: refused here (use --go-trace)
  --reserve BYTES     stop spawning when free memory (MemAvailable or the cgroup's headroom)
                      falls below this; 0 = never [2%% of usable memory, 32..512 MiB]
  --dry-run           check the arguments, print the `+"`start`"+` event, spawn nothing
  --wait-to-start     after the `+"`start`"+` event, wait for a line or EOF on stdin before spawning
                      (the start gate: a conductor reads its base meanwhile; hold's and serve's
                      release is the line after it)
  --help, --version

Durations need a unit: 500ms, 1s, 1m30s. Byte counts take an optional K, M or G (x1024).
Exit codes: 0 done; 1 output failed; 2 bad usage; 3 spawning stopped at a limit (see the result's
`+"`failure`"+`).
`, program, maxN, maxGomaxprocs)
}

var (
	errHelp    = errors.New("help")
	errVersion = errors.New("version")
)

const workloadList = "(sleep, hold, churn, pingpong, chain or serve)"

// parseArgs parses the arguments after the program name. The error is the one-line reason
// (without usage), or errHelp / errVersion.
func parseArgs(args []string) (*config, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("missing workload %s", workloadList)
	}
	first := args[0]
	switch first {
	case "--help", "-h":
		return nil, errHelp
	case "--version":
		return nil, errVersion
	}
	var w workload
	for _, candidate := range workloads {
		if string(candidate) == first {
			w = candidate
		}
	}
	if w == "" {
		if strings.HasPrefix(first, "-") {
			return nil, fmt.Errorf("missing workload before '%s' %s", first, workloadList)
		}
		return nil, fmt.Errorf("unknown workload '%s' %s", first, workloadList)
	}
	cfg := &config{
		workload: w, n: w.defaultN(), sleepNs: 1_000_000_000, batch: 100, rounds: 10_000,
		events: 1_000, queue: 16, eventType: "int", size: 16, addrs: 1, backlog: 4096,
		work: defaultWork,
	}
	seen := map[string]bool{}
	for i := 1; i < len(args); i++ {
		arg := args[i]
		if arg == "--help" || arg == "-h" {
			return nil, errHelp
		}
		if !strings.HasPrefix(arg, "--") {
			return nil, fmt.Errorf("unexpected argument '%s'", arg)
		}
		if set, ok := switches[arg]; ok {
			set(cfg)
			continue
		}
		flag, value, hasValue := strings.Cut(arg, "=")
		if _, ok := switches[flag]; ok {
			return nil, fmt.Errorf("flag '%s' takes no value", flag)
		}
		known := false
		for _, f := range flags {
			if f.name != flag {
				continue
			}
			known = true
			if f.appliesTo != "" && f.appliesTo != w {
				return nil, fmt.Errorf("flag '%s' does not apply to %s", flag, w)
			}
		}
		if !known {
			return nil, fmt.Errorf("unknown flag '%s' for %s", flag, w)
		}
		if flag == "--stack-size" {
			return nil, errors.New("flag '--stack-size' is not supported: goroutine stacks start small and grow on demand; Go has no per-goroutine stack size")
		}
		if flag == "--tokio-trace" {
			return nil, errors.New("flag '--tokio-trace' is not supported: it records tokio's task hooks (the tokio workload's hooks build, tokio-tasks-hooks); Go's scheduler is recorded with --go-trace")
		}
		if flag == "--workers" {
			return nil, errors.New("flag '--workers' is not supported: it sets an async runtime's worker threads; the Go scheduler's processors are set with --gomaxprocs")
		}
		if seen[flag] {
			return nil, fmt.Errorf("flag '%s' given twice", flag)
		}
		seen[flag] = true
		if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag '%s' needs a value", flag)
			}
			i++
			value = args[i]
		}
		if err := cfg.set(flag, value); err != nil {
			return nil, fmt.Errorf("%s '%s': %v", flag, value, err)
		}
	}
	return cfg, nil
}

// set applies one flag's value.
func (cfg *config) set(flag, value string) (err error) {
	switch flag {
	case "--n":
		cfg.n, err = parseCount(value, 1, maxN)
	case "--sleep":
		cfg.sleepNs, err = parseDurationNs(value)
	case "--hold-for":
		var ns uint64
		ns, err = parseDurationNs(value)
		cfg.holdForNs = &ns
	case "--batch":
		cfg.batch, err = parseCount(value, 1, maxN)
	case "--rounds":
		cfg.rounds, err = parseCount(value, 1, 1_000_000_000)
	case "--events":
		cfg.events, err = parseCount(value, 1, 1_000_000_000)
	case "--queue":
		cfg.queue, err = parseCount(value, 1, 1_000_000)
	case "--size":
		cfg.size, err = parseCount(value, 1, 1<<24)
	case "--type":
		switch value {
		case "int", "str", "str_ptr", "str_clone":
			cfg.eventType = value
		default:
			err = errors.New("must be int, str, str_ptr or str_clone")
		}
	case "--port":
		cfg.port, err = parseCount(value, 0, 65535)
	case "--addrs":
		cfg.addrs, err = parseCount(value, 1, maxAddrs)
	case "--backlog":
		cfg.backlog, err = parseCount(value, 1, 1<<20)
	case "--work":
		cfg.work, err = parseWork(value)
	case "--serve-for":
		var ns uint64
		ns, err = parseDurationNs(value)
		cfg.serveForNs = &ns
	case "--gomaxprocs":
		var procs uint64
		procs, err = parseCount(value, 1, maxGomaxprocs)
		cfg.gomaxprocs = &procs
	case "--go-trace":
		if value == "" {
			err = errors.New("needs a file name")
		}
		cfg.goTrace = value
	case "--reserve":
		if value != "auto" {
			var bytes uint64
			bytes, err = parseBytes(value, ^uint64(0))
			cfg.reserve = &bytes
		}
	}
	return err
}

// maxAddrs is how many loopback addresses serve listens on at most (127.0.0.1 to 127.0.0.64).
const maxAddrs = 64

// maxBody is the largest response body --work takes.
const maxBody = 16 << 20

// work is what serve does for each request: spin, then sleep, then respond with the body.
type work struct {
	spinNs, sleepNs, bodyBytes uint64
}

var defaultWork = work{spinNs: 0, sleepNs: 0, bodyBytes: 128}

// parseWork reads --work's comma-separated KIND=VALUE list; kinds not given keep their default.
func parseWork(list string) (work, error) {
	w := defaultWork
	seen := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		kind, value, hasValue := strings.Cut(item, "=")
		if kind != "spin" && kind != "sleep" && kind != "body" {
			return w, fmt.Errorf("unknown kind '%s' (spin, sleep or body)", kind)
		}
		if !hasValue {
			example := "1ms"
			if kind == "body" {
				example = "1K"
			}
			return w, fmt.Errorf("'%s' needs a value, like %s=%s", kind, kind, example)
		}
		if seen[kind] {
			return w, fmt.Errorf("'%s' given twice", kind)
		}
		seen[kind] = true
		var err error
		switch kind {
		case "spin":
			w.spinNs, err = parseDurationNs(value)
		case "sleep":
			w.sleepNs, err = parseDurationNs(value)
		case "body":
			w.bodyBytes, err = parseBytes(value, maxBody)
		}
		if err != nil {
			return w, fmt.Errorf("%s '%s' %v", kind, value, err)
		}
	}
	return w, nil
}
