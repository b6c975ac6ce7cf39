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

// TestPublishMode resolves --publish-mode and --atomic-transactions
// against real servers: this module's nats-server with a stream outboxd
// created (fast and atomic batches), the same server with a stream without
// allow_batched and allow_atomic, and an older nats-server (Debian's 2.9,
// no JetStream API level) whose stream outboxd created. auto picks fast or
// atomic batches only where both take them; fast and on refuse to start
// elsewhere, naming what is missing; async, off and --exclusive-stream
// never use them.
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
		atomic    AtomicMode
		exclusive bool
		want      publishing
		wantErr   []string
	}{
		{"auto/current", current, PublishAuto, AtomicAuto, false, publishing{fast: true, atomic: true}, nil},
		{"fast/current", current, PublishFast, AtomicOn, false, publishing{fast: true, atomic: true}, nil},
		{"async/current", current, PublishAsync, AtomicAuto, false, publishing{atomic: true}, nil},
		{"auto/current/atomic off", current, PublishAuto, AtomicOff, false, publishing{fast: true}, nil},
		{"auto/current/exclusive", current, PublishAuto, AtomicAuto, true, publishing{}, nil},
		{"auto/no allow_batched", plain, PublishAuto, AtomicAuto, false, publishing{}, nil},
		{"fast/no allow_batched", plain, PublishFast, AtomicAuto, false, publishing{}, []string{"--publish-mode fast", "allow_batched", "--publish-mode async"}},
		{"atomic on/no allow_atomic", plain, PublishAuto, AtomicOn, false, publishing{}, []string{"--atomic-transactions on", "allow_atomic", "--atomic-transactions off"}},
		{"auto/old server", old, PublishAuto, AtomicAuto, false, publishing{}, nil},
		{"fast/old server", old, PublishFast, AtomicAuto, false, publishing{}, []string{"--publish-mode fast", "API level 0", "nats-server 2.14"}},
		{"atomic on/old server", old, PublishAuto, AtomicOn, false, publishing{}, []string{"--atomic-transactions on", "API level 0", "nats-server 2.12"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.PublishMode, c.AtomicTransactions, c.Exclusive = tc.mode, tc.atomic, tc.exclusive
			got, err := resolvePublishing(ctx, c, tc.js, zerolog.Nop())
			if tc.wantErr != nil {
				if err == nil || !Permanent(err) {
					t.Fatalf("resolvePublishing = %+v, %v; want a permanent error", got, err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolvePublishing = %+v, %v; want %+v, nil", got, err, tc.want)
			}
		})
	}
}
