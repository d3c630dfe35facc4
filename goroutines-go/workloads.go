package main

// The five workloads on goroutines (serve, the sixth, is in serve.go). Each spawns through the
// harness (which counts, guards and reports) and keeps nothing per task beyond what the runtime
// needs: tasks wait on one shared gate, report to one shared latch and one WaitGroup.

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// shared is what every task of a run reads. Package-level on purpose: a go statement with no
// captured variables allocates no closure, so a goroutine costs only what the runtime needs.
var shared struct {
	nap     time.Duration
	gate    chan struct{}
	started *latch
	done    sync.WaitGroup
}

func sleepTask() {
	time.Sleep(shared.nap)
	shared.done.Done()
}

func holdTask() {
	shared.started.arrive()
	<-shared.gate
	shared.done.Done()
}

func churnTask() { shared.done.Done() }

// spawn starts one goroutine running task, counted in the harness and the WaitGroup.
func (h *harness) spawn(task func()) {
	shared.done.Add(1)
	go task()
	h.spawned++
}

// runSleep: N tasks each sleep, then all are joined — Hansen's experiment with exactly N tasks.
func runSleep(h *harness) *throughput {
	shared.nap = time.Duration(h.cfg.sleepNs)
	h.phase("spawn")
	for h.spawned < h.target() && h.maySpawn() {
		h.spawn(sleepTask)
	}
	h.snapshotPeak()
	h.phase("join")
	shared.done.Wait()
	h.phase("end")
	return &throughput{"tasks/s", h.spawned, "spawn"}
}

// runHold: N tasks stay alive together until released, proving they coexist.
func runHold(h *harness) *throughput {
	shared.gate = make(chan struct{})
	shared.started = newLatch(h.target())
	h.phase("spawn")
	for h.spawned < h.target() && h.maySpawn() {
		h.spawn(holdTask)
	}
	shared.started.wait(h.spawned, h.tick)
	h.emitPeak(h.spawned)
	h.phase("steady")
	waitForRelease(h.cfg.holdForNs, fmt.Sprintf("%d tasks alive; a line or EOF on stdin releases them", h.spawned))
	h.phase("join")
	close(shared.gate) // one close releases every task
	shared.done.Wait()
	h.phase("end")
	return &throughput{"tasks/s", h.spawned, "spawn"}
}

// waitForRelease waits for forNs (--hold-for, --serve-for), or else, saying so on stderr, for a
// line or EOF on stdin.
func waitForRelease(forNs *uint64, notice string) {
	if forNs != nil {
		time.Sleep(time.Duration(*forNs))
		return
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", program, notice)
	stdin.ReadString('\n')
}

// stdin is read through one buffer for the whole process: the start gate's line and the release
// after it may come in one read, and a second reader would lose what the first had buffered.
var stdin = bufio.NewReader(os.Stdin)

// waitAtStartGate (--wait-to-start): one line, or EOF, on stdin lets the run go on. Before any
// phase or spawn, so that the reader's base holds nothing of the run.
func waitAtStartGate() {
	stdin.ReadString('\n')
}

// runChurn: create and join N tasks, at most --batch alive at once: the cost of a task's whole life.
func runChurn(h *harness) *throughput {
	batch := minU64(h.cfg.batch, h.target())
	h.phase("churn")
	for first := true; h.spawned < h.target() && h.failure == nil; first = false {
		for inBatch := uint64(0); inBatch < batch && h.spawned < h.target() && h.maySpawn(); inBatch++ {
			h.spawn(churnTask)
		}
		if first {
			h.snapshotPeak() // the first batch: the most tasks this workload has at once
		}
		shared.done.Wait()
	}
	h.phase("end")
	return &throughput{"tasks/s", h.spawned, "churn"}
}

// runPingpong: --n pairs each bounce --rounds round trips over two channels of one slot.
func runPingpong(h *harness) *throughput {
	rounds := h.cfg.rounds
	gate := make(chan struct{})
	finished := newLatch(h.cfg.n)
	pairs := uint64(0)
	h.phase("spawn")
	for h.spawned < h.target() && h.maySpawn() {
		toPong, toPing := make(chan uint64, 1), make(chan uint64, 1)
		// The pong echoes until its ping hangs up (or never starts: then main closes its inbox).
		h.spawn(func() {
			defer shared.done.Done()
			for v := range toPong {
				toPing <- v
			}
		})
		if !h.maySpawn() {
			close(toPong)
			break
		}
		h.spawn(func() {
			defer shared.done.Done()
			<-gate
			for round := uint64(0); round < rounds; round++ {
				toPong <- round
				<-toPing
			}
			close(toPong)
			finished.arrive()
		})
		pairs++
	}
	h.snapshotPeak()
	h.phase("steady")
	close(gate)
	finished.wait(pairs, func() {})
	h.phase("join")
	shared.done.Wait()
	h.phase("end")
	return &throughput{"hops/s", pairs * rounds * 2, "steady"}
}

// runChain: the bench-of-chan experiment. --n receivers, each with a bounded queue of --queue;
// --n senders, sender i sending --events events to receiver i once all are spawned.
func runChain(h *harness) *throughput {
	template := strings.Repeat("x", int(h.cfg.size))
	switch h.cfg.eventType {
	case "str":
		size := int(h.cfg.size)
		return chainOf(h, func(uint64) string { return strings.Repeat("x", size) })
	case "str_ptr":
		return chainOf(h, func(uint64) *string { return &template })
	case "str_clone":
		return chainOf(h, func(uint64) string { return strings.Clone(template) })
	default:
		return chainOf(h, func(i uint64) uint64 { return i })
	}
}

func chainOf[T any](h *harness, makeEvent func(uint64) T) *throughput {
	events, queue := h.cfg.events, h.cfg.queue
	gate := make(chan struct{})
	drained := newLatch(h.cfg.n)
	var received atomic.Uint64
	receivers := uint64(0)
	h.phase("spawn")
	for h.spawned < h.target() && h.maySpawn() {
		inbox := make(chan T, queue)
		// A receiver counts until its sender closes the queue, then reports once.
		h.spawn(func() {
			defer shared.done.Done()
			count := uint64(0)
			for range inbox {
				count++
			}
			received.Add(count)
			drained.arrive()
		})
		receivers++
		if !h.maySpawn() {
			close(inbox) // the receiver sees no sender and reports 0 events
			break
		}
		h.spawn(func() {
			defer shared.done.Done()
			<-gate
			for i := uint64(0); i < events; i++ {
				inbox <- makeEvent(i)
			}
			close(inbox)
		})
	}
	h.snapshotPeak()
	h.phase("steady")
	close(gate)
	drained.wait(receivers, func() {})
	h.phase("join")
	shared.done.Wait()
	h.phase("end")
	return &throughput{"events/s", received.Load(), "steady"}
}
