// Command goroutines is the spawnscope workload on goroutines (Go standard library only).
// The contract it shares with `threads` is in schema/ and the architecture notes.
package main

import (
	"errors"
	"fmt"
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
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		fmt.Fprint(os.Stderr, usage())
		return 2
	}
	if cfg.gomaxprocs != nil {
		runtime.GOMAXPROCS(int(*cfg.gomaxprocs))
	}
	h := newHarness(cfg)
	h.start()
	if cfg.dryRun {
		return 0
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
	}
	return h.finish(t)
}
