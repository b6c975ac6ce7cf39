package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// orderTable is an outbox table whose rows count their inserts in a
// bigserial, as Watermill's "offset" does (its schema adapter for
// PostgreSQL: "offset" SERIAL, "uuid" VARCHAR(36), "created_at" TIMESTAMP
// DEFAULT CURRENT_TIMESTAMP, "payload" JSON). "offset" is a reserved word:
// ORDER BY must quote it.
const orderTable = `CREATE TABLE orders_outbox ("offset" bigserial PRIMARY KEY, "uuid" varchar(36) NOT NULL,
		"created_at" timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, "payload" json);
	CREATE PUBLICATION outboxd FOR TABLE orders_outbox WITH (publish = 'insert')`

// orderMapping maps orderTable, with one fixed subject.
var orderMapping = []string{"--table", "orders_outbox", "--columns", "id=uuid,payload=payload,created_at=created_at",
	"--subject", "orders.placed"}

// orderRows is how many rows one transaction inserts.
const orderRows = 12

// insertOneTransaction inserts orderRows rows in one transaction, so all
// share created_at (CURRENT_TIMESTAMP is the transaction's start), with ids
// that sort in the reverse of the insert order. It returns the ids in
// insert order.
func (e *env) insertOneTransaction() []string {
	e.t.Helper()
	ctx := context.Background()
	conn := e.connect()
	tx, err := conn.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	var ids []string
	for i := range orderRows {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", orderRows-i)
		if _, err := tx.Exec(ctx, `INSERT INTO orders_outbox ("uuid", "payload") VALUES ($1, $2)`, id, fmt.Sprintf(`{"n":%d}`, i)); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
	var distinct int
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT created_at) FROM orders_outbox`).Scan(&distinct); err != nil || distinct != 1 {
		e.t.Fatalf("the rows of one transaction have %d distinct created_at (%v), want 1", distinct, err)
	}
	return ids
}

// TestBackfillOrderBy: rows of one transaction share created_at, so by
// default backfill publishes them by id, not in insert order; with
// --order-by on the bigserial that counts inserts (alone, or after
// created_at) they come out in insert order.
func TestBackfillOrderBy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		orderBy []string // the flag and its value; none for the default
		inserts bool     // want insert order; else id order
	}{
		{name: "default: created_at, then id"},
		{name: "offset", orderBy: []string{"--order-by", "offset"}, inserts: true},
		{name: "created_at and offset", orderBy: []string{"--order-by", `created_at, "offset"`}, inserts: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.Shared(t), false)
			e.pg.Exec(t, e.dsn, orderTable)
			ids := e.insertOneTransaction()
			args := append(append(slices.Clone(orderMapping), tt.orderBy...), "--create-stream", "--where", "true")
			out := e.runOK(e.backfillArgs(args...)...)
			if want := fmt.Sprintf("backfilled %d rows", len(ids)); !strings.Contains(out, want) {
				t.Errorf("backfill output lacks %q:\n%s", want, out)
			}
			want := ids
			if !tt.inserts {
				want = slices.Sorted(slices.Values(ids))
			}
			msgs := e.readStream(e.js(), len(want), 30*time.Second)
			got := make([]string, len(msgs))
			for i, m := range msgs {
				got[i] = m.Header.Get(jetstream.MsgIDHeader)
			}
			if !slices.Equal(got, want) {
				t.Errorf("stream order\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestBackfillOrderByUnknownColumn: an --order-by that names no column of
// the table (a typo, the wrong case) stops backfill before the slot
// exists, naming the column and the table's columns.
func TestBackfillOrderByUnknownColumn(t *testing.T) {
	for _, tt := range []struct {
		name, orderBy string
		want          []string
	}{
		{"unknown", "SequenceNumber", []string{`--order-by "SequenceNumber": names "SequenceNumber", which is no column of table "public"."orders_outbox"`,
			`(it has "offset", "uuid", "created_at", "payload")`, "exact case as the catalog has them"}},
		{"wrong case", "created_at,Offset", []string{`names "Offset", which is no column`, "write it as the catalog has it: offset"}},
		{"empty name", "offset,,uuid", []string{`--order-by "offset,,uuid" names an empty column`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.Shared(t), false)
			e.pg.Exec(t, e.dsn, orderTable)
			e.insertOneTransaction()
			args := append(slices.Clone(orderMapping), "--order-by", tt.orderBy, "--create-stream", "--where", "true")
			e.expectExit(e.backfillArgs(args...), tt.want...)
			if e.slotExists() {
				t.Error("backfill created the slot before refusing --order-by")
			}
		})
	}
}
