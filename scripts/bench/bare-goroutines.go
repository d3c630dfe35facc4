// The least a program can do to hold N goroutines alive at once: the floor `goroutines hold` is
// compared with by scripts/bench-workloads.sh. Prints `rss_kb=… spawn_ns=…`.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	started atomic.Int64
	gate    = make(chan struct{})
	done    sync.WaitGroup
)

func task() {
	started.Add(1)
	<-gate
	done.Done()
}

func main() {
	n, _ := strconv.ParseInt(os.Args[1], 10, 64)
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		done.Add(1)
		go task()
	}
	for started.Load() < n {
		time.Sleep(time.Millisecond)
	}
	spawnNs := time.Since(t0).Nanoseconds() / n
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if rss, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fmt.Printf("rss_kb=%s spawn_ns=%d\n", strings.TrimSuffix(strings.TrimSpace(rss), " kB"), spawnNs)
		}
	}
	close(gate)
	done.Wait()
}
