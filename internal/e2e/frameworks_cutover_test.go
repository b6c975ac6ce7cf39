package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The cut-over of docs/migrating.md on the framework tables: the
// framework's own relay keeps publishing (and marking rows sent its way)
// while an application keeps inserting; backfill publishes the rows still
// pending at the slot's snapshot, run streams the rest, then the old relay
// stops. The stream must end with every row exactly once, and outboxd's
// copies of one transaction's rows in insert order.

// frameworkRelay is how a framework's table is written and how its own
// relay publishes and marks rows sent.
type frameworkRelay struct {
	fixture  string // frameworkCases' fixture: DDL and mapping
	setup    string // SQL after the DDL
	subjects string // what the stream captures
	newID    func(n int) string
	// insert writes row n: $1 its id, $2 its JSON body.
	insert string
	// pending is the backfill --where of rows the old relay has not sent.
	pending string
	// pick selects up to $1 unsent rows, in the relay's order, locked:
	// the id and the body the relay publishes.
	pick string
	// markSent records that the relay sent row $1.
	markSent string
}

func frameworkRelays() []frameworkRelay {
	uuids := func(int) string { return uuid.NewString() }
	return []frameworkRelay{
		{
			// MassTransit's delivery service removes delivered messages.
			fixture: "masstransit", subjects: "masstransit.>", newID: uuids,
			insert: `INSERT INTO "OutboxMessage" ("SentTime", "Headers", "MessageId", "ContentType", "MessageType", "Body")
				VALUES (now(), '{"Tenant-Id": "acme"}', $1::uuid, 'application/vnd.masstransit+json', 'urn:message:Shop.Contracts:OrderSubmitted', $2)`,
			pending:  "true",
			pick:     `SELECT "MessageId"::text, "Body" FROM "OutboxMessage" ORDER BY "SequenceNumber" LIMIT $1 FOR UPDATE SKIP LOCKED`,
			markSent: `DELETE FROM "OutboxMessage" WHERE "MessageId" = $1::uuid`,
		},
		{
			// CAP's dispatcher sets StatusName to Succeeded.
			fixture: "cap", subjects: "cap.>", newID: func(n int) string { return strconv.Itoa(2857008912166200000 + n) },
			insert: `INSERT INTO "cap"."published" ("Id", "Version", "Name", "Content", "Retries", "Added", "ExpiresAt", "StatusName")
				VALUES ($1::bigint, 'v1', 'shop.order.paid', '{"Headers":{"cap-msg-id":"' || $1 || '","cap-msg-name":"shop.order.paid"},"Value":' || $2 || '}',
				0, localtimestamp, NULL, 'Scheduled')`,
			pending:  `"StatusName" <> 'Succeeded'`,
			pick:     `SELECT "Id"::text, ("Content"::json -> 'Value')::text FROM "cap"."published" WHERE "StatusName" <> 'Succeeded' ORDER BY "Id" LIMIT $1 FOR UPDATE SKIP LOCKED`,
			markSent: `UPDATE "cap"."published" SET "StatusName" = 'Succeeded', "ExpiresAt" = now() + interval '1 day' WHERE "Id" = $1::bigint`,
		},
		{
			// A hand-written EF Core relay sets ProcessedAt; CreatedAt is
			// DateTime.UtcNow per event.
			fixture: "efcore", subjects: "efcore.>", newID: uuids,
			insert: `INSERT INTO "OutboxMessages" ("Id", "TypeName", "Content", "CreatedAt")
				VALUES ($1::uuid, 'MyApp.Events.OrderPaid, MyApp', $2, clock_timestamp())`,
			pending:  `"ProcessedAt" IS NULL`,
			pick:     `SELECT "Id"::text, "Content" FROM "OutboxMessages" WHERE "ProcessedAt" IS NULL ORDER BY "CreatedAt" LIMIT $1 FOR UPDATE SKIP LOCKED`,
			markSent: `UPDATE "OutboxMessages" SET "ProcessedAt" = now() WHERE "Id" = $1::uuid`,
		},
		{
			// Watermill's forwarder is a SQL subscriber: it acknowledges by
			// moving its consumer group's offset, and reads only
			// transactions below the snapshot's xmin, so that one still
			// open is not skipped.
			fixture: "watermill", subjects: "watermill.>", newID: uuids,
			setup: `CREATE TABLE "watermill_offsets_orders" (consumer_group varchar(255) NOT NULL PRIMARY KEY,
				offset_acked bigint, last_processed_transaction_id xid8 NOT NULL)`,
			insert: `INSERT INTO "watermill_orders" (uuid, payload, metadata, transaction_id)
				VALUES ($1, $2::json, '{"name":"events.OrderPaid"}', pg_current_xact_id())`,
			pending: `NOT EXISTS (SELECT 1 FROM "watermill_offsets_orders" o WHERE o.consumer_group = 'forwarder' ` +
				`AND (o.last_processed_transaction_id, o.offset_acked) >= ("watermill_orders".transaction_id, "watermill_orders"."offset"))`,
			pick: `SELECT m.uuid, m.payload::text FROM "watermill_orders" m
				LEFT JOIN "watermill_offsets_orders" o ON o.consumer_group = 'forwarder'
				WHERE m.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
				AND (o.consumer_group IS NULL OR (m.transaction_id, m."offset") > (o.last_processed_transaction_id, o.offset_acked))
				ORDER BY m.transaction_id, m."offset" LIMIT $1`,
			markSent: `INSERT INTO "watermill_offsets_orders" (consumer_group, offset_acked, last_processed_transaction_id)
				SELECT 'forwarder', "offset", transaction_id FROM "watermill_orders" WHERE uuid = $1
				ON CONFLICT (consumer_group) DO UPDATE SET offset_acked = EXCLUDED.offset_acked,
				last_processed_transaction_id = EXCLUDED.last_processed_transaction_id`,
		},
	}
}

// TestFrameworkTablesCutOver follows the migration guide on each
// framework's table with its relay and a writer running.
func TestFrameworkTablesCutOver(t *testing.T) {
	for _, fr := range frameworkRelays() {
		fc := frameworkCaseOf(t, fr.fixture)
		t.Run(fc.name, func(t *testing.T) {
			e, _ := newFrameworkEnv(t, fc)
			if fr.setup != "" {
				e.pg.Exec(t, e.dsn, fr.setup)
			}
			js := e.js()
			if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: streamName, Subjects: []string{fr.subjects},
				Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			w := &frameworkWriter{e: e, fr: fr, conn: e.connect()}
			for range 10 {
				w.tx(3)
			}
			old := &frameworkOldRelay{fr: fr, conn: e.connect(), js: js, subject: strings.TrimSuffix(fr.subjects, ">") + "legacy"}
			for range 2 {
				if _, err := old.batch(t.Context(), 5); err != nil {
					t.Fatal(err)
				}
			}
			stopOld := background(t, 50*time.Millisecond, func(ctx context.Context) error { _, err := old.batch(ctx, 5); return err })
			stopWriter := background(t, 5*time.Millisecond, func(context.Context) error { w.tx(3); return nil })

			args := append(append([]string{}, fc.mapping...), "--where", fr.pending, "--max-in-flight", "1")
			if fc.orderBy != "" {
				args = append(args, "--order-by", fc.orderBy)
			}
			out := e.runOK(e.backfillArgs(args...)...)
			summary := backfilled.FindStringSubmatch(out)
			if summary == nil {
				t.Fatalf("backfill printed no summary:\n%s", tail(out, 20))
			}
			heldAlready, _ := strconv.Atoi(summary[2])
			run := e.start(e.args(fc.mapping...)...)
			e.waitStreaming(run)
			time.Sleep(300 * time.Millisecond)
			if err := stopOld(); err != nil {
				t.Fatalf("old relay: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			if err := stopWriter(); err != nil {
				t.Fatalf("writer: %v", err)
			}
			written := w.written()
			msgs := e.readStream(js, len(written), time.Minute)
			run.stopCleanly()
			oldStored := checkCutOver(t, msgs, w.transactions())
			// Ids published twice: by the old relay after outboxd, or by
			// backfill after the old relay (run's repeats are not counted).
			overlap := old.sent() - oldStored + heldAlready
			t.Logf("the old relay published %d, %d of them stored; backfill found %d held already", old.sent(), oldStored, heldAlready)
			if overlap == 0 {
				t.Errorf("no id was published by both: the old relay never overlapped with outboxd")
			}
		})
	}
}

// checkCutOver: every written id exactly once, nothing else; outboxd's
// copies of one transaction in insert order; both the old relay and
// outboxd stored some. It returns how many the old relay stored.
func checkCutOver(t *testing.T, msgs []message, txs [][]string) int {
	t.Helper()
	written := map[string]bool{}
	for _, tx := range txs {
		for _, id := range tx {
			written[id] = true
		}
	}
	seen := map[string]int{} // id → stream position
	bySource := map[string]int{}
	for i, m := range msgs {
		id := m.Header.Get(jetstream.MsgIDHeader)
		if !written[id] {
			t.Errorf("stream holds %q, which no transaction wrote", id)
		}
		if _, dup := seen[id]; dup {
			t.Errorf("stream holds %q twice", id)
		}
		seen[id] = i
		if m.Header.Get(headerOldRelay) != "" {
			bySource["old relay"]++
		} else {
			bySource["outboxd"]++
		}
	}
	for id := range written {
		if _, ok := seen[id]; !ok {
			t.Errorf("row %s is not in the stream: lost in the cut-over", id)
		}
	}
	for _, tx := range txs {
		last := -1
		for _, id := range tx {
			i, ok := seen[id]
			if !ok || msgs[i].Header.Get(headerOldRelay) != "" {
				continue
			}
			if i < last {
				t.Errorf("transaction %v: outboxd stored %s before a row inserted before it", tx, id)
			}
			last = i
		}
	}
	t.Logf("%d rows in %d transactions; stored by source %v", len(written), len(txs), bySource)
	if bySource["old relay"] == 0 || bySource["outboxd"] == 0 {
		t.Errorf("stored by source %v: the cut-over was not exercised", bySource)
	}
	return bySource["old relay"]
}

// frameworkWriter inserts rows as the application does, n per transaction.
type frameworkWriter struct {
	e    *env
	fr   frameworkRelay
	conn *pgx.Conn

	mu  sync.Mutex
	txs [][]string
	n   int
}

// tx writes one transaction of size rows. It is not cancelled: a commit
// cut short would leave the test not knowing whether its rows exist.
func (w *frameworkWriter) tx(size int) {
	ctx := context.Background()
	var ids []string
	err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
		for range size {
			w.n++
			id := w.fr.newID(w.n)
			if _, err := tx.Exec(ctx, w.fr.insert, id, fmt.Sprintf(`{"n": %d}`, w.n)); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		w.e.t.Errorf("writer: %v", err)
		return
	}
	w.mu.Lock()
	w.txs = append(w.txs, ids)
	w.mu.Unlock()
}

func (w *frameworkWriter) transactions() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.txs
}

func (w *frameworkWriter) written() []string {
	var ids []string
	for _, tx := range w.transactions() {
		ids = append(ids, tx...)
	}
	return ids
}

// frameworkOldRelay is the framework's own relay: it publishes unsent
// rows with Nats-Msg-Id = the row's id, then marks them sent.
type frameworkOldRelay struct {
	fr      frameworkRelay
	conn    *pgx.Conn
	js      jetstream.JetStream
	subject string

	mu        sync.Mutex
	published int
}

func (r *frameworkOldRelay) batch(ctx context.Context, n int) (int, error) {
	tx, err := r.conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	rows, err := tx.Query(ctx, r.fr.pick, n)
	if err != nil {
		return 0, err
	}
	type pending struct{ id, body string }
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pending, error) {
		var p pending
		return p, row.Scan(&p.id, &p.body)
	})
	if err != nil {
		return 0, err
	}
	for _, p := range batch {
		msg := &nats.Msg{Subject: r.subject, Data: []byte(p.body), Header: nats.Header{jetstream.MsgIDHeader: {p.id}, headerOldRelay: {"true"}}}
		if _, err := r.js.PublishMsg(ctx, msg); err != nil {
			return 0, err
		}
		r.mu.Lock()
		r.published++
		r.mu.Unlock()
		if _, err := tx.Exec(ctx, r.fr.markSent, p.id); err != nil {
			return 0, err
		}
	}
	return len(batch), tx.Commit(ctx)
}

func (r *frameworkOldRelay) sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.published
}

// background runs step every pace until the returned stop is called; stop
// returns step's first error. The test's cleanup stops it too.
func background(t *testing.T, pace time.Duration, step func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := step(ctx); err != nil && ctx.Err() == nil {
				done <- err
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(pace):
			}
		}
		done <- nil
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() }) //nolint:errcheck
	return stop
}
