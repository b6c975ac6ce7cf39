package relay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/sink"
)

// TestPublishMode resolves --publish-mode against real servers: this
// module's nats-server with a stream outboxd created (fast batches), the
// same server with a stream without allow_batched, and an older
// nats-server (Debian's 2.9, no JetStream API level) whose stream outboxd
// created. auto picks fast only where both take it; fast refuses to start
// elsewhere, naming what is missing; async and --exclusive-stream never
// use it.
func TestPublishMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	current := natstest.Start(t).JetStream(t)
	if _, err := sink.EnsureStream(ctx, current, cfg.Stream, cfg.Subject, true); err != nil {
		t.Fatal(err)
	}
	plain := natstest.Start(t).JetStream(t)
	if _, err := plain.CreateStream(ctx, jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{"outbox.>"}}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natstest.OldServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	old, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.EnsureStream(ctx, old, cfg.Stream, cfg.Subject, true); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		js        jetstream.JetStream
		mode      PublishMode
		exclusive bool
		want      bool
		wantErr   []string
	}{
		{"auto/current", current, PublishAuto, false, true, nil},
		{"fast/current", current, PublishFast, false, true, nil},
		{"async/current", current, PublishAsync, false, false, nil},
		{"auto/current/exclusive", current, PublishAuto, true, false, nil},
		{"auto/no allow_batched", plain, PublishAuto, false, false, nil},
		{"fast/no allow_batched", plain, PublishFast, false, false, []string{"--publish-mode fast", "allow_batched", "--publish-mode async"}},
		{"auto/old server", old, PublishAuto, false, false, nil},
		{"fast/old server", old, PublishFast, false, false, []string{"--publish-mode fast", "API level 0", "nats-server 2.14"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.PublishMode, c.Exclusive = tc.mode, tc.exclusive
			got, err := fastPublishing(ctx, c, tc.js, zerolog.Nop())
			if tc.wantErr != nil {
				if err == nil || !Permanent(err) {
					t.Fatalf("fastPublishing = %v, %v; want a permanent error", got, err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("fastPublishing = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
}
