package decoder

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/event"
)

// matchErr checks err against want: nil means no error; a *RowError or
// *SchemaError matches by type and column (and, for RowError, event id);
// anything else matches with errors.Is.
func matchErr(tb testing.TB, err, want error) {
	tb.Helper()
	switch w := want.(type) {
	case nil:
		if err != nil {
			tb.Fatalf("unexpected error: %v", err)
		}
	case *event.RowError:
		var got *event.RowError
		if !errors.As(err, &got) {
			tb.Fatalf("error = %v, want a *event.RowError", err)
		}
		if got.Column != w.Column || got.EventID != w.EventID {
			tb.Fatalf("RowError column %q id %q, want column %q id %q (%v)", got.Column, got.EventID, w.Column, w.EventID, err)
		}
	case *SchemaError:
		var got *SchemaError
		if !errors.As(err, &got) {
			tb.Fatalf("error = %v, want a *SchemaError", err)
		}
		if got.Column != w.Column || (w.Table != "" && got.Table != w.Table) {
			tb.Fatalf("SchemaError table %q column %q, want table %q column %q (%v)", got.Table, got.Column, w.Table, w.Column, err)
		}
	default:
		if !errors.Is(err, want) {
			tb.Fatalf("error = %v, want %v", err, want)
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "zero config", cfg: Config{}},
		{name: "custom table", cfg: Config{Schema: "app", Table: "events"}},
		{name: "optional columns unmapped", cfg: Config{Columns: Columns{
			ID: "id", AggregateType: "a", AggregateID: "b", EventType: "c", Payload: "d",
		}}},
		{name: "only id and payload", cfg: Config{Columns: Columns{ID: "Id", Payload: "Content"}}},
		{name: "partial columns", cfg: Config{Columns: Columns{ID: "event_id"}}, wantErr: "Columns.Payload is empty"},
		{name: "id missing", cfg: Config{Columns: Columns{Payload: "body", EventType: "kind"}}, wantErr: "Columns.ID is empty"},
		{name: "payload missing", cfg: Config{Columns: Columns{
			ID: "id", AggregateType: "a", AggregateID: "b", EventType: "c", Headers: "h",
		}}, wantErr: `Columns.Payload is empty: set it to the outbox table's column name (default "payload")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || d == nil {
				t.Fatalf("New = %v, %v", d, err)
			}
		})
	}
}

func TestDecodeTransaction(t *testing.T) {
	d := newDecoder(t, Config{}, outboxRelation())
	wantTx := event.TxInfo{Xid: testXid, CommitLSN: beginLSN, CommitTime: commitTime}

	if d.InTransaction() {
		t.Fatal("InTransaction before Begin")
	}
	ch, err := d.Decode(beginLSN, testBegin())
	if err != nil || ch.Kind != Begin || ch.Tx != wantTx || ch.Event != nil {
		t.Fatalf("Begin = %+v, %v; want Kind Begin, Tx %+v", ch, err, wantTx)
	}
	if !d.InTransaction() {
		t.Fatal("not InTransaction after Begin")
	}
	for range 2 {
		ch, err = d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()...))
		if err != nil || ch.Kind != Insert || ch.Tx != wantTx {
			t.Fatalf("Insert = %+v, %v", ch, err)
		}
		if ch.Event.Tx != wantTx || ch.Event.LSN != rowLSN {
			t.Fatalf("Event Tx %+v LSN %s, want %+v %s", ch.Event.Tx, ch.Event.LSN, wantTx, rowLSN)
		}
	}
	ch, err = d.Decode(endLSN, testCommit())
	if err != nil || ch.Kind != Commit || ch.Tx != wantTx || ch.EndLSN != endLSN {
		t.Fatalf("Commit = %+v, %v; want Kind Commit, EndLSN %s", ch, err, endLSN)
	}
	if d.InTransaction() {
		t.Fatal("InTransaction after Commit")
	}
	// The next transaction starts clean.
	next := event.TxInfo{Xid: testXid + 1, CommitLSN: 0x20000000, CommitTime: pgEpoch}
	ch, err = d.Decode(0x1FFFFFF0, beginMsg(next.CommitLSN, next.CommitTime, next.Xid))
	if err != nil || ch.Tx != next {
		t.Fatalf("second Begin = %+v, %v; want Tx %+v", ch, err, next)
	}
}

func TestDecodeProtocolErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   [][]byte
		data    []byte
		wantErr error
	}{
		{name: "empty message", data: nil, wantErr: ErrMalformed},
		{name: "commit without begin", data: testCommit(), wantErr: ErrMalformed},
		{name: "begin inside transaction", setup: [][]byte{testBegin()}, data: testBegin(), wantErr: ErrMalformed},
		{name: "commit after commit", setup: [][]byte{testBegin(), testCommit()}, data: testCommit(), wantErr: ErrMalformed},
		{name: "insert outside transaction", setup: [][]byte{outboxRelation()}, data: insertMsg(outboxRelID, outboxRow()...), wantErr: ErrMalformed},
		{name: "other insert outside transaction", setup: [][]byte{otherRelation()}, data: insertMsg(otherRelID, otherRow()...), wantErr: ErrMalformed},
		{name: "insert into unknown relation", setup: [][]byte{outboxRelation(), testBegin()}, data: insertMsg(99, outboxRow()...), wantErr: ErrMalformed},
		{name: "fewer columns than relation", setup: [][]byte{outboxRelation(), testBegin()}, data: insertMsg(outboxRelID, outboxRow()[:6]...), wantErr: ErrMalformed},
		{name: "more columns than relation", setup: [][]byte{outboxRelation(), testBegin()}, data: insertMsg(outboxRelID, append(outboxRow(), text("x"))...), wantErr: ErrMalformed},
		{name: "unknown value kind", setup: [][]byte{outboxRelation(), testBegin()}, data: insertMsg(outboxRelID, append(outboxRow()[:6], val{kind: 'x'})...), wantErr: ErrMalformed},
		{name: "insert tuple type K", setup: [][]byte{outboxRelation(), testBegin()}, data: msg{'I'}.u32(outboxRelID).u8('K').tuple(outboxRow()), wantErr: ErrMalformed},
		{name: "trailing byte after insert", setup: [][]byte{outboxRelation(), testBegin()}, data: append(insertMsg(outboxRelID, outboxRow()...), 0), wantErr: ErrMalformed},
		{name: "trailing byte after begin", data: append(testBegin(), 0), wantErr: ErrMalformed},
		{name: "column count beyond message", data: msg{'R'}.u32(1).str("public").str("t").u8('d').u16(65535), wantErr: ErrMalformed},
		{name: "value length beyond message", setup: [][]byte{outboxRelation(), testBegin()}, data: msg{'I'}.u32(outboxRelID).u8('N').u16(7).u8('t').u32(0xFFFFFFFF), wantErr: ErrMalformed},
		{name: "unknown message type", data: []byte{'Z', 0, 0}, wantErr: ErrMalformed},
		{name: "two-phase begin prepare", data: []byte{'b', 0, 0}, wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{}, tt.setup...)
			ch, err := d.Decode(rowLSN, tt.data)
			matchErr(t, err, tt.wantErr)
			if ch.Kind != None || ch.Event != nil {
				t.Fatalf("Change = %+v with error, want the zero Change", ch)
			}
		})
	}
}

func TestDecodeIgnored(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{name: "other relation insert", data: insertMsg(otherRelID, otherRow()...)},
		{name: "other relation binary and unchanged values", data: insertMsg(otherRelID, binval("\x00\x00\x00\x2a"), unchanged)},
		{name: "other relation null", data: insertMsg(otherRelID, null, null)},
		{name: "relation", data: relationMsg(16400, "public", "audit", col{name: "x", oid: oidText})},
		{name: "relation in pg_catalog", data: relationMsg(1259, "", "pg_class")},
		{name: "origin", data: originMsg(0x1000, "node_a")},
		{name: "type", data: typeMsg(16500, "public", "mood")},
		{name: "update of outbox row", data: updateMsg(outboxRelID, outboxRow()...)},
		{name: "delete of outbox row", data: deleteMsg(outboxRelID, text(testID))},
		{name: "truncate", data: truncateMsg(outboxRelID, otherRelID)},
		{name: "logical message", data: logicalMsg(true, 0x1000, "outboxd", "hello")},
		{name: "stream start", data: msg{'S'}.u32(testXid).u8(1)},
		{name: "stream stop", data: msg{'E'}},
		{name: "stream commit", data: msg{'c'}.u32(testXid).u8(0).u64(1).u64(2).u64(3)},
		{name: "stream abort", data: msg{'A'}.u32(testXid).u32(testXid)},
		{name: "truncated update", data: []byte{'U', 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{}, outboxRelation(), otherRelation(), testBegin())
			ch, err := d.Decode(rowLSN, tt.data)
			if err != nil || ch != (Change{}) {
				t.Fatalf("Decode = %+v, %v; want the zero Change", ch, err)
			}
			if !d.InTransaction() {
				t.Fatal("an ignored message ended the transaction")
			}
			// The outbox table still decodes afterwards.
			if ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()...)); err != nil || ch.Kind != Insert {
				t.Fatalf("Insert after %s = %+v, %v", tt.name, ch, err)
			}
		})
	}
}

// wantEvent holds the mapped fields of an Event; Tx, LSN and the row are
// checked elsewhere.
type wantEvent struct {
	ID, AggregateType, AggregateID, EventType string
	Payload                                   []byte
	Headers                                   []event.Header
	CreatedAt                                 time.Time
}

func eventFields(ev *event.Event) wantEvent {
	return wantEvent{ev.ID, ev.AggregateType, ev.AggregateID, ev.EventType, ev.Payload, ev.Headers, ev.CreatedAt}
}

// rowWith returns outboxRow with column i replaced.
func rowWith(i int, v val) []val {
	r := outboxRow()
	r[i] = v
	return r
}

func TestDecodeInsert(t *testing.T) {
	defaultWant := wantEvent{
		ID:            testID,
		AggregateType: "order",
		AggregateID:   "42",
		EventType:     "order.created",
		Payload:       []byte(`{"total": 1999, "currency": "EUR"}`),
		Headers:       []event.Header{{Key: "trace-id", Value: "abc"}, {Key: "content-type", Value: "application/json"}},
		CreatedAt:     commitTime,
	}
	with := func(f func(*wantEvent)) wantEvent {
		w := defaultWant
		f(&w)
		return w
	}
	withType := colsWithType

	tests := []struct {
		name    string
		cfg     Config
		cols    []col // nil means outboxCols()
		row     []val // nil means outboxRow()
		want    wantEvent
		wantErr error
	}{
		{name: "default columns", want: defaultWant},
		{
			name: "column order differs and extra columns",
			cols: []col{
				{name: "tenant", oid: oidText},
				{name: "created_at", oid: oidTimestamptz},
				{name: "payload", oid: oidJSONB},
				{name: "event_type", oid: oidVarchar},
				{name: "headers", oid: oidJSON},
				{name: "aggregate_id", oid: oidVarchar},
				{name: "seq", oid: 20},
				{name: "aggregate_type", oid: oidVarchar},
				{name: "id", oid: oidText},
			},
			row: []val{
				text("acme"),
				text("2026-12-02 15:39:55.123456+00"),
				text(`{"total": 1999, "currency": "EUR"}`),
				text("order.created"),
				text(`{"trace-id": "abc", "content-type": "application/json"}`),
				text("42"),
				text("7"),
				text("order"),
				text(testID),
			},
			want: defaultWant,
		},
		{
			name: "custom column names",
			cfg: Config{Schema: "app", Table: "Outbox", Columns: Columns{
				ID: "event_id", AggregateType: "kind", AggregateID: "key", EventType: "type", Payload: "body", Headers: "meta", CreatedAt: "ts",
			}},
			cols: []col{
				{name: "event_id", oid: oidUUID}, {name: "kind", oid: oidText}, {name: "key", oid: oidText},
				{name: "type", oid: oidText}, {name: "body", oid: oidJSONB}, {name: "meta", oid: oidJSONB}, {name: "ts", oid: oidTimestamptz},
			},
			want: defaultWant,
		},
		{
			name: "one column feeds two fields",
			cfg: Config{Columns: Columns{
				ID: "id", AggregateType: "aggregate_type", AggregateID: "id", EventType: "event_type", Payload: "payload",
			}},
			cols: withType("id", oidText),
			want: with(func(w *wantEvent) { w.AggregateID, w.Headers, w.CreatedAt = testID, nil, time.Time{} }),
		},
		{
			name: "headers and created_at not mapped nor present",
			cfg: Config{Columns: Columns{
				ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", EventType: "event_type", Payload: "payload",
			}},
			cols: outboxCols()[:5],
			row:  outboxRow()[:5],
			want: with(func(w *wantEvent) { w.Headers, w.CreatedAt = nil, time.Time{} }),
		},
		{name: "null headers", row: rowWith(5, null), want: with(func(w *wantEvent) { w.Headers = nil })},
		{name: "null created_at", row: rowWith(6, null), want: with(func(w *wantEvent) { w.CreatedAt = time.Time{} })},
		{name: "empty strings in aggregate and type", row: rowWith(1, text("")), want: with(func(w *wantEvent) { w.AggregateType = "" })},
		{name: "empty payload", row: rowWith(4, text("")), cols: withType("payload", oidText), want: with(func(w *wantEvent) { w.Payload = []byte{} })},
		{name: "id as text", cols: withType("id", oidText), row: rowWith(0, text("evt-1")), want: with(func(w *wantEvent) { w.ID = "evt-1" })},
		{name: "id as varchar", cols: withType("id", oidVarchar), row: rowWith(0, text("evt-1")), want: with(func(w *wantEvent) { w.ID = "evt-1" })},

		{name: "null id", row: rowWith(0, null), wantErr: &event.RowError{Column: "id"}},
		{name: "unchanged id", row: rowWith(0, unchanged), wantErr: &event.RowError{Column: "id"}},
		{name: "binary id", row: rowWith(0, binval("0123456789abcdef")), wantErr: &event.RowError{Column: "id"}},
		{name: "empty id", row: rowWith(0, text("")), wantErr: &event.RowError{Column: "id"}},
		{name: "null aggregate_type is empty", row: rowWith(1, null), want: with(func(w *wantEvent) { w.AggregateType = "" })},
		{name: "null aggregate_id is empty", row: rowWith(2, null), want: with(func(w *wantEvent) { w.AggregateID = "" })},
		{name: "null event_type is empty", row: rowWith(3, null), want: with(func(w *wantEvent) { w.EventType = "" })},
		{name: "unchanged event_type", row: rowWith(3, unchanged), wantErr: &event.RowError{Column: "event_type", EventID: testID}},
		{name: "binary aggregate_id", row: rowWith(2, binval("x")), wantErr: &event.RowError{Column: "aggregate_id", EventID: testID}},
		{
			name: "only id and payload mapped",
			cfg:  Config{Columns: Columns{ID: "id", Payload: "payload"}},
			want: with(func(w *wantEvent) {
				w.AggregateType, w.AggregateID, w.EventType, w.Headers, w.CreatedAt = "", "", "", nil, time.Time{}
			}),
		},
		{name: "null payload", row: rowWith(4, null), wantErr: &event.RowError{Column: "payload", EventID: testID}},
		{name: "unchanged payload", row: rowWith(4, unchanged), wantErr: &event.RowError{Column: "payload", EventID: testID}},
		{name: "unchanged headers", row: rowWith(5, unchanged), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "unchanged created_at", row: rowWith(6, unchanged), wantErr: &event.RowError{Column: "created_at", EventID: testID}},
		{name: "binary created_at", row: rowWith(6, binval("\x00\x01\x02\x03\x04\x05\x06\x07")), wantErr: &event.RowError{Column: "created_at", EventID: testID}},
		{
			name:    "binary value in unmapped column",
			cols:    append(outboxCols(), col{name: "seq", oid: 20}),
			row:     append(outboxRow(), binval("\x00\x00\x00\x00\x00\x00\x00\x07")),
			wantErr: &event.RowError{Column: "seq", EventID: testID},
		},
		{
			name: "unchanged unmapped column is fine",
			cols: append(outboxCols(), col{name: "big", oid: oidText}),
			row:  append(outboxRow(), unchanged),
			want: defaultWant,
		},

		{
			name: "headers keep order",
			row:  rowWith(5, text(`{"z": "1", "a": "2", "m": "3"}`)),
			want: with(func(w *wantEvent) {
				w.Headers = []event.Header{{Key: "z", Value: "1"}, {Key: "a", Value: "2"}, {Key: "m", Value: "3"}}
			}),
		},
		{
			name: "json headers keep duplicates and escapes",
			cols: withType("headers", oidJSON),
			row:  rowWith(5, text(`{"k\"1":"caf\u00e9","k\"1":"2"}`)),
			want: with(func(w *wantEvent) { w.Headers = []event.Header{{Key: `k"1`, Value: "café"}, {Key: `k"1`, Value: "2"}} }),
		},
		{name: "empty headers object", row: rowWith(5, text(`{}`)), want: with(func(w *wantEvent) { w.Headers = nil })},
		{name: "headers number value", row: rowWith(5, text(`{"a": "1", "b": 2}`)), want: with(func(w *wantEvent) { w.Headers = []event.Header{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}} })},
		{name: "headers boolean value", row: rowWith(5, text(`{"a": true}`)), want: with(func(w *wantEvent) { w.Headers = []event.Header{{Key: "a", Value: "true"}} })},
		{name: "headers nested object", row: rowWith(5, text(`{"a": {"b": "c"}}`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers null value left out", row: rowWith(5, text(`{"a": null, "b": "x"}`)), want: with(func(w *wantEvent) { w.Headers = []event.Header{{Key: "b", Value: "x"}} })},
		{name: "headers array value", row: rowWith(5, text(`{"a": ["x"]}`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers array", row: rowWith(5, text(`["a", "b"]`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers json null", row: rowWith(5, text(`null`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers string", row: rowWith(5, text(`"a"`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers invalid json", row: rowWith(5, text(`{"a": "b"`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers trailing data", row: rowWith(5, text(`{"a": "b"} {}`)), wantErr: &event.RowError{Column: "headers", EventID: testID}},
		{name: "headers empty text", row: rowWith(5, text(``)), wantErr: &event.RowError{Column: "headers", EventID: testID}},

		{name: "bytea payload", cols: withType("payload", oidBytea), row: rowWith(4, text(`\x00ff10AB`)), want: with(func(w *wantEvent) { w.Payload = []byte{0x00, 0xff, 0x10, 0xab} })},
		{name: "empty bytea payload", cols: withType("payload", oidBytea), row: rowWith(4, text(`\x`)), want: with(func(w *wantEvent) { w.Payload = []byte{} })},
		{name: "bytea odd hex", cols: withType("payload", oidBytea), row: rowWith(4, text(`\x0`)), wantErr: &event.RowError{Column: "payload", EventID: testID}},
		{name: "bytea bad hex", cols: withType("payload", oidBytea), row: rowWith(4, text(`\xzz`)), wantErr: &event.RowError{Column: "payload", EventID: testID}},
		{name: "bytea escape format", cols: withType("payload", oidBytea), row: rowWith(4, text(`abc\000`)), wantErr: &event.RowError{Column: "payload", EventID: testID}},
		{name: "json payload as sent", cols: withType("payload", oidJSON), row: rowWith(4, text(" {\"a\" :1 } ")), want: with(func(w *wantEvent) { w.Payload = []byte(" {\"a\" :1 } ") })},
		{name: "text payload as sent", cols: withType("payload", oidText), row: rowWith(4, text("\\x00 not json")), want: with(func(w *wantEvent) { w.Payload = []byte("\\x00 not json") })},

		{name: "created_at with offset", row: rowWith(6, text("2026-12-02 21:09:55.123456+05:30")), want: defaultWant},
		{name: "created_at without fraction", row: rowWith(6, text("2026-12-02 15:39:55+00")), want: with(func(w *wantEvent) { w.CreatedAt = commitTime.Truncate(time.Second) })},
		{name: "created_at timestamp without time zone", cols: withType("created_at", oidTimestamp), row: rowWith(6, text("2026-12-02 15:39:55.123456")), want: defaultWant},
		{name: "created_at infinity", row: rowWith(6, text("infinity")), wantErr: &event.RowError{Column: "created_at", EventID: testID}},
		{name: "created_at other DateStyle", row: rowWith(6, text("Wed Dec 02 15:39:55.123456 2026 UTC")), wantErr: &event.RowError{Column: "created_at", EventID: testID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols, rowVals := tt.cols, tt.row
			if cols == nil {
				cols = outboxCols()
			}
			if rowVals == nil {
				rowVals = outboxRow()
			}
			schema, table := tt.cfg.Schema, tt.cfg.Table
			if schema == "" {
				schema = "public"
			}
			if table == "" {
				table = "outbox"
			}
			d := newDecoder(t, tt.cfg, relationMsg(outboxRelID, schema, table, cols...), testBegin())
			ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, rowVals...))
			matchErr(t, err, tt.wantErr)
			if err != nil {
				var re *event.RowError
				if errors.As(err, &re) && (re.Xid != testXid || re.LSN != rowLSN || re.Reason == "") {
					t.Fatalf("RowError %+v, want xid %d, lsn %s and a reason", re, testXid, rowLSN)
				}
				return
			}
			if ch.Kind != Insert || ch.Event == nil {
				t.Fatalf("Change = %+v, want an Insert", ch)
			}
			if got := eventFields(ch.Event); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("event\n got %+v\nwant %+v", got, tt.want)
			}
			// Every column is readable by name, whatever the mapping.
			for i, c := range cols {
				got, ok := ch.Event.Column(c.name)
				if wantOK := rowVals[i].kind == 't'; ok != wantOK || got != rowVals[i].data && wantOK {
					t.Fatalf("Column(%q) = %q, %v; want %q, %v", c.name, got, ok, rowVals[i].data, wantOK)
				}
			}
		})
	}
}

func TestEventColumn(t *testing.T) {
	cols := append(outboxCols(),
		col{name: "tenant", oid: oidText},
		col{name: "region", oid: oidText},
		col{name: "note", oid: oidText},
		col{name: "blob", oid: oidText},
	)
	row := append(outboxRow(), text("acme"), null, text(""), unchanged)
	d := newDecoder(t, Config{}, relationMsg(outboxRelID, "public", "outbox", cols...), testBegin())
	ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, row...))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		column string
		want   string
		wantOK bool
	}{
		{name: "mapped column", column: "aggregate_id", want: "42", wantOK: true},
		{name: "unmapped column", column: "tenant", want: "acme", wantOK: true},
		{name: "created_at as text", column: "created_at", want: "2026-12-02 15:39:55.123456+00", wantOK: true},
		{name: "empty value", column: "note", want: "", wantOK: true},
		{name: "null", column: "region"},
		{name: "unchanged toast", column: "blob"},
		{name: "no such column", column: "missing"},
		{name: "names are case-sensitive", column: "Tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ch.Event.Column(tt.column)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("Column(%q) = %q, %v; want %q, %v", tt.column, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	var zero event.Event
	if v, ok := zero.Column("id"); ok || v != "" {
		t.Fatalf("zero Event Column = %q, %v", v, ok)
	}
}

func TestDecodeSchemaErrors(t *testing.T) {
	replace := func(name string, c col) []col {
		cols := outboxCols()
		for i := range cols {
			if cols[i].name == name {
				cols[i] = c
			}
		}
		return cols
	}
	drop := func(name string) []col {
		var cols []col
		for _, c := range outboxCols() {
			if c.name != name {
				cols = append(cols, c)
			}
		}
		return cols
	}
	tests := []struct {
		name    string
		cfg     Config
		rel     []byte
		wantErr error
	}{
		{name: "valid", rel: outboxRelation()},
		{name: "missing event_type", rel: relationMsg(outboxRelID, "public", "outbox", drop("event_type")...), wantErr: &SchemaError{Table: "public.outbox", Column: "event_type"}},
		{name: "missing optional headers when mapped", rel: relationMsg(outboxRelID, "public", "outbox", drop("headers")...), wantErr: &SchemaError{Column: "headers"}},
		{name: "renamed id", rel: relationMsg(outboxRelID, "public", "outbox", replace("id", col{name: "ID", oid: oidUUID})...), wantErr: &SchemaError{Column: "id"}},
		{name: "id bigint", rel: relationMsg(outboxRelID, "public", "outbox", replace("id", col{name: "id", oid: oidInt8})...)},
		{name: "id numeric", rel: relationMsg(outboxRelID, "public", "outbox", replace("id", col{name: "id", oid: 1700})...), wantErr: &SchemaError{Column: "id"}},
		{name: "payload integer", rel: relationMsg(outboxRelID, "public", "outbox", replace("payload", col{name: "payload", oid: 23})...), wantErr: &SchemaError{Column: "payload"}},
		{name: "aggregate_type uuid", rel: relationMsg(outboxRelID, "public", "outbox", replace("aggregate_type", col{name: "aggregate_type", oid: oidUUID})...), wantErr: &SchemaError{Column: "aggregate_type"}},
		{name: "headers text", rel: relationMsg(outboxRelID, "public", "outbox", replace("headers", col{name: "headers", oid: oidText})...)},
		{name: "headers bytea", rel: relationMsg(outboxRelID, "public", "outbox", replace("headers", col{name: "headers", oid: oidBytea})...), wantErr: &SchemaError{Column: "headers"}},
		{name: "payload bytea with a path", cfg: Config{Columns: withPaths(DefaultColumns(), "Value", "")},
			rel: relationMsg(outboxRelID, "public", "outbox", replace("payload", col{name: "payload", oid: oidBytea})...), wantErr: &SchemaError{Column: "payload"}},
		{name: "payload jsonb with a path", cfg: Config{Columns: withPaths(DefaultColumns(), "Value", "")}, rel: outboxRelation()},
		{name: "created_at date", rel: relationMsg(outboxRelID, "public", "outbox", replace("created_at", col{name: "created_at", oid: 1082})...), wantErr: &SchemaError{Column: "created_at"}},
		{name: "custom mapping missing", cfg: Config{Schema: "app", Table: "events", Columns: Columns{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", EventType: "event_type", Payload: "body"}}, rel: relationMsg(outboxRelID, "app", "events", outboxCols()...), wantErr: &SchemaError{Table: "app.events", Column: "body"}},
		{name: "other schema is not the outbox", rel: relationMsg(outboxRelID, "audit", "outbox", drop("payload")...)},
		{name: "table name is case-sensitive", rel: relationMsg(outboxRelID, "public", "Outbox", drop("payload")...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, tt.cfg)
			ch, err := d.Decode(rowLSN, tt.rel)
			matchErr(t, err, tt.wantErr)
			if ch != (Change{}) {
				t.Fatalf("Relation Change = %+v, want the zero Change", ch)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			var se *SchemaError
			errors.As(err, &se)
			if !strings.Contains(msg, se.Table) || !strings.Contains(msg, `"`+se.Column+`"`) || !strings.Contains(msg, "map ") {
				t.Fatalf("error %q should name the table, the column and the fix", msg)
			}
			// Every Insert into the table reports the same problem.
			if _, err := d.Decode(beginLSN, testBegin()); err != nil {
				t.Fatal(err)
			}
			_, err = d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()[:len(outboxRow())-1]...))
			matchErr(t, err, tt.wantErr)
		})
	}
}

func TestDecodeRelationChanges(t *testing.T) {
	d := newDecoder(t, Config{}, outboxRelation(), testBegin())
	first, err := d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()...))
	if err != nil {
		t.Fatal(err)
	}

	// ALTER TABLE outbox ADD COLUMN tenant text: the new layout replaces the cache.
	added := append(outboxCols(), col{name: "tenant", oid: oidText})
	if _, err := d.Decode(rowLSN, relationMsg(outboxRelID, "public", "outbox", added...)); err != nil {
		t.Fatalf("Relation with added column: %v", err)
	}
	if _, err := d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()...)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Insert with the old column count = %v, want ErrMalformed", err)
	}
	ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, append(outboxRow(), text("acme"))...))
	if err != nil {
		t.Fatalf("Insert with the new column: %v", err)
	}
	if v, ok := ch.Event.Column("tenant"); !ok || v != "acme" {
		t.Fatalf(`Column("tenant") = %q, %v`, v, ok)
	}
	// An event decoded before the change still reads its own row.
	if _, ok := first.Event.Column("tenant"); ok {
		t.Fatal("an earlier event sees a column added after it")
	}
	if v, _ := first.Event.Column("event_type"); v != "order.created" {
		t.Fatalf("earlier event Column(event_type) = %q", v)
	}

	// ALTER TABLE outbox DROP COLUMN payload.
	var dropped []col
	for _, c := range added {
		if c.name != "payload" {
			dropped = append(dropped, c)
		}
	}
	_, err = d.Decode(rowLSN, relationMsg(outboxRelID, "public", "outbox", dropped...))
	matchErr(t, err, &SchemaError{Table: "public.outbox", Column: "payload"})
	r := outboxRow()
	_, err = d.Decode(rowLSN, insertMsg(outboxRelID, append(append(r[:4:4], r[5:]...), text("acme"))...))
	matchErr(t, err, &SchemaError{Column: "payload"})

	// Putting the column back makes the table usable again.
	if _, err := d.Decode(rowLSN, outboxRelation()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()...)); err != nil {
		t.Fatalf("Insert after the fix: %v", err)
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{
			name: "row error with id",
			err:  &event.RowError{EventID: "e-1", Xid: 771, LSN: 0x16B3748, Column: "payload", Reason: "is NULL"},
			want: `outbox row id "e-1" (xid 771, lsn 0/16B3748): column "payload" is NULL`,
		},
		{
			name: "row error without id",
			err:  &event.RowError{Xid: 5, LSN: 0x100000000, Column: "id", Reason: "is empty"},
			want: `outbox row id unknown (xid 5, lsn 1/0): column "id" is empty`,
		},
		{
			name: "schema error",
			err:  &SchemaError{Table: "public.outbox", Column: "payload", Reason: "does not exist"},
			want: `outbox table public.outbox: column "payload" does not exist`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error()\n got %s\nwant %s", got, tt.want)
			}
		})
	}

	// And as produced by Decode.
	d := newDecoder(t, Config{}, outboxRelation(), testBegin())
	_, err := d.Decode(rowLSN, insertMsg(outboxRelID, rowWith(4, null)...))
	want := `outbox row id "` + testID + `" (xid 771, lsn 0/16B3700): column "payload" is NULL`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Decode error = %v, want prefix %s", err, want)
	}
}

// TestDecodeTruncated cuts valid messages at every byte: each prefix must
// return ErrMalformed, never panic and never decode.
func TestDecodeTruncated(t *testing.T) {
	byteaCols := outboxCols()
	byteaCols[4].oid = oidBytea
	tests := []struct {
		name  string
		setup [][]byte
		data  []byte
	}{
		{name: "begin", data: testBegin()},
		{name: "commit", setup: [][]byte{testBegin()}, data: testCommit()},
		{name: "outbox relation", data: outboxRelation()},
		{name: "other relation", data: otherRelation()},
		{name: "outbox insert", setup: [][]byte{outboxRelation(), testBegin()}, data: insertMsg(outboxRelID, outboxRow()...)},
		{name: "outbox insert with nulls", setup: [][]byte{outboxRelation(), testBegin()}, data: insertMsg(outboxRelID, rowWith(6, null)...)},
		{name: "bytea insert", setup: [][]byte{relationMsg(outboxRelID, "public", "outbox", byteaCols...), testBegin()}, data: insertMsg(outboxRelID, rowWith(4, text(`\x0102`))...)},
		{name: "other insert", setup: [][]byte{otherRelation(), testBegin()}, data: insertMsg(otherRelID, otherRow()...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newDecoder(t, Config{}, tt.setup...).Decode(rowLSN, tt.data); err != nil {
				t.Fatalf("whole message: %v", err)
			}
			for n := range len(tt.data) {
				d := newDecoder(t, Config{}, tt.setup...)
				ch, err := d.Decode(rowLSN, tt.data[:n])
				if !errors.Is(err, ErrMalformed) || ch != (Change{}) {
					t.Fatalf("first %d of %d bytes: Change %+v, error %v; want ErrMalformed", n, len(tt.data), ch, err)
				}
			}
		})
	}
}

// TestBuilderMatchesPglogrepl checks the test builder (and the decoder's
// reading of it) against an independent parser.
func TestBuilderMatchesPglogrepl(t *testing.T) {
	t.Run("begin", func(t *testing.T) {
		m := parse[*pglogrepl.BeginMessage](t, testBegin())
		if m.FinalLSN != beginLSN || m.Xid != testXid || !m.CommitTime.Equal(commitTime) {
			t.Fatalf("pglogrepl Begin = %+v", m)
		}
		ch, err := newDecoder(t, Config{}).Decode(beginLSN, testBegin())
		if err != nil || ch.Tx.CommitLSN != m.FinalLSN || ch.Tx.Xid != m.Xid || !ch.Tx.CommitTime.Equal(m.CommitTime) {
			t.Fatalf("Decode Begin = %+v, %v; pglogrepl %+v", ch, err, m)
		}
	})
	t.Run("commit", func(t *testing.T) {
		m := parse[*pglogrepl.CommitMessage](t, testCommit())
		if m.CommitLSN != beginLSN || m.TransactionEndLSN != endLSN || !m.CommitTime.Equal(commitTime) || m.Flags != 0 {
			t.Fatalf("pglogrepl Commit = %+v", m)
		}
		ch, err := newDecoder(t, Config{}, testBegin()).Decode(endLSN, testCommit())
		if err != nil || ch.EndLSN != m.TransactionEndLSN {
			t.Fatalf("Decode Commit = %+v, %v; pglogrepl %+v", ch, err, m)
		}
	})
	t.Run("relation", func(t *testing.T) {
		m := parse[*pglogrepl.RelationMessage](t, outboxRelation())
		if m.RelationID != outboxRelID || m.Namespace != "public" || m.RelationName != "outbox" || m.ReplicaIdentity != 'd' {
			t.Fatalf("pglogrepl Relation = %+v", m)
		}
		d := newDecoder(t, Config{}, outboxRelation())
		rel := d.rels[outboxRelID]
		if len(m.Columns) != len(rel.cols) {
			t.Fatalf("pglogrepl has %d columns, decoder %d", len(m.Columns), len(rel.cols))
		}
		for i, c := range m.Columns {
			want := outboxCols()[i]
			if c.Name != want.name || c.DataType != want.oid || c.Flags != want.flags || c.TypeModifier != want.typmod {
				t.Fatalf("pglogrepl column %d = %+v, built %+v", i, c, want)
			}
			if rel.cols[i] != (relColumn{name: c.Name, typ: c.DataType, flags: c.Flags}) {
				t.Fatalf("decoder column %d = %+v, pglogrepl %+v", i, rel.cols[i], c)
			}
		}
	})
	t.Run("insert", func(t *testing.T) {
		rowVals := append(rowWith(5, null), unchanged)
		cols := append(outboxCols(), col{name: "big", oid: oidText})
		data := insertMsg(outboxRelID, rowVals...)
		m := parse[*pglogrepl.InsertMessage](t, data)
		if m.RelationID != outboxRelID || len(m.Tuple.Columns) != len(rowVals) {
			t.Fatalf("pglogrepl Insert = %+v", m)
		}
		d := newDecoder(t, Config{}, relationMsg(outboxRelID, "public", "outbox", cols...), testBegin())
		ch, err := d.Decode(rowLSN, data)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range m.Tuple.Columns {
			if c.DataType != rowVals[i].kind || string(c.Data) != rowVals[i].data {
				t.Fatalf("pglogrepl value %d = %c %q, built %c %q", i, c.DataType, c.Data, rowVals[i].kind, rowVals[i].data)
			}
			got, ok := ch.Event.Column(cols[i].name)
			if ok != (c.DataType == 't') || got != string(c.Data) {
				t.Fatalf("Column(%q) = %q, %v; pglogrepl %c %q", cols[i].name, got, ok, c.DataType, c.Data)
			}
		}
	})
	t.Run("others", func(t *testing.T) {
		for _, data := range [][]byte{
			originMsg(0x1000, "node_a"), typeMsg(16500, "public", "mood"),
			updateMsg(outboxRelID, outboxRow()...), deleteMsg(outboxRelID, text(testID)),
			truncateMsg(1, 2), logicalMsg(true, 0x1000, "p", "c"),
		} {
			m, err := pglogrepl.Parse(data)
			if err != nil || byte(m.Type()) != data[0] {
				t.Fatalf("pglogrepl.Parse(%q) = %T, %v", data[0], m, err)
			}
		}
	})
}

func parse[M pglogrepl.Message](tb testing.TB, data []byte) M {
	tb.Helper()
	m, err := pglogrepl.Parse(bytes.Clone(data))
	if err != nil {
		tb.Fatalf("pglogrepl.Parse: %v", err)
	}
	typed, ok := m.(M)
	if !ok {
		tb.Fatalf("pglogrepl.Parse = %T", m)
	}
	return typed
}

// TestRowErrorKeepsRow: a row that cannot become an event comes back in
// its RowError as far as it could be read, so its dead letter keeps the
// body and the subject's fields; Ordinal tells rows of one transaction
// apart, and starts again with the next transaction.
func TestRowErrorKeepsRow(t *testing.T) {
	tests := []struct {
		name        string
		cols        []col
		row         []val
		wantID      string
		wantType    string
		wantPayload string
		wantHeaders []event.Header
	}{
		{name: "header value an object", row: rowWith(5, text(`{"retries": {"n": 3}}`)), wantID: testID, wantType: "order", wantPayload: `{"total": 1999, "currency": "EUR"}`},
		{name: "null id", row: rowWith(0, null), wantType: "order", wantPayload: `{"total": 1999, "currency": "EUR"}`,
			wantHeaders: []event.Header{{Key: "trace-id", Value: "abc"}, {Key: "content-type", Value: "application/json"}}},
		{name: "null payload", row: rowWith(4, null), wantID: testID, wantType: "order",
			wantHeaders: []event.Header{{Key: "trace-id", Value: "abc"}, {Key: "content-type", Value: "application/json"}}},
		{name: "binary aggregate type", row: rowWith(1, binval("x")), wantID: testID, wantPayload: `{"total": 1999, "currency": "EUR"}`,
			wantHeaders: []event.Header{{Key: "trace-id", Value: "abc"}, {Key: "content-type", Value: "application/json"}}},
		{name: "bad bytea kept as sent", cols: colsWithType("payload", oidBytea), row: rowWith(4, text(`\xzz`)), wantID: testID, wantType: "order", wantPayload: `\xzz`,
			wantHeaders: []event.Header{{Key: "trace-id", Value: "abc"}, {Key: "content-type", Value: "application/json"}}},
		{name: "bytea decoded", cols: colsWithType("payload", oidBytea), row: []val{text(testID), text("order"), text("42"), text("t"), text(`\x6869`), text(`[]`), null},
			wantID: testID, wantType: "order", wantPayload: "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols := tt.cols
			if cols == nil {
				cols = outboxCols()
			}
			d := newDecoder(t, Config{}, relationMsg(outboxRelID, "public", "outbox", cols...), testBegin())
			_, err := d.Decode(rowLSN, insertMsg(outboxRelID, tt.row...))
			var re *event.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error = %v, want a *event.RowError", err)
			}
			got := re.Row
			if got == nil {
				t.Fatalf("RowError %v has no Row", re)
			}
			if got.ID != tt.wantID || got.AggregateType != tt.wantType || string(got.Payload) != tt.wantPayload || !reflect.DeepEqual(got.Headers, tt.wantHeaders) {
				t.Errorf("Row = id %q type %q payload %q headers %v, want %q %q %q %v",
					got.ID, got.AggregateType, got.Payload, got.Headers, tt.wantID, tt.wantType, tt.wantPayload, tt.wantHeaders)
			}
			if got.Tx.Xid != testXid || got.LSN != rowLSN || re.Ordinal != 1 {
				t.Errorf("Row xid %d lsn %s ordinal %d, want %d %s 1", got.Tx.Xid, got.LSN, re.Ordinal, testXid, rowLSN)
			}
			if v, ok := got.Column("aggregate_id"); !ok || v != "42" {
				t.Errorf(`Row.Column("aggregate_id") = %q, %v; want "42", true (subject templates read it)`, v, ok)
			}
		})
	}

	t.Run("ordinal", func(t *testing.T) {
		d := newDecoder(t, Config{}, outboxRelation(), testBegin())
		ordinals := func() []int {
			var got []int
			for _, row := range [][]val{outboxRow(), rowWith(0, null), rowWith(0, null)} {
				_, err := d.Decode(rowLSN, insertMsg(outboxRelID, row...))
				var re *event.RowError
				if errors.As(err, &re) {
					got = append(got, re.Ordinal)
				}
			}
			return got
		}
		if got := ordinals(); !reflect.DeepEqual(got, []int{2, 3}) {
			t.Errorf("ordinals of the two bad rows after a good one = %v, want [2 3]", got)
		}
		for _, msg := range [][]byte{testCommit(), testBegin()} {
			if _, err := d.Decode(beginLSN, msg); err != nil {
				t.Fatal(err)
			}
		}
		if got := ordinals(); !reflect.DeepEqual(got, []int{2, 3}) {
			t.Errorf("in the next transaction: ordinals %v, want [2 3] again", got)
		}
	})
}

// TestDecodePartitionSentAsItself: a row of a partition of the outbox
// table (its id in Config.Partitions) that the publication sends as the
// partition's (publish_via_partition_root off) is a *SchemaError naming it
// and the fix, never a skipped row. Another table's rows are still
// skipped.
func TestDecodePartitionSentAsItself(t *testing.T) {
	const partitionID = 16500
	partition := relationMsg(partitionID, "public", "outbox_2026_12", outboxCols()...)
	// pgoutput sends the partition's Relation message also when it sends
	// its rows as the table's: that alone is no error.
	d := newDecoder(t, Config{Partitions: []uint32{partitionID}}, otherRelation(), outboxRelation(), partition, testBegin())
	if ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, outboxRow()...)); err != nil || ch.Kind != Insert {
		t.Fatalf("Insert sent as the table's = %+v, %v; want an Insert", ch, err)
	}
	var schemaErr *SchemaError
	ch, err := d.Decode(rowLSN, insertMsg(partitionID, outboxRow()...))
	if !errors.As(err, &schemaErr) || !strings.Contains(err.Error(), "partition public.outbox_2026_12") ||
		!strings.Contains(err.Error(), "publish_via_partition_root = true") {
		t.Fatalf("Insert sent as the partition's = %+v, %v; want a *SchemaError naming it and the fix", ch, err)
	}
	if ch, err := d.Decode(rowLSN, insertMsg(otherRelID, otherRow()...)); err != nil || ch.Kind != None {
		t.Fatalf("Insert into another table = %+v, %v; want None", ch, err)
	}
}
