package main

// The reduction: a Go execution trace (x/exp/trace reads go1.22+ formats) in, one record per
// goroutine state change out, and the counts that sum them up. The one home of the runtime's
// readied→running rule: a goroutine made runnable by its creation or an unblock, to its next
// start on a thread (a goroutine put back on the run queue by a preemption, a yield or a
// syscall's return is not "readied": it was already running).

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"

	"golang.org/x/exp/trace"
)

// summary is go-sched.json: what the records' indexes name, the clock, and the counts.
type summary struct {
	FormatVersion int `json:"format_version"`
	RecordBytes   int `json:"record_bytes"`
	// MaxRecords: the cap on the records written (--max-records).
	MaxRecords uint64 `json:"max_records"`
	// RecordsKept: the records written, the trace's first ones in its time order.
	RecordsKept uint64 `json:"records_kept"`
	// KeptUntilNs: the last kept record's time; every change the parser handed out before it is
	// kept. That time may be the parser's (flagTimeMoved), far past the events' own.
	KeptUntilNs uint64 `json:"kept_until_ns"`
	// KeptUntilOwnNs: the latest time among the kept records the parser did not move: the kept
	// records' own times reach here. A long trace's parser may move most of its first records to
	// one later event's time (a pingpong of 10,000 pairs: 14.8 M of the first 16.8 M records
	// moved to 210.8 s, their own times within the first 1 s).
	KeptUntilOwnNs uint64 `json:"kept_until_own_ns"`
	// RecordsPastCap: the changes after the cap, counted but not written.
	RecordsPastCap pastCap `json:"records_past_cap"`
	// Reasons: record.reason indexes it; 0 is "".
	Reasons []string `json:"reasons"`
	// Functions: record.function indexes it (a created goroutine's start function).
	Functions []string `json:"functions"`
	Clock     clock    `json:"clock"`
	Counts    counts   `json:"counts"`
	// Threads: every OS thread (M) that emitted a goroutine change, with how many.
	Threads []threadCount `json:"threads"`
	// Procs: the Ps' changes written to go-procs.bin (procs.go), in the same window.
	Procs procsSummary `json:"procs"`
}

// clock says how the trace's timestamps were put on CLOCK_MONOTONIC.
type clock struct {
	// Snapshots: Sync events with a clock snapshot (go1.25+); 0 means the trace clock was taken
	// as CLOCK_MONOTONIC as it is (the runtime's nanotime on Linux).
	Snapshots int `json:"snapshots"`
	// MonoMinusTraceNs: the first and last snapshot's offset (Mono - Trace), added to every
	// timestamp from its Sync on.
	FirstMonoMinusTraceNs int64  `json:"first_mono_minus_trace_ns"`
	LastMonoMinusTraceNs  int64  `json:"last_mono_minus_trace_ns"`
	FirstNs               uint64 `json:"first_ns"`
	LastNs                uint64 `json:"last_ns"`
	// MovedByParser: kept records whose time the parser moved forward to keep its order (flag
	// flagTimeMoved): their own time is at or before the one written.
	MovedByParser uint64 `json:"moved_by_parser"`
}

type counts struct {
	// Created: NotExist → Runnable, Waiting or Syscall; by the new goroutine's start function.
	Created           uint64            `json:"created"`
	CreatedByFunction map[string]uint64 `json:"created_by_function"`
	// AtStart: goroutines the trace found already there (Undetermined → anything).
	AtStart uint64 `json:"at_start"`
	// Started: Runnable → Running.
	Started uint64 `json:"started"`
	// Blocked: Running → Waiting, by the runtime's reason ("chan receive", "sleep", "sync", …).
	Blocked         uint64            `json:"blocked"`
	BlockedByReason map[string]uint64 `json:"blocked_by_reason"`
	// Unblocked: Waiting → Runnable.
	Unblocked uint64 `json:"unblocked"`
	// Stopped: Running → Runnable (preempted, yielded), by reason.
	Stopped         uint64            `json:"stopped"`
	StoppedByReason map[string]uint64 `json:"stopped_by_reason"`
	// Syscalls: Running → Syscall; SyscallsBlocked: Syscall → Runnable (its P was taken).
	Syscalls        uint64 `json:"syscalls"`
	SyscallsBlocked uint64 `json:"syscalls_blocked"`
	// Destroyed: → NotExist.
	Destroyed uint64 `json:"destroyed"`
	// ReadiedToRunning: the changes with a wait_ns (the readied→running samples), kept or not.
	ReadiedToRunning uint64 `json:"readied_to_running"`
	// Transitions: every change recorded, "From->To".
	Transitions map[string]uint64 `json:"transitions"`
}

// pastCap counts the changes read after the cap was reached: all of them, by "From->To", and
// those that carried a readied→running wait (so the kept records' waits are counts.readied_to_running
// less these).
type pastCap struct {
	Records          uint64            `json:"records"`
	ReadiedToRunning uint64            `json:"readied_to_running"`
	Transitions      map[string]uint64 `json:"transitions"`
}

type threadCount struct {
	Tid     int64  `json:"tid"`
	Records uint64 `json:"records"`
}

// reducer holds what one pass needs: the name tables, the clock offset, and each runnable
// goroutine's readied moment.
type reducer struct {
	out       *bufio.Writer
	buf       [recordBytes]byte
	sum       summary
	reasons   map[string]uint16
	functions map[trace.Stack]uint32
	names     map[string]uint32
	offset    int64
	readied   map[trace.GoID]readiedAt
	threads   map[trace.ThreadID]uint64
	order     parserOrder
	changes   uint64
	procs     *procReducer
}

// readiedAt is a runnable goroutine's readied moment, and whether the parser moved its time.
type readiedAt struct {
	ts    uint64
	moved bool
}

// parserOrder tells the events whose time x/exp/trace moved. The reader hands out every event
// in one time order, each M's in its own order; where an M's event comes after a later event of
// another M (its generation read after theirs: an M writes into the next generation while
// others still finish the last, or an ordering constraint holds it back), the reader sets its
// time to the last one handed out + 1 ns (reader.go, ReadEvent). That time is the parser's, not
// the thread's clock: the event happened at or before it, after its M's previous event. The
// tracer's own times are whole ticks (64 ns on linux/amd64), so a time 1 ns after the previous
// event's is the parser's.
type parserOrder struct {
	last trace.Time
	seen bool
}

// movedByParser says whether the event at t (the next one read, of any kind) had its time
// moved, and takes it as the last one handed out.
func (o *parserOrder) movedByParser(t trace.Time) bool {
	moved := o.seen && t == o.last+1
	o.last, o.seen = t, true
	return moved
}

// reduce reads a whole trace from in and writes every record (header first) to out, and the
// Ps' records to procsOut (procs.go).
func reduce(in io.Reader, out, procsOut io.Writer) (*summary, error) {
	return reduceKeeping(in, out, procsOut, math.MaxUint64)
}

// reduceKeeping reads a whole trace from in and writes its first maxRecords goroutine records
// (header first) to out, and the Ps' records of the same window to procsOut; the counts are of
// the whole trace.
func reduceKeeping(in io.Reader, out, procsOut io.Writer, maxRecords uint64) (*summary, error) {
	reader, err := trace.NewReader(bufio.NewReaderSize(in, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("not a Go execution trace this reader knows: %w", err)
	}
	r := &reducer{
		out:       bufio.NewWriterSize(out, 1<<20),
		reasons:   map[string]uint16{"": 0},
		functions: map[trace.Stack]uint32{},
		names:     map[string]uint32{},
		readied:   map[trace.GoID]readiedAt{},
		threads:   map[trace.ThreadID]uint64{},
	}
	r.sum = summary{FormatVersion: formatVersion, RecordBytes: recordBytes, MaxRecords: maxRecords,
		Reasons: []string{""}, Functions: []string{}}
	r.sum.RecordsPastCap.Transitions = map[string]uint64{}
	c := &r.sum.Counts
	c.CreatedByFunction, c.BlockedByReason, c.StoppedByReason, c.Transitions =
		map[string]uint64{}, map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	if _, err := r.out.Write(header()); err != nil {
		return nil, err
	}
	if r.procs, err = newProcReducer(procsOut); err != nil {
		return nil, err
	}
	for {
		ev, err := reader.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the trace after %d goroutine changes: %w", r.changes, err)
		}
		moved := r.order.movedByParser(ev.Time())
		switch ev.Kind() {
		case trace.EventSync:
			// A new generation: its stacks are new, and a Stack kept as a key would hold the
			// last generation's whole table (a long trace's reducer grew to GBs so).
			clear(r.functions)
			if snap := ev.Sync().ClockSnapshot; snap != nil {
				r.offset = int64(snap.Mono) - int64(snap.Trace)
				if r.sum.Clock.Snapshots == 0 {
					r.sum.Clock.FirstMonoMinusTraceNs = r.offset
				}
				r.sum.Clock.LastMonoMinusTraceNs = r.offset
				r.sum.Clock.Snapshots++
			}
		case trace.EventStateTransition:
			if st := ev.StateTransition(); st.Resource.Kind == trace.ResourceGoroutine {
				if err := r.transition(ev, st, moved); err != nil {
					return nil, err
				}
			}
			// The Ps' records end where the goroutines' do: one window for both.
			keep := r.sum.RecordsKept < r.sum.MaxRecords
			if err := r.procs.transition(ev, moved, r.offset, keep); err != nil {
				return nil, err
			}
		}
	}
	if err := r.out.Flush(); err != nil {
		return nil, err
	}
	if r.sum.Procs, err = r.procs.finish(); err != nil {
		return nil, err
	}
	for tid, n := range r.threads {
		r.sum.Threads = append(r.sum.Threads, threadCount{int64(tid), n})
	}
	sort.Slice(r.sum.Threads, func(i, j int) bool { return r.sum.Threads[i].Tid < r.sum.Threads[j].Tid })
	return &r.sum, nil
}

func (r *reducer) transition(ev trace.Event, st trace.StateTransition, moved bool) error {
	from, to := st.Goroutine()
	if from == to {
		// A later generation's status of a goroutine already known: no change.
		return nil
	}
	goid := st.Resource.Goroutine()
	ts := uint64(int64(ev.Time()) + r.offset)
	rec := record{tsNs: ts, goid: uint64(goid), waitNs: noWait, tid: -1, proc: -1,
		from: uint8(from), to: uint8(to), function: noFunction}
	if moved {
		rec.flags |= flagTimeMoved
	}
	if m := ev.Thread(); m != trace.NoThread {
		rec.tid = int32(m)
		r.threads[m]++
	}
	if p := ev.Proc(); p != trace.NoProc {
		rec.proc = int16(p)
	}
	rec.reason = r.reason(st.Reason)
	c := &r.sum.Counts
	kind := from.String() + "->" + to.String()
	c.Transitions[kind]++
	switch {
	case from == trace.GoUndetermined:
		c.AtStart++
	case from == trace.GoNotExist:
		c.Created++
		name := r.startFunction(st.Stack, &rec)
		c.CreatedByFunction[name]++
	case to == trace.GoNotExist:
		c.Destroyed++
	case from == trace.GoRunnable && to == trace.GoRunning:
		c.Started++
	case from == trace.GoRunning && to == trace.GoWaiting:
		c.Blocked++
		c.BlockedByReason[st.Reason]++
	case from == trace.GoWaiting && to == trace.GoRunnable:
		c.Unblocked++
	case from == trace.GoRunning && to == trace.GoRunnable:
		c.Stopped++
		c.StoppedByReason[st.Reason]++
	case from == trace.GoRunning && to == trace.GoSyscall:
		c.Syscalls++
	case from == trace.GoSyscall && to == trace.GoRunnable:
		c.SyscallsBlocked++
	}
	// readied → running: only a creation or an unblock readies; the next start closes it.
	switch {
	case to == trace.GoRunnable && (from == trace.GoNotExist || from == trace.GoWaiting):
		r.readied[goid] = readiedAt{ts, moved}
	case to == trace.GoRunning:
		if at, ok := r.readied[goid]; ok && from == trace.GoRunnable {
			rec.waitNs = ts - min(at.ts, ts)
			if at.moved {
				rec.flags |= flagWaitStartMoved
			}
			c.ReadiedToRunning++
		}
		delete(r.readied, goid)
	default:
		delete(r.readied, goid)
	}
	if r.changes == 0 {
		r.sum.Clock.FirstNs = ts
	}
	r.sum.Clock.LastNs = max(r.sum.Clock.LastNs, ts)
	r.changes++
	// The cut is by time (the reader's one order): past the cap, counted only.
	if r.sum.RecordsKept >= r.sum.MaxRecords {
		past := &r.sum.RecordsPastCap
		past.Records++
		past.Transitions[kind]++
		if rec.waitNs != noWait {
			past.ReadiedToRunning++
		}
		return nil
	}
	r.sum.RecordsKept++
	r.sum.KeptUntilNs = ts
	if moved {
		r.sum.Clock.MovedByParser++
	} else {
		r.sum.KeptUntilOwnNs = max(r.sum.KeptUntilOwnNs, ts)
	}
	rec.encode(r.buf[:])
	_, err := r.out.Write(r.buf[:])
	return err
}

// reason is the index of a reason in the table, added on first sight.
func (r *reducer) reason(text string) uint16 {
	if i, ok := r.reasons[text]; ok {
		return i
	}
	i := uint16(len(r.sum.Reasons))
	r.reasons[text] = i
	r.sum.Reasons = append(r.sum.Reasons, text)
	return i
}

// startFunction names a new goroutine's start function (the innermost frame of its start stack),
// indexes it in the table and returns the name; "" where the trace has no stack.
func (r *reducer) startFunction(stack trace.Stack, rec *record) string {
	index, ok := r.functions[stack]
	if !ok {
		name := ""
		for frame := range stack.Frames() {
			name = frame.Func
			break
		}
		if index, ok = r.names[name]; !ok {
			index = uint32(len(r.sum.Functions))
			r.names[name] = index
			r.sum.Functions = append(r.sum.Functions, name)
		}
		r.functions[stack] = index
	}
	rec.function = index
	return r.sum.Functions[index]
}
