// cgo-threads: a small cgo program for spawnscope's command-mode tests — N goroutines that each
// call into C and stay there, so that the Go runtime starts an OS thread for each, as a cgo
// binary does: through pthread_create (runtime/cgo), not its own clone. It prints one line when
// all N are in C (what `--peak-when` can match), then releases them after HOLD and waits for
// them.
//
//	cgo-threads N HOLD   e.g. cgo-threads 1000 1s
package main

/*
#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int inside, released;

// hold: counted in, then waits until release.
static void hold(void) {
	pthread_mutex_lock(&mu);
	inside++;
	pthread_cond_broadcast(&cond);
	while (!released)
		pthread_cond_wait(&cond, &mu);
	pthread_mutex_unlock(&mu);
}

// wait_inside: returns once n callers are in hold.
static void wait_inside(int n) {
	pthread_mutex_lock(&mu);
	while (inside < n)
		pthread_cond_wait(&cond, &mu);
	pthread_mutex_unlock(&mu);
}

static void release_all(void) {
	pthread_mutex_lock(&mu);
	released = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&mu);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: cgo-threads N HOLD")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "cgo-threads: N must be a positive integer")
		os.Exit(2)
	}
	hold, err := time.ParseDuration(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "cgo-threads: HOLD must be a Go duration (3s, 500ms)")
		os.Exit(2)
	}
	var done sync.WaitGroup
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			// A goroutine in a C call keeps its thread: the runtime starts another for the rest.
			C.hold()
			done.Done()
		}()
	}
	// Called from the main goroutine, it holds a thread too, until all N are in.
	C.wait_inside(C.int(n))
	fmt.Printf("all %d in C\n", n)
	time.Sleep(hold)
	C.release_all()
	done.Wait()
	fmt.Println("released")
}
