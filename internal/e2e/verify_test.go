package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestVerify: outboxd verify passes on a clean run, and finds a message
// deleted from the stream (lost, exit 1) and a row's message stored a
// second time after the duplicate window (duplicated, exit 1), naming the
// row each time.
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
}
