package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
	"github.com/outboxd/outboxd/sink"
)

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRelayStopsEveryGoroutine runs the whole relay in-process against a
// real PostgreSQL and NATS server, with the metrics server, status page
// and slot probe, streams events, reads the metrics address, and stops it:
// Run returns nil and no goroutine it started is left.
func TestRelayStopsEveryGoroutine(t *testing.T) {
	const events = 200
	ns := natstest.Start(t)
	js := ns.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	cfg := defaultRunConfig()
	cfg.PGURL, cfg.NATSURL, cfg.CreateStream = dsn, ns.URL(), true
	cfg.MetricsAddr = freeAddr(t)
	cfg.StatusInterval, cfg.ShutdownTimeout = 100*time.Millisecond, 10*time.Second
	// Retention's goroutine and connection must stop with the rest.
	cfg.Retention, cfg.RetentionPause = "0s", 50*time.Millisecond
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", cfg.Slot) //nolint:errcheck
	})
	// The server starts goroutines for each stream it makes: make the
	// stream and the checkpoint bucket now, so those are not counted as the
	// relay's. The first request also starts this client's own reply
	// subscription.
	if _, err := sink.EnsureStream(ctx, js, cfg.Stream, cfg.relay.Subject, true); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.NewKVStore(ctx, js, cfg.relay.Checkpoint.Bucket, cfg.Slot); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	// Everything running now (servers, test connections) is not the relay's.
	ignore := goleak.IgnoreCurrent()
	relayCtx, stopRelay := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runRelay(relayCtx, cfg, zerolog.Nop()) }()

	testsync.Eventually(t, 30*time.Second, testsync.Until("the slot is active", func() bool {
		var active bool
		err := conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", cfg.Slot).Scan(&active)
		return err == nil && active
	}))
	for i := range events {
		if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
			VALUES (gen_random_uuid(), 'order', $1, 'Created', '{}')`, fmt.Sprint(i%7)); err != nil {
			t.Fatal(err)
		}
	}
	testsync.Eventually(t, time.Minute, testsync.Until(fmt.Sprintf("%d events in the stream", events), func() bool {
		s, err := js.Stream(ctx, cfg.Stream)
		return err == nil && s.CachedInfo().State.Msgs == events
	}))
	want := fmt.Sprintf(`outboxd_events_published_total{stream="OUTBOX"} %d`, events)
	testsync.Eventually(t, 10*time.Second, testsync.Until(want, func() bool {
		return strings.Contains(get(t, client, "http://"+cfg.MetricsAddr+"/metrics"), want)
	}))
	if page := get(t, client, "http://"+cfg.MetricsAddr+"/"); !strings.Contains(page, "<canvas") {
		t.Errorf("status page without a chart:\n%s", page)
	}
	get(t, client, "http://"+cfg.MetricsAddr+"/status.json")
	testsync.Eventually(t, 30*time.Second, testsync.Until("retention emptied the table", func() bool {
		var n int
		return conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n) == nil && n == 0
	}))

	stopRelay()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runRelay after stop = %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("runRelay did not return within a minute of the stop")
	}
	goleak.VerifyNone(t, ignore)
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestMetricsAddrInUse: a --metrics-addr another process holds stops
// outboxd at once, before it connects anywhere, naming the address and the
// way out; the default address in use gives way to a free port.
func TestMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := defaultRunConfig()
	cfg.MetricsAddr = ln.Addr().String()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}

	// As the default: another port.
	o, err := newObservability(cfg, zerolog.Nop())
	if err != nil || len(o.tasks) == 0 {
		t.Fatalf("the default address in use: %v, %d tasks; want a free port", err, len(o.tasks))
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.tasks[0](cancelled); err != nil { // serve, closing the listener
		t.Fatal(err)
	}

	// Chosen: an error.
	cfg.metricsAddrSet = true
	// With a context that is never done, only an error that is not
	// retried returns at all.
	err = runRelay(context.Background(), cfg, zerolog.Nop())
	if err == nil {
		t.Fatal("runRelay = nil, want the error of the address in use")
	}
	for _, want := range []string{"--metrics-addr", cfg.MetricsAddr, "address already in use", `""`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
