package sink

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/event"
)

// TestNullPayloadHeader: a row whose payload was NULL (--null-payload
// empty) is published with an empty body and Outbox-Null-Payload: true; no
// other message carries that header, not even one whose row asks for it.
func TestNullPayloadHeader(t *testing.T) {
	tmpl, err := ParseTemplate("outbox.events")
	if err != nil {
		t.Fatal(err)
	}
	p := &Publisher{cfg: Config{Subject: tmpl, Stream: "OUTBOX", DeadLetter: "outbox.dead"}}
	tx := event.TxInfo{Xid: 7, CommitLSN: 0x150, CommitTime: time.Now()}
	tests := []struct {
		name     string
		ev       event.Event
		wantBody string
		want     string // the header's value, "" for none
	}{
		{name: "NULL payload", ev: event.Event{ID: "e1", AggregateType: "Customer", EventType: "Deleted", NullPayload: true, Tx: tx}, want: "true"},
		{name: "empty payload is not NULL", ev: event.Event{ID: "e2", AggregateType: "Customer", EventType: "Deleted", Payload: []byte{}, Tx: tx}},
		{name: "a row cannot forge it", ev: event.Event{ID: "e3", AggregateType: "Order", EventType: "Paid", Payload: []byte(`{}`), Tx: tx,
			Headers: []event.Header{{Key: HeaderNullPayload, Value: "true"}}}, wantBody: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := p.message(&tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if got := msg.Header.Get(HeaderNullPayload); got != tt.want || string(msg.Data) != tt.wantBody {
				t.Fatalf("body %q, %s %q; want %q, %q", msg.Data, HeaderNullPayload, got, tt.wantBody, tt.want)
			}
			// A dead letter of the same row says so too.
			dead := p.deadLetter(&tt.ev, &event.RowError{EventID: tt.ev.ID, Column: "payload", Reason: "test"})
			if got := dead.Header.Get(HeaderNullPayload); got != tt.want {
				t.Fatalf("dead letter %s %q, want %q", HeaderNullPayload, got, tt.want)
			}
		})
	}
}
