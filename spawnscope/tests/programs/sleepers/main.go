// sleepers: a small async program for spawnscope's command-mode tests — N goroutines that each
// sleep, standing in for any program whose tasks are not OS threads. It prints one line when all
// N have started (what `--peak-when` can match), then waits for them.
//
//	sleepers N SLEEP   e.g. sleepers 100000 3s
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sleepers N SLEEP")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "sleepers: N must be a positive integer")
		os.Exit(2)
	}
	sleep, err := time.ParseDuration(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sleepers: SLEEP must be a Go duration (3s, 500ms)")
		os.Exit(2)
	}
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			started.Done()
			time.Sleep(sleep)
			done.Done()
		}()
	}
	started.Wait()
	fmt.Printf("all %d sleeping\n", n)
	done.Wait()
}
