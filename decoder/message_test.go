package decoder

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/event"
)

const testEnvelope = `{"id": "` + testID + `", "aggregate_type": "order", "aggregate_id": "42", "event_type": "order.created", "payload": {"total": 9.5}, "headers": {"Trace-Id": "abc", "A": "1"}}`

// TestMessageEvents: with EnvelopePrefix, a transactional message with the
// prefix is an Insert in its transaction; a bad or non-transactional one a
// RowError for it; other prefixes stay what they were.
func TestMessageEvents(t *testing.T) {
	cfg := Config{EnvelopePrefix: "outbox"}
	tx := event.TxInfo{Xid: testXid, CommitLSN: beginLSN, CommitTime: commitTime}

	d := newDecoder(t, cfg, testBegin())
	ch, err := d.Decode(rowLSN, logicalMsg(true, 0x16B3710, "outbox", testEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	want := &event.Event{Tx: tx, LSN: 0x16B3710, ID: testID, AggregateType: "order", AggregateID: "42", EventType: "order.created",
		Payload: []byte(`{"total": 9.5}`), Headers: []event.Header{{Key: "A", Value: "1"}, {Key: "Trace-Id", Value: "abc"}}, FromMessage: true}
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
			var rowErr *event.RowError
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
	var rowErr *event.RowError
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
