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
