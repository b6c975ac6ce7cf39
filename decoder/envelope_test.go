package decoder

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const testEnvelope = `{"id": "` + testID + `", "aggregate_type": "order", "aggregate_id": "42", "event_type": "order.created", "payload": {"total": 9.5}, "headers": {"Trace-Id": "abc", "A": "1"}}`

func TestParseEnvelope(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    Envelope
	}{
		{"full", testEnvelope, Envelope{ID: testID, AggregateType: "order", AggregateID: "42", EventType: "order.created",
			Payload: json.RawMessage(`{"total": 9.5}`), Headers: map[string]string{"Trace-Id": "abc", "A": "1"}}},
		{"null payload, no headers", `{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":null}`,
			Envelope{ID: "x", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`null`)}},
		{"null and empty headers", `{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":[1],"headers":null}`,
			Envelope{ID: "x", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`[1]`)}},
		{"escapes and white space", " {\"id\":\"x\",\"aggregate_type\":\"caf\\u00e9\",\"aggregate_id\":\"1\",\"event_type\":\"e\",\"payload\":\"s\",\"headers\":{}}\n",
			Envelope{ID: "x", AggregateType: "café", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`"s"`)}},
		{"duplicate key: the last wins, as in jsonb", `{"id":"x","id":"y","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1}`,
			Envelope{ID: "y", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`1`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEnvelope([]byte(tt.content))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseEnvelope = %+v, want %+v", got, tt.want)
			}
			// What a producer marshals from it reads back the same.
			raw, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseEnvelope(raw)
			if err == nil && jsonEqual(t, again.Payload, tt.want.Payload) {
				again.Payload = tt.want.Payload // Marshal compacts it
			}
			if err != nil || !reflect.DeepEqual(again, tt.want) {
				t.Fatalf("marshalled %s reads back as %+v, %v", raw, again, err)
			}
		})
	}
}

func TestParseEnvelopeBad(t *testing.T) {
	valid := map[string]string{"id": `"x"`, "aggregate_type": `"order"`, "aggregate_id": `"1"`, "event_type": `"e"`, "payload": `{}`}
	with := func(key, value string) string { // value "" drops the key
		var parts []string
		for _, k := range envelopeKeys {
			v, ok := valid[k]
			if k == key {
				v, ok = value, value != ""
			}
			if ok {
				parts = append(parts, `"`+k+`": `+v)
			}
		}
		if _, known := valid[key]; !known && key != "headers" && value != "" {
			parts = append(parts, `"`+key+`": `+value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	tests := []struct {
		name, content, wantKey, wantErr string
	}{
		{"not JSON", `{"id": `, "", "is not valid JSON"},
		{"not UTF-8", "{\"id\": \"\xff\"}", "", "is not valid JSON"},
		{"empty", ``, "", "is not valid JSON"},
		{"array", `[1, 2]`, "", "is a JSON array, want an object"},
		{"string", `"order.created"`, "", "is a JSON string, want an object"},
		{"unknown key", with("created_at", `"2026-12-03"`), "created_at", "is not an envelope key"},
		{"missing id", with("id", ""), "id", "is missing"},
		{"empty id", with("id", `""`), "id", "is empty"},
		{"numeric id", with("id", `42`), "id", "is a JSON number, want a string"},
		{"null id", with("id", `null`), "id", "is a JSON null, want a string"},
		{"id with a line break", with("id", `"a\nb"`), "id", "control character"},
		{"missing aggregate type", with("aggregate_type", ""), "aggregate_type", "is missing"},
		{"blank aggregate id", with("aggregate_id", `"  "`), "aggregate_id", "is empty"},
		{"object aggregate id", with("aggregate_id", `{"a": 1}`), "aggregate_id", "is a JSON object, want a string"},
		{"boolean event type", with("event_type", `true`), "event_type", "is a JSON boolean, want a string"},
		{"event type with a tab", with("event_type", `"a\tb"`), "event_type", "control character"},
		{"missing payload", with("payload", ""), "payload", "is missing"},
		{"headers array", with("headers", `["a"]`), "headers", "is a JSON array, want an object of strings"},
		{"header number", with("headers", `{"Attempt": 3}`), "headers", `has header "Attempt" whose value is a JSON number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(tt.content))
			var envErr *EnvelopeError
			if !errors.As(err, &envErr) || envErr.Key != tt.wantKey || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseEnvelope(%s): err = %v, want an EnvelopeError for key %q mentioning %q", tt.content, err, tt.wantKey, tt.wantErr)
			}
		})
	}
}

// TestEnvelopeValidate covers what only a Go-built envelope can hold.
func TestEnvelopeValidate(t *testing.T) {
	good := func() Envelope {
		return Envelope{ID: "x", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`{}`)}
	}
	tests := []struct {
		name    string
		edit    func(*Envelope)
		wantKey string
	}{
		{"no payload", func(e *Envelope) { e.Payload = nil }, "payload"},
		{"payload not JSON", func(e *Envelope) { e.Payload = json.RawMessage(`{`) }, "payload"},
		{"payload not UTF-8", func(e *Envelope) { e.Payload = json.RawMessage("\"\xff\"") }, "payload"},
		{"aggregate type not UTF-8", func(e *Envelope) { e.AggregateType = "\xff" }, "aggregate_type"},
		{"header value not UTF-8", func(e *Envelope) { e.Headers = map[string]string{"A": "\xff"} }, "headers"},
	}
	e := good()
	if err := e.Validate(); err != nil {
		t.Fatalf("valid envelope: %v", err)
	}
	for _, tt := range tests {
		e := good()
		tt.edit(&e)
		var envErr *EnvelopeError
		if err := e.Validate(); !errors.As(err, &envErr) || envErr.Key != tt.wantKey {
			t.Errorf("%s: Validate = %v, want an EnvelopeError for key %q", tt.name, err, tt.wantKey)
		}
	}
}

// TestMessageEvents: with EnvelopePrefix, a transactional message with the
// prefix is an Insert in its transaction; a bad or non-transactional one a
// RowError for it; other prefixes stay what they were.
func TestMessageEvents(t *testing.T) {
	cfg := Config{EnvelopePrefix: "outbox"}
	tx := TxInfo{Xid: testXid, CommitLSN: beginLSN, CommitTime: commitTime}

	d := newDecoder(t, cfg, testBegin())
	ch, err := d.Decode(rowLSN, logicalMsg(true, 0x16B3710, "outbox", testEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	want := &Event{Tx: tx, LSN: 0x16B3710, ID: testID, AggregateType: "order", AggregateID: "42", EventType: "order.created",
		Payload: []byte(`{"total": 9.5}`), Headers: []Header{{"A", "1"}, {"Trace-Id", "abc"}}, FromMessage: true}
	if ch.Kind != Insert || ch.Tx != tx || !reflect.DeepEqual(ch.Event, want) {
		t.Fatalf("Change = %+v, event %+v; want Insert of %+v", ch, ch.Event, want)
	}
	for name, wantValue := range map[string]string{"id": testID, "aggregate_type": "order", "aggregate_id": "42", "event_type": "order.created"} {
		if v, ok := ch.Event.Column(name); !ok || v != wantValue {
			t.Errorf("Column(%q) = %q, %v; want %q", name, v, ok, wantValue)
		}
	}
	if v, ok := ch.Event.Column("payload"); ok {
		t.Errorf("Column(payload) = %q, want none: only the envelope's text keys fill placeholders", v)
	}
	// Other prefixes: None without Messages, Message with it.
	mustNone(t, d, rowLSN, logicalMsg(true, 0x1000, "outboxd", "x"))
	if ch, err := newDecoder(t, Config{EnvelopePrefix: "outbox", Messages: true}, testBegin()).
		Decode(rowLSN, logicalMsg(true, 0x1000, "audit", "x")); err != nil || ch.Kind != Message {
		t.Errorf("other prefix with Messages: Change %+v, %v; want Kind Message", ch, err)
	}
	// Without EnvelopePrefix the envelope is just a message.
	if ch, err := newDecoder(t, Config{Messages: true}, testBegin()).
		Decode(rowLSN, logicalMsg(true, 0x1000, "outbox", testEnvelope)); err != nil || ch.Kind != Message {
		t.Errorf("no EnvelopePrefix: Change %+v, %v; want Kind Message", ch, err)
	}

	bad := []struct {
		name, data, wantID, wantKey, wantErr string
		transactional                        bool
	}{
		{"not JSON", `order.created`, "", "", "is not valid JSON", true},
		{"missing event type", `{"id": "e-1", "aggregate_type": "a", "aggregate_id": "1", "payload": {}}`, "e-1", "event_type", "is missing", true},
		{"non-transactional", testEnvelope, testID, "", "transactional = false", false},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, cfg, testBegin())
			if !tt.transactional {
				d = newDecoder(t, cfg)
			}
			ch, err := d.Decode(rowLSN, logicalMsg(tt.transactional, 0x2000, "outbox", tt.data))
			var rowErr *RowError
			if !errors.As(err, &rowErr) || ch != (Change{}) {
				t.Fatalf("Change %+v, err %v; want a RowError", ch, err)
			}
			wantXid := uint32(0)
			if tt.transactional {
				wantXid = testXid
			}
			if !rowErr.Message || rowErr.EventID != tt.wantID || rowErr.Column != tt.wantKey || rowErr.Xid != wantXid ||
				rowErr.LSN != 0x2000 || string(rowErr.Content) != tt.data || !strings.Contains(err.Error(), tt.wantErr) ||
				!strings.HasPrefix(err.Error(), "outbox message id ") {
				t.Fatalf("RowError %+v (%v), want message id %q, key %q, xid %d, lsn 0/2000, the content, mentioning %q",
					rowErr, err, tt.wantID, tt.wantKey, wantXid, tt.wantErr)
			}
		})
	}
}

// TestMessageEventsStreamed: an envelope inside a streamed transaction
// waits in the spool and comes back as an Insert at replay, in order with
// the rows; a non-transactional one in a segment is reported at once.
func TestMessageEventsStreamed(t *testing.T) {
	d, spool := newStreamDecoder(t, Config{EnvelopePrefix: "outbox"})
	mustNone(t, d, 0, streamStartMsg(streamXid, true))
	mustNone(t, d, 0, inStream(streamXid, outboxRelation()))
	mustNone(t, d, 0x2000010, inStream(streamXid, insertMsg(outboxRelID, idRow(1)...)))
	mustNone(t, d, 0, inStream(streamXid, logicalMsg(true, 0x2000020, "outbox", testEnvelope)))
	_, err := d.Decode(0, inStream(streamXid, logicalMsg(false, 0x2000030, "outbox", testEnvelope)))
	var rowErr *RowError
	if !errors.As(err, &rowErr) || !rowErr.Message {
		t.Fatalf("non-transactional envelope in a segment: err %v, want a message RowError", err)
	}
	mustNone(t, d, 0, streamStopMsg())
	if len(spoolFiles(t, spool)) == 0 {
		t.Fatal("nothing spooled")
	}
	sc, err := d.Decode(0, testStreamCommit())
	if err != nil || sc.Kind != StreamCommit {
		t.Fatalf("stream commit: %+v, %v", sc, err)
	}
	var ids []string
	for ch, err := range d.Replay(sc.Tx.Xid) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Kind == Insert {
			ids = append(ids, ch.Event.ID)
			if ch.Event.Tx != sc.Tx {
				t.Errorf("event %s: Tx %+v, want %+v", ch.Event.ID, ch.Event.Tx, sc.Tx)
			}
		}
	}
	if want := []string{"row-000001", testID}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("replayed events %q, want %q", ids, want)
	}
}
