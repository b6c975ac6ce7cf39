package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/testenv/cpuclock"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/relay"
)

// benchPayload is a ~200 byte jsonb payload, as in the decoder's benchmarks.
const benchPayload = `{"order_id": 918273, "customer": {"id": "c-5521", "tier": "gold"}, "items": [{"sku": "A-100", "qty": 2, "price": 1999}, {"sku": "B-220", "qty": 1, "price": 4500}], "currency": "EUR", "total": 8498}`

// BenchmarkRelayBacklog drains a backlog of b.N outbox rows written before
// the relay starts, through the whole pipeline in-process: a real
// PostgreSQL's walsender → replication → decoder → sink → ack tracker →
// checkpoint, into an in-process JetStream (file storage, R1). The clock
// runs from the relay's start until the slot's confirmed_flush_lsn reaches
// the end of the backlog, so it includes connecting (a few milliseconds);
// status updates and checkpoints go every 10ms so their timers do not
// dominate.
// Run it with a fixed count, e.g. -benchtime=20000x; -cpuprofile then shows
// the relay and nats-server (PostgreSQL is another process). cpu-ns/event
// is the CPU time of this process (relay and nats-server, not PostgreSQL)
// per event, steadier than wall time on a shared machine.
func BenchmarkRelayBacklog(b *testing.B) {
	for _, bc := range []struct {
		name      string
		txSize    int
		configure func(*runConfig)
	}{
		{"sink=jetstream/mode=async/tx=1", 1, publishing(relay.PublishAsync, relay.AtomicOff)},
		{"sink=jetstream/mode=async/tx=100", 100, publishing(relay.PublishAsync, relay.AtomicOff)},
		{"sink=jetstream/mode=fast/tx=1", 1, publishing(relay.PublishFast, relay.AtomicOff)},
		{"sink=jetstream/mode=fast/tx=100", 100, publishing(relay.PublishFast, relay.AtomicOff)},
		{"sink=jetstream/mode=fast+atomic/tx=1", 1, publishing(relay.PublishFast, relay.AtomicOn)},
		{"sink=jetstream/mode=fast+atomic/tx=100", 100, publishing(relay.PublishFast, relay.AtomicOn)},
		{"sink=null/tx=1", 1, func(c *runConfig) { c.Sink = sinkNull }},
		{"sink=null/tx=100", 100, func(c *runConfig) { c.Sink = sinkNull }},
	} {
		b.Run(bc.name, func(b *testing.B) { benchmarkRelayBacklog(b, bc.txSize, bc.configure) })
	}
}

// publishing sets --publish-mode and --atomic-transactions.
func publishing(mode relay.PublishMode, atomic relay.AtomicMode) func(*runConfig) {
	return func(c *runConfig) { c.PublishMode, c.Atomic = string(mode), string(atomic) }
}

func benchmarkRelayBacklog(b *testing.B, txSize int, configure func(*runConfig)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dsn, conn := pgtest.Shared(b).MigratedDatabase(b)
	ns := natstest.Start(b)
	cfg := defaultRunConfig()
	cfg.PGURL, cfg.NATSURL, cfg.CreateStream, cfg.MetricsAddr = dsn, ns.URL(), true, ""
	// The confirmed position reaches PostgreSQL on the status timer: at
	// the default of 1s the clock would measure that timer, not the drain.
	cfg.StatusInterval, cfg.CheckpointEvery = 10*time.Millisecond, 10*time.Millisecond
	if configure != nil {
		configure(&cfg)
	}
	if err := cfg.validate(); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", cfg.Slot) //nolint:errcheck
	})
	writeBacklog(ctx, b, conn, b.N, txSize)
	end := lastCommitEnd(ctx, b, conn, cfg.Slot, cfg.Publication)

	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuclock.Process()
	relayCtx, stopRelay := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runRelay(relayCtx, cfg, zerolog.Nop()) }()
	for confirmedFlush(ctx, b, conn, cfg.Slot) < end {
		select {
		case err := <-done:
			b.Fatalf("relay stopped before the end of the backlog: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	elapsed, cpu := time.Since(start), cpuclock.Process()-cpu
	b.StopTimer()
	stopRelay()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if cfg.Sink == sinkJetStream {
		stream, err := ns.JetStream(b).Stream(ctx, cfg.Stream)
		if err != nil {
			b.Fatal(err)
		}
		if got := stream.CachedInfo().State.Msgs; got != uint64(b.N) {
			b.Fatalf("stream holds %d messages, want %d", got, b.N)
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/event")
}

// writeBacklog commits n outbox rows in transactions of txSize rows, each
// with a ~200 byte payload.
func writeBacklog(ctx context.Context, b *testing.B, conn *pgx.Conn, n, txSize int) {
	b.Helper()
	// One statement without arguments goes through the simple protocol, so
	// the DO block may COMMIT between its transactions.
	sql := fmt.Sprintf(`DO $$
BEGIN
  FOR t IN 0..%d LOOP
    INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
    SELECT gen_random_uuid(), 'order', (t * %d + i) %% 97, 'Created', '%s'::jsonb
    FROM generate_series(1, least(%d, %d - t * %d)) AS i;
    COMMIT;
  END LOOP;
END $$`, (n-1)/txSize, txSize, benchPayload, txSize, n, txSize)
	if _, err := conn.Exec(ctx, sql); err != nil {
		b.Fatalf("write backlog: %v", err)
	}
	var count int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&count); err != nil {
		b.Fatal(err)
	}
	if count != n {
		b.Fatalf("backlog holds %d rows, want %d", count, n)
	}
}

// lastCommitEnd is the end LSN of the slot's last pending transaction: the
// position the relay confirms once it has published everything. (The
// current WAL position would do only after a keepalive, which the server
// sends when it likes, so the clock would measure its timing.) Peeking
// decodes the backlog once more but consumes nothing.
func lastCommitEnd(ctx context.Context, b *testing.B, conn *pgx.Conn, slot, publication string) pglogrepl.LSN {
	b.Helper()
	// pgoutput's Commit: 'C', flags, commit LSN, end LSN (bytes 11-18).
	rows, err := conn.Query(ctx, `SELECT substring(data from 11 for 8)
		FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)
		WHERE get_byte(data, 0) = ascii('C')`, slot, publication)
	if err != nil {
		b.Fatal(err)
	}
	var end pglogrepl.LSN
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			b.Fatal(err)
		}
		end = max(end, pglogrepl.LSN(binary.BigEndian.Uint64(raw)))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return end
}

// confirmedFlush is the slot's confirmed_flush_lsn.
func confirmedFlush(ctx context.Context, b *testing.B, conn *pgx.Conn, slot string) pglogrepl.LSN {
	b.Helper()
	var lsn pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}
