package main

// Why spawning stopped, diagnosed from what the process can read, and the guard that stops
// spawning before a limit turns into a crash (threads-rs/src/limits.rs is the same logic).
// Goroutine creation itself never returns an error: running out of memory (or mappings) is the
// only way it fails, and the Go runtime aborts the process when it does. The guard turns that into
// data, so unlike threads there is no errno to diagnose: only the guard's own stops.

import "fmt"

const (
	mib    = 1 << 20
	eNOMEM = 12
)

// opt is an optional reading: nil when it could not be read (or is unlimited).
func opt(v uint64, ok bool) *uint64 {
	if !ok {
		return nil
	}
	return &v
}

func orZero(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// readings is everything readable about the limits on task creation, at one moment.
type readings struct {
	threadsMax, tasksOnHost, pidMax, maxMapCount, maps, rlimitNproc *uint64
	euid                                                            uint64
	threads, cgroupPidsMax, cgroupPidsCurrent                       *uint64
	memAvailable, cgroupMemLimit, cgroupMemUsage                    *uint64
}

func (r readings) object() object {
	return object{}.
		with("threads_max", r.threadsMax).
		with("tasks_on_host", r.tasksOnHost).
		with("pid_max", r.pidMax).
		with("max_map_count", r.maxMapCount).
		with("maps", r.maps).
		with("rlimit_nproc", r.rlimitNproc).
		with("euid", r.euid).
		with("threads", r.threads).
		with("cgroup_pids_max", r.cgroupPidsMax).
		with("cgroup_pids_current", r.cgroupPidsCurrent).
		with("mem_available_bytes", r.memAvailable).
		with("cgroup_mem_limit_bytes", r.cgroupMemLimit).
		with("cgroup_mem_usage_bytes", r.cgroupMemUsage)
}

// headroom is the bytes that can still be allocated: MemAvailable, or less when the cgroup limit
// is nearer. The cases are schema/limit-diagnosis.tsv (headroom column).
func headroom(memAvailable, cgroupLimit, cgroupUsage *uint64) *uint64 {
	var cgroup *uint64
	if cgroupLimit != nil && cgroupUsage != nil {
		left := uint64(0)
		if *cgroupLimit > *cgroupUsage {
			left = *cgroupLimit - *cgroupUsage
		}
		cgroup = &left
	}
	switch {
	case memAvailable != nil && cgroup != nil:
		return opt(minU64(*memAvailable, *cgroup), true)
	case memAvailable != nil:
		return memAvailable
	default:
		return cgroup
	}
}

// detail puts the numbers that bear on limit in a sentence; the cases are
// schema/limit-diagnosis.tsv.
func (r readings) detail(limit string) string {
	n := func(v *uint64) string {
		if v == nil {
			return "?"
		}
		return fmt.Sprint(*v)
	}
	switch limit {
	case "cgroup pids.max":
		return fmt.Sprintf("the cgroup holds %s tasks, its pids.max is %s", n(r.cgroupPidsCurrent), n(r.cgroupPidsMax))
	case "kernel.threads-max":
		return fmt.Sprintf("%s tasks on the host, kernel.threads-max is %s", n(r.tasksOnHost), n(r.threadsMax))
	case "kernel.pid_max":
		return fmt.Sprintf("%s tasks on the host use PIDs, kernel.pid_max is %s", n(r.tasksOnHost), n(r.pidMax))
	case "vm.max_map_count":
		return fmt.Sprintf("the process has %s mappings, vm.max_map_count is %s", n(r.maps), n(r.maxMapCount))
	case "memory":
		limit := "none"
		if r.cgroupMemLimit != nil {
			limit = fmt.Sprintf("%d MiB", *r.cgroupMemLimit/mib)
		}
		return fmt.Sprintf("%d MiB can still be allocated (MemAvailable %d MiB, cgroup limit %s, usage %d MiB)",
			orZero(headroom(r.memAvailable, r.cgroupMemLimit, r.cgroupMemUsage))/mib, orZero(r.memAvailable)/mib,
			limit, orZero(r.cgroupMemUsage)/mib)
	case "RLIMIT_NPROC":
		return fmt.Sprintf("not root and RLIMIT_NPROC is %s; this process has %s threads and the user's other tasks count too",
			n(r.rlimitNproc), n(r.threads))
	}
	return "no readable limit was reached; see readings"
}

// limits are the limits this process lives under; cgroup directories are looked up once.
type limits struct {
	memoryCgroup, pidsCgroup       cgroupDir
	hasMemoryCgroup, hasPidsCgroup bool
}

func discoverLimits() *limits {
	l := &limits{}
	l.memoryCgroup, l.hasMemoryCgroup = findCgroupDir("memory")
	l.pidsCgroup, l.hasPidsCgroup = findCgroupDir("pids")
	return l
}

// memoryReadings are cheap enough for the guard to take while spawning.
func (l *limits) memoryReadings() (memAvailable, cgroupLimit, cgroupUsage *uint64) {
	memAvailable = opt(meminfo("MemAvailable"))
	if l.hasMemoryCgroup {
		limit, limited, usage, usageOk := cgroupMemory(l.memoryCgroup)
		cgroupLimit, cgroupUsage = opt(limit, limited), opt(usage, usageOk)
	}
	return
}

func (l *limits) readHeadroom() *uint64 { return headroom(l.memoryReadings()) }

func (l *limits) read() readings {
	r := readings{
		threadsMax:  opt(sysctl("kernel/threads-max")),
		tasksOnHost: opt(tasksOnHost()),
		pidMax:      opt(sysctl("kernel/pid_max")),
		maxMapCount: opt(sysctl("vm/max_map_count")),
		maps:        opt(mapCount()),
		rlimitNproc: opt(rlimitNproc()),
		euid:        uint64(syscallGeteuid()),
		threads:     opt(threadCount(), true),
	}
	if l.hasPidsCgroup {
		pmax, limited, current, currentOk := cgroupPids(l.pidsCgroup)
		r.cgroupPidsMax, r.cgroupPidsCurrent = opt(pmax, limited), opt(current, currentOk)
	}
	r.memAvailable, r.cgroupMemLimit, r.cgroupMemUsage = l.memoryReadings()
	return r
}

// autoReserve is the default --reserve: 2 % of the memory this process may use, 32..512 MiB.
func (l *limits) autoReserve() uint64 {
	var cgroupLimit *uint64
	if l.hasMemoryCgroup {
		limit, limited, _, _ := cgroupMemory(l.memoryCgroup)
		cgroupLimit = opt(limit, limited)
	}
	return autoReserveFor(opt(meminfo("MemTotal")), cgroupLimit)
}

// autoReserveFor is the default --reserve from MemTotal and the cgroup's memory limit (nil:
// unreadable or unlimited); the cases are schema/auto-reserve.tsv.
func autoReserveFor(memTotal, cgroupLimit *uint64) uint64 {
	usable := ^uint64(0)
	if memTotal != nil {
		usable = *memTotal
	}
	if cgroupLimit != nil {
		usable = minU64(usable, *cgroupLimit)
	}
	return minU64(maxU64(usable/50, 32*mib), 512*mib)
}

// failure is why spawning stopped: the schema's `failure` object.
type failure struct {
	errno          int
	message, limit string
	detail         string
	readings       readings
}

// guardedFailure is spawning stopped by the guard before limit was hit (as ENOMEM, what mmap
// would return). Goroutine creation has no other way to fail.
func guardedFailure(limit, message string, l *limits) *failure {
	r := l.read()
	return &failure{errno: eNOMEM, message: message, limit: limit, detail: r.detail(limit), readings: r}
}

func (f *failure) object() object {
	return object{}.
		with("errno", f.errno).
		with("errno_name", errnoName(f.errno)).
		with("message", f.message).
		with("limit", f.limit).
		with("detail", f.detail).
		with("readings", f.readings.object())
}

// mapsReserve is the mappings kept free (as in the threads workload, where a new thread maps its
// signal stack from inside itself); the Go runtime aborts when an mmap fails.
const mapsReserve = 1024

// budget is one resource that spawning uses up, read again only when the tasks spawned since the
// last read could have used half of what was left, at the cost per task seen so far. A run far
// from a limit reads /proc a handful of times; one near it reads more often the nearer it gets.
// The cases are schema/spawn-budget.tsv.
type budget struct {
	reserve, minPerTask, nextCheck uint64
	atStart                        *uint64
}

func newBudget(reserve, minPerTask uint64, headroomNow *uint64) *budget {
	return &budget{reserve: reserve, minPerTask: minPerTask, nextCheck: 64, atStart: headroomNow}
}

// check returns what is left and false when it fell below the reserve.
func (b *budget) check(spawned uint64, readHeadroom func() *uint64) (uint64, bool) {
	if b.reserve == 0 || b.atStart == nil || spawned < b.nextCheck {
		return 0, true
	}
	left := readHeadroom()
	if left == nil {
		b.reserve = 0 // no longer readable: this budget cannot be watched
		return 0, true
	}
	if *left < b.reserve {
		return *left, false
	}
	used := uint64(0)
	if *b.atStart > *left {
		used = *b.atStart - *left
	}
	perTask := maxU64(used/maxU64(spawned, 1), b.minPerTask)
	b.nextCheck = spawned + minU64(maxU64((*left-b.reserve)/2/perTask, 1), 65_536)
	return *left, true
}

// mapHeadroom is the mappings this process may still create under vm.max_map_count.
func mapHeadroom() *uint64 {
	limit, ok1 := sysctl("vm/max_map_count")
	maps, ok2 := mapCount()
	if !ok1 || !ok2 {
		return nil
	}
	return opt(limit-minU64(maps, limit), true)
}

// spawnGuard stops spawning before a limit would turn into a crash rather than an error: memory
// (the OOM killer, or the Go runtime's abort) and vm.max_map_count. --reserve sets the memory
// kept free; 0 turns the guard off.
type spawnGuard struct{ memory, maps *budget }

func newSpawnGuard(reserve uint64, l *limits) *spawnGuard {
	var memoryNow, mapsNow *uint64
	if reserve > 0 {
		memoryNow, mapsNow = l.readHeadroom(), mapHeadroom()
	}
	return &spawnGuard{newBudget(reserve, 1024, memoryNow), newBudget(mapsReserve, 4, mapsNow)}
}

// check is called before spawning task number spawned; a non-nil failure means stop.
func (g *spawnGuard) check(spawned uint64, l *limits) *failure {
	var limit, message string
	if left, ok := g.memory.check(spawned, l.readHeadroom); !ok {
		limit = "memory"
		message = fmt.Sprintf("memory headroom %d MiB fell below the reserve of %d MiB (--reserve); spawning stopped",
			left/mib, g.memory.reserve/mib)
	} else if left, ok := g.maps.check(spawned, mapHeadroom); !ok {
		limit = "vm.max_map_count"
		message = fmt.Sprintf("only %d memory mappings left under vm.max_map_count (reserve %d); spawning stopped before mmap fails",
			left, mapsReserve)
	} else {
		return nil
	}
	return guardedFailure(limit, message, l)
}
