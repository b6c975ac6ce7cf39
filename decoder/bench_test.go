package decoder

import (
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// benchPayload is a ~200 byte jsonb payload as the server prints it.
const benchPayload = `{"order_id": 918273, "customer": {"id": "c-5521", "tier": "gold"}, "items": [{"sku": "A-100", "qty": 2, "price": 1999}, {"sku": "B-220", "qty": 1, "price": 4500}], "currency": "EUR", "total": 8498}`

func benchDecodeInsert(b *testing.B, headers val) {
	if n := len(benchPayload); n < 190 || n > 210 {
		b.Fatalf("payload is %d bytes, want about 200", n)
	}
	d := newDecoder(b, Config{}, outboxRelation(), testBegin())
	data := insertMsg(outboxRelID, append(rowWith(4, text(benchPayload))[:5:5], headers, text("2026-12-02 15:39:55.123456+00"))...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ch, err := d.Decode(rowLSN, data)
		if err != nil || ch.Event == nil {
			b.Fatal(ch, err)
		}
	}
}

// BenchmarkDecodeInsert decodes one outbox row with a ~200 byte jsonb
// payload, a timestamptz created_at and NULL headers: the hot path.
func BenchmarkDecodeInsert(b *testing.B) {
	benchDecodeInsert(b, null)
}

// BenchmarkDecodeInsertHeaders adds a two-key headers object, which goes
// through encoding/json.
func BenchmarkDecodeInsertHeaders(b *testing.B) {
	benchDecodeInsert(b, text(`{"trace-id": "4bf92f3577b34da6", "content-type": "application/json"}`))
}

// BenchmarkEventColumn reads one unmapped column for a subject template.
func BenchmarkEventColumn(b *testing.B) {
	cols := append(outboxCols(), col{name: "tenant", oid: oidText})
	d := newDecoder(b, Config{}, relationMsg(outboxRelID, "public", "outbox", cols...), testBegin())
	ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, append(outboxRow(), text(strings.Repeat("t", 8)))...))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ch.Event.Column("tenant"); !ok {
			b.Fatal("no tenant")
		}
	}
}

// BenchmarkPglogreplParseInsert is the same row through pglogrepl.Parse,
// for comparison: it allocates per column and does not map the row.
func BenchmarkPglogreplParseInsert(b *testing.B) {
	data := insertMsg(outboxRelID, append(rowWith(4, text(benchPayload))[:5:5], null, text("2026-12-02 15:39:55.123456+00"))...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pglogrepl.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpoolReplay replays a streamed transaction of 100,000 outbox
// rows (the row of BenchmarkDecodeInsert) from its spool file; spooling it
// again before each replay is not timed.
func BenchmarkSpoolReplay(b *testing.B) {
	const rows = 100_000
	spool := newSpool(b)
	d := newDecoder(b, Config{Spool: spool})
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		streamRows(b, d, rows, 10_000)
		b.StartTimer()
		for ch, err := range d.Replay(streamXid) {
			if err != nil {
				b.Fatal(err)
			}
			if ch.Kind == Insert {
				events++
			}
		}
	}
	if events%rows != 0 {
		b.Fatalf("replayed %d events, not a multiple of %d", events, rows)
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(0, "ns/op") // per 100k-row transaction: events/s says it better
}

// BenchmarkSpoolAppend decodes streamed outbox Inserts into the spool: the
// cost of a row of a streamed transaction before its commit.
func BenchmarkSpoolAppend(b *testing.B) {
	spool := newSpool(b)
	d := newDecoder(b, Config{Spool: spool}, streamStartMsg(streamXid, true), inStream(streamXid, outboxRelation()))
	row := inStream(streamXid, insertMsg(outboxRelID, append(rowWith(4, text(benchPayload))[:5:5], null, text("2026-12-02 15:39:55.123456+00"))...))
	b.SetBytes(int64(len(row)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(rowLSN, row); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if _, err := d.Decode(rowLSN, streamStopMsg()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDecodeInsertPaths decodes a row of CAP's table: payload and
// headers at JSON paths into one text column.
func BenchmarkDecodeInsertPaths(b *testing.B) {
	cfg := Config{Schema: "cap", Table: "published", Columns: capColumns(b)}
	d := newDecoder(b, cfg, relationMsg(outboxRelID, "cap", "published", capCols()...), testBegin())
	data := insertMsg(outboxRelID, capRow(text(capContent))...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ch, err := d.Decode(rowLSN, data)
		if err != nil || ch.Event == nil {
			b.Fatal(ch, err)
		}
	}
}
