package natsembed

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestStart(t *testing.T) {
	var logs bytes.Buffer
	s, err := Start(context.Background(), Config{StoreDir: t.TempDir(), Logger: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.JetStreamEnabled() {
		t.Error("JetStream is not enabled")
	}
	if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") {
		t.Errorf("listening on %s, want 127.0.0.1", s.Addr())
	}
	if !strings.Contains(logs.String(), `"component":"nats-server"`) {
		t.Errorf("server log did not reach the Logger: %q", logs.String())
	}
}

func TestOptionsNeedStoreDir(t *testing.T) {
	if _, err := (Config{}).Options(); err == nil {
		t.Error("Options without StoreDir: err = nil")
	}
}
