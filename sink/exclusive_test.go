package sink

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/natstest"
)

// checkExpectations checks that every stored message sent with
// Nats-Expected-Last-Sequence expected the sequence just before its own,
// and that at least min of them carried one (the window was used).
func checkExpectations(t *testing.T, srv *natstest.Server, stream string, min int) {
	t.Helper()
	with := 0
	for _, m := range readStream(t, srv, stream) {
		v := m.Header.Get(jetstream.ExpectedLastSeqHeader)
		if v == "" {
			continue
		}
		with++
		if got, err := strconv.ParseUint(v, 10, 64); err != nil || got != m.Seq-1 {
			t.Fatalf("message %d was sent expecting last sequence %q, want %d", m.Seq, v, m.Seq-1)
		}
	}
	if with < min {
		t.Fatalf("%d messages were pipelined with an expected last sequence, want at least %d", with, min)
	}
}

func TestExclusiveOrder(t *testing.T) {
	const n, maxInFlight = 20000, 256
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(n, 50, 64)
	a := newAcker()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight, Exclusive: true})
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkAcks(t, a, n)
	checkStored(t, srv, "OUTBOX", tmpl, items)
	checkExpectations(t, srv, "OUTBOX", n-1)
}

// TestExclusiveReplay runs a second publisher as after a restart from an
// older checkpoint: the events it replays are already stored (duplicates,
// sent one at a time), then new ones follow pipelined again.
func TestExclusiveReplay(t *testing.T) {
	const n, firstRun, resumeAt = 6000, 4000, 2500
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(n, 20, 64)
	cfg := Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 128, Exclusive: true}

	if err := run(ctx, newTestPublisher(t, js, nc.MaxPayload(), cfg), items[:firstRun], newAcker(), nil); err != nil {
		t.Fatalf("first Run = %v, want nil", err)
	}
	replay := make([]Item, 0, n-resumeAt)
	for i, it := range items[resumeAt:] {
		replay = append(replay, Item{Seq: uint64(i + 1), Event: it.Event})
	}
	a := newAcker()
	if err := run(ctx, newTestPublisher(t, js, nc.MaxPayload(), cfg), replay, a, nil); err != nil {
		t.Fatalf("second Run = %v, want nil", err)
	}
	checkAcks(t, a, len(replay))
	checkStored(t, srv, "OUTBOX", tmpl, items)
	checkExpectations(t, srv, "OUTBOX", n-10)
}

// TestExclusiveOutage is TestPublisherOutage in exclusive mode.
func TestExclusiveOutage(t *testing.T) { testPublisherOutage(t, Config{Exclusive: true}) }

// TestExclusiveDeadLetter mixes rows that go to a dead-letter subject in
// another stream into the events: each is a sync point, and the events
// still land once, in order, with correct expectations.
func TestExclusiveDeadLetter(t *testing.T) {
	const n = 3000
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD", Subjects: []string{"dead.letter"}}); err != nil {
		t.Fatal(err)
	}
	items := newEventBuilder(t).items(n, 20, 64)
	var good []Item
	dead := 0
	for i := range items {
		if i%97 == 5 {
			ev := items[i].Event
			items[i].Dead = &event.RowError{EventID: ev.ID, Xid: ev.Tx.Xid, LSN: ev.LSN, Column: "payload", Reason: "test"}
			items[i].Event = nil
			dead++
			continue
		}
		good = append(good, items[i])
	}
	a := newAcker()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 128,
		Exclusive: true, DeadLetter: "dead.letter"})
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkAcks(t, a, n)
	checkStored(t, srv, "OUTBOX", tmpl, good)
	checkExpectations(t, srv, "OUTBOX", len(good)/2)
	msgs := readStream(t, srv, "DEAD")
	if len(msgs) != dead {
		t.Fatalf("dead-letter stream holds %d messages, want %d", len(msgs), dead)
	}
	for _, m := range msgs {
		if v := m.Header.Get(jetstream.ExpectedLastSeqHeader); v != "" {
			t.Fatalf("dead-letter message %d carries Nats-Expected-Last-Sequence %q", m.Seq, v)
		}
		if !strings.Contains(m.Header.Get(HeaderDeadLetterReason), "test") {
			t.Fatalf("dead-letter message %d has reason %q", m.Seq, m.Header.Get(HeaderDeadLetterReason))
		}
	}
}
