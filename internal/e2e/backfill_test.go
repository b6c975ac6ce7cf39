package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/sink"
)

// pendingWhere is the old relay's notion of an unsent row.
const pendingWhere = `"ProcessedAt" IS NULL`

// backfillArgs is the command line of `outboxd backfill` for this environment.
func (e *env) backfillArgs(extra ...string) []string {
	return append([]string{"backfill", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot,
		"--stream", streamName, "--log-level", "info"}, extra...)
}

// addProcessedAt gives the outbox table a polling relay's status column.
func (e *env) addProcessedAt() {
	e.t.Helper()
	e.pg.Exec(e.t, e.dsn, `ALTER TABLE outbox ADD COLUMN "ProcessedAt" timestamptz`)
}

// oldRelay simulates the polling relay being replaced: it publishes the
// oldest unsent rows in small batches with Nats-Msg-Id = id, then marks
// them sent, as an EF Core or Dapper relay does.
type oldRelay struct {
	e    *env
	conn *pgx.Conn
	js   jetstream.JetStream

	mu         sync.Mutex
	published  int // publishes acknowledged
	duplicates int // of them, ids JetStream had already
}

// header on the old relay's messages, so the test can tell who stored what.
const headerOldRelay = "Old-Relay"

func (e *env) newOldRelay() *oldRelay {
	return &oldRelay{e: e, conn: e.connect(), js: e.js()}
}

// batch publishes and marks up to n unsent rows; it returns how many.
func (r *oldRelay) batch(ctx context.Context, n int) (int, error) {
	tx, err := r.conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := tx.Query(ctx, `SELECT id::text, aggregate_type, aggregate_id, event_type, payload::text FROM outbox
		WHERE `+pendingWhere+` ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED`, n)
	if err != nil {
		return 0, err
	}
	type pending struct{ id, aggType, aggID, evType, payload string }
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pending, error) {
		var p pending
		return p, row.Scan(&p.id, &p.aggType, &p.aggID, &p.evType, &p.payload)
	})
	if err != nil {
		return 0, err
	}
	for _, p := range batch {
		msg := &nats.Msg{Subject: "outbox." + p.aggType + "." + p.evType, Data: []byte(p.payload), Header: nats.Header{
			jetstream.MsgIDHeader:    {p.id},
			sink.HeaderAggregateType: {p.aggType},
			sink.HeaderAggregateID:   {p.aggID},
			headerOldRelay:           {"true"},
		}}
		ack, err := r.js.PublishMsg(ctx, msg)
		if err != nil {
			return 0, err
		}
		r.mu.Lock()
		r.published++
		if ack.Duplicate {
			r.duplicates++
		}
		r.mu.Unlock()
		if _, err := tx.Exec(ctx, `UPDATE outbox SET "ProcessedAt" = now() WHERE id = $1`, p.id); err != nil {
			return 0, err
		}
	}
	return len(batch), tx.Commit(ctx)
}

// waitOutput waits until p's output matches re and returns the match.
func waitOutput(t *testing.T, p *proc, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.output.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			if m := re.FindStringSubmatch(p.output.String()); m != nil {
				return m
			}
			t.Fatalf("outboxd exited (%v) without printing %s:\n%s", p.err, re, tail(p.output.String(), 40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("outboxd did not print %s within %s:\n%s", re, timeout, tail(p.output.String(), 40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	progressStart = regexp.MustCompile(`backfill: 0/(\d+) rows`)
	backfilled    = regexp.MustCompile(`backfilled (\d+) rows .*\((\d+) of them acknowledged as held already, (\d+) dead-lettered\)`)
	runDuplicate  = regexp.MustCompile(`"event_id":"([^"]+)"[^\n]*duplicate absorbed by JetStream`)
)

// TestBackfillCutOver is the migration from a polling relay: rows pending
// before the cut-over, an old relay still publishing them (and newer ones)
// with the same Nats-Msg-Id while backfill reads the slot's snapshot, rows
// written during the snapshot read, then outboxd run on the slot, then the
// old relay stopped. The stream must hold every event exactly once.
func TestBackfillCutOver(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	e.addProcessedAt()
	js := e.js()
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: streamName, Subjects: []string{"outbox.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	check := checker.New()
	ctx := context.Background()
	before := e.newWriter(check, 20)
	for range 20 {
		if _, err := before.tx(ctx, 50, true); err != nil {
			t.Fatal(err)
		}
	}
	relay := e.newOldRelay()
	// Before the cut-over the old relay has sent some rows already.
	for range 5 {
		if _, err := relay.batch(ctx, 20); err != nil {
			t.Fatal(err)
		}
	}
	stopRelay := background(t, 50*time.Millisecond, func(ctx context.Context) error { _, err := relay.batch(ctx, 10); return err })

	// One publish in flight at a time keeps the snapshot read going while
	// rows are written.
	// The writer runs across the slot's creation: rows committed before its
	// consistent point are the snapshot's (backfill), rows committed after
	// it, also before the snapshot's import and during the read, are the
	// stream's (run); none may be both.
	during := e.newWriter(check, 20).background(0, 2*time.Millisecond, func(int) (int, bool) { return 3, true })
	bf := e.start(e.backfillArgs("--where", pendingWhere, "--max-in-flight", "1")...)
	total, _ := strconv.Atoi(waitOutput(t, bf, progressStart, time.Minute)[1])
	afterSnapshot := countRows(t, e)
	// Rows must commit while the snapshot read is still going on.
	writtenDuring := 0
	for running := true; running && writtenDuring < 30; {
		select {
		case <-bf.done:
			running = false
		default:
			writtenDuring = countRows(t, e) - afterSnapshot
			time.Sleep(10 * time.Millisecond)
		}
	}
	if code := bf.wait(2 * time.Minute); code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, tail(bf.output.String(), 40))
	}
	if writtenDuring < 30 {
		t.Fatalf("only %d rows were written while backfill read the snapshot: the test proves nothing", writtenDuring)
	}
	summary := waitOutput(t, bf, backfilled, time.Second)
	n, _ := strconv.Atoi(summary[1])
	heldAlready, _ := strconv.Atoi(summary[2])
	if n != total {
		t.Errorf("backfill published %d rows, its snapshot counted %d", n, total)
	}

	run := e.start(e.args()...)
	e.waitStreaming(run)
	time.Sleep(300 * time.Millisecond)
	if err := stopRelay(); err != nil {
		t.Fatalf("old relay: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := during.Stop(); err != nil {
		t.Fatalf("writer: %v", err)
	}

	msgs := e.readStream(js, check.Count(), time.Minute)
	run.stopCleanly() // its log is complete
	report := check.Verify(receivedAny(t, msgs))
	bySource := map[string]int{}
	backfilledIDs := map[string]bool{}
	for _, m := range msgs {
		switch {
		case m.Header.Get(headerOldRelay) != "":
			bySource["old relay"]++
		case m.Header.Get("Outbox-Backfill") != "":
			bySource["backfill"]++
			backfilledIDs[m.Header.Get(jetstream.MsgIDHeader)] = true
		default:
			bySource["run"]++
		}
	}
	relay.mu.Lock()
	oldPublished, oldDuplicates := relay.published, relay.duplicates
	relay.mu.Unlock()
	// Ids published twice: by backfill after the old relay, or the other
	// way round, or by run after the old relay (or before it).
	overlap := oldDuplicates + (n - bySource["backfill"])
	if heldAlready != n-bySource["backfill"] {
		t.Errorf("backfill reported %d of its %d rows already in the stream, but %d of them are not its copies", heldAlready, n, n-bySource["backfill"])
	}
	t.Logf("%s; stored by source %v; backfill published %d; old relay published %d (%d duplicates); rows in all %d",
		report, bySource, n, oldPublished, oldDuplicates, countRows(t, e))
	if report.Lost != 0 || report.Unexpected != 0 || report.Duplicates != 0 {
		t.Errorf("stream check failed: %s", report)
	}
	// A row in both the snapshot and the stream is a duplicate run's
	// publish of it meets: the read was not the slot's snapshot.
	runDuplicates := runDuplicate.FindAllStringSubmatch(run.output.String(), -1)
	t.Logf("run met %d duplicates", len(runDuplicates))
	for _, m := range runDuplicates {
		if backfilledIDs[m[1]] {
			t.Errorf("run streamed %s, which backfill had published from the snapshot: snapshot and stream overlap", m[1])
		}
	}
	for _, source := range []string{"old relay", "backfill", "run"} {
		if bySource[source] == 0 {
			t.Errorf("no message in the stream came from %s: the cut-over was not exercised", source)
		}
	}
	if overlap == 0 {
		t.Errorf("no id was published twice: the old relay never overlapped with backfill or run")
	}
}

// countRows counts the outbox rows.
func countRows(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.connect().QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// receivedAny is received for a stream that also holds the old relay's
// messages, which carry no Outbox-Lsn (they count as 0/0): order across
// the cut-over is not checked (the old relay publishes concurrently).
func receivedAny(t *testing.T, msgs []message) []checker.Received {
	t.Helper()
	withLSN := make([]message, len(msgs))
	for i, m := range msgs {
		withLSN[i] = m
		if m.Header.Get(sink.HeaderLSN) == "" {
			withLSN[i].Header = nats.Header{sink.HeaderLSN: {"0/0"}}
			for k, v := range m.Header {
				withLSN[i].Header[k] = v
			}
		}
	}
	return received(t, withLSN)
}

// slotExists reports whether the environment's slot exists.
func (e *env) slotExists() bool {
	e.t.Helper()
	var n int
	if err := e.connect().QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n > 0
}

// TestBackfillBadInput: each bad predicate or state stops backfill with a
// message naming it and the fix, publishes nothing, and leaves no slot it
// created behind.
func TestBackfillBadInput(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(t *testing.T, e *env)
		args      func(e *env) []string
		want      []string
		keepSlot  bool // the slot existed before: backfill must not drop it
		published int  // messages the setup put in the stream
	}{
		{
			name: "empty predicate",
			args: func(e *env) []string { return e.backfillArgs("--create-stream", "--where", " ") },
			want: []string{"--where is empty", `--where '"ProcessedAt" IS NULL'`},
		},
		{
			name: "syntax error",
			args: func(e *env) []string { return e.backfillArgs("--create-stream", "--where", `"ProcessedAt" IS`) },
			want: []string{`--where "\"ProcessedAt\" IS" has a syntax error at its end`, "SQLSTATE 42601"},
		},
		{
			name: "syntax error inside",
			args: func(e *env) []string {
				return e.backfillArgs("--create-stream", "--where", `"ProcessedAt" IS NULL ANDD true`)
			},
			want: []string{"has a syntax error at character 23", `"ANDD"`},
		},
		{
			name: "unknown column",
			args: func(e *env) []string { return e.backfillArgs("--create-stream", "--where", `ProcessedAt IS NULL`) },
			want: []string{`names a column "public"."outbox" does not have`, `column "processedat" does not exist`,
				`"ProcessedAt"`, "mixed-case names need double quotes"},
		},
		{
			name: "predicate that writes",
			setup: func(t *testing.T, e *env) {
				e.pg.Exec(t, e.dsn, "CREATE SEQUENCE side_effect")
				if _, err := e.newWriter(checker.New(), 1).tx(context.Background(), 1, true); err != nil {
					t.Fatal(err)
				}
			},
			args: func(e *env) []string {
				return e.backfillArgs("--create-stream", "--where", `nextval('side_effect') > 0`)
			},
			want: []string{"SQLSTATE 25006", "the predicate must only read", "was dropped again"},
		},
		{
			name: "predicate failing at run time",
			setup: func(t *testing.T, e *env) {
				w := e.newWriter(checker.New(), 1)
				if _, err := w.tx(context.Background(), 3, true); err != nil {
					t.Fatal(err)
				}
			},
			// Only rows reveal it, so it fails inside the snapshot, after
			// the slot was created: backfill drops the slot again.
			args: func(e *env) []string {
				return e.backfillArgs("--create-stream", "--where", `1 / (length(aggregate_type) - length(aggregate_type)) = 0`)
			},
			want: []string{"division by zero", "SQLSTATE 22012", "was dropped again, so backfill can be run again"},
		},
		{
			name: "slot exists",
			setup: func(t *testing.T, e *env) {
				e.pg.Exec(t, e.dsn, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", e.slot)
			},
			args:     func(e *env) []string { return e.backfillArgs("--create-stream", "--where", pendingWhere) },
			want:     []string{"already exists: backfill needs the snapshot", "pg_drop_replication_slot", "another --slot"},
			keepSlot: true,
		},
		{
			name: "no table",
			args: func(e *env) []string { return e.backfillArgs("--create-stream", "--table", "", "--where", "true") },
			want: []string{"--table is empty: backfill reads the rows of an outbox table"},
		},
		{
			name: "checkpoint of an earlier slot",
			setup: func(t *testing.T, e *env) {
				// A run that published one event saved a checkpoint.
				run := e.start(e.args()...)
				e.waitStreaming(run)
				if _, err := e.newWriter(checker.New(), 1).tx(context.Background(), 1, true); err != nil {
					t.Fatal(err)
				}
				e.readStream(e.js(), 1, 30*time.Second)
				run.stopCleanly()
				e.pg.Exec(t, e.dsn, "SELECT pg_drop_replication_slot($1)", e.slot)
			},
			args:      func(e *env) []string { return e.backfillArgs("--create-stream", "--where", pendingWhere) },
			want:      []string{"checkpoint kv:outboxd/", "already holds position", "pass another --slot"},
			published: 1,
		},
		{
			name: "row without id and a dead-letter subject",
			setup: func(t *testing.T, e *env) {
				e.pg.Exec(t, e.dsn, `CREATE TABLE "OutboxMessages" ("Id" uuid, "TypeName" text, "Content" text, "CreatedAt" timestamptz);
					CREATE PUBLICATION bf FOR TABLE "OutboxMessages" WITH (publish = 'insert');
					INSERT INTO "OutboxMessages" VALUES (NULL, 'A', '{}', now()), (NULL, 'B', '{}', now())`)
			},
			args: func(e *env) []string {
				return e.backfillArgs("--create-stream", "--where", "true", "--table", `"OutboxMessages"`, "--publication", "bf",
					"--columns", outboxMessagesColumns, "--subject", "outbox.{event_type}", "--dead-letter", "outbox.dead")
			},
			want: []string{`snapshot outbox row id unknown`, `column "Id" is NULL`, "cannot dead-letter a row without an id", "--where",
				"was dropped again"},
		},
		{
			name: "stream missing",
			args: func(e *env) []string { return e.backfillArgs("--where", pendingWhere) },
			want: []string{fmt.Sprintf("stream %q does not exist", streamName), "--create-stream"},
		},
	}
	pg := pgtest.Shared(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pg, true)
			e.addProcessedAt()
			if tt.setup != nil {
				tt.setup(t, e)
			}
			out := e.expectExit(tt.args(e), tt.want...)
			t.Logf("output:\n%s", tail(out, 3))
			if got := e.slotExists(); got != tt.keepSlot {
				t.Errorf("slot exists after the failure: %v, want %v", got, tt.keepSlot)
			}
			if stream, err := e.js().Stream(context.Background(), streamName); err == nil {
				if n := stream.CachedInfo().State.Msgs; n != uint64(tt.published) {
					t.Errorf("stream holds %d messages after a failed backfill, want %d", n, tt.published)
				}
			}
		})
	}
}

// TestBackfillThenRunDefaultTable is the plain case on outboxd's own table
// (no old relay): every row before the slot comes from backfill, every
// later one from run, in (created_at, id) order, with the headers run
// gives and Outbox-Backfill marking the first.
func TestBackfillThenRunDefaultTable(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 5)
	// One row per transaction: rows of one transaction share created_at
	// and go out in id order, which the checker would call a reordering.
	for range 100 {
		if _, err := w.tx(context.Background(), 1, true); err != nil {
			t.Fatal(err)
		}
	}
	out := e.runOK(e.backfillArgs("--create-stream", "--where", "true")...)
	if !strings.Contains(out, "backfilled 100 rows") || !strings.Contains(out, "backfill: 100/100 rows (100.0%)") {
		t.Errorf("backfill output lacks the count or the final progress line:\n%s", out)
	}
	run := e.start(e.args()...)
	e.waitStreaming(run)
	if _, err := w.tx(context.Background(), 10, true); err != nil {
		t.Fatal(err)
	}
	msgs := e.readStream(e.js(), check.Count(), time.Minute)
	if report := check.Verify(received(t, msgs)); !report.OK() {
		t.Errorf("stream check failed: %s", report)
	}
	for i, m := range msgs {
		backfill := m.Header.Get("Outbox-Backfill") == "true"
		if backfill != (i < 100) {
			t.Errorf("message %d: Outbox-Backfill %q, want it on the first 100 only", i+1, m.Header.Get("Outbox-Backfill"))
		}
		if !strings.HasPrefix(m.Subject, "outbox.") || m.Header.Get(sink.HeaderEventType) == "" {
			t.Errorf("message %d: subject %q, event type %q: not what run publishes", i+1, m.Subject, m.Header.Get(sink.HeaderEventType))
		}
	}
	run.stopCleanly()
}

// TestBackfillOutboxMessages is the cut-over from the second C# design's
// table, mapped with --columns: the rows whose "ProcessedAt" is NULL come
// from backfill in "CreatedAt" order, the ones the old relay sent are not
// published again, and later rows come from run, all with the subject
// from "TypeName" and the same mapping.
func TestBackfillOutboxMessages(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	e.pg.Exec(t, e.dsn, outboxMessagesTable)
	mapping := []string{"--table", `"OutboxMessages"`, "--columns", outboxMessagesColumns, "--subject", "events.{event_type}"}
	rows := mappedRows()
	for i := range rows {
		rows[i].aggregate = ""
	}
	conn := e.connect()
	ctx := context.Background()
	// Rows written newest first: backfill must still send them oldest
	// "CreatedAt" first. Every third one the old relay has sent.
	base := time.Now().Add(-time.Hour)
	var pending []mappedRow
	for i := len(rows) - 1; i >= 0; i-- {
		var processed *time.Time
		if i%3 == 0 {
			processed = &base
		}
		if _, err := conn.Exec(ctx, `INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt", "ProcessedAt")
			VALUES ($1, $2, $3, $4, $5)`, rows[i].id, rows[i].typ, rows[i].payload, base.Add(time.Duration(i)*time.Second), processed); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range rows {
		if i%3 != 0 {
			pending = append(pending, r)
		}
	}
	out := e.runOK(e.backfillArgs(append(mapping, "--create-stream", "--where", pendingWhere)...)...)
	if want := fmt.Sprintf("backfilled %d rows", len(pending)); !strings.Contains(out, want) {
		t.Errorf("backfill output lacks %q:\n%s", want, out)
	}
	run := e.start(e.args(mapping...)...)
	e.waitStreaming(run)
	later := mappedRows()[:2]
	for i := range later {
		later[i].aggregate = ""
		if _, err := conn.Exec(ctx, `INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt") VALUES ($1, $2, $3, now())`,
			later[i].id, later[i].typ, later[i].payload); err != nil {
			t.Fatal(err)
		}
	}
	want := append(pending, later...)
	msgs := e.readStream(e.js(), len(want), time.Minute)
	if len(msgs) != len(want) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if err := checkMapped(m, want[i]); err != nil {
			t.Errorf("message %d: %v", i, err)
		}
		if subject := "events." + want[i].typ; m.Subject != subject {
			t.Errorf("message %d: subject %q, want %q", i, m.Subject, subject)
		}
		if backfill := m.Header.Get("Outbox-Backfill") == "true"; backfill != (i < len(pending)) {
			t.Errorf("message %d: Outbox-Backfill %v, want it on the %d backfilled rows only", i, backfill, len(pending))
		}
	}
	run.stopCleanly()
}

// TestBackfillPublicationRowFilter: a publication with a row filter
// leaves rows out of the stream, and backfill leaves the same rows out.
func TestBackfillPublicationRowFilter(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	e.pg.Exec(t, e.dsn, `ALTER PUBLICATION outboxd SET TABLE outbox WHERE (aggregate_type <> 'invoice')`)
	w := e.newWriter(checker.New(), 3)
	rows, err := w.tx(context.Background(), 30, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, r := range rows {
		if r.AggregateType != "invoice" {
			want[r.ID.String()] = true
		}
	}
	out := e.runOK(e.backfillArgs("--create-stream", "--where", "true")...)
	if s := fmt.Sprintf("backfilled %d rows", len(want)); !strings.Contains(out, s) {
		t.Errorf("backfill output lacks %q:\n%s", s, out)
	}
	msgs := e.readStream(e.js(), len(want), 30*time.Second)
	if len(msgs) != len(want) {
		t.Fatalf("stream holds %d messages, want the %d rows the publication publishes", len(msgs), len(want))
	}
	for _, m := range msgs {
		if id := m.Header.Get(jetstream.MsgIDHeader); !want[id] {
			t.Errorf("backfill published %s (%s), which the publication's row filter leaves out", id, m.Header.Get(sink.HeaderAggregateType))
		}
	}
}

// TestBackfillDeadLetter: a row that cannot be published (its subject
// value holds a dot) stops backfill, naming the row, and the slot is
// dropped again; with --dead-letter it goes there and the others are
// published.
func TestBackfillDeadLetter(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	w := e.newWriter(checker.New(), 3)
	rows, err := w.tx(context.Background(), 3, true)
	if err != nil {
		t.Fatal(err)
	}
	e.pg.Exec(t, e.dsn, `UPDATE outbox SET aggregate_type = 'bad.type' WHERE id = $1`, rows[1].ID)
	e.expectExit(e.backfillArgs("--create-stream", "--where", "true"),
		rows[1].ID.String(), "cannot fill subject placeholder {aggregate_type}", "was dropped again")
	if e.slotExists() {
		t.Fatal("the slot is left after the failed backfill")
	}
	out := e.runOK(e.backfillArgs("--create-stream", "--where", "true", "--dead-letter", "outbox.dead")...)
	if !strings.Contains(out, "backfilled 3 rows") || !strings.Contains(out, ", 1 dead-lettered)") {
		t.Errorf("backfill summary does not count 3 rows and 1 dead letter:\n%s", tail(out, 3))
	}
	msgs := e.readStream(e.js(), 3, 30*time.Second)
	dead := 0
	for _, m := range msgs {
		if m.Subject == "outbox.dead" {
			dead++
			if id := m.Header.Get(sink.HeaderID); id != rows[1].ID.String() || m.Header.Get(sink.HeaderDeadLetterReason) == "" {
				t.Errorf("dead letter for row %q with reason %q, want row %s with a reason", id, m.Header.Get(sink.HeaderDeadLetterReason), rows[1].ID)
			}
		}
	}
	if len(msgs) != 3 || dead != 1 {
		t.Errorf("stream holds %d messages, %d dead letters; want 3 and 1", len(msgs), dead)
	}
}

// TestBackfillInterrupted: SIGTERM in the middle of the snapshot read
// stops backfill with exit status 1, says so, and drops the slot, so that
// running it again starts over.
func TestBackfillInterrupted(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	w := e.newWriter(checker.New(), 3)
	for range 4 {
		if _, err := w.tx(context.Background(), 500, true); err != nil {
			t.Fatal(err)
		}
	}
	bf := e.start(e.backfillArgs("--create-stream", "--where", "true", "--max-in-flight", "1")...)
	waitOutput(t, bf, progressStart, time.Minute)
	if code := bf.stop(time.Minute); code != 1 {
		t.Fatalf("backfill exited %d after SIGTERM, want 1:\n%s", code, tail(bf.output.String(), 20))
	}
	out := bf.output.String()
	for _, want := range []string{"backfill interrupted (SIGINT or SIGTERM)", "was dropped again"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out, 20))
		}
	}
	if e.slotExists() {
		t.Error("the slot is left after the interrupted backfill")
	}
	out = e.runOK(e.backfillArgs("--where", "true")...)
	if !strings.Contains(out, "backfilled 2000 rows") {
		t.Errorf("the second backfill did not publish every row:\n%s", tail(out, 10))
	}
}

// TestBackfillRate measures how fast backfill publishes a table's rows,
// process start and checks included, and checks that it published them
// all. OUTBOXD_TEST_BACKFILL_ROWS sets the row count (default 2,000).
func TestBackfillRate(t *testing.T) {
	n := 2000
	if v := os.Getenv("OUTBOXD_TEST_BACKFILL_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("OUTBOXD_TEST_BACKFILL_ROWS=%q is not a positive count", v)
		}
	}
	e := newEnv(t, pgtest.Shared(t), true)
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{uuid.New(), "order", fmt.Sprintf("agg-%d", i%100), "Created", fmt.Sprintf(`{"n": %d, "note": "event %d"}`, i, i)}
	}
	if _, err := e.connect().CopyFrom(context.Background(), pgx.Identifier{"outbox"},
		[]string{"id", "aggregate_type", "aggregate_id", "event_type", "payload"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := e.runOK(e.backfillArgs("--create-stream", "--where", "true")...)
	elapsed := time.Since(start)
	if want := fmt.Sprintf("backfilled %d rows", n); !strings.Contains(out, want) {
		t.Fatalf("backfill output lacks %q:\n%s", want, tail(out, 5))
	}
	stream, err := e.js().Stream(context.Background(), streamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := stream.CachedInfo().State.Msgs; got != uint64(n) {
		t.Errorf("stream holds %d messages, want %d", got, n)
	}
	t.Logf("backfill published %d rows in %s: %.0f rows/s", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
}

// TestBackfillUnpublishedColumns: a row read from the snapshot carries
// only the columns pgoutput sends, so a subject placeholder on a generated
// column fails in backfill, on the row, as it fails in run, instead of
// filling the subject; one on a column the publication's column list
// leaves out is refused before the slot exists, as run refuses it.
func TestBackfillUnpublishedColumns(t *testing.T) {
	for _, tt := range []struct{ name, setup, want string }{
		{"generated column", `ALTER TABLE outbox ADD COLUMN tenant text GENERATED ALWAYS AS ('acme') STORED`,
			`column "tenant" of table "public"."outbox": is a generated column`},
		{"column list", `ALTER TABLE outbox ADD COLUMN tenant text DEFAULT 'acme';
			ALTER PUBLICATION outboxd SET TABLE outbox (id, aggregate_type, aggregate_id, event_type, payload, headers, created_at)`,
			`not "tenant", which outboxd reads`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.Shared(t), true)
			e.pg.Exec(t, e.dsn, tt.setup)
			if _, err := e.newWriter(checker.New(), 1).tx(context.Background(), 2, true); err != nil {
				t.Fatal(err)
			}
			e.expectExit(e.backfillArgs("--create-stream", "--where", "true", "--subject", "outbox.{tenant}"), tt.want)
			if e.slotExists() {
				t.Error("the slot is left after the failed backfill")
			}
		})
	}
}

// TestBackfillStatementTimeout: a statement_timeout set for the database
// does not cut the snapshot read, however long it takes.
func TestBackfillStatementTimeout(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	if _, err := e.newWriter(checker.New(), 1).tx(context.Background(), 3, true); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	e.pg.Exec(t, e.dsn, fmt.Sprintf(`ALTER DATABASE %s SET statement_timeout = '300ms'`, pgx.Identifier{cfg.Database}.Sanitize()))
	// Each row takes 0.2 s to select: the count and the read take 0.6 s.
	out := e.runOK(e.backfillArgs("--create-stream", "--where", "pg_sleep(0.2) IS NOT NULL")...)
	if !strings.Contains(out, "backfilled 3 rows") {
		t.Errorf("backfill output lacks the 3 rows:\n%s", tail(out, 5))
	}
}

// TestBackfillLeastPrivilegeRole: backfill needs no more than run does: it
// works as the role `outboxd migrate --role` makes (LOGIN REPLICATION,
// SELECT on the outbox), which no superuser is.
func TestBackfillLeastPrivilegeRole(t *testing.T) {
	e := newRoleEnv(t)
	if _, err := e.newWriter(checker.New(), 2).tx(context.Background(), 20, true); err != nil {
		t.Fatal(err)
	}
	args := e.backfillArgs("--create-stream", "--where", "true")
	args[2] = withURL(t, e.dsn, relayRole)
	out := e.runOK(args...)
	if !strings.Contains(out, "backfilled 20 rows") || strings.Contains(out, "permission denied") {
		t.Errorf("backfill as %s:\n%s", relayRole, tail(out, 10))
	}
}
