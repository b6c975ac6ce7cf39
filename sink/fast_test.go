package sink

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/natstest"
)

// TestCheckFastBatch: a stream outboxd creates on this nats-server takes
// fast batches; one without allow_batched does not, and the error says so
// and how to fix it.
func TestCheckFastBatch(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	_, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	if err := CheckFastBatch(ctx, js, "OUTBOX"); err != nil {
		t.Fatalf("CheckFastBatch on a stream EnsureStream created = %v, want nil", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}}); err != nil {
		t.Fatal(err)
	}
	err := CheckFastBatch(ctx, js, "PLAIN")
	var fbErr *FastBatchError
	if !errors.As(err, &fbErr) {
		t.Fatalf("CheckFastBatch on a stream without allow_batched = %v, want a *FastBatchError", err)
	}
	for _, want := range []string{`"PLAIN"`, "allow_batched", "--publish-mode async"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestCheckFastBatchOldServer asks a real older nats-server (Debian's 2.9,
// which reports no JetStream API level): EnsureStream creates the stream
// without allow_batched, which that server would not know, and
// CheckFastBatch names the level it found and the one needed.
func TestCheckFastBatchOldServer(t *testing.T) {
	ctx := testCtx(t)
	url := natstest.OldServer(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	err = CheckFastBatch(ctx, js, "OUTBOX")
	var fbErr *FastBatchError
	if !errors.As(err, &fbErr) {
		t.Fatalf("CheckFastBatch on nats-server %s = %v, want a *FastBatchError", nc.ConnectedServerVersion(), err)
	}
	for _, want := range []string{"API level 0", "level 4", "--publish-mode async"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Async publishing works there as ever.
	items := newEventBuilder(t).items(500, 10, 64)
	a := newAcker()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 64})
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, len(items))
}

// TestFastOrder publishes many small transactions in fast batches: acks
// come in order, and the stream holds every event once, in order, with its
// headers.
func TestFastOrder(t *testing.T) {
	const n, maxInFlight = 20000, 256
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(n, 50, 64)
	a := newAcker()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight, Fast: true})
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkAcks(t, a, n)
	checkStored(t, srv, "OUTBOX", tmpl, items)
}

// TestFastWindowBounded: no message reaches the server more than
// MaxInFlight ahead of the acknowledgements, in fast mode too.
func TestFastWindowBounded(t *testing.T) { testPublisherWindowBounded(t, true) }

// TestFastNoStrayMessages: a core NATS subscriber of the subjects sees
// exactly the events, whatever the batch sizes: no end-of-batch or other
// control messages.
func TestFastNoStrayMessages(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	sub, err := srv.Conn(t).SubscribeSync("outbox.>")
	if err != nil {
		t.Fatal(err)
	}
	all := newEventBuilder(t).items(2503, 10, 32)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: true})
	a := newAcker()
	// Batches of one (the feeder stops between rounds) and longer ones.
	start := 0
	for round, size := range []int{1, 1, 500, 1, 2000} {
		if err := run(ctx, p, all[start:start+size], a, nil); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		start += size
	}
	checkAcks(t, a, len(all))
	checkStored(t, srv, "OUTBOX", tmpl, all)
	time.Sleep(100 * time.Millisecond) // let any stray message arrive
	if got, _, err := sub.Pending(); err != nil || got != len(all) {
		t.Fatalf("the subscriber saw %d messages (%v), want exactly the %d events", got, err, len(all))
	}
}

// TestFastDuplicates replays events in fast mode: repeats inside a batch
// and a batch that starts with one are absorbed by Nats-Msg-Id, every item
// is acknowledged, and the stream holds each event once.
func TestFastDuplicates(t *testing.T) {
	const n = 2000
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(n, 10, 64)
	obs := &countingObserver{}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 256, Fast: true, Observer: obs})
	if err := run(ctx, p, items[:n/2], newAcker(), nil); err != nil {
		t.Fatal(err)
	}
	// A restart replays from an older checkpoint: the first half again,
	// then the rest.
	start := time.Now()
	a := newAcker()
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("replay of %d events, %d of them duplicates: %s", n, n/2, time.Since(start))
	checkAcks(t, a, n)
	checkStored(t, srv, "OUTBOX", tmpl, items)
	if published, _, _, _, failures := obs.counts(); published != n+n/2 || failures != 0 {
		t.Errorf("observer: %d published, %d failures; want %d and 0", published, failures, n+n/2)
	}
}

// TestFastOutage stops the server in the middle of fast batches: the
// unacknowledged messages are republished in order once it is back.
func TestFastOutage(t *testing.T) { testPublisherOutage(t, Config{Fast: true}) }

// TestFastStreamRefuses: a stream without allow_batched refuses the first
// batch; the publisher says so, goes on asynchronously, and loses nothing.
func TestFastStreamRefuses(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{tmpl.Filter()},
		Storage: jetstream.FileStorage, Duplicates: DefaultDuplicateWindow}); err != nil {
		t.Fatal(err)
	}
	items := newEventBuilder(t).items(3000, 10, 64)
	a := newAcker()
	obs := &countingObserver{}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 128, Fast: true, Observer: obs})
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, len(items))
	checkStored(t, srv, "OUTBOX", tmpl, items)
	if _, _, _, _, failures := obs.counts(); failures != 1 {
		t.Errorf("%d failures reported, want 1 (the refused batch)", failures)
	}
}

// TestFastDeadLetter mixes dead-letter rows for another stream into fast
// batches: each goes alone between batches, and the events still land
// once, in order.
func TestFastDeadLetter(t *testing.T) {
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
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 128, Fast: true, DeadLetter: "dead.letter"})
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkAcks(t, a, n)
	checkStored(t, srv, "OUTBOX", tmpl, good)
	if msgs := readStream(t, srv, "DEAD"); len(msgs) != dead {
		t.Fatalf("dead-letter stream holds %d messages, want %d", len(msgs), dead)
	}
}

// TestFastBadRow: a row that cannot be published stops fast mode as it
// stops async mode, with its *event.RowError, never acknowledging it,
// once the rows before it (held in the open batch) are stored.
func TestFastBadRow(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t, natstest.WithMaxPayload(4096))
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	b := newEventBuilder(t)
	items := b.items(100, 10, 64)
	big := b.event(testRow{ID: eventID(1000), AggregateType: "order", AggregateID: "1", EventType: "created", Payload: make([]byte, 8192)})
	items = append(items, Item{Seq: uint64(len(items) + 1), Event: big})
	a := newAcker()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: true})
	err := run(ctx, p, items, a, nil)
	var rowErr *event.RowError
	if !errors.As(err, &rowErr) || rowErr.EventID != big.ID {
		t.Fatalf("Run = %v, want the *event.RowError of %s", err, big.ID)
	}
	checkStoppedAt(t, srv, js, a, tmpl, items, 100)
}

func TestFastNotWithExclusive(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	_, err := NewPublisher(js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: testTemplate(t, defaultTemplate), Fast: true, Exclusive: true})
	if err == nil || !strings.Contains(err.Error(), "exclusive") || !strings.Contains(err.Error(), "async") {
		t.Fatalf("NewPublisher(Fast and Exclusive) = %v, want an error naming both and the way out", err)
	}
}

func TestFastFlow(t *testing.T) {
	for _, tc := range []struct {
		maxInFlight       int
		flow, outstanding uint16
	}{
		{1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {256, 128, 2}, {4096, 500, 8}, {65536, 500, 131},
	} {
		flow, outstanding := fastFlow(tc.maxInFlight)
		if flow != tc.flow || outstanding != tc.outstanding {
			t.Errorf("fastFlow(%d) = %d, %d; want %d, %d", tc.maxInFlight, flow, outstanding, tc.flow, tc.outstanding)
		}
		if int(flow)*int(outstanding) > tc.maxInFlight {
			t.Errorf("fastFlow(%d) lets %d in flight", tc.maxInFlight, int(flow)*int(outstanding))
		}
	}
}

// TestFastLinger: an open batch waits Config.Linger for the next item
// before it commits, so a lone item is held that long, then stored.
func TestFastLinger(t *testing.T) {
	const linger = 2 * time.Second
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(1, 1, 32)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: true, Linger: linger})
	a := newAcker()
	in := make(chan Item, 1)
	in <- items[0]
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx, in, a) }()
	time.Sleep(linger / 5)
	if n := a.count.Load(); n != 0 {
		t.Fatalf("%d acks %s into a %s linger, want the lone item held", n, linger/5, linger)
	}
	waitFor(t, 5*linger, "the lingering batch to commit", func() bool { return a.count.Load() == 1 })
	close(in)
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	checkStored(t, srv, "OUTBOX", tmpl, items)
}
