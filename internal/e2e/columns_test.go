package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/sink"
)

// The outbox tables of the two C# designs outboxd replaces, exactly.
const (
	outboxMessageTable = `CREATE TABLE "OutboxMessage" ("Id" uuid, "AggregateType" text, "Topic" text,
		"Payload" text, "CreatedAt" timestamptz, "Status" int);
		CREATE PUBLICATION outboxd FOR TABLE "OutboxMessage" WITH (publish = 'insert')`
	outboxMessagesTable = `CREATE TABLE "OutboxMessages" ("Id" uuid, "TypeName" text, "Content" text,
		"CreatedAt" timestamptz, "ProcessedAt" timestamptz NULL);
		CREATE PUBLICATION outboxd FOR TABLE "OutboxMessages" WITH (publish = 'insert')`
	outboxMessageColumns  = "id=Id,aggregate_type=AggregateType,event_type=Topic,payload=Payload,created_at=CreatedAt"
	outboxMessagesColumns = "id=Id,event_type=TypeName,payload=Content,created_at=CreatedAt"
)

// mappedRow is one row of a mapped table as written, and what its message
// must carry.
type mappedRow struct {
	id        uuid.UUID
	textID    string // the id as the table holds it, when not id's text form
	aggregate string // "" when the table has no aggregate type
	typ       string
	payload   string
}

// mappedRows are payloads a polling relay would have sent as they are:
// JSON with odd spacing and key order, non-ASCII text, and text that is not
// JSON at all.
func mappedRows() []mappedRow {
	payloads := []string{
		`{"orderId":42,"total":99.5}`,
		"  {\"b\": 1,\n \"a\": [1, 2]}  ",
		`{"name":"Zoë Ångström","note":"€ — ✓"}`,
		`not json, forwarded as it is`,
		`{"orderId":43}`,
	}
	rows := make([]mappedRow, len(payloads))
	for i, p := range payloads {
		rows[i] = mappedRow{id: uuid.New(), aggregate: "Order", typ: []string{"OrderPlaced", "OrderShipped"}[i%2], payload: p}
	}
	return rows
}

// TestColumnsOutboxMessage streams the table of the first C# design, with
// the subject from its "Topic" column.
func TestColumnsOutboxMessage(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	e.pg.Exec(t, e.dsn, outboxMessageTable)
	rows := mappedRows()
	insert := func(conn *pgx.Conn, tx pgx.Tx, r mappedRow) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO "OutboxMessage" ("Id", "AggregateType", "Topic", "Payload", "CreatedAt", "Status")
			VALUES ($1, $2, $3, $4, now(), 0)`, r.id, r.aggregate, r.typ, r.payload)
		return err
	}
	msgs := e.streamMapped(rows, insert, "--table", `public."OutboxMessage"`,
		"--columns", outboxMessageColumns, "--subject", "orders.{Topic}")
	for i, m := range msgs {
		r := rows[i]
		if want := "orders." + r.typ; m.Subject != want {
			t.Errorf("message %d: subject %q, want %q", i, m.Subject, want)
		}
		if got := m.Header.Get(sink.HeaderAggregateType); got != r.aggregate {
			t.Errorf("message %d: %s = %q, want %q", i, sink.HeaderAggregateType, got, r.aggregate)
		}
	}
}

// TestColumnsOutboxMessages streams the table of the second C# design, with
// the subject from "TypeName" through the field it is mapped to, and the
// mapping from the environment.
func TestColumnsOutboxMessages(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	e.pg.Exec(t, e.dsn, outboxMessagesTable)
	t.Setenv("OUTBOXD_COLUMNS", outboxMessagesColumns)
	rows := mappedRows()
	for i := range rows {
		rows[i].aggregate = ""
	}
	insert := func(conn *pgx.Conn, tx pgx.Tx, r mappedRow) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt")
			VALUES ($1, $2, $3, now())`, r.id, r.typ, r.payload)
		return err
	}
	msgs := e.streamMapped(rows, insert, "--table", `"OutboxMessages"`, "--subject", "events.{event_type}")
	for i, m := range msgs {
		if want := "events." + rows[i].typ; m.Subject != want {
			t.Errorf("message %d: subject %q, want %q", i, m.Subject, want)
		}
		if got := m.Header.Values(sink.HeaderAggregateType); len(got) != 0 {
			t.Errorf("message %d: %s = %q, want none (the table has no aggregate type)", i, sink.HeaderAggregateType, got)
		}
	}
}

// streamMapped runs outboxd on a mapped table, writes rows (the first
// three in one transaction, the rest one each), and returns the stream's
// messages once each row's is there, after checking what every mapping
// must keep: commit order, Nats-Msg-Id from the id column, the payload's
// bytes unchanged, the event type header, no aggregate id header.
func (e *env) streamMapped(rows []mappedRow, insert func(*pgx.Conn, pgx.Tx, mappedRow) error, args ...string) []message {
	e.t.Helper()
	return e.streamMappedBatches(rows, insert, [][]mappedRow{rows[:3], rows[3:4], rows[4:]}, e.args(args...)...)
}

// streamMappedBatches is streamMapped with the transactions given and the
// whole command line.
func (e *env) streamMappedBatches(rows []mappedRow, insert func(*pgx.Conn, pgx.Tx, mappedRow) error, txs [][]mappedRow, args ...string) []message {
	e.t.Helper()
	p := e.start(args...)
	e.waitStreaming(p)
	conn := e.connect()
	ctx := context.Background()
	for _, batch := range txs {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, r := range batch {
				if err := insert(conn, tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	msgs := e.readStream(e.js(), len(rows), time.Minute)
	if len(msgs) != len(rows) {
		e.t.Fatalf("stream holds %d messages, want %d", len(msgs), len(rows))
	}
	for i, m := range msgs {
		if err := checkMapped(m, rows[i]); err != nil {
			e.t.Errorf("message %d (stream seq %d): %v", i, m.Seq, err)
		}
	}
	p.stopCleanly()
	return msgs
}

func checkMapped(m message, r mappedRow) error {
	id := r.id.String()
	if r.textID != "" {
		id = r.textID
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != id {
		return fmt.Errorf("Nats-Msg-Id %q, want %q (commit order broken?)", got, id)
	}
	if !bytes.Equal(m.Data, []byte(r.payload)) {
		return fmt.Errorf("body %q, want the payload column's bytes %q", m.Data, r.payload)
	}
	if got := m.Header.Get(sink.HeaderEventType); got != r.typ {
		return fmt.Errorf("%s = %q, want %q", sink.HeaderEventType, got, r.typ)
	}
	if got := m.Header.Values(sink.HeaderAggregateID); len(got) != 0 {
		return fmt.Errorf("%s = %q, want none (not mapped)", sink.HeaderAggregateID, got)
	}
	return nil
}

// TestColumnsBadInput: each bad --columns, or a subject placeholder the
// table cannot fill, stops outboxd before streaming with an error that
// names the value and the fix.
func TestColumnsBadInput(t *testing.T) {
	table := []string{"--table", `"OutboxMessage"`, "--subject", "orders.{Topic}"}
	tests := []struct {
		name  string
		setup string // SQL instead of outboxMessageTable
		args  []string
		want  []string
	}{
		{name: "unknown field", args: []string{"--columns", "id=Id,evnt_type=Topic,payload=Payload"},
			want: []string{"--columns", `unknown field "evnt_type"`, "use id, aggregate_type, aggregate_id, event_type, payload, headers, created_at"}},
		{name: "id not mapped", args: []string{"--columns", "event_type=Topic,payload=Payload"},
			want: []string{"--columns", "field id is not mapped", "id and payload are required"}},
		{name: "payload not mapped", args: []string{"--columns", "id=Id,event_type=Topic"},
			want: []string{"--columns", "field payload is not mapped"}},
		{name: "duplicate field", args: []string{"--columns", "id=Id,payload=Payload,id=Topic"},
			want: []string{"--columns", `field id is mapped twice (to "Id" and "Topic")`}},
		{name: "column does not exist", args: []string{"--columns", "id=Id,event_type=Topik,payload=Payload"},
			want: []string{`column "Topik" does not exist (field event_type is mapped to it)`, `"Id", "AggregateType", "Topic", "Payload", "CreatedAt", "Status"`}},
		{name: "names are case-sensitive", args: []string{"--columns", "id=id,payload=Payload"},
			want: []string{`column "id" does not exist`}},
		{name: "wrong column type", args: []string{"--columns", "id=Id,event_type=Status,payload=Payload"},
			want: []string{`column "Status" has type integer, but field event_type accepts text or varchar`}},
		{name: "timestamp id", args: []string{"--columns", "id=CreatedAt,payload=Payload"},
			want: []string{`column "CreatedAt" has type`, "but field id accepts"}},
		{name: "placeholder of no column", args: []string{"--columns", outboxMessageColumns, "--subject", "orders.{topic}"},
			want: []string{`--subject "orders.{topic}"`, "has placeholder {topic}, which is no column", "exact case"}},
		{name: "publication column list leaves a mapped column out", args: []string{"--columns", outboxMessageColumns},
			setup: strings.Replace(outboxMessageTable, `FOR TABLE "OutboxMessage"`, `FOR TABLE "OutboxMessage" ("Id", "Topic", "Payload", "CreatedAt")`, 1),
			want: []string{`publication "outboxd": publishes only the columns Id, Topic, Payload, CreatedAt of table "public"."OutboxMessage", not "AggregateType"`,
				`ALTER PUBLICATION "outboxd" DROP TABLE "public"."OutboxMessage"; ALTER PUBLICATION "outboxd" ADD TABLE "public"."OutboxMessage"`}},
		{name: "publication column list leaves a placeholder column out", args: []string{"--columns", "id=Id,payload=Payload", "--subject", "orders.{Topic}"},
			setup: strings.Replace(outboxMessageTable, `FOR TABLE "OutboxMessage"`, `FOR TABLE "OutboxMessage" ("Id", "Payload")`, 1),
			want:  []string{`not "Topic", which outboxd reads`}},
		{name: "default subject needs an unmapped field", args: []string{"--columns", "id=Id,event_type=Topic,payload=Payload", "--subject", "outbox.{aggregate_type}.{event_type}"},
			want: []string{"placeholder {aggregate_type}", "a field --columns does not map"}},
	}
	pg := pgtest.Shared(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pg, false)
			setup := outboxMessageTable
			if tt.setup != "" {
				setup = tt.setup
			}
			e.pg.Exec(t, e.dsn, setup)
			e.expectExit(e.args(append(table, tt.args...)...), tt.want...)
		})
	}
}

// TestColumnsPublicationFix: for a mixed-case table without a publication,
// outboxd's error gives SQL that quotes the name, and running that SQL is
// all it takes to stream.
func TestColumnsPublicationFix(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	table, _, _ := strings.Cut(outboxMessageTable, ";")
	e.pg.Exec(t, e.dsn, table)
	args := e.args("--table", `public."OutboxMessage"`, "--columns", outboxMessageColumns, "--subject", "orders.{Topic}")
	const fix = `CREATE PUBLICATION "outboxd" FOR TABLE "public"."OutboxMessage" WITH (publish = 'insert')`
	e.expectExit(args, `publication "outboxd": does not exist`, fix)

	e.pg.Exec(t, e.dsn, fix)
	rows := mappedRows()[:1]
	insert := func(_ *pgx.Conn, tx pgx.Tx, r mappedRow) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO "OutboxMessage" ("Id", "AggregateType", "Topic", "Payload")
			VALUES ($1, $2, $3, $4)`, r.id, r.aggregate, r.typ, r.payload)
		return err
	}
	e.streamMappedBatches(rows, insert, [][]mappedRow{rows}, args...)
}

// TestColumnsByteaPayload streams a table with a text id, a varchar type
// and a bytea payload: the body is the payload's raw bytes, NUL and
// non-UTF-8 bytes included, and Nats-Msg-Id is the text id.
func TestColumnsByteaPayload(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	e.pg.Exec(t, e.dsn, `CREATE TABLE "Events" ("EventId" text PRIMARY KEY, "Kind" varchar(100), "Body" bytea);
		CREATE PUBLICATION outboxd FOR TABLE "Events" WITH (publish = 'insert')`)
	payloads := []string{"\x00\x01\xfe\xff", "\x08\x96\x01\x12\x07testing", "", "plain \\x text"}
	rows := make([]mappedRow, len(payloads))
	for i, p := range payloads {
		rows[i] = mappedRow{id: uuid.New(), typ: "Proto", payload: p}
	}
	insert := func(_ *pgx.Conn, tx pgx.Tx, r mappedRow) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO "Events" ("EventId", "Kind", "Body") VALUES ($1, $2, $3)`,
			"evt-"+r.id.String(), r.typ, []byte(r.payload))
		return err
	}
	for i := range rows {
		rows[i].textID = "evt-" + rows[i].id.String()
	}
	e.streamMappedBatches(rows, insert, [][]mappedRow{rows[:2], rows[2:]}, e.args("--table", `"Events"`,
		"--columns", "id=EventId,event_type=Kind,payload=Body", "--subject", "bin.{Kind}")...)
}
