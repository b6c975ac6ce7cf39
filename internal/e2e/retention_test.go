package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
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
	retentionRounds(t, p, 3)
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

// retentionRounds waits until outboxd has logged n more retention rounds
// that ran their DELETE.
func retentionRounds(t *testing.T, p *proc, n int) {
	t.Helper()
	const done = "retention round\""
	before := strings.Count(p.output.String(), done)
	waitFor(t, p, 30*time.Second, fmt.Sprintf("%d more retention rounds", n), func() bool {
		return strings.Count(p.output.String(), done) >= before+n
	})
}

// idsLeft returns which of ids the query's table still holds; query
// selects an id column WHERE id = ANY($1).
func idsLeft(t *testing.T, conn *pgx.Conn, query string, ids []string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query, ids)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	return left
}

// TestRetentionTimestampZone: created_at of type timestamp (without time
// zone) holds UTC wall-clock times by default. With the database's
// TimeZone east of UTC (Asia/Shanghai) a fresh row must not look hours old,
// and west of it (America/New_York) an old row must not look in the
// future. --created-at-zone names another zone; an unknown one stops
// outboxd.
func TestRetentionTimestampZone(t *testing.T) {
	const table = `CREATE TABLE tz_outbox (id text PRIMARY KEY, aggregate_type text, event_type text, payload jsonb, created_at timestamp);
		CREATE PUBLICATION outboxd FOR TABLE tz_outbox WITH (publish = 'insert')`
	for _, tt := range []struct {
		name, serverZone, flagZone string
	}{
		{name: "UTC+8 server, UTC values", serverZone: "Asia/Shanghai"},
		{name: "UTC-5 server, UTC values", serverZone: "America/New_York"},
		{name: "values in the server's zone", serverZone: "America/New_York", flagZone: "America/New_York"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.Shared(t), false)
			e.pg.Exec(t, e.dsn, table)
			e.pg.Exec(t, e.dsn, "ALTER DATABASE "+pgx.Identifier{e.slot}.Sanitize()+" SET timezone = '"+tt.serverZone+"'")
			args := []string{"--table", "tz_outbox", "--columns", "id=id,aggregate_type=aggregate_type,event_type=event_type,payload=payload,created_at=created_at",
				"--retention", "1h"}
			valueZone := "UTC"
			if tt.flagZone != "" {
				args, valueZone = append(args, "--created-at-zone", tt.flagZone), tt.flagZone
			}
			p := e.start(e.args(append(args, retentionArgs...)...)...)
			e.waitStreaming(p)
			conn := e.connect()
			ctx := context.Background()
			for _, r := range []struct{ id, age string }{{"fresh-1", "6 seconds"}, {"old-1", "2 hours"}, {"fresh-2", "0 seconds"}, {"old-2", "1 day"}} {
				if _, err := conn.Exec(ctx, `INSERT INTO tz_outbox VALUES ($1, 'order', 'Created', '{}', (now() - $2::interval) AT TIME ZONE $3)`,
					r.id, r.age, valueZone); err != nil {
					t.Fatal(err)
				}
			}
			e.readStream(e.js(), 4, time.Minute)
			e.waitRowCount(conn, p, 2, time.Minute)
			retentionRounds(t, p, 3)
			if left := idsLeft(t, conn, "SELECT id FROM tz_outbox WHERE id = ANY($1)", []string{"fresh-1", "fresh-2", "old-1", "old-2"}); !slices.Equal(left, []string{"fresh-1", "fresh-2"}) {
				t.Errorf("rows left %v, want the two younger than an hour", left)
			}
			p.stopCleanly()
		})
	}
	t.Run("unknown zone", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		e.expectExit(e.args("--retention", "1h", "--created-at-zone", "Mars/Olympus"), `--created-at-zone "Mars/Olympus"`, "pg_timezone_names")
	})
}

// TestRetentionKeepsRowsBeforeSlot: rows committed before the slot existed
// were never published by outboxd, so retention keeps them, across
// restarts, and says so; once they are gone it stops testing rows against
// the slot's snapshot. After a backfill, which publishes them, nothing is
// kept. A slot created outside outboxd keeps the rows there were then.
func TestRetentionKeepsRowsBeforeSlot(t *testing.T) {
	insert := func(t *testing.T, conn *pgx.Conn, n int) []string {
		t.Helper()
		var ids []string
		for range n {
			id := uuid.NewString()
			if _, err := conn.Exec(context.Background(), `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
				VALUES ($1, 'order', '1', 'Created', '{}')`, id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	const left = "SELECT id::text FROM outbox WHERE id::text = ANY($1)"
	beforeSlot := func(t *testing.T, path string) string {
		t.Helper()
		var before string
		editCheckpoint(t, path, func(fields map[string]any) { before, _ = fields["before_slot"].(string) })
		return before
	}

	t.Run("slot created by run", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		conn := e.connect()
		old := insert(t, conn, 3)
		path := filepath.Join(e.dir, "checkpoint.json")
		args := e.args(append([]string{"--retention", "0s", "--checkpoint", "file:" + path}, retentionArgs...)...)
		p := e.start(args...)
		e.waitStreaming(p)
		insert(t, conn, 4)
		e.readStream(e.js(), 4, time.Minute)
		e.waitRowCount(conn, p, 3, time.Minute)
		retentionRounds(t, p, 3)
		if got := idsLeft(t, conn, left, old); !slices.Equal(got, old) {
			t.Fatalf("rows before the slot left: %v, want all of %v", got, old)
		}
		if !strings.Contains(p.output.String(), "--retention keeps the rows committed before the slot existed") {
			t.Errorf("no warning naming the kept rows:\n%s", tail(p.output.String(), 20))
		}
		p.stopCleanly()
		if before := beforeSlot(t, path); before == "" || before == "none" {
			t.Fatalf("checkpoint before_slot = %q, want the slot's snapshot", before)
		}

		p = e.start(args...) // the rows are still kept after a restart
		e.waitStreaming(p)
		insert(t, conn, 2)
		e.readStream(e.js(), 6, time.Minute)
		e.waitRowCount(conn, p, 3, time.Minute)
		retentionRounds(t, p, 2)
		if got := idsLeft(t, conn, left, old); !slices.Equal(got, old) {
			t.Fatalf("after a restart, rows before the slot left: %v, want all of %v", got, old)
		}
		p.stopCleanly()

		if _, err := conn.Exec(context.Background(), "DELETE FROM outbox"); err != nil {
			t.Fatal(err)
		}
		p = e.start(args...)
		e.waitStreaming(p)
		p.stopCleanly()
		if before := beforeSlot(t, path); before != "none" {
			t.Errorf("checkpoint before_slot = %q once those rows are gone, want none", before)
		}
	})
	t.Run("slot created by backfill", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		conn := e.connect()
		insert(t, conn, 3)
		if p := e.start(e.backfillArgs("--create-stream", "--where", "true")...); p.wait(time.Minute) != 0 {
			t.Fatalf("backfill failed:\n%s", tail(p.output.String(), 20))
		}
		p := e.start(e.args(append([]string{"--retention", "0s"}, retentionArgs...)...)...)
		e.waitStreaming(p)
		insert(t, conn, 2)
		e.readStream(e.js(), 5, time.Minute)
		e.waitRowCount(conn, p, 0, time.Minute)
		p.stopCleanly()
	})
	t.Run("slot created outside outboxd", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		conn := e.connect()
		if p := e.start("slot", "create", "--pg-url", e.dsn, "--slot", e.slot); p.wait(time.Minute) != 0 {
			t.Fatalf("slot create failed:\n%s", tail(p.output.String(), 20))
		}
		streamed := insert(t, conn, 3) // after the slot: published, but outboxd cannot know
		p := e.start(e.args(append([]string{"--retention", "0s"}, retentionArgs...)...)...)
		e.waitStreaming(p)
		insert(t, conn, 2)
		e.readStream(e.js(), 5, time.Minute)
		e.waitRowCount(conn, p, 3, time.Minute)
		if got := idsLeft(t, conn, left, streamed); !slices.Equal(got, streamed) {
			t.Errorf("rows in the table at the first start left: %v, want all of %v", got, streamed)
		}
		if !strings.Contains(p.output.String(), "--retention keeps the rows in the table now") {
			t.Errorf("no warning about the rows kept:\n%s", tail(p.output.String(), 20))
		}
		p.stopCleanly()
	})
}

// TestRetentionKeepsRowsTooLargeForADeadLetter: with --dead-letter, a row
// whose payload does not fit in its dead letter is the payload's only
// copy: retention keeps it, and deletes the rows around it.
func TestRetentionKeepsRowsTooLargeForADeadLetter(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true, natstest.WithMaxPayload(64<<10))
	p := e.start(e.args(append([]string{"--retention", "0s", "--dead-letter", "outbox.dead-letter"}, retentionArgs...)...)...)
	e.waitStreaming(p)
	conn := e.connect()
	ctx := context.Background()
	big := uuid.NewString()
	for i, size := range []int{10, 70 << 10, 10} {
		id := uuid.NewString()
		if i == 1 {
			id = big
		}
		if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'order', '1', 'Created', jsonb_build_object('blob', repeat('x', $2)))`, id, size); err != nil {
			t.Fatal(err)
		}
	}
	msgs := e.readStream(e.js(), 3, time.Minute)
	if dropped := msgs[1].Header.Get("Outbox-Dead-Letter-Body-Dropped"); msgs[1].Subject != "outbox.dead-letter" || dropped == "" {
		t.Fatalf("the large row's message: subject %q, body dropped %q; want a dead letter without its body", msgs[1].Subject, dropped)
	}
	e.waitRowCount(conn, p, 1, time.Minute)
	retentionRounds(t, p, 3)
	if got := idsLeft(t, conn, "SELECT id::text FROM outbox WHERE id::text = ANY($1)", []string{big}); len(got) != 1 {
		t.Errorf("the row whose dead letter dropped its body was deleted")
	}
	p.stopCleanly()
}
