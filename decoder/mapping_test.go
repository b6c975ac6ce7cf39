package decoder

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/event"
)

// The mapping of framework tables: integer ids and an id prefix, headers
// in a text column, values at a JSON path, NULL payloads.

// capCols is DotNetCore.CAP's "cap"."published" as far as outboxd reads
// it: Id bigint, Name varchar, Content text holding CAP's wrapper.
func capCols() []col {
	return []col{{name: "Id", oid: oidInt8, flags: 1}, {name: "Version", oid: oidVarchar}, {name: "Name", oid: oidVarchar},
		{name: "Content", oid: oidText}, {name: "Retries", oid: oidInt4}, {name: "Added", oid: oidTimestamp}, {name: "StatusName", oid: oidVarchar}}
}

// capContent is what CAP writes into Content: its headers (values strings
// or null) and the message body under Value.
const capContent = `{"Headers":{"cap-msg-id":"1001","cap-msg-name":"shop.order.paid","cap-msg-type":"OrderPaid","cap-callback-name":null,` +
	`"cap-senttime":"2026-12-02 15:39:55 +00:00"},"Value":{"OrderId":42,"Total":99.5}}`

func capRow(content val) []val {
	return []val{text("1001"), text("v1"), text("shop.order.paid"), content, text("0"), text("2026-12-02 15:39:55.123456"), text("Scheduled")}
}

func capColumns(tb testing.TB) Columns {
	tb.Helper()
	c, err := ParseColumns("id=Id,event_type=Name,payload=Content->Value,headers=Content->Headers,created_at=Added")
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// decodeOne decodes one Insert of row into a table of cols after Begin.
func decodeOne(t *testing.T, cfg Config, cols []col, row []val) (*event.Event, error) {
	t.Helper()
	if cfg.Schema == "" {
		cfg.Schema = "public"
	}
	if cfg.Table == "" {
		cfg.Table = "outbox"
	}
	d := newDecoder(t, cfg, relationMsg(outboxRelID, cfg.Schema, cfg.Table, cols...), testBegin())
	ch, err := d.Decode(rowLSN, insertMsg(outboxRelID, row...))
	if err != nil {
		if ch != (Change{}) {
			t.Fatalf("Change %+v with error %v", ch, err)
		}
		return nil, err
	}
	if ch.Kind != Insert || ch.Event == nil {
		t.Fatalf("Change %+v, want an Insert", ch)
	}
	return ch.Event, nil
}

func TestDecodeMappedValues(t *testing.T) {
	capCfg := Config{Schema: "cap", Table: "published", Columns: capColumns(t)}
	textHeaders := colsWithType("headers", oidText)
	path := func(c Columns, payload, headers []string) Columns {
		if payload != nil {
			c.PayloadPath = jsonPath(payload...)
		}
		if headers != nil {
			c.HeadersPath = jsonPath(headers...)
		}
		return c
	}
	onPayload := func(keys ...string) Config { return Config{Columns: path(DefaultColumns(), keys, nil)} }
	tests := []struct {
		name        string
		cfg         Config
		cols        []col // nil: outboxCols()
		row         []val // nil: outboxRow()
		wantID      string
		wantPayload string
		wantHeaders []event.Header // nil: outboxRow's headers
		noHeaders   bool
	}{
		{name: "bigint id", cols: colsWithType("id", oidInt8), row: rowWith(0, text("9223372036854775807")), wantID: "9223372036854775807"},
		{name: "integer id", cols: colsWithType("id", oidInt4), row: rowWith(0, text("-42")), wantID: "-42"},
		{name: "smallint id", cols: colsWithType("id", oidInt2), row: rowWith(0, text("7")), wantID: "7"},
		{name: "id prefix", cfg: Config{IDPrefix: "sales:"}, wantID: "sales:" + testID},
		{name: "id prefix on an integer id", cfg: Config{IDPrefix: "db1-"}, cols: colsWithType("id", oidInt8), row: rowWith(0, text("17")), wantID: "db1-17"},
		{
			name: "headers in a text column", cols: textHeaders,
			row:         rowWith(5, text(`{"MT-Activity-Id": "00-abc-01", "MT-Redelivery-Count": 2, "MT-Fault": false, "MT-Reason": null}`)),
			wantHeaders: []event.Header{{Key: "MT-Activity-Id", Value: "00-abc-01"}, {Key: "MT-Redelivery-Count", Value: "2"}, {Key: "MT-Fault", Value: "false"}},
		},
		{name: "headers in a varchar column", cols: colsWithType("headers", oidVarchar), row: rowWith(5, text(`{"a": "b"}`)),
			wantHeaders: []event.Header{{Key: "a", Value: "b"}}},
		{name: "empty headers in a text column", cols: textHeaders, row: rowWith(5, text(`{}`)), noHeaders: true},
		{
			name: "CAP", cfg: capCfg, cols: capCols(), row: capRow(text(capContent)), wantID: "1001",
			wantPayload: `{"OrderId":42,"Total":99.5}`,
			wantHeaders: []event.Header{{Key: "cap-msg-id", Value: "1001"}, {Key: "cap-msg-name", Value: "shop.order.paid"},
				{Key: "cap-msg-type", Value: "OrderPaid"}, {Key: "cap-senttime", Value: "2026-12-02 15:39:55 +00:00"}},
		},
		{name: "payload path: a number", cfg: onPayload("total"), wantPayload: "1999"},
		{name: "payload path: a string's content", cfg: onPayload("doc"), row: rowWith(4, text(`{"doc": "{\"a\": 1}"}`)), wantPayload: `{"a": 1}`},
		{name: "payload path: an escaped string", cfg: onPayload("doc"), row: rowWith(4, text(`{"doc": "caf\u00e9\n\"x\""}`)), wantPayload: "café\n\"x\""},
		{name: "payload path: null", cfg: onPayload("v"), row: rowWith(4, text(`{"v": null}`)), wantPayload: "null"},
		{name: "payload path: two keys", cfg: onPayload("a", "b"), row: rowWith(4, text(`{"x": [1, {"b": 2}], "a": {"c": "}", "b": [true, {"d": "]"}] } }`)),
			wantPayload: `[true, {"d": "]"}]`},
		{name: "payload path: the last of a repeated key", cfg: Config{Columns: path(DefaultColumns(), []string{"v"}, nil)}, cols: colsWithType("payload", oidJSON),
			row: rowWith(4, text(`{"v": 1, "w": 0, "v": 2}`)), wantPayload: "2"},
		{name: "payload path: an escaped key", cfg: onPayload(`k"1`), cols: colsWithType("payload", oidText), row: rowWith(4, text(`{"k\"1": "x", "k\u00221x": "y"}`)), wantPayload: "x"},
		{name: "payload path into a varchar column", cfg: onPayload("Value"), cols: colsWithType("payload", oidVarchar), row: rowWith(4, text(` {"Value" : {"a":1} } `)), wantPayload: `{"a":1}`},
		{name: "headers path", cfg: Config{Columns: path(DefaultColumns(), nil, []string{"meta", "nats"})},
			row: rowWith(5, text(`{"meta": {"nats": {"Trace": "t1", "n": 1}, "other": [1]}}`)), wantHeaders: []event.Header{{Key: "Trace", Value: "t1"}, {Key: "n", Value: "1"}}},
		{name: "NULL headers column with a path", cfg: Config{Columns: path(DefaultColumns(), nil, []string{"h"})}, row: rowWith(5, null), noHeaders: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols, row := tt.cols, tt.row
			if cols == nil {
				cols = outboxCols()
			}
			if row == nil {
				row = outboxRow()
			}
			ev, err := decodeOne(t, tt.cfg, cols, row)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.wantID
			if want == "" {
				want = testID
			}
			if ev.ID != want {
				t.Errorf("ID %q, want %q", ev.ID, want)
			}
			if want := tt.wantPayload; want != "" && string(ev.Payload) != want {
				t.Errorf("Payload %q, want %q", ev.Payload, want)
			}
			wantHeaders := tt.wantHeaders
			if wantHeaders == nil && !tt.noHeaders {
				wantHeaders = []event.Header{{Key: "trace-id", Value: "abc"}, {Key: "content-type", Value: "application/json"}}
			}
			if !reflect.DeepEqual(ev.Headers, wantHeaders) {
				t.Errorf("Headers %q, want %q", ev.Headers, wantHeaders)
			}
			if ev.NullPayload {
				t.Error("NullPayload set for a row with a payload")
			}
		})
	}
}

// TestDecodeMappingErrors: a row the mapping cannot read is a RowError
// that names the row id (prefixed like the message id), the column and the
// fix, and keeps the whole payload column for its dead letter.
func TestDecodeMappingErrors(t *testing.T) {
	capCfg := Config{Schema: "cap", Table: "published", Columns: capColumns(t), IDPrefix: "cap:"}
	onPayload := func(keys ...string) Config {
		c := DefaultColumns()
		c.PayloadPath = jsonPath(keys...)
		return Config{Columns: c}
	}
	tests := []struct {
		name        string
		cfg         Config
		cols        []col
		row         []val
		wantID      string
		wantColumn  string
		wantPayload string // the dead letter's body: the column as the row holds it
		wantReason  []string
	}{
		{
			name: "nested header value", cols: colsWithType("headers", oidText), row: rowWith(5, text(`{"trace": "a", "ctx": {"user": "u1"}}`)),
			wantID: testID, wantColumn: "headers", wantPayload: `{"total": 1999, "currency": "EUR"}`,
			wantReason: []string{`has header "ctx" whose value is a JSON object`, "write header values as strings, numbers or booleans",
				"map headers to it with a JSON path: --columns headers=headers->ctx"},
		},
		{
			name: "CAP: nested header value", cfg: capCfg, cols: capCols(),
			row:    capRow(text(`{"Headers": {"cap-msg-id": "1001", "extra": [1]}, "Value": {}}`)),
			wantID: "cap:1001", wantColumn: "Content", wantPayload: `{"Headers": {"cap-msg-id": "1001", "extra": [1]}, "Value": {}}`,
			wantReason: []string{`at the JSON path ->Headers has header "extra" whose value is a JSON array`, "--columns headers=Content->Headers->extra"},
		},
		{
			name: "CAP: no Value key", cfg: capCfg, cols: capCols(), row: capRow(text(`{"Headers": {}, "value": 1}`)),
			wantID: "cap:1001", wantColumn: "Content", wantPayload: `{"Headers": {}, "value": 1}`,
			wantReason: []string{`does not match the JSON path ->Value: there is no key "Value" (the object has keys "Headers", "value")`,
				"fix the path in --columns (keys are case-sensitive)"},
		},
		{
			name: "CAP: headers not an object", cfg: capCfg, cols: capCols(), row: capRow(text(`{"Headers": "x", "Value": 1}`)),
			wantID: "cap:1001", wantColumn: "Content", wantPayload: `{"Headers": "x", "Value": 1}`,
			wantReason: []string{`at the JSON path ->Headers is a JSON string, want an object of header values`},
		},
		{
			name: "path through a non-object", cfg: onPayload("a", "b"), row: rowWith(4, text(`{"a": [1]}`)),
			wantID: testID, wantColumn: "payload", wantPayload: `{"a": [1]}`,
			wantReason: []string{`does not match the JSON path ->a->b: at ->a is a JSON array, not an object, so it has no key "b"`, "fix the path in --columns"},
		},
		{
			name: "path into a scalar column value", cfg: onPayload("a"), row: rowWith(4, text(`"just a string"`)),
			wantID: testID, wantColumn: "payload", wantPayload: `"just a string"`,
			wantReason: []string{`the column holds a JSON string, not an object, so it has no key "a"`},
		},
		{
			name: "path into text that is not JSON", cfg: onPayload("Value"), cols: colsWithType("payload", oidText), row: rowWith(4, text(`Value=1`)),
			wantID: testID, wantColumn: "payload", wantPayload: `Value=1`,
			wantReason: []string{"is not valid JSON, so the JSON path ->Value cannot be read", "map the field to the column itself, or make the writer store JSON"},
		},
		{
			name: "many keys: the first ten named", cfg: onPayload("Value"),
			row:    rowWith(4, text(`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10}`)),
			wantID: testID, wantColumn: "payload", wantPayload: `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10}`,
			wantReason: []string{`(the object has keys "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", …)`},
		},
		{
			name: "path into an empty object", cfg: onPayload("Value"), row: rowWith(4, text(`{}`)),
			wantID: testID, wantColumn: "payload", wantPayload: `{}`,
			wantReason: []string{`there is no key "Value" (the object has no keys)`},
		},
		{
			name: "NULL payload under stop", cfg: Config{IDPrefix: "p-"}, row: rowWith(4, null),
			wantID: "p-" + testID, wantColumn: "payload",
			wantReason: []string{"is NULL, and --null-payload is stop", "--null-payload skip", "--null-payload empty", "Debezium"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols, row := tt.cols, tt.row
			if cols == nil {
				cols = outboxCols()
			}
			_, err := decodeOne(t, tt.cfg, cols, row)
			var re *event.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a *event.RowError", err)
			}
			if re.EventID != tt.wantID || re.Column != tt.wantColumn {
				t.Errorf("RowError id %q column %q, want %q %q", re.EventID, re.Column, tt.wantID, tt.wantColumn)
			}
			msg := err.Error()
			for _, want := range append([]string{`id "` + tt.wantID + `"`, `column "` + tt.wantColumn + `"`}, tt.wantReason...) {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q\ndoes not say %q", msg, want)
				}
			}
			if re.Row == nil || string(re.Row.Payload) != tt.wantPayload || re.Row.ID != tt.wantID {
				t.Fatalf("RowError.Row %+v, want id %q and the payload column %q", re.Row, tt.wantID, tt.wantPayload)
			}
		})
	}
}

// TestDecodeNullPayload: with AllowNullPayload, a NULL payload is an Event
// marked NullPayload with no body, every other field read and checked as
// usual; without it, a RowError.
func TestDecodeNullPayload(t *testing.T) {
	ev, err := decodeOne(t, Config{AllowNullPayload: true}, outboxCols(), rowWith(4, null))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.NullPayload || ev.Payload != nil || ev.ID != testID || ev.EventType != "order.created" || len(ev.Headers) != 2 || ev.CreatedAt != commitTime {
		t.Fatalf("event %+v, want NullPayload, no payload, and the row's other fields", ev)
	}
	// A JSON path does not apply to a NULL column.
	c := DefaultColumns()
	c.PayloadPath = jsonPath("Value")
	if ev, err = decodeOne(t, Config{Columns: c, AllowNullPayload: true}, outboxCols(), rowWith(4, null)); err != nil || !ev.NullPayload {
		t.Fatalf("with a path: %+v, %v; want a NullPayload event", ev, err)
	}
	// Another bad value still makes the row a RowError.
	_, err = decodeOne(t, Config{AllowNullPayload: true}, outboxCols(), append(rowWith(4, null)[:5:5], text(`{"a": {}}`), null))
	matchErr(t, err, &event.RowError{Column: "headers", EventID: testID})
	// An empty text payload is not NULL.
	if ev, err = decodeOne(t, Config{AllowNullPayload: true}, colsWithType("payload", oidText), rowWith(4, text(""))); err != nil || ev.NullPayload || ev.Payload == nil {
		t.Fatalf("empty payload: %+v, %v; want a payload of zero bytes, not NullPayload", ev, err)
	}
	_, err = decodeOne(t, Config{}, outboxCols(), rowWith(4, null))
	matchErr(t, err, &event.RowError{Column: "payload", EventID: testID})
}

// TestEnvelopeIDPrefix: an event from a logical message gets the prefix
// too, in its RowError as well.
func TestEnvelopeIDPrefix(t *testing.T) {
	d := newDecoder(t, Config{EnvelopePrefix: "outbox", IDPrefix: "m:"}, testBegin())
	ch, err := d.Decode(rowLSN, logicalMsg(true, 0x1000, "outbox", testEnvelope))
	if err != nil || ch.Event == nil || !strings.HasPrefix(ch.Event.ID, "m:") || ch.Event.ID == "m:" {
		t.Fatalf("Decode = %+v, %v; want an event whose id starts with m:", ch.Event, err)
	}
	_, err = d.Decode(rowLSN, logicalMsg(true, 0x1000, "outbox", `{"id": "x1", "payload": 1}`))
	var re *event.RowError
	if !errors.As(err, &re) || re.EventID != "m:x1" {
		t.Fatalf("error %v, want a RowError with id m:x1", err)
	}
}
