package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/checker"
	"github.com/outboxd/outboxd/internal/pgtest"
)

// retentionArgs run retention as eagerly as the flags allow.
var retentionArgs = []string{"--retention-pause", "50ms", "--retention-wait", "1s"}

// TestRetentionKeepsUnpublishedRows runs --retention 0s (delete as soon as
// confirmed) through a NATS outage and a long-open transaction: rows
// written while NATS is down, and the long transaction's row (the oldest
// by created_at, committed last, during the outage), stay in the table
// while retention keeps trying, and go only once they are in the stream.
func TestRetentionKeepsUnpublishedRows(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	p := e.start(e.args(append([]string{"--retention", "0s"}, retentionArgs...)...)...)
	e.waitStreaming(p)
	ctx := context.Background()
	conn := e.connect()
	check := checker.New()
	w := e.newWriter(check, 5)

	long, err := e.connect().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	longID := uuid.New()
	if _, err := long.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES ($1, 'order', 'long', 'Created', '{}', now() - interval '1 day')`, longID); err != nil {
		t.Fatal(err)
	}

	for range 10 {
		if _, err := w.tx(ctx, 2, true); err != nil {
			t.Fatal(err)
		}
	}
	e.waitRowCount(conn, p, 0, time.Minute) // published and deleted; the long row is not committed

	e.nats.Shutdown()
	var unpublished []uuid.UUID
	for range 10 {
		rows, err := w.tx(ctx, 2, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			unpublished = append(unpublished, r.ID)
		}
	}
	if err := long.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	check.Committed([]checker.Event{{ID: longID.String(), Aggregate: "order/long"}})
	unpublished = append(unpublished, longID)

	// Retention tries, round after round (each waits --retention-wait for
	// a confirmation that cannot come), while nothing can be confirmed.
	const round = "retention round: waiting for the snapshot to be confirmed"
	before := strings.Count(p.output.String(), round)
	waitFor(t, p, 30*time.Second, "three retention rounds during the outage", func() bool {
		return strings.Count(p.output.String(), round) >= before+3
	})
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE id = ANY($1)", unpublished).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != len(unpublished) {
		t.Fatalf("%d of the %d rows committed while NATS was down are left: retention deleted unpublished rows", left, len(unpublished))
	}

	e.nats.Restart(t)
	e.waitRowCount(conn, p, 0, time.Minute)
	e.verify(e.js(), check, time.Minute)
	if got, _ := metric(scrape(t, p.metricsURL()), "outboxd_retention_deleted_rows_total"); got != float64(check.Count()) {
		t.Errorf("outboxd_retention_deleted_rows_total = %v, want %d", got, check.Count())
	}
	p.stopCleanly()
}

// TestRetentionAgeMappedTable runs --retention 1h on the C# OutboxMessage
// table: confirmed rows older than an hour by "CreatedAt" go, younger ones
// stay; quoted mixed-case names work in the DELETE.
func TestRetentionAgeMappedTable(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	e.pg.Exec(t, e.dsn, outboxMessageTable)
	p := e.start(e.args(append([]string{"--table", `"OutboxMessage"`, "--columns", outboxMessageColumns,
		"--subject", "orders.{Topic}", "--retention", "1h"}, retentionArgs...)...)...)
	e.waitStreaming(p)
	ctx := context.Background()
	conn := e.connect()
	var young []uuid.UUID
	for i := range 6 {
		id := uuid.New()
		age := "2 hours"
		if i%2 == 1 {
			age, young = "0 seconds", append(young, id)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO "OutboxMessage" ("Id", "AggregateType", "Topic", "Payload", "CreatedAt", "Status")
			VALUES ($1, 'Order', 'OrderPlaced', '{}', now() - $2::interval, 0)`, id, age); err != nil {
			t.Fatal(err)
		}
	}
	e.readStream(e.js(), 6, time.Minute)
	e.waitRowCount(conn, p, 3, time.Minute)
	before := strings.Count(p.output.String(), "retention round\"")
	waitFor(t, p, 30*time.Second, "three more retention rounds", func() bool {
		return strings.Count(p.output.String(), "retention round\"") >= before+3
	})
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM "OutboxMessage" WHERE "Id" = ANY($1)`, young).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != len(young) {
		t.Errorf("%d of the %d rows younger than --retention are left, want all", left, len(young))
	}
	p.stopCleanly()
}

// TestRetentionNeedsDelete: a role that may not delete from the table
// stops outboxd at start with the GRANT to run.
func TestRetentionNeedsDelete(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	role := e.slot + "_ro"
	e.pg.Exec(t, e.dsn, `CREATE ROLE `+role+` LOGIN REPLICATION; GRANT SELECT ON outbox TO `+role)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), e.dsn)
		if err == nil {
			conn.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) //nolint:errcheck
			conn.Close(context.Background())
		}
	})
	args := e.args("--retention", "0s")
	args[2] = withURL(t, e.dsn, role)
	e.expectExit(args, `role "`+role+`" may not DELETE from it, which --retention needs`, `GRANT DELETE ON "public"."outbox" TO "`+role+`"`)
}

// TestInsertThenDelete: a producer that inserts the outbox row and deletes
// it in the same transaction leaves the table empty, and outboxd, as it
// is, still publishes every event in commit order: the INSERT is in the
// WAL, and pgoutput with publish = 'insert' never sends the DELETE.
func TestInsertThenDelete(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	p := e.start(e.args()...)
	e.waitStreaming(p)
	ctx := context.Background()
	conn := e.connect()
	check := checker.New()
	for i := range 20 {
		ids := []uuid.UUID{uuid.New(), uuid.New()}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, id := range ids {
				if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
					VALUES ($1, 'order', $2, 'Created', '{"n": 1}')`, id, strconv.Itoa(i%3)); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, "DELETE FROM outbox WHERE id = ANY($1)", ids)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		events := make([]checker.Event, len(ids))
		for j, id := range ids {
			events[j] = checker.Event{ID: id.String(), Aggregate: "order/" + strconv.Itoa(i%3)}
		}
		check.Committed(events)
	}
	e.verify(e.js(), check, time.Minute)
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("outbox holds %d rows, want 0", rows)
	}
	p.stopCleanly()
}

// waitRowCount waits until the outbox table (whichever the test made)
// holds want rows.
func (e *env) waitRowCount(conn *pgx.Conn, p *proc, want int, timeout time.Duration) {
	e.t.Helper()
	var table string
	if err := conn.QueryRow(context.Background(), `SELECT format('%I.%I', schemaname, tablename) FROM pg_publication_tables
		WHERE pubname = 'outboxd'`).Scan(&table); err != nil {
		e.t.Fatal(err)
	}
	var n int
	waitFor(e.t, p, timeout, "the outbox table to hold "+strconv.Itoa(want)+" rows", func() bool {
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		return n == want
	})
}

// waitFor polls cond until it holds, failing the test after timeout or
// when outboxd exits.
func waitFor(t *testing.T, p *proc, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("outboxd exited while waiting for %s: %v\n%s", what, p.err, tail(p.output.String(), 40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s\n%s", what, timeout, tail(p.output.String(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
