package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	rtrace "runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/exp/trace"
)

// The encoder writes each field where schema/go-sched-record.tsv says, at the size it says: the
// table the conductor's reader is checked against too.
func TestLayoutIsTheTables(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "schema", "go-sched-record.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	rec := record{tsNs: 0x0102030405060708, goid: 0x1112131415161718, waitNs: 0x2122232425262728,
		tid: 0x31323334, proc: 0x4142, from: 0x51, to: 0x61, reason: 0x7172, flags: 0x9192,
		function: 0x81828384}
	var b [recordBytes]byte
	rec.encode(b[:])
	want := map[string]uint64{"ts_ns": rec.tsNs, "goid": rec.goid, "wait_ns": rec.waitNs,
		"tid": uint64(rec.tid), "proc": uint64(rec.proc), "from": uint64(rec.from), "to": uint64(rec.to),
		"reason": uint64(rec.reason), "flags": uint64(rec.flags), "function": uint64(rec.function)}
	sizes := map[string]int{"u64": 8, "u32": 4, "i32": 4, "u16": 2, "i16": 2, "u8": 1}
	end := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 {
			t.Fatalf("malformed row %q", line)
		}
		offset, err := strconv.Atoi(cols[1])
		size, known := sizes[cols[2]]
		value, named := want[cols[0]]
		if err != nil || !known || !named || offset != end {
			t.Fatalf("row %q: offset %d expected, type known %v, field known %v", line, end, known, named)
		}
		var got uint64
		for i := size - 1; i >= 0; i-- {
			got = got<<8 | uint64(b[offset+i])
		}
		if got != value {
			t.Errorf("%s at %d: %#x, want %#x", cols[0], offset, got, value)
		}
		delete(want, cols[0])
		end = offset + size
	}
	if end != recordBytes || len(want) != 0 {
		t.Fatalf("the table ends at %d (records are %d bytes); fields it lacks: %v", end, recordBytes, want)
	}
	if decode(b[:]) != rec {
		t.Fatalf("decode(encode(r)) = %+v, want %+v", decode(b[:]), rec)
	}
}

func monotonicNs() uint64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return uint64(ts.Nano())
}

const spawned = 2000

// knownTask is the test program's goroutine: it starts, blocks once on the gate, and ends.
func knownTask(gate chan struct{}, started *sync.WaitGroup, done *sync.WaitGroup) {
	started.Done()
	<-gate
	done.Done()
}

// traceKnownProgram traces a small program with known counts: spawned goroutines created by
// knownTask, and one goroutine locked to its OS thread that reports that thread's TID.
func traceKnownProgram(t *testing.T) (data []byte, lockedTid int, before, after uint64) {
	var buf bytes.Buffer
	before = monotonicNs()
	if err := rtrace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{}) // one per traced program: each test traces its own
	var started, done sync.WaitGroup
	started.Add(spawned)
	done.Add(spawned)
	for range spawned {
		go knownTask(gate, &started, &done)
	}
	tids := make(chan int)
	go func() {
		runtime.LockOSThread()
		tid := syscall.Gettid()
		for range 3 {
			tids <- tid
		}
	}()
	for range 3 {
		lockedTid = <-tids
	}
	started.Wait()
	close(gate)
	done.Wait()
	rtrace.Stop()
	after = monotonicNs()
	return buf.Bytes(), lockedTid, before, after
}

// naive counts what x/exp/trace reports on its own: each goroutine change by "From->To", the
// creations by start function, and how many starts follow a creation or an unblock directly.
type naive struct {
	transitions map[string]uint64
	created     map[string]uint64
	readied     uint64
}

func countNaively(t *testing.T, data []byte) naive {
	reader, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	n := naive{transitions: map[string]uint64{}, created: map[string]uint64{}}
	last := map[trace.GoID]trace.GoState{} // the state each goroutine was in before Runnable
	for {
		ev, err := reader.ReadEvent()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		if from == to {
			continue
		}
		n.transitions[from.String()+"->"+to.String()]++
		id := st.Resource.Goroutine()
		if from == trace.GoNotExist {
			for f := range st.Stack.Frames() {
				n.created[f.Func]++
				break
			}
		}
		if to == trace.GoRunnable {
			last[id] = from
		}
		if from == trace.GoRunnable && to == trace.GoRunning &&
			(last[id] == trace.GoNotExist || last[id] == trace.GoWaiting) {
			n.readied++
		}
		if to != trace.GoRunnable {
			delete(last, id)
		}
	}
	return n
}

// The reducer's counts are x/exp/trace's, on a trace this test makes of a program whose counts
// it knows; every record decodes, on the clock the test read around the trace, on the thread
// that emitted it.
func TestReducerCountsWhatTheParserCounts(t *testing.T) {
	data, lockedTid, before, after := traceKnownProgram(t)
	var out bytes.Buffer
	sum, err := reduce(bytes.NewReader(data), &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := countNaively(t, data)
	c := sum.Counts
	if len(c.Transitions) != len(want.transitions) {
		t.Errorf("transitions %v, x/exp/trace counts %v", c.Transitions, want.transitions)
	}
	for key, n := range want.transitions {
		if c.Transitions[key] != n {
			t.Errorf("%s: %d, x/exp/trace counts %d", key, c.Transitions[key], n)
		}
	}
	if c.ReadiedToRunning != want.readied {
		t.Errorf("readied→running samples %d, x/exp/trace counts %d", c.ReadiedToRunning, want.readied)
	}
	const task = "spawnscope/gotrace-reduce.knownTask"
	if c.CreatedByFunction[task] != spawned || want.created[task] != spawned {
		t.Errorf("created by %s: %d (x/exp/trace: %d), want %d; all: %v", task,
			c.CreatedByFunction[task], want.created[task], spawned, c.CreatedByFunction)
	}
	if c.BlockedByReason["chan receive"] == 0 || c.Destroyed < spawned {
		t.Errorf("blocked on chan receive %d, destroyed %d", c.BlockedByReason["chan receive"], c.Destroyed)
	}
	if sum.Clock.Snapshots == 0 {
		t.Errorf("no clock snapshot in a %s trace", runtime.Version())
	}

	records := out.Bytes()
	if !bytes.Equal(records[:headerBytes], header()) || (len(records)-headerBytes)%recordBytes != 0 {
		t.Fatalf("header %q, %d bytes", records[:headerBytes], len(records))
	}
	if got := uint64(len(records)-headerBytes) / recordBytes; got != sum.RecordsKept {
		t.Fatalf("%d records written, the summary says %d", got, sum.RecordsKept)
	}
	var waits, lockedRecords, moved uint64
	var lastTs uint64
	// Each goroutine's last readying record: whether the parser moved its time.
	readiedMoved := map[uint64]bool{}
	lockedGoid := uint64(0)
	for off := headerBytes; off < len(records); off += recordBytes {
		r := decode(records[off : off+recordBytes])
		if r.tsNs < before || r.tsNs > after {
			t.Fatalf("record at %d ns, outside the trace's [%d, %d] on CLOCK_MONOTONIC", r.tsNs, before, after)
		}
		if r.flags&flagTimeMoved != 0 {
			moved++
			// A moved time is the parser's: 1 ns after the event before it, here a record or
			// an event the reducer does not write (so at least 1 ns after the last record).
			if r.tsNs <= lastTs {
				t.Fatalf("a moved record at %d ns, not after the record before it at %d", r.tsNs, lastTs)
			}
		}
		lastTs = r.tsNs
		if r.to == uint8(trace.GoRunnable) && (r.from == uint8(trace.GoNotExist) || r.from == uint8(trace.GoWaiting)) {
			readiedMoved[r.goid] = r.flags&flagTimeMoved != 0
		}
		if r.waitNs != noWait {
			waits++
			if r.to != uint8(trace.GoRunning) || r.waitNs > after-before {
				t.Fatalf("a wait on %+v", r)
			}
			// The wait's start is flagged moved exactly when its readying record was.
			if (r.flags&flagWaitStartMoved != 0) != readiedMoved[r.goid] {
				t.Fatalf("wait-start-moved flag %v on %+v, its readying record moved: %v",
					r.flags&flagWaitStartMoved != 0, r, readiedMoved[r.goid])
			}
		} else if r.flags&flagWaitStartMoved != 0 {
			t.Fatalf("wait-start-moved flag on a record without a wait: %+v", r)
		}
		if r.function != noFunction && r.from != uint8(trace.GoNotExist) {
			t.Fatalf("a start function on %+v", r)
		}
		// The locked goroutine: the one that blocks on "chan send" three times over.
		if int(r.reason) < len(sum.Reasons) && sum.Reasons[r.reason] == "chan send" && lockedGoid == 0 {
			lockedGoid = r.goid
		}
		if r.goid == lockedGoid && r.to == uint8(trace.GoRunning) {
			lockedRecords++
			if int(r.tid) != lockedTid {
				t.Errorf("the locked goroutine ran on thread %d, its gettid() said %d", r.tid, lockedTid)
			}
		}
	}
	if waits != c.ReadiedToRunning {
		t.Errorf("%d records carry a wait, the summary counts %d", waits, c.ReadiedToRunning)
	}
	if moved != sum.Clock.MovedByParser {
		t.Errorf("%d records flagged moved, the summary counts %d", moved, sum.Clock.MovedByParser)
	}
	if lockedRecords == 0 {
		t.Errorf("the locked goroutine (TID %d) never seen starting", lockedTid)
	}
	found := false
	for _, th := range sum.Threads {
		found = found || th.Tid == int64(lockedTid)
	}
	if !found {
		t.Errorf("thread %d not among %v", lockedTid, sum.Threads)
	}
}

// The parser's moved times: x/exp/trace hands out an event read after a later one as that
// one's time + 1 ns; the tracer's own times are whole ticks apart or more. So an event 1 ns after
// the one before it was moved, one later than that was not, and the first one never is.
func TestAMovedTimeIsOneNanosecondAfterTheEventBefore(t *testing.T) {
	var o parserOrder
	for i, c := range []struct {
		t     trace.Time
		moved bool
	}{
		{6400, false}, // the first
		{6464, false}, // a tick later: the tracer's own
		{6465, true},  // held back behind the event at 6464: moved to it + 1
		{6466, true},  // and the next one of the same batch
		{6528, false}, // a later tick: its own again
		{7040, false},
		{7041, true}, // a Sync (the reader sets it to the last time + 1): moved too, and not a record
		{7042, true},
	} {
		if got := o.movedByParser(c.t); got != c.moved {
			t.Errorf("event %d at %d: moved %v, want %v", i, c.t, got, c.moved)
		}
	}
}

// A file that is not a trace is refused with the reader's reason.
func TestNotATraceIsRefused(t *testing.T) {
	if _, err := reduce(strings.NewReader("hello"), io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "not a Go execution trace") {
		t.Fatalf("err = %v", err)
	}
}

// A cap of K keeps the uncapped reduction's first K records, byte for byte (so in its time
// order); every count is the uncapped one's, and what lies past the cap is counted: the
// uncapped records less K, by transition, with their readied→running waits.
func TestACapKeepsTheFirstRecordsAndCountsTheWholeTrace(t *testing.T) {
	data, _, _, _ := traceKnownProgram(t)
	var whole, wholeProcs bytes.Buffer
	all, err := reduce(bytes.NewReader(data), &whole, &wholeProcs)
	if err != nil {
		t.Fatal(err)
	}
	const keep = 1000
	if all.RecordsKept <= keep {
		t.Fatalf("the test program made only %d records", all.RecordsKept)
	}
	var cut, cutProcs bytes.Buffer
	capped, err := reduceKeeping(bytes.NewReader(data), &cut, &cutProcs, keep)
	if err != nil {
		t.Fatal(err)
	}
	if capped.RecordsKept != keep || cut.Len() != headerBytes+keep*recordBytes {
		t.Fatalf("kept %d records in %d bytes, want %d", capped.RecordsKept, cut.Len(), keep)
	}
	if !bytes.Equal(cut.Bytes(), whole.Bytes()[:cut.Len()]) {
		t.Fatal("the kept records are not the uncapped reduction's first ones")
	}
	var lastTs, waits, lastOwn uint64
	for off := headerBytes; off < cut.Len(); off += recordBytes {
		r := decode(cut.Bytes()[off : off+recordBytes])
		if r.tsNs < lastTs {
			t.Fatalf("record at %d ns after one at %d: not in time order", r.tsNs, lastTs)
		}
		lastTs = r.tsNs
		if r.flags&flagTimeMoved == 0 {
			lastOwn = max(lastOwn, r.tsNs)
		}
		if r.waitNs != noWait {
			waits++
		}
	}
	if capped.KeptUntilOwnNs != lastOwn || lastOwn == 0 {
		t.Errorf("kept_until_own_ns %d, the last kept record not moved at %d", capped.KeptUntilOwnNs, lastOwn)
	}
	if capped.KeptUntilNs != lastTs {
		t.Errorf("kept_until_ns %d, the last kept record's time %d", capped.KeptUntilNs, lastTs)
	}
	past := capped.RecordsPastCap
	if past.Records != all.RecordsKept-keep {
		t.Errorf("past the cap %d, want %d uncapped less %d", past.Records, all.RecordsKept, keep)
	}
	var byKind uint64
	for _, n := range past.Transitions {
		byKind += n
	}
	if byKind != past.Records {
		t.Errorf("past the cap by transition %v sums to %d, not %d", past.Transitions, byKind, past.Records)
	}
	if waits+past.ReadiedToRunning != all.Counts.ReadiedToRunning {
		t.Errorf("waits kept %d + past %d, the whole trace's %d", waits, past.ReadiedToRunning,
			all.Counts.ReadiedToRunning)
	}
	if !reflect.DeepEqual(capped.Counts, all.Counts) || !reflect.DeepEqual(capped.Threads, all.Threads) {
		t.Errorf("the counts moved with the cap:\n%+v\n%+v", capped.Counts, all.Counts)
	}
	if capped.Clock.FirstNs != all.Clock.FirstNs || capped.Clock.LastNs != all.Clock.LastNs {
		t.Errorf("the clock's span moved with the cap: %+v, %+v", capped.Clock, all.Clock)
	}
	if all.RecordsPastCap.Records != 0 || all.KeptUntilNs != all.Clock.LastNs {
		t.Errorf("uncapped: %d past the cap, kept until %d of %d", all.RecordsPastCap.Records,
			all.KeptUntilNs, all.Clock.LastNs)
	} // The Ps' records share the window: a prefix of the uncapped ones, the rest counted, and
	// every kept P change at or before the goroutines' cut.
	if capped.Procs.Records+capped.Procs.RecordsPastCap != all.Procs.Records || all.Procs.RecordsPastCap != 0 {
		t.Errorf("P records kept %d + past %d, uncapped %d (past %d)", capped.Procs.Records,
			capped.Procs.RecordsPastCap, all.Procs.Records, all.Procs.RecordsPastCap)
	}
	if !bytes.Equal(cutProcs.Bytes(), wholeProcs.Bytes()[:cutProcs.Len()]) ||
		cutProcs.Len() != headerBytes+int(capped.Procs.Records)*procRecordBytes {
		t.Error("the kept P records are not the uncapped reduction's first ones")
	}
	for off := headerBytes; off < cutProcs.Len(); off += procRecordBytes {
		if p := decodeProc(cutProcs.Bytes()[off : off+procRecordBytes]); p.tsNs > capped.KeptUntilNs+1 {
			t.Fatalf("a kept P change at %d ns, past the goroutines' cut at %d", p.tsNs, capped.KeptUntilNs)
		}
	}
	if !reflect.DeepEqual(capped.Procs.ByKind, all.Procs.ByKind) || capped.Procs.Steals != all.Procs.Steals {
		t.Errorf("the Ps' counts moved with the cap: %+v, %+v", capped.Procs, all.Procs)
	}
}
