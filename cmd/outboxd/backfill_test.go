package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestWaitConnectedNoServer: with no NATS server at the address, backfill
// stops after the wait with an error naming the flag, instead of failing
// later with the client's buffer error.
func TestWaitConnectedNoServer(t *testing.T) {
	nc, err := nats.Connect("nats://"+freeAddr(t), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	err = waitConnected(context.Background(), nc, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "connect to NATS at --nats-url: no server answered within 200ms") {
		t.Fatalf("waitConnected = %v, want the no-server error", err)
	}
}

// TestBackfillSince: --since takes an RFC 3339 time, needs created_at
// mapped, and lets --where default to every row; without --since, --where
// is required.
func TestBackfillSince(t *testing.T) {
	run := defaultRunConfig()
	if err := run.validate(); err != nil {
		t.Fatal(err)
	}
	noCreatedAt := run
	noCreatedAt.relay.Columns.CreatedAt = ""
	for _, tt := range []struct {
		name      string
		run       runConfig
		where     string
		since     string
		wantWhere string
		wantErr   string
	}{
		{name: "none", run: run, where: "true", wantWhere: "true"},
		{name: "where defaults to every row", run: run, since: "2026-12-05T14:00:00Z", wantWhere: "true"},
		{name: "with a where", run: run, where: `"Status" = 0`, since: "2026-12-05T14:00:00.5+01:00", wantWhere: `"Status" = 0`},
		{name: "not RFC 3339", run: run, since: "yesterday", wantErr: `--since "yesterday" is not a time: use RFC 3339`},
		{name: "date only", run: run, since: "2026-12-05", wantErr: `--since "2026-12-05" is not a time`},
		{name: "no where", run: run, wantErr: "--where is empty"},
		{name: "no created_at", run: noCreatedAt, since: "2026-12-05T14:00:00Z", wantErr: "--columns maps none: map it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := backfillConfig(tt.run, tt.where, tt.since)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("backfillConfig(since %q) = %v, want an error with %q", tt.since, err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.Where != tt.wantWhere || (tt.since != "" && cfg.Since.IsZero()) {
				t.Fatalf("backfillConfig(since %q) = %v: where %q since %v, want where %q", tt.since, err, cfg.Where, cfg.Since, tt.wantWhere)
			}
		})
	}
}
