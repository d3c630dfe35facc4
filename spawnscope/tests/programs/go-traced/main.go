// go-traced: a Go program for spawnscope's command-mode runtime-trace test, knowing nothing of
// spawnscope but the lines that start Go's execution tracer on $SPAWNSCOPE_GO_TRACE (as the
// manual's "Measuring any program" shows them). N goroutines in a ring pass a token ROUNDS times
// round it, so each blocks on a channel receive and is unblocked by its neighbour (a send never
// blocks: each channel has room for the one token).
//
//	go-traced N ROUNDS   e.g. go-traced 300 20
package main

import (
	"fmt"
	"os"
	"runtime/trace"
	"strconv"
	"sync"
)

func main() {
	// The lines a program adds: the first Go process of a tree to create the file is traced
	// (O_EXCL); another one given the same variable goes on untraced.
	if path := os.Getenv("SPAWNSCOPE_GO_TRACE"); path != "" {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil && trace.Start(f) == nil {
			defer trace.Stop()
		} else {
			fmt.Fprintf(os.Stderr, "go-traced: not traced: %v\n", err)
		}
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go-traced N ROUNDS")
		os.Exit(2)
	}
	n, err1 := strconv.Atoi(os.Args[1])
	rounds, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || n < 1 || rounds < 1 {
		fmt.Fprintln(os.Stderr, "go-traced: N and ROUNDS must be positive integers")
		os.Exit(2)
	}
	ring := make([]chan int, n)
	for i := range ring {
		ring[i] = make(chan int, 1) // one token in the ring: a send never blocks
	}
	var done sync.WaitGroup
	done.Add(n)
	for i := 0; i < n; i++ {
		go pass(ring[i], ring[(i+1)%n], i == 0, i == n-1, rounds, &done)
	}
	ring[0] <- 0
	done.Wait()
	fmt.Printf("go-traced: %d goroutines passed the token %d times round\n", n, rounds)
}

// pass forwards the token from in to out. The first goroutine counts the rounds; after the last
// it sends -1 instead, which each forwards once and returns (the last one, whose out is the
// first's in, only returns).
func pass(in <-chan int, out chan<- int, first, last bool, rounds int, done *sync.WaitGroup) {
	defer done.Done()
	for {
		token := <-in
		if first && token >= 0 {
			token++
			if token > rounds {
				token = -1
			}
		}
		if token < 0 {
			if !last {
				out <- token
			}
			return
		}
		out <- token
	}
}
