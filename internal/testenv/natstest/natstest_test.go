package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestRestartKeepsStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := Start(t, WithSyncAlways())
	url := s.URL()
	js := s.JetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "events.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	s.Shutdown()
	if s.Server() != nil {
		t.Fatal("Server() after Shutdown is not nil")
	}
	s.Restart(t)
	if s.URL() != url {
		t.Errorf("URL after Restart = %s, want %s", s.URL(), url)
	}

	// A fresh connection sees the stored messages.
	stream, err := s.JetStream(t).Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if n := stream.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("messages after restart = %d, want 3", n)
	}
	msg, err := stream.GetMsg(ctx, 3)
	if err != nil || string(msg.Data) != "m2" {
		t.Fatalf("message 3 = %v, %v; want m2", msg, err)
	}

	// The connection made before the outage reconnects and publishes again.
	ack, err := js.Publish(ctx, "events.x", []byte("after"))
	if err != nil {
		t.Fatalf("publish on the old connection after restart: %v", err)
	}
	if ack.Sequence != 4 {
		t.Errorf("sequence = %d, want 4", ack.Sequence)
	}
}

func TestOptions(t *testing.T) {
	s := Start(t, WithSyncAlways(), WithMaxPayload(4096))
	if !s.Server().JetStreamEnabled() {
		t.Error("JetStream is not enabled")
	}
	if got := s.Server().JetStreamConfig().SyncAlways; !got {
		t.Error("SyncAlways = false, want true")
	}
	if got := s.Conn(t).MaxPayload(); got != 4096 {
		t.Errorf("MaxPayload = %d, want 4096", got)
	}
	if got := Start(t).Server().JetStreamConfig().SyncAlways; got {
		t.Error("SyncAlways by default = true, want false")
	}
}

func TestWithMonitoring(t *testing.T) {
	if url := Start(t).MonitorURL(); url != "" {
		t.Errorf("MonitorURL without WithMonitoring = %q, want empty", url)
	}
	s := Start(t, WithMonitoring(), WithSyncAlways())
	resp, err := http.Get(s.MonitorURL() + "/jsz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Config struct {
			SyncAlways bool `json:"sync_always"`
		} `json:"config"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil || !jsz.Config.SyncAlways {
		t.Errorf("/jsz at %s: sync_always %v (%v), want true", s.MonitorURL(), jsz.Config.SyncAlways, err)
	}
}
