package main

// The Go runtime's Ps: every P state change of the trace (x/exp/trace's ProcStatus, ProcStart,
// ProcStop and ProcSteal, seen as StateTransitions of a ResourceProc), one record each in
// go-procs.bin (schema/go-proc-record.tsv; the conductor's reader,
// crates/record/src/go_procs.rs, follows the same table), with which M made the change and
// which M held the P before it. x/exp/trace does not say a steal's kind or victim (the event's
// third argument, the M stolen from, is kept inside the parser), so a steal is told here by who
// made it: a Running P stopped by an M other than the one that holds it (sysmon's retake, or a
// stop-the-world, taking a P from an M in a syscall: runtime.syscallingThread.releaseP), or an
// Idle → Idle change (the parser lost the P's M: a ProcSyscallAbandoned status). A P stopped by
// its own holder is a stop, including the runtime's self-steal on a syscall's exit (a P it
// "pretends" lost: runtime.exitsyscall), which x/exp/trace hands out the same way.

import (
	"bufio"
	"encoding/binary"
	"io"
	"sort"

	"golang.org/x/exp/trace"
)

const (
	procMagic         = "SPGOPRC1"
	procFormatVersion = 1
	procRecordBytes   = 24
)

// The kinds of P change (a record's kind byte).
const (
	// procStatus: the trace's first word on a P (from Undetermined, or NotExist for a P that
	// appears in a later generation).
	procStatus = iota
	// procStart: Idle → Running, by the M that takes it.
	procStart
	// procStop: Running → Idle, by the M that held it.
	procStop
	// procSteal: Running → Idle by another M, or Idle → Idle (the holder lost to the parser).
	procSteal
)

var procKindNames = [...]string{"status", "start", "stop", "steal"}

// procRecord is one P state change.
type procRecord struct {
	tsNs     uint64
	tid      int32 // the M that made the change, -1 none
	holder   int32 // the M that held the P before it, -1 none or unknown
	proc     int32
	from, to uint8 // x/exp/trace's ProcState
	kind     uint8
	flags    uint8
}

func procHeader() []byte {
	b := make([]byte, headerBytes)
	copy(b, procMagic)
	binary.LittleEndian.PutUint32(b[8:], procFormatVersion)
	binary.LittleEndian.PutUint32(b[12:], procRecordBytes)
	return b
}

func (r *procRecord) encode(b []byte) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], r.tsNs)
	le.PutUint32(b[8:], uint32(r.tid))
	le.PutUint32(b[12:], uint32(r.holder))
	le.PutUint32(b[16:], uint32(r.proc))
	b[20], b[21], b[22], b[23] = r.from, r.to, r.kind, r.flags
}

func decodeProc(b []byte) procRecord {
	le := binary.LittleEndian
	return procRecord{tsNs: le.Uint64(b[0:]), tid: int32(le.Uint32(b[8:])),
		holder: int32(le.Uint32(b[12:])), proc: int32(le.Uint32(b[16:])),
		from: b[20], to: b[21], kind: b[22], flags: b[23]}
}

// procsSummary is go-sched.json's `procs`: what go-procs.bin holds, counted.
type procsSummary struct {
	FormatVersion int    `json:"format_version"`
	RecordBytes   int    `json:"record_bytes"`
	Records       uint64 `json:"records"`
	// PsSeen: the distinct Ps the trace names.
	PsSeen int `json:"ps_seen"`
	// ByKind: records by kind (status, start, stop, steal).
	ByKind map[string]uint64 `json:"by_kind"`
	// Transitions: every change recorded, "From->To".
	Transitions map[string]uint64 `json:"transitions"`
	// Steals: Ps taken from the M that held them; StealsHolderUnknown: of those, the ones
	// whose holder the parser had lost (Idle → Idle).
	Steals              uint64 `json:"steals"`
	StealsHolderUnknown uint64 `json:"steals_holder_unknown"`
	// RecordsPastCap: P changes after the goroutines' records reached their cap (the same
	// window for both files): counted in ByKind, Transitions and Steals, not written.
	RecordsPastCap uint64 `json:"records_past_cap"`
	// MovedByParser: records whose time the parser moved (flag bit 0), as in go-sched.bin.
	MovedByParser uint64 `json:"moved_by_parser"`
	// Threads: the Ms that made a P change or held a P, ascending.
	Threads []int64 `json:"threads"`
}

// procReducer writes the P records and keeps each P's holder.
type procReducer struct {
	out     *bufio.Writer
	buf     [procRecordBytes]byte
	sum     procsSummary
	holders map[trace.ProcID]trace.ThreadID // a Running P's M
	seen    map[trace.ProcID]bool
	threads map[trace.ThreadID]bool
}

func newProcReducer(out io.Writer) (*procReducer, error) {
	p := &procReducer{out: bufio.NewWriterSize(out, 1<<16),
		sum: procsSummary{FormatVersion: procFormatVersion, RecordBytes: procRecordBytes,
			ByKind: map[string]uint64{}, Transitions: map[string]uint64{}},
		holders: map[trace.ProcID]trace.ThreadID{}, seen: map[trace.ProcID]bool{},
		threads: map[trace.ThreadID]bool{}}
	_, err := p.out.Write(procHeader())
	return p, err
}

// transition records a P's state change (other events are not its concern); offset puts the
// trace's clock on CLOCK_MONOTONIC as for the goroutines' records; keep false: past the cap,
// counted only.
func (p *procReducer) transition(ev trace.Event, moved bool, offset int64, keep bool) error {
	if ev.Kind() != trace.EventStateTransition {
		return nil
	}
	st := ev.StateTransition()
	if st.Resource.Kind != trace.ResourceProc {
		return nil
	}
	from, to := st.Proc()
	id := st.Resource.Proc()
	m := ev.Thread()
	holder, held := p.holders[id]
	rec := procRecord{tsNs: uint64(int64(ev.Time()) + offset), tid: -1, holder: -1,
		proc: int32(id), from: uint8(from), to: uint8(to)}
	switch {
	case from == trace.ProcUndetermined || from == trace.ProcNotExist:
		rec.kind = procStatus
	case from == trace.ProcIdle && to == trace.ProcRunning:
		rec.kind = procStart
	case from == trace.ProcRunning && to == trace.ProcIdle && held && holder == m:
		rec.kind = procStop
	case from == trace.ProcIdle && to == trace.ProcIdle,
		from == trace.ProcRunning && to == trace.ProcIdle:
		rec.kind = procSteal
		p.sum.Steals++
		if !held {
			p.sum.StealsHolderUnknown++
		}
	default:
		// A later generation's restatement of a state already known: no change.
		return nil
	}
	if held {
		rec.holder = int32(holder)
		p.threads[holder] = true
	}
	if m != trace.NoThread {
		rec.tid = int32(m)
		p.threads[m] = true
	}
	if to == trace.ProcRunning && m != trace.NoThread {
		p.holders[id] = m
	} else {
		delete(p.holders, id)
	}
	p.seen[id] = true
	p.sum.ByKind[procKindNames[rec.kind]]++
	p.sum.Transitions[from.String()+"->"+to.String()]++
	if !keep {
		p.sum.RecordsPastCap++
		return nil
	}
	if moved {
		rec.flags |= flagTimeMoved
		p.sum.MovedByParser++
	}
	p.sum.Records++
	rec.encode(p.buf[:])
	_, err := p.out.Write(p.buf[:])
	return err
}

// finish flushes the records and completes the counts.
func (p *procReducer) finish() (procsSummary, error) {
	p.sum.PsSeen = len(p.seen)
	p.sum.Threads = []int64{}
	for m := range p.threads {
		p.sum.Threads = append(p.sum.Threads, int64(m))
	}
	sort.Slice(p.sum.Threads, func(i, j int) bool { return p.sum.Threads[i] < p.sum.Threads[j] })
	return p.sum, p.out.Flush()
}
