package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/internal/natsembed"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
	"github.com/outboxd/outboxd/migrations"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/sink"
)

// runDemo starts the servers, migrates, runs the relay, writes events
// sample events and prints them from the stream, then stops it all.
func runDemo(ctx context.Context, out io.Writer, events int, log zerolog.Logger) error {
	fmt.Fprintln(out, "starting a private PostgreSQL (wal_level=logical) ...")
	pg, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return err
	}
	defer pg.Close()
	storeDir, err := os.MkdirTemp("", "outboxd-demo-nats-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(storeDir)
	ns, err := natsembed.Start(ctx, natsembed.Config{StoreDir: storeDir})
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()

	cfg := relay.DefaultConfig()
	cfg.PGURL = pg.DSN("postgres")
	cfg.CreateStream = true
	// The checkpoint goes to a KV bucket on the embedded server, removed
	// with it; no metrics address, so nothing clashes with a real outboxd.
	if err := cfg.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(out, "PostgreSQL at %s, NATS at %s\n", cfg.PGURL, ns.ClientURL())
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()

	conn, err := pgx.Connect(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return err
	}
	fmt.Fprintln(out, "migrated: table public.outbox, publication outboxd")

	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	g, gctx := errgroup.WithContext(ctx)
	metrics := telemetry.NewMetrics(cfg.Stream)
	env := relay.Env{NATS: nc, Metrics: metrics, Health: telemetry.NewHealth(metrics), Log: log}
	g.Go(func() error { return relay.Run(relayCtx, cfg, env) })
	g.Go(func() error {
		defer stopRelay() // printed everything, or failed: stop the relay cleanly
		// Rows committed before the slot exists are not in its stream.
		if err := waitForActiveSlot(gctx, conn, cfg.Slot); err != nil {
			return err
		}
		if err := writeSampleEvents(gctx, conn, events); err != nil {
			return err
		}
		fmt.Fprintf(out, "committed %d events in %d transactions; streaming:\n", events, (events+4)/5)
		return printStream(gctx, out, nc, cfg.Stream, events)
	})
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Fprintf(out, "all %d events acknowledged by JetStream, checkpoint saved, outboxd stopped\n", events)
	return nil
}

// waitForActiveSlot waits until outboxd streams from the slot.
func waitForActiveSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var active bool
		err := conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("wait for outboxd to start streaming: %w", err)
		}
		if active {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("outboxd did not start streaming from slot %q: %w", slot, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeSampleEvents commits events in transactions of up to five rows.
func writeSampleEvents(ctx context.Context, conn *pgx.Conn, events int) error {
	types := []string{"OrderPlaced", "OrderPaid", "OrderShipped"}
	for i := 0; i < events; {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		for j := 0; j < 5 && i < events; j, i = j+1, i+1 {
			if _, err := tx.Exec(ctx, `INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload)
				VALUES ($1, 'order', $2, $3, $4)`, uuid.New(), fmt.Sprintf("order-%d", i/3+1), types[i%3],
				fmt.Sprintf(`{"order": %d, "step": %q}`, i/3+1, types[i%3])); err != nil {
				tx.Rollback(ctx) //nolint:errcheck
				return err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}

// printStream prints messages from the stream until it has seen n.
func printStream(ctx context.Context, out io.Writer, nc *nats.Conn, name string, n int) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stream jetstream.Stream
	for stream == nil {
		if stream, err = js.Stream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		if stream == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	consumer, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	for seen := 0; seen < n; {
		batch, err := consumer.Fetch(n-seen, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		for msg := range batch.Messages() {
			seen++
			meta, _ := msg.Metadata()
			fmt.Fprintf(out, "  seq=%-4d %-28s id=%s lsn=%s %s\n", meta.Sequence.Stream, msg.Subject(),
				msg.Headers().Get(jetstream.MsgIDHeader), msg.Headers().Get(sink.HeaderLSN), msg.Data())
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("saw %d of %d events before timing out", seen, n)
		}
	}
	return nil
}
