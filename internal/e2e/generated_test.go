package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// generatedTable derives the event type from the payload in a stored
// generated column, which PostgreSQL 15-17 never send through pgoutput.
const generatedTable = `CREATE TABLE gen_outbox (id uuid PRIMARY KEY, payload jsonb NOT NULL,
	kind text GENERATED ALWAYS AS (payload->>'type') STORED)`

// generatedMapping maps gen_outbox, its subject from the generated column.
var generatedMapping = []string{"--table", "gen_outbox", "--columns", "id=id,payload=payload,event_type=kind",
	"--subject", "outbox.{kind}"}

// TestGeneratedColumn: a generated column outboxd reads stops run and
// backfill at start, before the slot exists, naming the column, why the
// stream lacks it and the fix, where the server does not send it
// (PostgreSQL 15-17, or 18 without publish_generated_columns = stored).
// On PostgreSQL 18 with that option, backfill and run publish its value.
func TestGeneratedColumn(t *testing.T) {
	t.Run("not sent", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), false)
		e.pg.Exec(t, e.dsn, generatedTable+`; CREATE PUBLICATION outboxd FOR TABLE gen_outbox`)
		e.pg.Exec(t, e.dsn, `INSERT INTO gen_outbox VALUES (gen_random_uuid(), '{"type":"OrderPaid"}')`)
		want := []string{`column "kind" of table "public"."gen_outbox": is a generated column`,
			"--columns event_type=kind, --subject placeholder {kind}", "the replication stream does not carry",
			"fix: read a plain column instead, filled by the writer or by a BEFORE INSERT trigger",
			`ALTER PUBLICATION "outboxd" SET (publish_generated_columns = stored)`}
		e.expectExit(e.args(generatedMapping...), want...)
		e.expectExit(e.backfillArgs(append(generatedMapping, "--create-stream", "--where", "true")...), want...)
		if e.slotExists() {
			t.Error("the slot exists after outboxd refused the generated column")
		}
	})
	t.Run("PostgreSQL 18, publish_generated_columns = stored", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), false)
		var version int
		if err := e.connect().QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int / 10000").Scan(&version); err != nil {
			t.Fatal(err)
		}
		if version < 18 {
			t.Skipf("PostgreSQL %d's pgoutput cannot send generated columns; scripts/test-versions 18 runs this (OUTBOXD_TEST_PG_VERSION=18)", version)
		}
		e.pg.Exec(t, e.dsn, generatedTable+`; CREATE PUBLICATION outboxd FOR TABLE gen_outbox WITH (publish_generated_columns = stored)`)
		e.pg.Exec(t, e.dsn, `INSERT INTO gen_outbox VALUES (gen_random_uuid(), '{"type":"OrderPlaced"}')`)
		e.runOK(e.backfillArgs(append(generatedMapping, "--create-stream", "--where", "true")...)...)
		p := e.start(e.args(generatedMapping...)...)
		e.waitStreaming(p)
		e.pg.Exec(t, e.dsn, `INSERT INTO gen_outbox VALUES (gen_random_uuid(), '{"type":"OrderPaid"}')`)
		msgs := e.readStream(e.js(), 2, 30*time.Second)
		for i, want := range []string{"outbox.OrderPlaced", "outbox.OrderPaid"} {
			if i >= len(msgs) || msgs[i].Subject != want || msgs[i].Header.Get("Outbox-Event-Type") != want[len("outbox."):] {
				t.Errorf("message %d: %+v, want subject %s and its Outbox-Event-Type", i, msgs[min(i, len(msgs)-1)], want)
			}
		}
		p.stopCleanly()
	})
}
