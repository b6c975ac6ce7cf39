package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestSlotInvalidated: a slot that lost its WAL to max_slot_wal_keep_size
// (wal_status = lost) stops outboxd with an error saying so and what to do.
func TestSlotInvalidated(t *testing.T) {
	e := newEnv(t, pgtest.Start(t, pgtest.WithConf("max_slot_wal_keep_size", "1MB"), pgtest.WithConf("wal_keep_size", "0")), true)
	w := e.newWriter(checker.New(), 5)
	e.streamThenStop(w, 3)
	// With outboxd stopped, write well past the limit and checkpoint so the
	// server removes the WAL the slot still needs.
	conn := e.connect()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		var status string
		if err := conn.QueryRow(ctx, "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status == "lost" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot wal_status is still %q", status)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS filler (b text); INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 5000); SELECT pg_switch_wal(); CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
	}
	e.expectExit(e.args(), "invalidated (wal_status = lost): the WAL it needed was removed", "outboxd slot drop", "outboxd backfill --since")
}

// TestSlotIdleTimeout: PostgreSQL 18 invalidates a slot inactive longer
// than idle_replication_slot_timeout. outboxd status warns while it is
// inactive; outboxd run then stops saying why, with the recovery from the
// outbox table, whose steps publish every event once.
func TestSlotIdleTimeout(t *testing.T) {
	e := newEnv(t, pgtest.Start(t), true)
	if major := serverMajor(t, e.pg); major < 18 {
		t.Skipf("PostgreSQL %d has no idle_replication_slot_timeout; scripts/test-versions 18 runs this (OUTBOXD_TEST_PG_VERSION=18)", major)
	}
	path := filepath.Join(e.dir, "checkpoint.json")
	args := e.args("--checkpoint", "file:"+path)
	check := checker.New()
	w := e.newWriter(check, 5)
	ctx := context.Background()
	p := e.start(args...)
	e.waitStreaming(p)
	if _, err := w.tx(ctx, 3, true); err != nil {
		t.Fatal(err)
	}
	e.readStream(e.js(), check.Count(), time.Minute)
	p.stopCleanly()

	e.pg.Exec(t, e.dsn, "ALTER SYSTEM SET idle_replication_slot_timeout = '1h'")
	e.pg.Exec(t, e.dsn, "SELECT pg_reload_conf()")
	status := e.start("status", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot, "--checkpoint", "file:"+path)
	status.wait(time.Minute)
	if out := status.output.String(); !strings.Contains(out, "slot_idle_timeout") || !strings.Contains(out, "idle_replication_slot_timeout (1h0m0s)") {
		t.Errorf("status does not warn of the idle timeout:\n%s", tail(out, 20))
	}

	if _, err := w.tx(ctx, 4, true); err != nil { // committed while outboxd is down
		t.Fatal(err)
	}
	e.pg.Exec(t, e.dsn, "ALTER SYSTEM SET idle_replication_slot_timeout = '1s'")
	e.pg.Exec(t, e.dsn, "SELECT pg_reload_conf()")
	time.Sleep(2 * time.Second)
	e.pg.Exec(t, e.dsn, "CHECKPOINT")
	e.pg.Exec(t, e.dsn, "ALTER SYSTEM RESET idle_replication_slot_timeout")
	e.pg.Exec(t, e.dsn, "SELECT pg_reload_conf()")
	out := e.expectExit(args, "inactive longer than idle_replication_slot_timeout", "outboxd slot drop --slot "+e.slot+" --yes", "rm "+path)
	since := backfillSince(t, out)

	e.recoverFromTable(path, since, true)
	p = e.start(args...)
	e.waitStreaming(p)
	if _, err := w.tx(ctx, 2, true); err != nil {
		t.Fatal(err)
	}
	e.verify(e.js(), check, time.Minute)
	p.stopCleanly()
}

// TestPublicationDroppedMidStream: dropping the publication while outboxd
// streams stops it with an error naming the publication.
func TestPublicationDroppedMidStream(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	p := e.start(e.args()...)
	e.waitStreaming(p)
	w := e.newWriter(checker.New(), 5)
	if _, err := w.tx(context.Background(), 3, true); err != nil {
		t.Fatal(err)
	}
	e.readStream(e.js(), 3, time.Minute)
	e.pg.Exec(t, e.dsn, "DROP PUBLICATION outboxd")
	// The walsender notices when it next decodes a change for the slot.
	if _, err := w.tx(context.Background(), 1, true); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(time.Minute); code == 0 {
		t.Fatal("outboxd exited 0 after its publication was dropped")
	}
	if out := p.output.String(); !contains(out, `publication "outboxd" does not exist`) {
		t.Errorf("output does not name the dropped publication:\n%s", tail(out, 20))
	}
}

// TestTableAlteredMidStream: a new column changes the Relation message and
// decoding goes on; dropping a required column stops outboxd with an error
// naming the column, and nothing after it is confirmed.
func TestTableAlteredMidStream(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	p := e.start(e.args()...)
	e.waitStreaming(p)
	check := checker.New()
	w := e.newWriter(check, 5)
	ctx := context.Background()
	if _, err := w.tx(ctx, 2, true); err != nil {
		t.Fatal(err)
	}
	e.pg.Exec(t, e.dsn, "ALTER TABLE outbox ADD COLUMN tenant text DEFAULT 'acme'")
	if _, err := w.tx(ctx, 2, true); err != nil {
		t.Fatal(err)
	}
	e.verify(e.js(), check, time.Minute)

	e.pg.Exec(t, e.dsn, "ALTER TABLE outbox DROP COLUMN event_type")
	bad := uuid.New()
	e.pg.Exec(t, e.dsn, "INSERT INTO outbox (id, aggregate_type, aggregate_id, payload) VALUES ($1, 'order', '1', '{}')", bad)
	if code := p.wait(time.Minute); code == 0 {
		t.Fatal("outboxd exited 0 after a required column was dropped")
	}
	if out := p.output.String(); !contains(out, `column "event_type"`) {
		t.Errorf("output does not name the dropped column:\n%s", tail(out, 20))
	}
	if msgs := e.readStream(e.js(), 4, time.Second); len(msgs) != 4 {
		t.Errorf("stream holds %d messages, want the 4 written before the column was dropped", len(msgs))
	}
}
