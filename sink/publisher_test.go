package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

func TestNewPublisherConfig(t *testing.T) {
	tmpl := testTemplate(t, defaultTemplate)
	tests := []struct {
		name         string
		cfg          Config
		wantInFlight int
		wantErr      string
	}{
		{name: "defaults", cfg: Config{Stream: "OUTBOX", Subject: tmpl}, wantInFlight: 4096},
		{name: "one", cfg: Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 1}, wantInFlight: 1},
		{name: "largest", cfg: Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 65536}, wantInFlight: 65536},
		{name: "no template", cfg: Config{Stream: "OUTBOX"}, wantErr: "BUG: sink.Config.Subject is nil"},
		{name: "negative window", cfg: Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: -1}, wantErr: "sink: max-in-flight -1 is out of range: use 1 to 65536"},
		{name: "window too large", cfg: Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 65537}, wantErr: "max-in-flight 65537 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPublisher(nil, 0, tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewPublisher = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.cfg.MaxInFlight != tt.wantInFlight {
				t.Errorf("MaxInFlight = %d, want %d", p.cfg.MaxInFlight, tt.wantInFlight)
			}
			if p.cfg.RetryMin != 100*time.Millisecond || p.cfg.RetryMax != 5*time.Second {
				t.Errorf("retry bounds = %s, %s; want 100ms, 5s", p.cfg.RetryMin, p.cfg.RetryMax)
			}
		})
	}
}

// TestConfigValidate: Validate names the setting as the user knows it and
// the values it takes, and checks the values as they stand (NewPublisher
// fills in the defaults first).
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "smallest window", cfg: Config{MaxInFlight: 1}},
		{name: "default window", cfg: Config{MaxInFlight: 4096}},
		{name: "largest window", cfg: Config{MaxInFlight: MaxInFlightLimit}},
		{name: "fast", cfg: Config{MaxInFlight: 4096, Fast: true}},
		{name: "exclusive", cfg: Config{MaxInFlight: 4096, Exclusive: true}},
		{name: "zero window", cfg: Config{}, wantErr: "max-in-flight 0 is out of range: use 1 to 65536"},
		{name: "negative window", cfg: Config{MaxInFlight: -1}, wantErr: "max-in-flight -1 is out of range: use 1 to 65536"},
		{name: "window one too large", cfg: Config{MaxInFlight: MaxInFlightLimit + 1}, wantErr: "max-in-flight 65537 is out of range: use 1 to 65536"},
		{name: "smallest int", cfg: Config{MaxInFlight: math.MinInt}, wantErr: fmt.Sprintf("max-in-flight %d is out of range: use 1 to 65536", math.MinInt)},
		{name: "largest int", cfg: Config{MaxInFlight: math.MaxInt}, wantErr: fmt.Sprintf("max-in-flight %d is out of range: use 1 to 65536", math.MaxInt)},
		{name: "fast and exclusive", cfg: Config{MaxInFlight: 4096, Fast: true, Exclusive: true},
			wantErr: "fast batch publishing cannot be combined with exclusive mode, whose Nats-Expected-Last-Sequence needs each message's own PubAck: use async publishing"},
		{name: "window checked first", cfg: Config{MaxInFlight: -1, Fast: true, Exclusive: true}, wantErr: "max-in-flight -1 is out of range: use 1 to 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// checkStored checks that the stream holds exactly items, once each, in
// order, as outboxd publishes them.
func checkStored(t *testing.T, srv *natstest.Server, stream string, tmpl *Template, items []Item) {
	t.Helper()
	msgs := readStream(t, srv, stream)
	if len(msgs) != len(items) {
		seen := make(map[string]int)
		for _, m := range msgs {
			seen[m.Header.Get(jetstream.MsgIDHeader)]++
		}
		lost, dup := 0, 0
		for _, it := range items {
			switch seen[it.Event.ID] {
			case 0:
				lost++
			case 1:
			default:
				dup++
			}
		}
		t.Fatalf("stream holds %d messages, want %d (%d events missing, %d stored more than once)", len(msgs), len(items), lost, dup)
	}
	bad := 0
	for i, m := range msgs {
		ev := items[i].Event
		if err := checkMessage(m, ev, tmpl); err != nil {
			if bad++; bad <= 10 {
				t.Errorf("stream message %d (seq %d): %v", i+1, m.Seq, err)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d messages wrong in all", bad)
	}
}

// checkMessage compares a stored message with the event it must carry.
func checkMessage(m storedMsg, ev *event.Event, tmpl *Template) error {
	if got := m.Header.Get(jetstream.MsgIDHeader); got != ev.ID {
		return fmt.Errorf("Nats-Msg-Id = %q, want %q (out of order or missing)", got, ev.ID)
	}
	wantSubject, err := tmpl.Render(ev)
	if err != nil {
		return err
	}
	if m.Subject != wantSubject {
		return fmt.Errorf("subject = %q, want %q", m.Subject, wantSubject)
	}
	if !bytes.Equal(m.Data, ev.Payload) {
		return fmt.Errorf("body = %x, want %x", m.Data, ev.Payload)
	}
	want := map[string]string{
		HeaderAggregateType: ev.AggregateType,
		HeaderAggregateID:   ev.AggregateID,
		HeaderEventType:     ev.EventType,
		HeaderLSN:           ev.Tx.CommitLSN.String(),
		HeaderXid:           strconv.FormatUint(uint64(ev.Tx.Xid), 10),
		HeaderCommitTime:    ev.Tx.CommitTime.UTC().Format(time.RFC3339Nano),
	}
	for _, h := range ev.Headers {
		if _, own := want[h.Key]; !own && h.Key != jetstream.MsgIDHeader && h.Key != jetstream.ExpectedStreamHeader {
			want[h.Key] = h.Value
		}
	}
	for k, v := range want {
		if v == "" {
			if got := m.Header.Values(k); len(got) != 0 {
				return fmt.Errorf("header %s = %q, want none (the field is empty)", k, got)
			}
			continue
		}
		if got := m.Header.Values(k); len(got) != 1 || got[0] != v {
			return fmt.Errorf("header %s = %q, want [%q]", k, got, v)
		}
	}
	ct, err := time.Parse(time.RFC3339Nano, m.Header.Get(HeaderCommitTime))
	if err != nil || !ct.Equal(ev.Tx.CommitTime) {
		return fmt.Errorf("commit time %q does not parse back to %s: %v", m.Header.Get(HeaderCommitTime), ev.Tx.CommitTime, err)
	}
	return nil
}

func checkAcks(t *testing.T, a *recordingAcker, n int) {
	t.Helper()
	seqs, bad := a.acked()
	for _, b := range bad {
		t.Error(b)
	}
	if len(seqs) != n {
		t.Fatalf("%d acks, want %d", len(seqs), n)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("ack %d is seq %d, want %d", i, s, i+1)
		}
	}
}

// TestPublisherWindowFull publishes to a subject no stream captures but a
// silent subscriber listens on, so no publish is ever acknowledged: Run
// must take exactly MaxInFlight items, publish them, and take no more.
func TestPublisherWindowFull(t *testing.T) {
	const maxInFlight = 16
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv) // no async timeout: futures wait forever
	tmpl := testTemplate(t, defaultTemplate)
	items := newEventBuilder(t).items(maxInFlight+5, 4, 16)

	var received atomic.Int64
	silent := srv.Conn(t)
	if _, err := silent.Subscribe("outbox.>", func(*nats.Msg) { received.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight})
	in := make(chan Item)
	a := newAcker()
	errC := make(chan error, 1)
	go func() { errC <- p.Run(ctx, in, a) }()

	for _, it := range items[:maxInFlight] {
		select {
		case in <- it:
		case err := <-errC:
			t.Fatalf("Run returned %v with a window not yet full", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("Run did not take item %d of a window of %d", it.Seq, maxInFlight)
		}
	}
	testsync.Eventually(t, 10*time.Second, testsync.Until("the window's messages to reach the server", func() bool { return received.Load() == maxInFlight }))
	// The one negative check that needs a grace period: with the window
	// full, Run must not take another item.
	select {
	case in <- items[maxInFlight]:
		t.Fatalf("Run took item %d with %d unacknowledged", maxInFlight+1, maxInFlight)
	case err := <-errC:
		t.Fatalf("Run returned %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if got := received.Load(); got != maxInFlight {
		t.Fatalf("%d messages reached the server, want %d", got, maxInFlight)
	}

	start := time.Now()
	cancel()
	select {
	case err := <-errC:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after cancel = %v, want context.Canceled", err)
		}
		t.Logf("Run returned %s after cancel", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}
	if seqs, _ := a.acked(); len(seqs) != 0 {
		t.Fatalf("acks %v for messages no stream stored", seqs)
	}
}

func TestPublisherNothingToPublish(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl})
	a := newAcker()
	if err := run(testCtx(t), p, nil, a, nil); err != nil {
		t.Fatalf("Run with in closed at once = %v, want nil", err)
	}
	checkAcks(t, a, 0)
}

// rowErrorFrom checks that err is a *event.RowError for ev naming
// column, and that its message names the row, xid and LSN.
func rowErrorFrom(t *testing.T, err error, ev *event.Event, column string, reason ...string) *event.RowError {
	t.Helper()
	var rerr *event.RowError
	if !errors.As(err, &rerr) {
		t.Fatalf("Run = %v, want a *event.RowError", err)
	}
	if rerr.EventID != ev.ID || rerr.Xid != ev.Tx.Xid || rerr.LSN != ev.LSN || rerr.Column != column {
		t.Errorf("RowError = %+v, want id %s, xid %d, lsn %s, column %q", rerr, ev.ID, ev.Tx.Xid, ev.LSN, column)
	}
	msg := err.Error()
	for _, want := range append([]string{ev.ID, fmt.Sprintf("xid %d", ev.Tx.Xid), "lsn " + ev.LSN.String()}, reason...) {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	return rerr
}

// checkStoppedAt checks what happens after Run stopped on item bad: every
// item before it was acknowledged, in order, and nothing after, and the
// stream holds exactly the items before it.
func checkStoppedAt(t *testing.T, srv *natstest.Server, js jetstream.JetStream, a *recordingAcker, tmpl *Template, items []Item, bad int) {
	t.Helper()
	seqs, problems := a.acked()
	for _, p := range problems {
		t.Error(p)
	}
	for i, s := range seqs {
		if s != uint64(i+1) || s >= items[bad].Seq {
			t.Fatalf("acks %v: want a prefix of the items before seq %d", seqs, items[bad].Seq)
		}
	}
	if len(seqs) != bad {
		t.Fatalf("%d items acknowledged, want all %d before the bad one", len(seqs), bad)
	}
	testsync.Eventually(t, 10*time.Second, testsync.Until("publishes in flight to settle", func() bool { return js.PublishAsyncPending() == 0 }))
	checkStored(t, srv, "OUTBOX", tmpl, items[:bad])
}

// TestPublisherMaxPayloadBoundary checks the size outboxd computes against
// the client's own encoding: a message of exactly max_payload bytes
// (payload plus headers) is stored, one byte more is a RowError.
func TestPublisherMaxPayloadBoundary(t *testing.T) {
	const limit = 4096
	ctx := testCtx(t)
	srv := natstest.Start(t, natstest.WithMaxPayload(limit))
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 8})

	// wireSize is the size the client sends and the server checks.
	wireSize := func(ev *event.Event) int {
		msg, err := newTestPublisher(t, js, 0, Config{Stream: "OUTBOX", Subject: tmpl}).message(ev)
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: msg.Subject, Header: msg.Header, Data: msg.Data}
		return m.Size() - len(m.Subject)
	}
	row := func(id string, size int) testRow {
		return testRow{ID: id, AggregateType: "order", AggregateID: "7", EventType: "created",
			Payload: testPayload(7, size), Headers: `{"trace-id": "abc"}`}
	}
	b := newEventBuilder(t)
	overhead := wireSize(b.event(row(eventID(0), 0)))
	evs := b.tx(row(eventID(1), limit-overhead), row(eventID(2), limit-overhead+1))
	if got := wireSize(evs[0]); got != limit {
		t.Fatalf("test bug: the fitting message is %d bytes, want %d", got, limit)
	}
	items := []Item{{Seq: 1, Event: evs[0]}, {Seq: 2, Event: evs[1]}}
	a := newAcker()
	err := run(ctx, p, items, a, nil)
	rowErrorFrom(t, err, evs[1], "payload", fmt.Sprintf("message of %d bytes", limit+1), "max_payload of 4096")
	checkStoppedAt(t, srv, js, a, tmpl, items, 1)
}

func TestPublisherBadSubjectValue(t *testing.T) {
	tests := []struct {
		name    string
		tenant  *string
		evType  string
		column  string
		wantErr string
	}{
		{name: "dot", tenant: strp("acme.eu"), evType: "created", column: "tenant", wantErr: "it contains '.'"},
		{name: "wildcard", tenant: strp("acme"), evType: ">", column: "event_type", wantErr: "wildcard '>'"},
		{name: "space", tenant: strp("acme corp"), evType: "created", column: "tenant", wantErr: "whitespace"},
		{name: "empty", tenant: strp(""), evType: "created", column: "tenant", wantErr: "is empty"},
		{name: "NULL", tenant: nil, evType: "created", column: "tenant", wantErr: "NULL or missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, "outbox.{tenant}.{event_type}")
			setupStream(t, js, "OUTBOX", tmpl)
			items := newEventBuilder(t).items(6, 2, 10)
			b := newEventBuilder(t)
			bad := b.event(testRow{ID: eventID(4), AggregateType: "order", AggregateID: "4", EventType: tt.evType,
				Payload: []byte("{}"), Tenant: tt.tenant})
			items[3].Event = bad

			a := newAcker()
			p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 64})
			err := run(ctx, p, items, a, nil)
			rowErrorFrom(t, err, bad, tt.column, "subject placeholder {"+tt.column+"}", tt.wantErr)
			checkStoppedAt(t, srv, js, a, tmpl, items, 3)
		})
	}
}

func TestPublisherContextCancel(t *testing.T) {
	// cancelAfter runs Run until ready says so, cancels, and checks that
	// Run returns the context's error promptly.
	cancelAfter := func(t *testing.T, p *Publisher, in chan Item, ready func() bool) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errC := make(chan error, 1)
		go func() { errC <- p.Run(ctx, in, newAcker()) }()
		testsync.Eventually(t, 20*time.Second, testsync.Until("Run to reach the state under test", ready))
		start := time.Now()
		cancel()
		select {
		case err := <-errC:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			t.Logf("returned %s after cancel", time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return within 5s of cancel")
		}
	}
	tmpl := testTemplate(t, defaultTemplate)

	t.Run("idle", func(t *testing.T) {
		srv := natstest.Start(t)
		nc, js := newJetStream(t, srv)
		setupStream(t, js, "OUTBOX", tmpl)
		p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl})
		cancelAfter(t, p, make(chan Item), func() bool { return true })
	})

	t.Run("server down", func(t *testing.T) {
		const maxInFlight = 32
		srv := natstest.Start(t)
		nc, js := newJetStream(t, srv, jetstream.WithPublishAsyncTimeout(200*time.Millisecond))
		setupStream(t, js, "OUTBOX", tmpl)
		srv.Shutdown()
		// Long backoff: cancel must cut the wait short.
		p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight,
			RetryMin: time.Minute, RetryMax: time.Minute})
		in := make(chan Item, 1000)
		for _, it := range newEventBuilder(t).items(1000, 10, 10) {
			in <- it
		}
		// The window is full once the buffered channel has given Run
		// maxInFlight items; then wait past the first publish timeout so
		// Run is in its retry backoff.
		var fullAt time.Time
		cancelAfter(t, p, in, func() bool {
			if len(in) > 1000-maxInFlight {
				return false
			}
			if fullAt.IsZero() {
				fullAt = time.Now()
			}
			return time.Since(fullAt) > time.Second
		})
	})

	t.Run("deadline", func(t *testing.T) {
		srv := natstest.Start(t)
		nc, js := newJetStream(t, srv)
		setupStream(t, js, "OUTBOX", tmpl)
		p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := p.Run(ctx, make(chan Item), newAcker()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
		}
	})
}

// TestPublisherOwnHeadersWin gives rows headers named like outboxd's own:
// the stored message carries outboxd's values, once each.
func TestPublisherOwnHeadersWin(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	evil := `{"Nats-Msg-Id": "same-for-both", "Nats-Expected-Stream": "ELSEWHERE",
		"Outbox-Aggregate-Type": "evil", "Outbox-Aggregate-Id": "evil", "Outbox-Event-Type": "evil",
		"Outbox-Lsn": "0/0", "Outbox-Xid": "1", "Outbox-Commit-Time": "never",
		"trace-id": "abc", "content-type": "application/json"}`
	b := newEventBuilder(t)
	evs := b.tx(
		testRow{ID: eventID(1), AggregateType: "order", AggregateID: "1", EventType: "created", Payload: []byte(`{"n":1}`), Headers: evil},
		testRow{ID: eventID(2), AggregateType: "order", AggregateID: "1", EventType: "paid", Payload: []byte(`{"n":2}`), Headers: evil},
		// An empty field (unmapped or NULL) has no header: not the row's either.
		testRow{ID: eventID(3), AggregateType: "order", AggregateID: "", EventType: "paid", Payload: []byte(`{"n":3}`), Headers: evil},
	)
	items := []Item{{Seq: 1, Event: evs[0]}, {Seq: 2, Event: evs[1]}, {Seq: 3, Event: evs[2]}}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl})
	a := newAcker()
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, 3)
	// All stored (dedupe is by event id, not the row's Nats-Msg-Id), with
	// outboxd's headers, and the row's own headers beside them.
	checkStored(t, srv, "OUTBOX", tmpl, items)
	for _, m := range readStream(t, srv, "OUTBOX") {
		if got := m.Header.Values("trace-id"); len(got) != 1 || got[0] != "abc" {
			t.Errorf("trace-id = %q, want [abc]", got)
		}
		if got := m.Header.Values(jetstream.ExpectedStreamHeader); len(got) != 1 || got[0] != "OUTBOX" {
			t.Errorf("%s = %q, want [OUTBOX]", jetstream.ExpectedStreamHeader, got)
		}
	}
}

// TestMessage checks the message built for one event without a server.
func TestMessage(t *testing.T) {
	tmpl := testTemplate(t, defaultTemplate)
	p := newTestPublisher(t, nil, 1<<20, Config{Stream: "OUTBOX", Subject: tmpl})
	b := newEventBuilder(t)
	ev := b.event(testRow{ID: eventID(1), AggregateType: "order", AggregateID: "42", EventType: "created",
		Payload: []byte{0, 1, 2, 0xff}, Headers: `{"b": "2", "a": "1", "Outbox-Xid": "0"}`})
	msg, err := p.message(ev)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "outbox.order.created" {
		t.Errorf("subject = %q", msg.Subject)
	}
	if !bytes.Equal(msg.Data, []byte{0, 1, 2, 0xff}) {
		t.Errorf("data = %x", msg.Data)
	}
	want := nats.Header{
		"a":                            {"1"},
		"b":                            {"2"},
		jetstream.MsgIDHeader:          {eventID(1)},
		jetstream.ExpectedStreamHeader: {"OUTBOX"},
		HeaderAggregateType:            {"order"},
		HeaderAggregateID:              {"42"},
		HeaderEventType:                {"created"},
		HeaderLSN:                      {ev.Tx.CommitLSN.String()},
		HeaderXid:                      {strconv.FormatUint(uint64(ev.Tx.Xid), 10)},
		HeaderCommitTime:               {"2026-12-02T15:39:55.124456Z"},
	}
	if len(msg.Header) != len(want) {
		t.Errorf("headers = %v, want %v", msg.Header, want)
	}
	for k, v := range want {
		if got := msg.Header.Values(k); len(got) != 1 || got[0] != v[0] {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}

	// NULL headers: only outboxd's.
	ev = b.event(testRow{ID: eventID(2), AggregateType: "order", AggregateID: "42", EventType: "created", Payload: []byte("x")})
	if msg, err = p.message(ev); err != nil {
		t.Fatal(err)
	}
	if len(msg.Header) != 8 {
		t.Errorf("headers of a row without headers = %v, want outboxd's 8", msg.Header)
	}
	// headerSize agrees with the client's encoding.
	m := &nats.Msg{Subject: msg.Subject, Header: msg.Header, Data: msg.Data}
	if got, want := headerSize(msg.Header), int64(m.Size()-len(m.Subject)-len(m.Data)); got != want {
		t.Errorf("headerSize = %d, client encodes %d", got, want)
	}
}

// TestMessageTransactionHeaders: the transaction's headers are formatted
// once per transaction, and an event of the next transaction (even one
// that shares a field with the last) carries its own.
func TestMessageTransactionHeaders(t *testing.T) {
	p := newTestPublisher(t, nil, 1<<20, Config{Stream: "OUTBOX", Subject: testTemplate(t, defaultTemplate)})
	b := newEventBuilder(t)
	base := b.event(testRow{ID: eventID(1), AggregateType: "order", AggregateID: "42", EventType: "created", Payload: []byte("x")})
	sameXid := base.Tx
	sameXid.CommitLSN += 0x100
	sameLSN := base.Tx
	sameLSN.Xid++
	later := base.Tx
	later.CommitTime = later.CommitTime.Add(time.Microsecond)
	for i, tx := range []event.TxInfo{base.Tx, base.Tx, sameXid, sameLSN, later, base.Tx} {
		ev := *base
		ev.Tx = tx
		msg, err := p.message(&ev)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{HeaderLSN: tx.CommitLSN.String(), HeaderXid: strconv.FormatUint(uint64(tx.Xid), 10),
			HeaderCommitTime: tx.CommitTime.UTC().Format(time.RFC3339Nano)}
		for k, v := range want {
			if got := msg.Header.Get(k); got != v {
				t.Errorf("event %d: header %s = %q, want %q", i, k, got, v)
			}
		}
	}
}

// TestPublisherBadHeaderKey gives a row a header key the NATS client
// refuses to encode. Retrying cannot help, so it must stop Run with a
// *event.RowError naming the headers column, not retry forever.
func TestPublisherBadHeaderKey(t *testing.T) {
	for _, key := range []string{"trace id", "a:b", "content/type", "", "caf\u00e9", "tab\there"} {
		t.Run(strconv.Quote(key), func(t *testing.T) {
			checkBadHeadersStop(t, map[string]string{"ok": "1", key: "v"}, "headers", strconv.Quote(key))
		})
	}
}

// checkBadHeadersStop runs four events through a publisher, the third with
// the given row headers, and checks Run stops on it with a RowError for
// column that contains want, having stored and acked only the two before.
func checkBadHeadersStop(t *testing.T, headers map[string]string, column, want string, opts ...natstest.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := natstest.Start(t, opts...)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := newEventBuilder(t).items(4, 2, 10)
	raw, err := json.Marshal(headers)
	if err != nil {
		t.Fatal(err)
	}
	bad := newEventBuilder(t).event(testRow{ID: eventID(3), AggregateType: "order", AggregateID: "3",
		EventType: "created", Payload: []byte("{}"), Headers: string(raw)})
	items[2].Event = bad
	a := newAcker()
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: 8})
	err = run(ctx, p, items, a, nil)
	rowErrorFrom(t, err, bad, column, want)
	checkStoppedAt(t, srv, js, a, tmpl, items, 2)
}

// TestValidHeaderKey holds validHeaderKey to the client's own rule: every
// one-byte key (and a few longer ones) is accepted by one exactly when the
// other accepts it.
func TestValidHeaderKey(t *testing.T) {
	nc := natstest.Start(t).Conn(t)
	keys := []string{"", "Trace-Id", "x_y.z", "a b", "caf\u00e9", "k\x7f"}
	for c := range 256 {
		keys = append(keys, string([]byte{byte(c)}))
	}
	for _, k := range keys {
		err := nc.PublishMsg(&nats.Msg{Subject: "check", Header: nats.Header{k: {"v"}}})
		if err != nil && !errors.Is(err, nats.ErrBadHeaderMsg) {
			t.Fatal(err)
		}
		ours := event.CheckHeader(k, "v") == nil
		if clientOK := err == nil; ours != clientOK {
			t.Errorf("event.CheckHeader(%q) accepts it: %v, the client accepts it: %v", k, ours, clientOK)
		}
	}
}

// TestPublisherHostileHeaderValues: a row header value with a CR, LF or
// other control character could smuggle in a header of its own; such a row
// is refused with a RowError naming the header, and a huge value counts
// against max_payload like the body does.
func TestPublisherHostileHeaderValues(t *testing.T) {
	for _, value := range []string{"a\r\nNats-Msg-Id: forged", "line\nbreak", "nul\x00", "bell\x07", "del\x7f"} {
		t.Run(strconv.Quote(value), func(t *testing.T) {
			checkBadHeadersStop(t, map[string]string{"trace": value}, "headers", "control character")
		})
	}
	t.Run("huge value", func(t *testing.T) {
		checkBadHeadersStop(t, map[string]string{"trace": strings.Repeat("x", 8000)}, "payload", "max_payload", natstest.WithMaxPayload(4096))
	})
}
