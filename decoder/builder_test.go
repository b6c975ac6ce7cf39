package decoder

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// This file builds pgoutput protocol v1 messages by hand, byte by byte as
// the server's logicalrep_write_* functions do. TestBuilderMatchesPglogrepl
// checks the builder against pglogrepl.Parse.

type col struct {
	name   string
	oid    uint32
	flags  uint8
	typmod int32
}

type val struct {
	kind byte // 'n', 'u', 't' or 'b'
	data string
}

func text(s string) val   { return val{kind: 't', data: s} }
func binval(s string) val { return val{kind: 'b', data: s} }

var (
	null      = val{kind: 'n'}
	unchanged = val{kind: 'u'}
)

type msg []byte

func (m msg) u8(v byte) msg    { return append(m, v) }
func (m msg) u16(v uint16) msg { return binary.BigEndian.AppendUint16(m, v) }
func (m msg) u32(v uint32) msg { return binary.BigEndian.AppendUint32(m, v) }
func (m msg) u64(v uint64) msg { return binary.BigEndian.AppendUint64(m, v) }
func (m msg) str(s string) msg { return append(append(m, s...), 0) }

func (m msg) tuple(vals []val) msg {
	m = m.u16(uint16(len(vals)))
	for _, v := range vals {
		m = m.u8(v.kind)
		if v.kind == 't' || v.kind == 'b' {
			m = append(m.u32(uint32(len(v.data))), v.data...)
		}
	}
	return m
}

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func pgMicros(t time.Time) uint64 { return uint64(t.Sub(pgEpoch).Microseconds()) }

func beginMsg(finalLSN pglogrepl.LSN, commitTime time.Time, xid uint32) []byte {
	return msg{'B'}.u64(uint64(finalLSN)).u64(pgMicros(commitTime)).u32(xid)
}

func commitMsg(commitLSN, endLSN pglogrepl.LSN, commitTime time.Time) []byte {
	return msg{'C'}.u8(0).u64(uint64(commitLSN)).u64(uint64(endLSN)).u64(pgMicros(commitTime))
}

func relationMsg(id uint32, namespace, name string, cols ...col) []byte {
	m := msg{'R'}.u32(id).str(namespace).str(name).u8('d').u16(uint16(len(cols)))
	for _, c := range cols {
		m = m.u8(c.flags).str(c.name).u32(c.oid).u32(uint32(c.typmod))
	}
	return m
}

func insertMsg(relID uint32, vals ...val) []byte {
	return msg{'I'}.u32(relID).u8('N').tuple(vals)
}

func updateMsg(relID uint32, vals ...val) []byte {
	return msg{'U'}.u32(relID).u8('N').tuple(vals)
}

func deleteMsg(relID uint32, key ...val) []byte {
	return msg{'D'}.u32(relID).u8('K').tuple(key)
}

func truncateMsg(relIDs ...uint32) []byte {
	m := msg{'T'}.u32(uint32(len(relIDs))).u8(0)
	for _, id := range relIDs {
		m = m.u32(id)
	}
	return m
}

func originMsg(lsn pglogrepl.LSN, name string) []byte {
	return msg{'O'}.u64(uint64(lsn)).str(name)
}

func typeMsg(oid uint32, namespace, name string) []byte {
	return msg{'Y'}.u32(oid).str(namespace).str(name)
}

func logicalMsg(transactional bool, lsn pglogrepl.LSN, prefix, content string) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	return append(msg{'M'}.u8(flags).u64(uint64(lsn)).str(prefix).u32(uint32(len(content))), content...)
}

// The fixture: an outbox table with the default columns, a business table
// beside it, and one transaction.
const (
	outboxRelID = 16384
	otherRelID  = 16390
	testXid     = 771
	beginLSN    = pglogrepl.LSN(0x16B3748)
	rowLSN      = pglogrepl.LSN(0x16B3700)
	endLSN      = pglogrepl.LSN(0x16B3780)
	testID      = "0190c1d2-7e4f-7a3b-9c1d-2e3f4a5b6c7d"
)

var commitTime = time.Date(2026, 12, 2, 15, 39, 55, 123456000, time.UTC)

func outboxCols() []col {
	return []col{
		{name: "id", oid: oidUUID, flags: 1, typmod: -1},
		{name: "aggregate_type", oid: oidText, typmod: -1},
		{name: "aggregate_id", oid: oidText, typmod: -1},
		{name: "event_type", oid: oidText, typmod: -1},
		{name: "payload", oid: oidJSONB, typmod: -1},
		{name: "headers", oid: oidJSONB, typmod: -1},
		{name: "created_at", oid: oidTimestamptz, typmod: -1},
	}
}

// colsWithType is outboxCols with the named column's type changed.
func colsWithType(name string, oid uint32) []col {
	cols := outboxCols()
	for i := range cols {
		if cols[i].name == name {
			cols[i].oid = oid
		}
	}
	return cols
}

func outboxRelation() []byte { return relationMsg(outboxRelID, "public", "outbox", outboxCols()...) }

func otherRelation() []byte {
	return relationMsg(otherRelID, "public", "orders",
		col{name: "id", oid: 20, flags: 1, typmod: -1},
		col{name: "status", oid: oidVarchar, typmod: 36},
	)
}

func testBegin() []byte  { return beginMsg(beginLSN, commitTime, testXid) }
func testCommit() []byte { return commitMsg(beginLSN, endLSN, commitTime) }

// outboxRow is a complete row in the default column order.
func outboxRow() []val {
	return []val{
		text(testID),
		text("order"),
		text("42"),
		text("order.created"),
		text(`{"total": 1999, "currency": "EUR"}`),
		text(`{"trace-id": "abc", "content-type": "application/json"}`),
		text("2026-12-02 15:39:55.123456+00"),
	}
}

func otherRow() []val { return []val{text("42"), text("paid")} }

// newDecoder returns a decoder that has decoded setup, failing the test on
// any error.
func newDecoder(tb testing.TB, cfg Config, setup ...[]byte) *Decoder {
	tb.Helper()
	d, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	for _, m := range setup {
		if _, err := d.Decode(rowLSN, m); err != nil {
			tb.Fatalf("setup message %q: %v", m[0], err)
		}
	}
	return d
}

// Protocol version 2 streaming messages, as logicalrep_write_stream_* write
// them.

func streamStartMsg(xid uint32, first bool) []byte {
	var f byte
	if first {
		f = 1
	}
	return msg{'S'}.u32(xid).u8(f)
}

func streamStopMsg() []byte { return msg{'E'} }

func streamCommitMsg(xid uint32, commitLSN, endLSN pglogrepl.LSN, commitTime time.Time) []byte {
	return msg{'c'}.u32(xid).u8(0).u64(uint64(commitLSN)).u64(uint64(endLSN)).u64(pgMicros(commitTime))
}

func streamAbortMsg(xid, subxid uint32) []byte { return msg{'A'}.u32(xid).u32(subxid) }

// inStream turns a version 1 Relation, Insert, Update, Delete, Truncate,
// Type or Message into its form inside a stream segment: the xid of the
// (sub)transaction right after the type byte.
func inStream(xid uint32, m []byte) []byte {
	return append(msg{m[0]}.u32(xid), m[1:]...)
}

// newSpool returns a Spool in a test temporary folder, closed at cleanup.
func newSpool(tb testing.TB) *Spool {
	tb.Helper()
	s, err := NewSpool(tb.TempDir())
	if err != nil {
		tb.Fatalf("NewSpool: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Spool.Close: %v", err)
		}
	})
	return s
}
