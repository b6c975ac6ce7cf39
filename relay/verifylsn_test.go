package relay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/sink"
)

// TestSinceFromLSN: --since LSN finds the first event committed at or
// after the LSN, whatever lies between (several events of one
// transaction, a deleted message, a message of another writer), and its
// commit time less the margin; an LSN past every event is refused.
func TestSinceFromLSN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := natstest.Start(t).JetStream(t)
	createCheckStream(ctx, t, js)
	base := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	publish := func(msg *nats.Msg) uint64 {
		t.Helper()
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	event := func(lsn pglogrepl.LSN, minute int) *nats.Msg {
		msg := nats.NewMsg("outbox.order.created")
		msg.Header.Set(sink.HeaderLSN, lsn.String())
		msg.Header.Set(sink.HeaderCommitTime, base.Add(time.Duration(minute)*time.Minute).Format(time.RFC3339Nano))
		return msg
	}
	// Transactions committed at 0/100 (three events), 0/200, 0/300 (its
	// message deleted), 0/400, with another writer's message between.
	for range 3 {
		publish(event(0x100, 0))
	}
	publish(event(0x200, 10))
	deleted := publish(event(0x300, 20))
	publish(nats.NewMsg("outbox.other.thing"))
	publish(event(0x400, 30))
	stream, err := js.Stream(ctx, "OUTBOX")
	if err == nil {
		err = stream.DeleteMsg(ctx, deleted)
	}
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		lsn  pglogrepl.LSN
		want int // the minute of the commit found
	}{{0x1, 0}, {0x100, 0}, {0x101, 10}, {0x200, 10}, {0x201, 30}, {0x400, 30}} {
		got, err := sinceFromLSN(ctx, js, "OUTBOX", tc.lsn)
		if want := base.Add(time.Duration(tc.want)*time.Minute - sinceLSNMargin); err != nil || !got.Equal(want) {
			t.Errorf("sinceFromLSN(%s) = %s, %v; want %s", tc.lsn, got, err, want)
		}
	}
	if _, err := sinceFromLSN(ctx, js, "OUTBOX", 0x401); err == nil || !strings.Contains(err.Error(), "no event committed at or after") {
		t.Errorf("sinceFromLSN past the last event = %v, want an error saying so", err)
	}
}
