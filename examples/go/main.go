// go-sleepers: N goroutines that each sleep 10 s, all waited for with a sync.WaitGroup — the Go
// program of async-runtimes-benchmarks-2024 ("Take 2", hez2010) as published, which put
// 3.55 / 34.3 / 262.7 / 2585.6 MB at 1 / 10,000 / 100,000 / 1,000,000 tasks on Go 1.23. Like
// the article's, it has no knob for the 10 s.
//
//	go-sleepers N
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	n, err := strconv.Atoi(firstArg())
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "usage: go-sleepers N (a whole number of goroutines, at least 1)")
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			time.Sleep(10 * time.Second)
			wg.Done()
		}()
	}
	wg.Wait()
}

func firstArg() string {
	if len(os.Args) < 2 {
		return ""
	}
	return os.Args[1]
}
