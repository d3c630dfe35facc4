package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	rtrace "runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/exp/trace"
)

// The encoder writes each field where schema/go-proc-record.tsv says, at the size it says: the
// table the conductor's reader is checked against too.
func TestProcLayoutIsTheTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "schema", "go-proc-record.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	rec := procRecord{tsNs: 0x0102030405060708, tid: 0x11121314, holder: 0x21222324,
		proc: 0x31323334, from: 0x41, to: 0x51, kind: 0x61, flags: 0x71}
	var b [procRecordBytes]byte
	rec.encode(b[:])
	want := map[string]uint64{"ts_ns": rec.tsNs, "tid": uint64(rec.tid), "holder": uint64(rec.holder),
		"proc": uint64(rec.proc), "from": uint64(rec.from), "to": uint64(rec.to),
		"kind": uint64(rec.kind), "flags": uint64(rec.flags)}
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
	if end != procRecordBytes || len(want) != 0 {
		t.Fatalf("the table ends at %d (records are %d bytes); fields it lacks: %v", end, procRecordBytes, want)
	}
	if decodeProc(b[:]) != rec {
		t.Fatalf("decodeProc(encode(r)) = %+v, want %+v", decodeProc(b[:]), rec)
	}
}

// traceWithABlockingSyscall traces a program on two Ps: goroutines that spin and block on a
// channel, and one in a 30 ms nanosleep system call (blocking: sysmon takes its P away, or a
// stop-the-world does).
func traceWithABlockingSyscall(t *testing.T) []byte {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var buf bytes.Buffer
	if err := rtrace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ping := make(chan int)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(60 * time.Millisecond)
			for n := 0; time.Now().Before(deadline); n++ {
				if i%2 == 0 {
					ping <- n
				} else {
					<-ping
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 3 {
			ts := syscall.Timespec{Nsec: 30_000_000}
			// A raw system call: the runtime hands its P off while it blocks.
			syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafePointer(&ts)), 0, 0)
		}
	}()
	// The spinners may leave one peer blocked at the deadline: drain it.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for drained := false; !drained; {
		select {
		case <-done:
			drained = true
		case ping <- 0:
		case <-ping:
		}
	}
	rtrace.Stop()
	return buf.Bytes()
}

// The Ps of a traced program: each P's Running intervals do not overlap, each is held by one M
// from its start to its stop (a stop by that M, a steal from it), an M holds one P at a time,
// the blocking syscall's P was stolen, and the counts are the records'.
func TestProcIntervalsAreHeldByOneM(t *testing.T) {
	data := traceWithABlockingSyscall(t)
	var recs, procs bytes.Buffer
	sum, err := reduce(bytes.NewReader(data), &recs, &procs)
	if err != nil {
		t.Fatal(err)
	}
	b := procs.Bytes()
	if !bytes.Equal(b[:headerBytes], procHeader()) || (len(b)-headerBytes)%procRecordBytes != 0 {
		t.Fatalf("header %q, %d bytes", b[:headerBytes], len(b))
	}
	p := sum.Procs
	if got := uint64(len(b)-headerBytes) / procRecordBytes; got != p.Records || got == 0 {
		t.Fatalf("%d records written, the summary says %d", got, p.Records)
	}
	type interval struct {
		m     int32
		begin uint64
	}
	running := map[int32]interval{} // P → its current holder
	holding := map[int32]int32{}    // M → its P
	seen := map[int32]bool{}
	var lastEnd = map[int32]uint64{}
	kinds := map[string]uint64{}
	var steals uint64
	for off := headerBytes; off < len(b); off += procRecordBytes {
		r := decodeProc(b[off : off+procRecordBytes])
		seen[r.proc] = true
		kinds[procKindNames[r.kind]]++
		cur, isRunning := running[r.proc]
		if isRunning != (r.from == uint8(trace.ProcRunning)) && r.kind != procStatus {
			t.Fatalf("%+v: P running %v before it", r, isRunning)
		}
		switch r.kind {
		case procStop, procSteal:
			if isRunning {
				if r.holder != cur.m {
					t.Fatalf("%+v: the P was held by M %d", r, cur.m)
				}
				if r.kind == procStop && r.tid != cur.m {
					t.Fatalf("a stop by M %d of a P held by M %d", r.tid, cur.m)
				}
				if r.kind == procSteal && r.tid == cur.m {
					t.Fatalf("a steal by the holder itself: %+v", r)
				}
				if r.tsNs < cur.begin {
					t.Fatalf("P %d's interval ends at %d before it began at %d", r.proc, r.tsNs, cur.begin)
				}
				delete(holding, cur.m)
				lastEnd[r.proc] = r.tsNs
			}
			if r.kind == procSteal {
				steals++
			}
			delete(running, r.proc)
		}
		if r.to == uint8(trace.ProcRunning) {
			if r.tid < 0 {
				t.Fatalf("a P running with no M: %+v", r)
			}
			if other, ok := holding[r.tid]; ok {
				t.Fatalf("M %d takes P %d while holding P %d", r.tid, r.proc, other)
			}
			if r.tsNs < lastEnd[r.proc] {
				t.Fatalf("P %d runs again at %d before its last interval ended at %d", r.proc, r.tsNs, lastEnd[r.proc])
			}
			running[r.proc] = interval{r.tid, r.tsNs}
			holding[r.tid] = r.proc
		}
	}
	t.Logf("Ps: %+v", p)
	if len(seen) != 2 || p.PsSeen != 2 {
		t.Errorf("Ps seen %d (records name %d), GOMAXPROCS was 2", p.PsSeen, len(seen))
	}
	if steals == 0 || steals != p.Steals {
		t.Errorf("steals: %d in the records, %d in the summary; a 30 ms blocking syscall's P is taken", steals, p.Steals)
	}
	for k, n := range kinds {
		if p.ByKind[k] != n {
			t.Errorf("%s: %d records, the summary says %d", k, n, p.ByKind[k])
		}
	}
	if kinds["start"] == 0 || kinds["stop"] == 0 {
		t.Errorf("kinds %v", kinds)
	}
}

func unsafePointer(ts *syscall.Timespec) unsafe.Pointer { return unsafe.Pointer(ts) }
