package decoder

import (
	"errors"
	"reflect"
	"testing"

	"github.com/outboxd/outboxd/event"
)

func snapshotColumns(cols []col) []SnapshotColumn {
	out := make([]SnapshotColumn, len(cols))
	for i, c := range cols {
		out[i] = SnapshotColumn{Name: c.name, TypeOID: c.oid}
	}
	return out
}

func snapshotValues(vals []val) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if v.kind == 't' {
			out[i] = []byte(v.data)
		}
	}
	return out
}

// TestSnapshotMatchesStream holds a row read with SQL to the Event, or the
// error, that the same row gives when it is streamed.
func TestSnapshotMatchesStream(t *testing.T) {
	tx := event.TxInfo{Xid: testXid, CommitLSN: beginLSN, CommitTime: commitTime}
	tests := []struct {
		name string
		cols []col
		row  func() []val
	}{
		{name: "full row", cols: outboxCols(), row: outboxRow},
		{name: "null headers", cols: outboxCols(), row: func() []val { r := outboxRow(); r[5] = null; return r }},
		{name: "extra column for the subject", cols: append(outboxCols(), col{name: "Tenant", oid: oidText}),
			row: func() []val { return append(outboxRow(), text("acme")) }},
		{name: "null aggregate type", cols: outboxCols(), row: func() []val { r := outboxRow(); r[1] = null; return r }},
		{name: "headers not an object", cols: outboxCols(), row: func() []val { r := outboxRow(); r[5] = text(`[1]`); return r }},
		{name: "bad timestamp", cols: outboxCols(), row: func() []val { r := outboxRow(); r[6] = text("12/02/2026"); return r }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := newDecoder(t, Config{}, relationMsg(outboxRelID, "public", "outbox", tt.cols...), testBegin())
			streamed, streamErr := stream.Decode(rowLSN, insertMsg(outboxRelID, tt.row()...))

			d := newDecoder(t, Config{})
			r, err := d.Snapshot(snapshotColumns(tt.cols), tx)
			if err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			values := snapshotValues(tt.row())
			ev, err := r.Event(values)
			if streamErr != nil {
				var want, got *event.RowError
				if !errors.As(streamErr, &want) || !errors.As(err, &got) {
					t.Fatalf("snapshot error %v, stream error %v: want the same *event.RowError", err, streamErr)
				}
				want.LSN = 0 // a snapshot row has no WAL position
				gotRow, wantRow := got.Row, want.Row
				got.Row, want.Row = nil, nil // each aliases its own message
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("snapshot error %+v, want %+v", got, want)
				}
				if gotRow == nil || wantRow == nil || !reflect.DeepEqual(eventFields(gotRow), eventFields(wantRow)) {
					t.Fatalf("snapshot error's row %+v, want %+v", gotRow, wantRow)
				}
				return
			}
			if err != nil {
				t.Fatalf("Event: %v", err)
			}
			for i := range values {
				clear(values[i]) // the caller may reuse its buffers
			}
			want := streamed.Event
			if ev.ID != want.ID || ev.AggregateType != want.AggregateType || ev.AggregateID != want.AggregateID ||
				ev.EventType != want.EventType || string(ev.Payload) != string(want.Payload) ||
				!reflect.DeepEqual(ev.Headers, want.Headers) || !ev.CreatedAt.Equal(want.CreatedAt) || ev.Tx != tx {
				t.Fatalf("snapshot event %+v\nwant %+v", ev, want)
			}
			for _, c := range tt.cols {
				gotV, gotOK := ev.Column(c.name)
				wantV, wantOK := want.Column(c.name)
				if gotV != wantV || gotOK != wantOK {
					t.Errorf("Column(%q) = %q, %v; want %q, %v", c.name, gotV, gotOK, wantV, wantOK)
				}
			}
		})
	}
}

// TestSnapshotSchemaError rejects columns that do not fit the mapping
// before any row is read, with the stream's *SchemaError.
func TestSnapshotSchemaError(t *testing.T) {
	cols := outboxCols()
	cols[4].oid = 23 // payload integer
	_, err := newDecoder(t, Config{}).Snapshot(snapshotColumns(cols), event.TxInfo{})
	var schemaErr *SchemaError
	if !errors.As(err, &schemaErr) || schemaErr.Column != "payload" {
		t.Fatalf("Snapshot error %v, want a *SchemaError for column payload", err)
	}
	_, err = newDecoder(t, Config{}).Snapshot(snapshotColumns(outboxCols()[:3]), event.TxInfo{})
	if !errors.As(err, &schemaErr) || schemaErr.Column != "event_type" {
		t.Fatalf("Snapshot error %v, want a *SchemaError for missing column event_type", err)
	}
}
