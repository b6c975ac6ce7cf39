package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/sink"
)

// TestVerify: outboxd verify passes on a clean run, and finds a message
// deleted from the stream (lost, exit 1) and a row's message stored a
// second time after the duplicate window (duplicated, exit 1), naming the
// row each time; outboxd replay --ids publishes the lost row again
// (--dry-run only lists it), after which verify finds it.
func TestVerify(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	ctx := context.Background()
	check := checker.New()
	w := e.newWriter(check, 4)
	since := time.Now().Add(-time.Minute).UTC()
	p := e.start(e.args()...)
	e.waitStreaming(p)
	for range 10 {
		if _, err := w.tx(ctx, 3, true); err != nil {
			t.Fatal(err)
		}
	}
	msgs := e.readStream(e.js(), check.Count(), time.Minute)
	p.stopCleanly()
	until := time.Now().Add(time.Second).UTC()
	verify := func(wantCode int, want ...string) string {
		t.Helper()
		v := e.start("verify", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot, "--stream", streamName,
			"--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano))
		code := v.wait(time.Minute)
		out := v.output.String()
		if code != wantCode {
			t.Errorf("verify exited %d, want %d:\n%s", code, wantCode, tail(out, 10))
		}
		for _, s := range want {
			if !contains(out, s) {
				t.Errorf("verify output lacks %q:\n%s", s, tail(out, 10))
			}
		}
		return out
	}
	verify(0, "): 30; messages in the stream since then: 30", "lost (no message): 0\n", "duplicated (stored more than once): 0\n",
		"out of created_at order within their aggregate: 0\n")

	// --since LSN: from a minute before the first transaction's commit,
	// the same rows.
	first := msgs[0].Header.Get(sink.HeaderLSN)
	committed, err := time.Parse(time.RFC3339Nano, msgs[0].Header.Get(sink.HeaderCommitTime))
	if err != nil {
		t.Fatal(err)
	}
	wantSince := "rows created from " + committed.Add(-time.Minute).UTC().Format(time.RFC3339) + " until "
	byLSN := e.start("verify", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot, "--stream", streamName,
		"--since", first, "--until", until.Format(time.RFC3339Nano))
	if code, out := byLSN.wait(time.Minute), byLSN.output.String(); code != 0 || !contains(out, wantSince) ||
		!contains(out, "): 30; messages in the stream since then: 30") {
		t.Errorf("verify --since %s exited %d, want 0, %q and the 30 rows:\n%s", first, code, wantSince, tail(out, 10))
	}

	js := e.js()
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	lost := msgs[4]
	if err := stream.DeleteMsg(ctx, lost.Seq); err != nil {
		t.Fatal(err)
	}
	verify(1, "lost (no message): 1 (e.g. "+lost.Header.Get(jetstream.MsgIDHeader)+")")

	e.shortenDuplicateWindow()
	again := msgs[7]
	m := nats.NewMsg(again.Subject)
	m.Header.Set(jetstream.MsgIDHeader, again.Header.Get(jetstream.MsgIDHeader))
	m.Data = []byte(`{"again": true}`)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	verify(1, "lost (no message): 1", "duplicated (stored more than once): 1 (e.g. "+again.Header.Get(jetstream.MsgIDHeader)+")")

	// outboxd replay puts the lost row back: --dry-run lists it and
	// publishes nothing; then it is published, with its own id and subject.
	lostID := lost.Header.Get(jetstream.MsgIDHeader)
	replay := func(extra ...string) string {
		t.Helper()
		r := e.start(append([]string{"replay", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot, "--stream", streamName,
			"--ids", lostID}, extra...)...)
		if code := r.wait(time.Minute); code != 0 {
			t.Fatalf("replay %v exited %d:\n%s", extra, code, tail(r.output.String(), 10))
		}
		return r.output.String()
	}
	if out := replay("--dry-run"); !contains(out, lostID+"\n") || !contains(out, "would publish these 1 rows") {
		t.Errorf("replay --dry-run does not list the lost row %s:\n%s", lostID, tail(out, 10))
	}
	verify(1, "lost (no message): 1")
	if out := replay(); !contains(out, "replayed 1 rows") {
		t.Errorf("replay did not publish the lost row:\n%s", tail(out, 10))
	}
	verify(1, "lost (no message): 0\n", "duplicated (stored more than once): 1")
	after := e.readStream(js, len(msgs)+1, time.Minute)
	last := after[len(after)-1]
	if last.Header.Get(jetstream.MsgIDHeader) != lostID || last.Subject != lost.Subject {
		t.Errorf("replayed message %s on %s, want %s on %s", last.Header.Get(jetstream.MsgIDHeader), last.Subject, lostID, lost.Subject)
	}
}
