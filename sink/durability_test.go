package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/natsembed"
)

// startMonitored starts a JetStream server with its HTTP monitoring port open.
func startMonitored(t *testing.T, syncAlways bool) (jetstream.JetStream, string) {
	t.Helper()
	opts, err := natsembed.Config{StoreDir: t.TempDir(), SyncAlways: syncAlways}.Options()
	if err != nil {
		t.Fatal(err)
	}
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", -1
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, "http://" + srv.MonitorAddr().String()
}

func TestCheckDurability(t *testing.T) {
	tests := []struct {
		name       string
		syncAlways bool
		monitor    bool
		wantWarn   string // "" means no warning
	}{
		{name: "R1, default sync interval", monitor: true, wantWarn: "sync_interval is 2m0s, not always"},
		{name: "R1, sync always", syncAlways: true, monitor: true},
		{name: "R1, no monitoring URL", syncAlways: true, wantWarn: "set --nats-monitor-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, monitor := startMonitored(t, tt.syncAlways)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}, Storage: jetstream.FileStorage}); err != nil {
				t.Fatal(err)
			}
			if !tt.monitor {
				monitor = ""
			}
			warnings, err := CheckDurability(ctx, js, "OUTBOX", monitor)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantWarn == "" && len(warnings) != 0:
				t.Errorf("warnings = %q, want none", warnings)
			case tt.wantWarn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tt.wantWarn) || !strings.Contains(warnings[0], "power failure")):
				t.Errorf("warnings = %q, want one containing %q and the risk", warnings, tt.wantWarn)
			}
		})
	}
	t.Run("monitoring URL that does not answer", func(t *testing.T) {
		js, _ := startMonitored(t, false)
		ctx := context.Background()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := CheckDurability(ctx, js, "OUTBOX", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/jsz") {
			t.Errorf("err = %v, want one naming the URL", err)
		}
	})
}
