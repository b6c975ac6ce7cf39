package sink

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// countingObserver records what the publisher reports.
type countingObserver struct {
	mu                                  sync.Mutex
	published, duplicates, dead, noTime int
	failures                            map[string]int
}

func (o *countingObserver) Published(committed time.Time, duplicate bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.published++
	if duplicate {
		o.duplicates++
	}
	if committed.IsZero() {
		o.noTime++
	}
}

func (o *countingObserver) DeadLettered() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dead++
}

func (o *countingObserver) PublishFailed(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failures == nil {
		o.failures = map[string]int{}
	}
	o.failures[reason]++
}

func (o *countingObserver) counts() (published, duplicates, dead, noTime, failures int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range o.failures {
		failures += n
	}
	return o.published, o.duplicates, o.dead, o.noTime, failures
}

// TestObserverCountsOutcomes publishes events and a dead-letter row, then
// the same again as a replay: the observer sees each acknowledgement once,
// with its commit time, and the replay as duplicates.
func TestObserverCountsOutcomes(t *testing.T) {
	const n, deadAt = 200, 17
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD", Subjects: []string{"dead.letter"}}); err != nil {
		t.Fatal(err)
	}
	items := newEventBuilder(t).items(n, 10, 32)
	ev := items[deadAt].Event
	items[deadAt].Dead = &event.RowError{EventID: ev.ID, Xid: ev.Tx.Xid, LSN: ev.LSN, Column: "payload", Reason: "test"}
	items[deadAt].Event = nil

	obs := &countingObserver{}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 32,
		DeadLetter: "dead.letter", Observer: obs})
	for round, wantDup := range []int{0, n - 1} {
		if err := run(ctx, p, items, newAcker(), nil); err != nil {
			t.Fatal(err)
		}
		published, duplicates, dead, noTime, failures := obs.counts()
		want := [5]int{(round + 1) * (n - 1), wantDup, round + 1, 0, 0}
		if got := [5]int{published, duplicates, dead, noTime, failures}; got != want {
			t.Fatalf("round %d: published, duplicates, dead-lettered, without commit time, failures = %v, want %v", round, got, want)
		}
	}
}

// TestObserverReportsFailures publishes while the server is down: the
// observer hears of failed publishes with a known reason, and of every
// event once the server is back.
func TestObserverReportsFailures(t *testing.T) {
	const n = 50
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc := srv.Conn(t, nats.ReconnectBufSize(-1))
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(n, 5, 32)
	obs := &countingObserver{}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Observer: obs})

	srv.Shutdown()
	errC := make(chan error, 1)
	go func() { errC <- run(ctx, p, items, newAcker(), nil) }()
	testsync.Eventually(t, 30*time.Second, testsync.Until("a failed publish", func() bool { _, _, _, _, failures := obs.counts(); return failures > 0 }))
	srv.Restart(t)
	if err := <-errC; err != nil {
		t.Fatal(err)
	}
	published, _, _, _, _ := obs.counts()
	if published != n {
		t.Errorf("published %d, want %d", published, n)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for reason := range obs.failures {
		if !slices.Contains(Reasons, reason) || reason == ReasonOther {
			t.Errorf("failure reason %q: want one of %v other than %q", reason, Reasons, ReasonOther)
		}
	}
}

func TestFailureReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{jetstream.ErrAsyncPublishTimeout, ReasonTimeout},
		{fmt.Errorf("publish: %w", nats.ErrTimeout), ReasonTimeout},
		{nats.ErrNoResponders, ReasonNoResponders},
		{nats.ErrConnectionReconnecting, ReasonDisconnected},
		{nats.ErrConnectionClosed, ReasonDisconnected},
		{nats.ErrReconnectBufExceeded, ReasonDisconnected},
		{&jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, ReasonWrongLastSequence},
		{fmt.Errorf("ack: %w", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamNotFound}), ReasonRejected},
		{errors.New("something else"), ReasonOther},
	}
	for _, tt := range tests {
		if got := failureReason(tt.err); got != tt.want {
			t.Errorf("failureReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
