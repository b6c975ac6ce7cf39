package sink

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// The behaviour every publish mode must share (order, the bounded window,
// recovery from an outage, duplicates, dead letters, a row that cannot be
// published) is tested here over all three modes.

// publishMode is one way Run publishes.
type publishMode struct {
	name            string
	fast, exclusive bool
}

var publishModes = []publishMode{
	{name: "async"},
	{name: "fast", fast: true},
	{name: "exclusive", exclusive: true},
}

// config returns cfg in mode m.
func (m publishMode) config(cfg Config) Config {
	cfg.Fast, cfg.Exclusive = m.fast, m.exclusive
	return cfg
}

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

// TestPublisherOrder publishes many small transactions: acks come in
// order, and the stream holds every event once, in order, with its
// headers; in exclusive mode all but the first were pipelined with a
// correct expected last sequence.
func TestPublisherOrder(t *testing.T) {
	const n, maxInFlight = 20000, 256
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := newEventBuilder(t).items(n, 50, 64)

			var sent atomic.Uint64
			a := newAcker()
			// Just before seq is acked, Run holds every item it has taken from
			// seq on. It has taken at least sent of them, so sent-(seq-1) is a
			// lower bound of the window. Fast mode learns acknowledgements in
			// cumulative steps, and this bound counts the messages a step
			// acknowledges as still in flight: TestPublisherWindowBounded
			// checks fast mode's window from the server's side.
			a.check = func(seq uint64) error {
				if s := sent.Load(); !mode.fast && s >= seq && s-(seq-1) > maxInFlight {
					return fmt.Errorf("at ack %d at least %d messages were in flight, more than %d", seq, s-(seq-1), maxInFlight)
				}
				return nil
			}
			p := newTestPublisher(t, js, nc.MaxPayload(), mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight}))
			if err := run(ctx, p, items, a, &sent); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			checkAcks(t, a, n)
			checkStored(t, srv, "OUTBOX", tmpl, items)
			if mode.exclusive {
				checkExpectations(t, srv, "OUTBOX", n-1)
			}
		})
	}
}

// TestPublisherWindowBounded watches the server side: a plain subscriber
// sees every message as it reaches the server, and when message seq first
// arrives, Run must have acked at least seq-MaxInFlight before it. Fast
// mode learns acknowledgements in cumulative steps, so only the
// server-side check applies to it: the client-side one counts the messages
// a step acknowledges as still in flight.
func TestPublisherWindowBounded(t *testing.T) {
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
			const n, maxInFlight = 3000, 8
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := newEventBuilder(t).items(n, 7, 32)
			seqOf := make(map[string]uint64, n)
			for _, it := range items {
				seqOf[it.Event.ID] = it.Seq
			}

			a := newAcker()
			var sent atomic.Uint64
			a.check = func(seq uint64) error {
				if s := sent.Load(); !mode.fast && s >= seq && s-(seq-1) > maxInFlight {
					return fmt.Errorf("at ack %d at least %d messages were in flight", seq, s-(seq-1))
				}
				return nil
			}
			var (
				mu         sync.Mutex
				violations []string
				seen       = make(map[uint64]bool, n)
				widest     uint64
			)
			watcher := srv.Conn(t)
			sub, err := watcher.Subscribe("outbox.>", func(m *nats.Msg) {
				seq := seqOf[m.Header.Get(jetstream.MsgIDHeader)]
				acked := a.count.Load()
				mu.Lock()
				defer mu.Unlock()
				if seen[seq] {
					return
				}
				seen[seq] = true
				if seq > acked {
					widest = max(widest, seq-acked)
				}
				if seq > acked+maxInFlight {
					violations = append(violations, fmt.Sprintf("message %d reached the server with only %d acked", seq, acked))
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := watcher.Flush(); err != nil {
				t.Fatal(err)
			}

			p := newTestPublisher(t, js, nc.MaxPayload(), mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight}))
			if err := run(ctx, p, items, a, &sent); err != nil {
				t.Fatalf("Run = %v", err)
			}
			checkAcks(t, a, n)
			testsync.Eventually(t, 10*time.Second, testsync.Until("the watcher to see every message", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == n
			}))
			if err := sub.Unsubscribe(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, v := range violations {
				if i == 10 {
					t.Errorf("... %d violations in all", len(violations))
					break
				}
				t.Error(v)
			}
			t.Logf("widest window seen from the server: %d", widest)
		})
	}
}

// TestPublisherOutage shuts the server down while Run publishes, keeps it
// down for a few seconds, and starts it again on the same port and store:
// the unacknowledged messages are republished in order once it is back.
//
// The connection has no reconnect buffer (nats.ReconnectBufSize(-1)). With
// the client's default 8 MiB buffer, publishes made after the client saw
// the connection drop wait in the buffer and are flushed as soon as it
// reconnects, ahead of the earlier messages that died with the old
// connection and that Run republishes only after that: the stream then
// holds every event once, but not in commit order (about every second run
// of this test fails that way with the default buffer).
func TestPublisherOutage(t *testing.T) {
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
			const n, maxInFlight, outageAt = 10000, 256, 3000
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc := srv.Conn(t, nats.ReconnectBufSize(-1))
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := newEventBuilder(t).items(n, 20, 100)

			a := newAcker()
			a.at = outageAt
			p := newTestPublisher(t, js, nc.MaxPayload(), mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight,
				AckTimeout: time.Second, RetryMin: 20 * time.Millisecond, RetryMax: 500 * time.Millisecond}))

			// The feeder holds back the rest of the events until the server is
			// down, so the outage surely falls in the middle of the run.
			down := make(chan struct{})
			in := make(chan Item)
			feedDone := make(chan struct{})
			runDone := make(chan struct{})
			go func() {
				defer close(feedDone)
				defer close(in)
				for i, it := range items {
					if i == outageAt+2*maxInFlight {
						select {
						case <-down:
						case <-runDone:
							return
						}
					}
					select {
					case in <- it:
					case <-runDone:
						return
					}
				}
			}()
			errC := make(chan error, 1)
			go func() {
				errC <- p.Run(ctx, in, a)
				close(runDone)
			}()

			select {
			case <-a.reached:
			case err := <-errC:
				t.Fatalf("Run returned %v before the outage", err)
			case <-ctx.Done():
				t.Fatal("no outage: acks never reached", outageAt)
			}
			srv.Shutdown()
			close(down)
			atShutdown := a.count.Load()
			time.Sleep(3 * time.Second) // the outage, not an assertion
			duringOutage := a.count.Load()
			srv.Restart(t)
			t.Logf("acks: %d when the server stopped, %d when it started again", atShutdown, duringOutage)
			if duringOutage >= n {
				t.Fatalf("every event was acked while the server was down")
			}

			select {
			case err := <-errC:
				if err != nil {
					t.Fatalf("Run = %v, want nil after the server came back", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("Run did not finish within 2m of the restart; %d of %d acked", a.count.Load(), n)
			}
			<-feedDone
			checkAcks(t, a, n)
			// Every acked event is in the stream, once, in order.
			checkStored(t, srv, "OUTBOX", tmpl, items)
		})
	}
}

// TestPublisherDuplicates publishes events twice within one Run, and an
// event id reused by a different row: JetStream keeps the first of each.
func TestPublisherDuplicates(t *testing.T) {
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			b := newEventBuilder(t)
			row := func(id, payload string) testRow {
				return testRow{ID: id, AggregateType: "order", AggregateID: "1", EventType: "created", Payload: []byte(payload)}
			}
			first := b.event(row(eventID(1), "first"))
			// The same event id in a later transaction: a replay after a restart.
			replayed := b.event(row(eventID(1), "first"))
			// A different row reusing the id: JetStream keeps the first one.
			second := b.event(row(eventID(2), "second"))
			clash := b.event(row(eventID(2), "clash"))
			items := []Item{{Seq: 1, Event: first}, {Seq: 2, Event: first}, {Seq: 3, Event: replayed}, {Seq: 4, Event: second}, {Seq: 5, Event: clash}}

			p := newTestPublisher(t, js, nc.MaxPayload(), mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 2}))
			a := newAcker()
			if err := run(ctx, p, items, a, nil); err != nil {
				t.Fatal(err)
			}
			checkAcks(t, a, len(items))
			checkStored(t, srv, "OUTBOX", tmpl, []Item{{Seq: 1, Event: first}, {Seq: 4, Event: second}})

			// A second Run over the same events, as after a restart that replays
			// them: everything is acked again and nothing is stored again.
			a = newAcker()
			if err := run(ctx, p, items, a, nil); err != nil {
				t.Fatal(err)
			}
			checkAcks(t, a, len(items))
			checkStored(t, srv, "OUTBOX", tmpl, []Item{{Seq: 1, Event: first}, {Seq: 4, Event: second}})
		})
	}
}

// TestPublisherReplay runs a second publisher as after a restart from an
// older checkpoint: the events it replays are already stored and
// Nats-Msg-Id absorbs them (in fast mode repeats inside a batch and a
// batch that starts with one; in exclusive mode sent one at a time), then
// new ones follow (in exclusive mode pipelined again). Every item is
// acknowledged and reported to the observer, and the stream holds each
// event once.
func TestPublisherReplay(t *testing.T) {
	const n, firstRun, resumeAt = 6000, 4000, 2500
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := newEventBuilder(t).items(n, 20, 64)
			obs := &countingObserver{}
			cfg := mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 128, Observer: obs})

			if err := run(ctx, newTestPublisher(t, js, nc.MaxPayload(), cfg), items[:firstRun], newAcker(), nil); err != nil {
				t.Fatalf("first Run = %v, want nil", err)
			}
			replay := make([]Item, 0, n-resumeAt)
			for i, it := range items[resumeAt:] {
				replay = append(replay, Item{Seq: uint64(i + 1), Event: it.Event})
			}
			start := time.Now()
			a := newAcker()
			if err := run(ctx, newTestPublisher(t, js, nc.MaxPayload(), cfg), replay, a, nil); err != nil {
				t.Fatalf("second Run = %v, want nil", err)
			}
			t.Logf("replay of %d events, %d of them duplicates: %s", len(replay), firstRun-resumeAt, time.Since(start))
			checkAcks(t, a, len(replay))
			checkStored(t, srv, "OUTBOX", tmpl, items)
			if published, _, _, _, failures := obs.counts(); published != firstRun+len(replay) || failures != 0 {
				t.Errorf("observer: %d published, %d failures; want %d and 0", published, failures, firstRun+len(replay))
			}
			if mode.exclusive {
				checkExpectations(t, srv, "OUTBOX", n-10)
			}
		})
	}
}

// TestPublisherDeadLetter mixes rows that go to a dead-letter subject in
// another stream into the events: each goes alone (in fast mode between
// batches, in exclusive mode as a sync point, without an expected last
// sequence), and the events still land once, in order (in exclusive mode
// with correct expectations).
func TestPublisherDeadLetter(t *testing.T) {
	const n = 3000
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
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
			p := newTestPublisher(t, js, nc.MaxPayload(), mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 128,
				DeadLetter: "dead.letter"}))
			if err := run(ctx, p, items, a, nil); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			checkAcks(t, a, n)
			checkStored(t, srv, "OUTBOX", tmpl, good)
			if mode.exclusive {
				checkExpectations(t, srv, "OUTBOX", len(good)/2)
			}
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
		})
	}
}

// TestPublisherMaxPayload: a row too large for the server's max_payload
// stops Run with its *event.RowError, never acknowledging it, once the
// rows before it (in fast mode held in the open batch) are stored.
func TestPublisherMaxPayload(t *testing.T) {
	for _, mode := range publishModes {
		t.Run(mode.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t, natstest.WithMaxPayload(4096))
			nc, js := newJetStream(t, srv)
			if nc.MaxPayload() != 4096 {
				t.Fatalf("server max_payload = %d, want 4096", nc.MaxPayload())
			}
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := newEventBuilder(t).items(10, 3, 100)
			b := newEventBuilder(t)
			b.xid, b.lsn = 5000, 0x2000000
			big := b.event(testRow{ID: eventID(6), AggregateType: "order", AggregateID: "6", EventType: "created",
				Payload: testPayload(6, 8<<10)})
			items[5].Event = big

			a := newAcker()
			p := newTestPublisher(t, js, nc.MaxPayload(), mode.config(Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 64}))
			err := run(ctx, p, items, a, nil)
			rerr := rowErrorFrom(t, err, big, "payload", "max_payload", "4096", "8192")
			if rerr.Xid != 5001 {
				t.Errorf("RowError.Xid = %d, want the big row's xid 5001", rerr.Xid)
			}
			checkStoppedAt(t, srv, js, a, tmpl, items, 5)
		})
	}
}
