package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestIdleSlotWALBounded: the database, or another database of the
// cluster, is busy with a table outside the publication and the outbox
// gets nothing. With the heartbeat on, the slot keeps advancing: the WAL
// it retains stays a small part of what was written, and no heartbeat is
// ever published. (On PostgreSQL 15 the slot advanced as well without the
// heartbeat, 2026-12-06: outboxd confirms the position of a keepalive when
// nothing is in flight. The heartbeat is for servers and proxies that do
// not carry the position along that way.)
func TestIdleSlotWALBounded(t *testing.T) {
	t.Run("same database", func(t *testing.T) { idleSlotWALBounded(t, false) })
	// The slot's walsender reads the whole cluster's WAL; the heartbeat
	// must be written in the slot's own database to be decoded by it.
	t.Run("another database", func(t *testing.T) { idleSlotWALBounded(t, true) })
}

// idleSlotWALBounded is TestIdleSlotWALBounded with the busy table in the
// slot's database or, elsewhere, in another database of the cluster.
func idleSlotWALBounded(t *testing.T, elsewhere bool) {
	e := newEnv(t, pgtest.Start(t, pgtest.WithConf("checkpoint_timeout", "30s")), true)
	p := e.start(e.args("--heartbeat-interval", "1s")...)
	e.waitStreaming(p)
	conn := e.connect()
	ctx := context.Background()
	busy := conn
	if elsewhere {
		other, err := pgx.Connect(ctx, e.pg.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close(context.Background()) })
		busy = other
	}
	if _, err := busy.Exec(ctx, "CREATE TABLE business (id bigserial PRIMARY KEY, note text)"); err != nil {
		t.Fatal(err)
	}
	var startLSN string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&startLSN); err != nil {
		t.Fatal(err)
	}
	// About five minutes of a busy application's writes, compressed: 300
	// rounds of 1,000 rows, with a checkpoint now and then so the server
	// can move restart_lsn forward.
	var maxRetained int64
	for round := 1; round <= 300; round++ {
		if _, err := busy.Exec(ctx, "INSERT INTO business (note) SELECT repeat('x', 200) FROM generate_series(1, 1000)"); err != nil {
			t.Fatal(err)
		}
		if round%50 == 0 {
			if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // a heartbeat and a status update go by
		}
		var retained int64
		if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&retained); err != nil {
			t.Fatal(err)
		}
		maxRetained = max(maxRetained, retained)
	}
	time.Sleep(3 * time.Second)
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	var written, retained int64
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $2::pg_lsn)::bigint,
			pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, e.slot, startLSN).Scan(&written, &retained); err != nil {
		t.Fatal(err)
	}
	t.Logf("WAL written %.1f MiB; retained by the slot at the end %.1f MiB, at most %.1f MiB during the run",
		float64(written)/(1<<20), float64(retained)/(1<<20), float64(maxRetained)/(1<<20))
	if written < 50<<20 {
		t.Fatalf("only %d bytes of WAL written: the test proves nothing", written)
	}
	if retained > written/4 || maxRetained > written/2 {
		t.Errorf("the slot retains %d bytes (max %d) of %d written: it does not advance", retained, maxRetained, written)
	}
	if msgs := e.readStream(e.js(), 0, time.Second); len(msgs) != 0 {
		t.Errorf("stream holds %d messages; heartbeats must never be published", len(msgs))
	}
	p.stopCleanly()
}
