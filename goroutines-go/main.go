// Command goroutines is the spawnscope workload on goroutines (Go standard library only).
// The contract it shares with `threads` is in schema/ and the architecture notes.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseArgs(args)
	switch {
	case errors.Is(err, errHelp):
		fmt.Print(usage())
		return 0
	case errors.Is(err, errVersion):
		fmt.Printf("%s %s (%s)\n", program, programVersion, runtime.Version())
		return 0
	case err != nil:
		return badUsage(err)
	}
	if cfg.gomaxprocs != nil {
		runtime.GOMAXPROCS(int(*cfg.gomaxprocs))
	}
	var listeners []*net.TCPListener
	if cfg.workload == serveWorkload {
		// Bound before `start`: an address that cannot be bound is bad usage.
		if listeners, err = listen(cfg); err != nil {
			return badUsage(err)
		}
	}
	var tracer *goTrace
	if cfg.goTrace != "" {
		// Opened before `start`: a path that cannot be written is bad usage.
		if tracer, err = openGoTrace(cfg.goTrace, cfg.dryRun); err != nil {
			return badUsage(err)
		}
	}
	h := newHarness(cfg)
	h.start()
	if cfg.dryRun {
		return 0
	}
	if tracer != nil {
		// Before the gate: the conductor's base reading holds the tracer's own start.
		if err := tracer.start(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: --go-trace: %v\n", program, err)
			return 1
		}
	}
	if cfg.waitToStart {
		waitAtStartGate()
	}
	var t *throughput
	switch cfg.workload {
	case sleepWorkload:
		t = runSleep(h)
	case holdWorkload:
		t = runHold(h)
	case churnWorkload:
		t = runChurn(h)
	case pingpongWorkload:
		t = runPingpong(h)
	case chainWorkload:
		t = runChain(h)
	case serveWorkload:
		t = runServe(h, listeners)
	}
	code := h.finish(t)
	if tracer != nil {
		if err := tracer.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: --go-trace: writing the trace: %v\n", program, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// badUsage prints the reason and the usage on stderr: exit code 2.
func badUsage(err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
	fmt.Fprint(os.Stderr, usage())
	return 2
}
