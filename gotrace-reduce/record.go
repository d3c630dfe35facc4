package main

// The raw records this reducer writes: their layout is schema/go-sched-record.tsv (the
// conductor's reader, crates/record/src/go_sched.rs, follows the same table; both tests check
// it row by row).

import (
	"encoding/binary"
	"math"
)

const (
	recordMagic = "SPGOSCH1"
	// formatVersion 3: the records are the trace's first max_records in the parser's order;
	// go-sched.json's counts stay over the whole trace and say what lies past the cap
	// (records_past_cap). 4: flags bit 1 (flagWaitStartMoved).
	formatVersion = 4
	recordBytes   = 40
	headerBytes   = 16
	// noWait: wait_ns of a change that is not a readied goroutine starting to run.
	noWait = math.MaxUint64
	// noFunction: function of a change that is not a creation.
	noFunction = math.MaxUint32
	// flagTimeMoved: the parser moved the event's time forward to keep its one time order (see
	// movedByParser); the event's own time lies at or before tsNs, not before its thread's
	// previous event.
	flagTimeMoved = 1 << 0
	// flagWaitStartMoved: on a record with a wait, the readying change's time (the wait's start)
	// was the parser's: the wait's true length is unknown (format 4 on; before it never set).
	flagWaitStartMoved = 1 << 1
)

// record is one goroutine state change.
type record struct {
	tsNs     uint64
	goid     uint64
	waitNs   uint64
	tid      int32
	proc     int16
	from, to uint8
	reason   uint16
	flags    uint16
	function uint32
}

func header() []byte {
	b := make([]byte, headerBytes)
	copy(b, recordMagic)
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	binary.LittleEndian.PutUint32(b[12:], recordBytes)
	return b
}

func (r *record) encode(b []byte) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], r.tsNs)
	le.PutUint64(b[8:], r.goid)
	le.PutUint64(b[16:], r.waitNs)
	le.PutUint32(b[24:], uint32(r.tid))
	le.PutUint16(b[28:], uint16(r.proc))
	b[30] = r.from
	b[31] = r.to
	le.PutUint16(b[32:], r.reason)
	le.PutUint16(b[34:], r.flags)
	le.PutUint32(b[36:], r.function)
}

func decode(b []byte) record {
	le := binary.LittleEndian
	return record{
		tsNs: le.Uint64(b[0:]), goid: le.Uint64(b[8:]), waitNs: le.Uint64(b[16:]),
		tid: int32(le.Uint32(b[24:])), proc: int16(le.Uint16(b[28:])), from: b[30], to: b[31],
		reason: le.Uint16(b[32:]), flags: le.Uint16(b[34:]), function: le.Uint32(b[36:]),
	}
}
