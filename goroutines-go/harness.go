package main

// What every workload shares: the events on stdout, phases, progress, the memory guard, the peak
// snapshot and the final `result`. The workloads themselves (workloads.go) only spawn and wait.

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

const (
	schemaVersion   = 1
	programVersion  = "0.1.0"
	progressEveryNs = 100_000_000
)

// throughput sums up a workload's work: the unit, how many were done, and in which phase.
type throughput struct {
	unit  string
	count uint64
	phase string
}

type phaseMark struct {
	name string
	tNs  uint64
	gc   gcCPU // the GC's work so far, read at the mark
}

type harness struct {
	cfg            *config
	reserve        uint64
	outputFailed   bool
	limits         *limits
	guard          *spawnGuard
	phases         []phaseMark
	spawned        uint64
	lastProgressNs uint64
	aliveMax       uint64
	peakAlive      uint64
	peakStatus     object
	peakStats      object
	failure        *failure
	serve          *serveStats // serve only: its tasks are connections
}

func newHarness(cfg *config) *harness {
	l := discoverLimits()
	reserve := l.autoReserve()
	if cfg.reserve != nil {
		reserve = *cfg.reserve
	}
	return &harness{cfg: cfg, reserve: reserve, limits: l, guard: newSpawnGuard(reserve, l)}
}

// target is how many tasks the workload means to spawn.
func (h *harness) target() uint64 { return h.cfg.workload.tasks(h.cfg.n) }

func (h *harness) emit(event object) {
	line, err := json.Marshal(event)
	if err == nil {
		_, err = os.Stdout.Write(append(line, '\n'))
	}
	if err != nil {
		h.outputFailed = true
	}
}

func (h *harness) params() object {
	c := h.cfg
	p := object{}.with("n", c.n)
	switch c.workload {
	case sleepWorkload:
		p = p.with("sleep_ns", c.sleepNs)
	case holdWorkload:
		p = p.with("hold_for_ns", c.holdForNs)
	case churnWorkload:
		p = p.with("batch", c.batch)
	case pingpongWorkload:
		p = p.with("rounds", c.rounds)
	case chainWorkload:
		p = p.with("events", c.events).with("queue", c.queue).with("type", c.eventType).with("size", c.size)
	case serveWorkload:
		p = p.with("port", c.port).with("addrs", c.addrs).with("backlog", c.backlog).
			with("serve_for_ns", c.serveForNs).
			with("work", object{}.with("spin_ns", c.work.spinNs).with("sleep_ns", c.work.sleepNs).
				with("body_bytes", c.work.bodyBytes))
	}
	return p.with("stack_size", nil).with("gomaxprocs", c.gomaxprocs).with("workers", nil).
		with("reserve_bytes", h.reserve)
}

func (h *harness) start() {
	h.emit(object{}.
		with("event", "start").
		with("schema", schemaVersion).
		with("t_ns", monotonicNs()).
		with("runtime", program).
		with("workload", h.cfg.workload).
		with("pid", os.Getpid()).
		with("program_version", programVersion).
		with("runtime_version", runtime.Version()).
		with("params", h.params()))
}

// phase marks the start of phase name (`end` closes the last one).
func (h *harness) phase(name string) {
	t := monotonicNs()
	h.phases = append(h.phases, phaseMark{name, t, readGCCPU()})
	h.emit(object{}.with("event", "phase").with("name", name).with("t_ns", t))
}

// alive counts live tasks: goroutines but main (runtime goroutines are not counted by Go).
func alive() uint64 { return uint64(runtime.NumGoroutine() - 1) }

// liveTasks is the workload's live tasks: serve's open connections (its accept loops and
// release wait are goroutines too), the goroutines for the others.
func (h *harness) liveTasks() uint64 {
	if h.serve != nil {
		return h.serve.open.Load()
	}
	return alive()
}

// tick emits a `progress` event if the last one is ~100 ms old.
func (h *harness) tick() {
	now := monotonicNs()
	if now < h.lastProgressNs+progressEveryNs {
		return
	}
	h.lastProgressNs = now
	live := h.liveTasks()
	h.aliveMax = maxU64(h.aliveMax, live)
	event := object{}.
		with("event", "progress").
		with("t_ns", now).
		with("spawned", h.spawned).
		with("target", h.target()).
		with("alive", live)
	if h.serve != nil {
		event = event.with("requests", h.serve.requests.Load())
	}
	h.emit(event)
}

// maySpawn runs before each spawn: progress now and then, and the memory guard. false = stop.
func (h *harness) maySpawn() bool {
	if h.failure != nil {
		return false
	}
	if h.spawned%1024 == 0 {
		h.tick()
	}
	if f := h.guard.check(h.spawned, h.limits); f != nil {
		h.stop(f)
		return false
	}
	return true
}

func (h *harness) stop(f *failure) {
	fmt.Fprintf(os.Stderr, "%s: spawning stopped after %d of %d tasks: %s (%s: %s)\n",
		program, h.spawned, h.target(), f.message, f.limit, f.detail)
	h.failure = f
}

// snapshotPeak records the moment most tasks are alive: /proc/self/status, the live count and
// the runtime's own figures.
func (h *harness) snapshotPeak() (uint64, object) {
	h.peakStatus = statusObject()
	h.peakAlive = h.liveTasks()
	h.aliveMax = maxU64(h.aliveMax, h.peakAlive)
	h.peakStats = runtimeStats()
	return h.peakAlive, h.peakStatus
}

// emitPeak is the `peak` event of hold and serve, with the snapshot just taken.
func (h *harness) emitPeak(expected uint64) {
	live, status := h.snapshotPeak()
	h.emit(object{}.
		with("event", "peak").
		with("t_ns", monotonicNs()).
		with("alive", live).
		with("expected", expected).
		with("status", status))
}

// runtimeStats reads runtime/metrics and the count of OS threads the runtime made (osThreadsMade).
func runtimeStats() object {
	names := []string{
		"/gc/stack/starting-size:bytes", "/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes",
		"/memory/classes/heap/objects:bytes", "/memory/classes/total:bytes", "/gc/cycles/total:gc-cycles",
		"/sched/goroutines-created:goroutines", "/sched/threads/total:threads",
	}
	samples := make([]metrics.Sample, len(names))
	for i, name := range names {
		samples[i].Name = name
	}
	metrics.Read(samples)
	value := func(i int) uint64 {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			return samples[i].Value.Uint64()
		}
		return 0
	}
	return object{}.
		with("gomaxprocs", runtime.GOMAXPROCS(0)).
		with("initial_stack_bytes", value(0)).
		with("goroutine_stack_bytes", value(1)).
		with("os_stack_bytes", value(2)).
		with("heap_objects_bytes", value(3)).
		with("runtime_total_bytes", value(4)).
		with("gc_cycles", value(5)).
		with("goroutines_created", value(6)).
		with("os_threads", value(7)).
		with("os_threads_created", osThreadsMade())
}

// osThreadsMade is the OS threads the Go runtime has made, the main thread (exec made it)
// included. pprof's threadcreate count is every M on the runtime's list, and a binary that links
// cgo (net's resolver does unless built with CGO_ENABLED=0) has an M more from its start: the
// extra M kept for a thread C made to call into Go on (needm), which has no thread of its own —
// counted, it is one thread more than the kernel ever created. runtime/metrics'
// /sched/threads/total (Go 1.26) is the Ms less the extra ones, idle or lent to a C thread (whose
// creation was C's, not the runtime's); without it (an older Go), the threadcreate count, which
// is the same count in a binary without cgo.
func osThreadsMade() uint64 {
	sample := []metrics.Sample{{Name: "/sched/threads/total:threads"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		return sample[0].Value.Uint64()
	}
	return uint64(pprof.Lookup("threadcreate").Count())
}

// gcCPU is the Go GC's work so far, as runtime/metrics estimates it: its completed cycles and
// its CPU seconds, in total and by kind. The runtime estimates each class from time spent
// holding a P (a pause counts GOMAXPROCS times its latency), so the figures are an upper bound
// of the CPU the GC used, not rusage's own measure; and it adds them up only when a cycle ends
// (mark termination), so a reading holds the cycles completed by then, a cycle still marking
// not at all. They are kept beside the process's user time to tell how much of it the GC was.
type gcCPU struct {
	cycles                                uint64
	total, assist, dedicated, idle, pause float64
}

var gcCPUNames = []string{
	"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/gc/mark/assist:cpu-seconds", "/cpu/classes/gc/mark/dedicated:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds", "/cpu/classes/gc/pause:cpu-seconds",
}

// readGCCPU reads the GC's figures now: a handful of counters, cheap enough for every phase mark.
func readGCCPU() gcCPU {
	samples := make([]metrics.Sample, len(gcCPUNames))
	for i, name := range gcCPUNames {
		samples[i].Name = name
	}
	metrics.Read(samples)
	seconds := func(i int) float64 {
		if samples[i].Value.Kind() == metrics.KindFloat64 {
			return samples[i].Value.Float64()
		}
		return 0
	}
	var cycles uint64
	if samples[0].Value.Kind() == metrics.KindUint64 {
		cycles = samples[0].Value.Uint64()
	}
	return gcCPU{cycles, seconds(1), seconds(2), seconds(3), seconds(4), seconds(5)}
}

// since is the GC's work from an earlier reading to this one: the cycles that ended between.
func (g gcCPU) since(before gcCPU) gcCPU {
	return gcCPU{
		g.cycles - before.cycles, g.total - before.total, g.assist - before.assist,
		g.dedicated - before.dedicated, g.idle - before.idle, g.pause - before.pause,
	}
}

func (g gcCPU) object() object {
	return object{}.
		with("cycles", g.cycles).
		with("cpu_s", g.total).
		with("assist_cpu_s", g.assist).
		with("dedicated_cpu_s", g.dedicated).
		with("idle_cpu_s", g.idle).
		with("pause_cpu_s", g.pause)
}

// rusageWithThreads reads getrusage and the OS threads the runtime has made (osThreadsMade) at
// one moment: the count is read before and after the call, again until the two agree. The runtime may start an M at any time (one for a blocked syscall, one more P
// woken after the peak); the probes' "threads created" check cuts its count at this very call,
// so the count it is held against must be this call's, not the peak's.
func rusageWithThreads() (object, uint64) {
	for {
		before := osThreadsMade()
		ru := rusageObject()
		if after := osThreadsMade(); after == before {
			return ru, after
		}
	}
}

func (h *harness) phaseSpan(name string) (uint64, bool) {
	for i := 0; i+1 < len(h.phases); i++ {
		if h.phases[i].name == name {
			return h.phases[i+1].tNs - h.phases[i].tNs, true
		}
	}
	return 0, false
}

// finish emits `result` and returns the process exit code.
func (h *harness) finish(t *throughput) int {
	phases := []object{}
	for i := 0; i+1 < len(h.phases); i++ {
		a, b := h.phases[i], h.phases[i+1]
		phases = append(phases, object{}.
			with("name", a.name).with("start_ns", a.tNs).with("end_ns", b.tNs).with("dur_ns", b.tNs-a.tNs))
	}
	spawnPhase := "spawn"
	if h.cfg.workload == churnWorkload {
		spawnPhase = "churn"
	}
	var perTask, rate any
	if ns, ok := h.phaseSpan(spawnPhase); ok && h.spawned > 0 {
		perTask = float64(ns) / float64(h.spawned)
	}
	if t != nil {
		if ns, ok := h.phaseSpan(t.phase); ok && ns > 0 {
			rate = object{}.with("unit", t.unit).with("count", t.count).with("value", float64(t.count)*1e9/float64(ns))
		}
	}
	if h.peakStatus == nil {
		h.snapshotPeak()
		h.peakAlive = 0
	}
	var failureObject, serveObject any
	if h.failure != nil {
		failureObject = h.failure.object()
	}
	if h.serve != nil {
		serveObject = h.serve.object(h.spawned)
	}
	ru, threads := rusageWithThreads()
	// The GC's work up to the rusage read, the user time it is held against, and within each
	// phase span: when its cycles fell moves the user time of the phases they fell in.
	gc := readGCCPU()
	gcPhases := []object{}
	for i := 0; i+1 < len(h.phases); i++ {
		a, b := h.phases[i], h.phases[i+1]
		d := b.gc.since(a.gc)
		gcPhases = append(gcPhases, object{}.with("name", a.name).with("cycles", d.cycles).with("cpu_s", d.total))
	}
	stats := h.peakStats
	if stats != nil {
		stats = append(object{}, stats...).
			with("os_threads_at_getrusage", threads).
			with("gc_at_getrusage", gc.object()).
			with("gc_per_phase", gcPhases)
	}
	h.emit(object{}.
		with("event", "result").
		with("schema", schemaVersion).
		with("t_ns", monotonicNs()).
		with("runtime", program).
		with("workload", h.cfg.workload).
		with("ok", h.failure == nil).
		with("params", h.params()).
		with("target", h.target()).
		with("spawned", h.spawned).
		with("alive_at_peak", h.peakAlive).
		with("alive_max", h.aliveMax).
		with("failure", failureObject).
		with("phases", phases).
		with("spawn_ns_per_task", perTask).
		with("throughput", rate).
		with("serve", serveObject).
		with("rusage", ru).
		with("status_at_peak", h.peakStatus).
		with("runtime_stats", stats))
	switch {
	case h.outputFailed:
		return 1
	case h.failure != nil:
		return 3
	}
	return 0
}

// latch counts arrivals and wakes main when the target is reached, so main sleeps instead of
// polling while thousands of tasks start or finish.
type latch struct {
	count, target atomic.Uint64
	reached       chan struct{}
	once          sync.Once
}

func newLatch(target uint64) *latch {
	l := &latch{reached: make(chan struct{})}
	l.target.Store(target)
	return l
}

func (l *latch) arrive() {
	if l.count.Add(1) == l.target.Load() {
		l.once.Do(func() { close(l.reached) })
	}
}

// wait blocks until target arrivals (lowered from the initial target when spawning stopped
// early), calling tick about every 100 ms.
func (l *latch) wait(target uint64, tick func()) {
	l.target.Store(target)
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for l.count.Load() < target {
		select {
		case <-l.reached:
		case <-ticker.C:
			tick()
		}
	}
}
