package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// demoOptions are the demo's flags.
type demoOptions struct {
	events int  // how many sample events to write
	keep   bool // keep everything running after printing them, until ctx ends
}

// runDemo starts the servers in one temporary folder, migrates, runs the
// relay, writes sample events and prints them from the stream, then stops
// it all and removes the folder; with opts.keep only once ctx ends. Each
// step is announced on out as it starts: initdb takes a few seconds, and a
// silent terminal looks stuck.
func runDemo(ctx context.Context, out io.Writer, opts demoOptions, log zerolog.Logger) error {
	dir, err := os.MkdirTemp("", "outboxd-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	pgDir := filepath.Join(dir, "postgres")
	fmt.Fprintf(out, "starting PostgreSQL (initdb, wal_level=logical) in %s ...\n", pgDir)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgDir})
	if err != nil {
		return err
	}
	defer pg.Close()
	natsDir := filepath.Join(dir, "nats")
	fmt.Fprintf(out, "starting NATS with JetStream (embedded) in %s ...\n", natsDir)
	ns, err := natsembed.Start(ctx, natsembed.Config{StoreDir: natsDir})
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()

	cfg := relay.DefaultConfig()
	cfg.PGURL = pg.DSN("postgres")
	cfg.CreateStream = true
	cfg.SpoolDir = dir
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
	fmt.Fprintln(out, "migrating: table public.outbox, function outbox_emit, publication outboxd ...")
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return err
	}

	fmt.Fprintf(out, "starting outboxd (slot %s, stream %s) ...\n", cfg.Slot, cfg.Stream)
	// In place of the relay's warning that acknowledged messages can be lost
	// on power failure: true, and beside the point for a stream in a folder
	// removed on exit.
	fmt.Fprintf(out, "  stream %s has a single replica in the temporary folder: fine for a demo, not for real events\n", cfg.Stream)
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	g, gctx := errgroup.WithContext(ctx)
	metrics := telemetry.NewMetrics(cfg.Stream)
	relayLog := log.Hook(dropSingleReplicaWarning(cfg.Stream))
	env := relay.Env{NATS: nc, Metrics: metrics, Health: telemetry.NewHealth(metrics), Log: relayLog}
	g.Go(func() error { return relay.Run(relayCtx, cfg, env) })
	g.Go(func() error {
		defer stopRelay() // printed everything, or failed: stop the relay cleanly
		// Rows committed before the slot exists are not in its stream.
		if err := waitForActiveSlot(gctx, conn, cfg.Slot); err != nil {
			return err
		}
		txs := (opts.events + 4) / 5
		fmt.Fprintf(out, "writing %d events in %d %s ...\n", opts.events, txs, plural(txs, "transaction"))
		if err := writeSampleEvents(gctx, conn, opts.events); err != nil {
			return err
		}
		fmt.Fprintln(out, "committed; each event as JetStream stores it:")
		if err := printStream(gctx, out, nc, cfg.Stream, opts.events); err != nil {
			return err
		}
		if !opts.keep {
			return nil
		}
		if err := printNextSteps(out, cfg, ns.ClientURL(), opts.events); err != nil {
			return err
		}
		<-gctx.Done() // Ctrl-C, or the relay failed and g.Wait reports why
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if opts.keep {
		fmt.Fprintf(out, "outboxd stopped, checkpoint saved; stopping NATS and PostgreSQL and removing %s\n", dir)
		return nil
	}
	fmt.Fprintf(out, "all %d events acknowledged by JetStream, checkpoint saved, outboxd stopped\n", opts.events)
	return nil
}

// dropSingleReplicaWarning is a hook that drops the relay's single-replica
// warning for the named stream; runDemo prints a one-line note instead.
// TestDemo fails if the warning's wording changes and it shows again.
type dropSingleReplicaWarning string

// Run discards the event if it is that warning.
func (stream dropSingleReplicaWarning) Run(e *zerolog.Event, level zerolog.Level, msg string) {
	if level == zerolog.WarnLevel && strings.HasPrefix(msg, fmt.Sprintf("stream %q has a single replica", string(stream))) {
		e.Discard()
	}
}

// printNextSteps tells a --keep user how to watch the stream and write
// another event while everything keeps running.
func printNextSteps(out io.Writer, cfg relay.Config, natsURL string, events int) error {
	subject, err := cfg.Subject.StreamSubject()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "all %d events acknowledged by JetStream; everything keeps running until Ctrl-C. Next, in another terminal:\n", events)
	fmt.Fprintf(out, "  watch the stream: nats --server %s sub --stream %s --all '%s'\n", natsURL, cfg.Stream, subject)
	fmt.Fprintf(out, "  write an event:   psql '%s' -c \"SELECT outbox_emit('order', 'order-99', 'OrderPlaced', jsonb_build_object('order', 99))\"\n", cfg.PGURL)
	return nil
}

// plural returns word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
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
