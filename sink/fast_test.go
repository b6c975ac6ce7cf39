package sink

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
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
	var fbErr *BatchError
	if !errors.As(err, &fbErr) {
		t.Fatalf("CheckFastBatch on a stream without allow_batched = %v, want a *BatchError", err)
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
	var fbErr *BatchError
	if !errors.As(err, &fbErr) {
		t.Fatalf("CheckFastBatch on nats-server %s = %v, want a *BatchError", nc.ConnectedServerVersion(), err)
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
	checkNoStray(t, sub, len(all))
}

// TestFastStreamRefuses: a stream without allow_batched refuses the first
// batch; the publisher says so, goes on asynchronously, and loses nothing.
func TestFastStreamRefuses(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	createPlainStream(ctx, t, js, tmpl)
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
	items := newEventBuilder(t).items(3, 1, 32)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: true, Linger: linger})
	a := newAcker()
	start := func(in chan Item) chan error {
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx, in, a) }()
		return errc
	}

	// A lone item goes out at once, alone: nothing follows it to batch.
	lone := make(chan Item, 1)
	lone <- items[0]
	errc := start(lone)
	testsync.Eventually(t, linger/2, testsync.Until("the lone item, published without lingering", func() bool { return a.count.Load() == 1 }))
	close(lone)
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}

	// Two waiting together start a batch, and the last waits the linger
	// for more before it commits.
	two := make(chan Item, 2)
	two <- items[1]
	two <- items[2]
	errc = start(two)
	time.Sleep(linger / 5)
	if n := a.count.Load(); n > 2 {
		t.Fatalf("%d acks %s into a %s linger, want the batch's last item held", n, linger/5, linger)
	}
	testsync.Eventually(t, 5*linger, testsync.Until("the lingering batch to commit", func() bool { return a.count.Load() == 3 }))
	close(two)
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	checkStored(t, srv, "OUTBOX", tmpl, items)
}

// TestFastTrickleSpell: a trickle's item starts a spell of async
// publishing, in which items that come together are not held for the
// linger; a backlog of backlogItems or more ends the spell, and batches,
// whose last item waits the linger, take over. Everything is stored once,
// in order, with no stray message.
func TestFastTrickleSpell(t *testing.T) {
	const linger = 2 * time.Second
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	watcher := srv.Conn(t)
	sub, err := watcher.SubscribeSync("outbox.>")
	if err == nil {
		err = watcher.Flush() // the server has the subscription before the first publish
	}
	if err != nil {
		t.Fatal(err)
	}
	backlog := 4 * backlogItems
	items := newEventBuilder(t).items(3+backlog, 5, 32)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: true, Linger: linger})
	a := newAcker()
	in := make(chan Item, len(items))
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx, in, a) }()

	in <- items[0] // a trickle: the spell starts
	testsync.Eventually(t, linger/2, testsync.Until("the trickle's item", func() bool { return a.count.Load() == 1 }))
	in <- items[1] // two together, within the spell: neither waits
	in <- items[2]
	testsync.Eventually(t, linger/2, testsync.Until("two items of the spell, not held for the linger", func() bool { return a.count.Load() == 3 }))

	for _, it := range items[3:] { // a backlog: batches again
		in <- it
	}
	time.Sleep(linger / 5)
	if n := a.count.Load(); n >= uint64(len(items)) {
		t.Fatalf("%d acks %s after a backlog of %d, want the last batch's commit held for the %s linger", n, linger/5, backlog, linger)
	}
	testsync.Eventually(t, 5*linger, testsync.Until("the backlog's last batch to commit", func() bool { return a.count.Load() == uint64(len(items)) }))
	close(in)
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v", err)
	}
	checkAcks(t, a, len(items))
	checkStored(t, srv, "OUTBOX", tmpl, items)
	checkNoStray(t, sub, len(items))
}

// TestFastGapNeverConfirmed: one message of a fast batch is lost on the
// wire (ADR-50: fast batches lose messages unless the publisher uses gap
// mode fail and trusts only the acknowledged sequence). The server ends
// the batch at the gap; no message is acknowledged to the checkpoint
// before the stream holds it at its place, and the lost one and those
// after it are published again: the stream ends up with every message
// once, in order. With gap mode ok, or an acknowledgement trusted past
// the gap, the check in Ack fails at the lost message.
func TestFastGapNeverConfirmed(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	dialer := &gapDialer{n: 7}
	nc := srv.Conn(t, nats.SetCustomDialer(dialer))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	stream, err := srv.JetStream(t).Stream(ctx, "OUTBOX")
	if err != nil {
		t.Fatal(err)
	}
	items := newEventBuilder(t).items(60, 20, 32)
	a := newAcker()
	// Item k is stream message k once stored: nothing else is published.
	a.check = func(seq uint64) error {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("item %d acknowledged, but the stream has no message %d: %v", seq, seq, err)
		}
		if got, want := m.Header.Get(jetstream.MsgIDHeader), items[seq-1].Event.ID; got != want {
			return fmt.Errorf("item %d (%s) acknowledged, but stream message %d is %s: a gap was confirmed", seq, want, seq, got)
		}
		return nil
	}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: true, Linger: 50 * time.Millisecond})
	in := make(chan Item, len(items))
	for _, it := range items {
		in <- it
	}
	close(in)
	if err := p.Run(ctx, in, a); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !dialer.dropped.Load() {
		t.Fatalf("no fast batch message was dropped (%d seen): the test tested nothing", dialer.seen.Load())
	}
	checkAcks(t, a, len(items))
	checkStored(t, srv, "OUTBOX", tmpl, items)
}

// checkNoStray fails unless sub, subscribed to the stream's subjects
// before the first publish, saw exactly n messages: no batch control
// message or empty commit reached the subjects.
func checkNoStray(t *testing.T, sub *nats.Subscription, n int) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // let any stray message arrive
	if got, _, err := sub.Pending(); err != nil || got != n {
		t.Fatalf("the subscriber saw %d messages (%v), want exactly the %d events", got, err, n)
	}
}
