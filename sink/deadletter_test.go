package sink

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
)

// TestDeadLetterHeaderRoom: the largest dead letter outboxd can build
// (every field and the reason as long as a header value may be) keeps
// its headers, apart from Nats-Msg-Id, within DeadLetterHeaderRoom, which
// retention relies on to know which rows' dead letters kept their body.
func TestDeadLetterHeaderRoom(t *testing.T) {
	tmpl, err := ParseTemplate("outbox.{aggregate_type}.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 5000)
	p := &Publisher{cfg: Config{Subject: tmpl, DeadLetter: "outbox.dead-letter"}}
	ev := &event.Event{ID: long, AggregateType: long, AggregateID: long, EventType: long, Payload: []byte("{}"),
		Tx: event.TxInfo{Xid: 1<<32 - 1, CommitLSN: 1<<64 - 1, CommitTime: time.Now()}, LSN: 1<<64 - 1}
	dead := &event.RowError{EventID: long, Xid: 1<<32 - 1, LSN: 1<<64 - 1, Column: strings.Repeat("c", 63), Reason: long}
	msg := p.deadLetter(ev, dead)
	size := headerSize(msg.Header) - int64(len(msg.Header.Get(jetstream.MsgIDHeader))+len(jetstream.MsgIDHeader)+4) + 64
	if size > DeadLetterHeaderRoom {
		t.Errorf("dead letter headers of %d bytes (with the 64 bytes of margin) beside Nats-Msg-Id, over DeadLetterHeaderRoom %d", size, DeadLetterHeaderRoom)
	}
	if len(msg.Header) < 10 {
		t.Errorf("dead letter has %d headers, want every field set: %v", len(msg.Header), msg.Header)
	}
}
