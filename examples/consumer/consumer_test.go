package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/examples/consumer"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.MainLeakChecked(m)) }

// ackWait is short so that a message whose consumer died comes again soon.
const ackWait = time.Second

// fixture is one test's stream, durable consumer and database, with the
// inbox and a business table that records every write it gets: a ledger
// without a unique key, so that an event applied twice shows as two rows.
type fixture struct {
	srv  *natstest.Server
	js   jetstream.JetStream
	cons jetstream.Consumer
	db   *pgx.Conn
	dsn  string
	c    *consumer.Consumer
	log  *bytes.Buffer // c.Logger's output; read it after Run returned
}

const ledgerTable = `CREATE TABLE ledger (
    event_id text    NOT NULL,
    amount   numeric NOT NULL
)`

func newFixture(t *testing.T, stream jetstream.StreamConfig) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{srv: natstest.Start(t), log: &bytes.Buffer{}}
	f.js = f.srv.JetStream(t)
	stream.Name, stream.Subjects = "OUTBOX", []string{"outbox.>"}
	if _, err := f.js.CreateStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	var err error
	f.cons, err = f.js.CreateOrUpdateConsumer(ctx, "OUTBOX", jetstream.ConsumerConfig{
		Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.dsn = pgtest.Shared(t).NewDatabase(t)
	f.db = f.connect(t)
	for _, ddl := range []string{consumer.InboxTable, ledgerTable} {
		if _, err := f.db.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	f.c = &consumer.Consumer{Name: "billing", DB: f.db, Handle: writeLedger,
		RetryDelay: 100 * time.Millisecond, Logger: zerolog.New(f.log)}
	return f
}

// connect opens another connection to the test's database.
func (f *fixture) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// writeLedger is the business write: one ledger row per call.
func writeLedger(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
	var event struct{ Amount float64 }
	if err := json.Unmarshal(msg.Data(), &event); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	_, err := tx.Exec(ctx, "INSERT INTO ledger (event_id, amount) VALUES ($1, $2)",
		msg.Headers().Get(jetstream.MsgIDHeader), event.Amount)
	return err
}

// publish publishes n events with fresh ids, as outboxd would, and returns
// the ids in order.
func (f *fixture) publish(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		f.publishID(t, ids[i], i+1)
	}
	return ids
}

func (f *fixture) publishID(t *testing.T, id string, amount int) *jetstream.PubAck {
	t.Helper()
	ack, err := f.js.Publish(context.Background(), "outbox.order.created",
		fmt.Appendf(nil, `{"amount": %d}`, amount), jetstream.WithMsgID(id))
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// run runs f.c until the JetStream consumer has nothing left to deliver or
// to be acked, then stops it. It fails the test when that does not happen
// within 15s: a message that keeps failing stays pending.
func (f *fixture) run(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var g errgroup.Group
	g.Go(func() error { return f.c.Run(ctx, f.cons) })
	info, waitErr := f.waitSettled(ctx)
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if waitErr != nil {
		t.Fatalf("%v\nlog:\n%s", waitErr, f.log)
	}
	return info
}

func (f *fixture) waitSettled(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := f.cons.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return info, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after 15s the consumer still has %d messages to deliver and %d unacknowledged (%d redelivered)",
				info.NumPending, info.NumAckPending, info.NumRedelivered)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ledger returns how many ledger rows each event got.
func (f *fixture) ledger(t *testing.T) map[string]int {
	t.Helper()
	rows, err := f.db.Query(context.Background(), "SELECT event_id, count(*) FROM ledger GROUP BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func (f *fixture) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := f.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkOnce fails the test unless the ledger holds each of ids exactly once
// and nothing else.
func checkOnce(t *testing.T, got map[string]int, ids []string) {
	t.Helper()
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("event %s: %d ledger rows, want 1", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("ledger holds %d events, want %d: %v", len(got), len(ids), got)
	}
}

// TestRedeliveryChangesNothing applies every event once while JetStream
// delivers it again in each way it does: a consumer that committed and
// then nak'ed (a retry after the commit), one that committed and died
// before its ack (AckWait expiry), and a copy published again after the
// stream's duplicate window, which the stream stores twice.
func TestRedeliveryChangesNothing(t *testing.T) {
	f := newFixture(t, jetstream.StreamConfig{Duplicates: 100 * time.Millisecond})
	ids := f.publish(t, 30)
	f.applyThenCrash(t, len(ids))
	republished := f.republishAfterWindow(t, ids[:3])

	info := f.run(t)

	// 30 first deliveries, 20 redeliveries of the crashed consumer's
	// messages (10 nak'ed, 10 never acked) and the 3 copies stored again.
	if want := uint64(len(ids) + 20 + republished); info.Delivered.Consumer < want {
		t.Errorf("JetStream made %d deliveries, want at least %d: the test did not redeliver", info.Delivered.Consumer, want)
	}
	checkOnce(t, f.ledger(t), ids)
	if n := f.count(t, "inbox"); n != len(ids) {
		t.Errorf("inbox holds %d rows, want %d", n, len(ids))
	}
}

// applyThenCrash is a consumer that applies n messages and commits, naks
// the first third (as if a later step failed), acks the last third, and
// dies with the middle third neither acked nor nak'ed.
func (f *fixture) applyThenCrash(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	nc := f.srv.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, "OUTBOX", "billing")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for msg := range batch.Messages() {
		if applied, err := f.c.Apply(ctx, msg); err != nil || !applied {
			t.Fatalf("first delivery of message %d: applied %v, error %v", i, applied, err)
		}
		switch {
		case i < n/3:
			err = msg.Nak()
		case i >= n-n/3:
			err = msg.DoubleAck(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		i++
	}
	if err := batch.Error(); err != nil || i != n {
		t.Fatalf("fetched %d of %d messages: %v", i, n, err)
	}
	if err := nc.Flush(); err != nil { // the naks reach the server before it dies
		t.Fatal(err)
	}
	nc.Close()
}

// republishAfterWindow publishes ids again once the stream's duplicate
// window has passed, so that the stream stores a second copy of each, and
// returns how many it stored.
func (f *fixture) republishAfterWindow(t *testing.T, ids []string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for f.publishID(t, id, 0).Duplicate {
			if time.Now().After(deadline) {
				t.Fatalf("the stream still deduplicates %s after 10s", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return len(ids)
}

// TestFailedTransactionKeepsTheMessage checks that a failed business write
// rolls back the inbox row with it: the redelivery applies the event. An
// inbox row committed on its own would lose the event here.
func TestFailedTransactionKeepsTheMessage(t *testing.T) {
	f := newFixture(t, jetstream.StreamConfig{})
	ids := f.publish(t, 5)
	var mu sync.Mutex
	calls := map[string]int{}
	f.c.Handle = func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
		if err := writeLedger(ctx, tx, msg); err != nil {
			return err
		}
		id := msg.Headers().Get(jetstream.MsgIDHeader)
		mu.Lock()
		defer mu.Unlock()
		calls[id]++
		if id == ids[2] && calls[id] == 1 {
			return errors.New("the account service is down")
		}
		return nil
	}

	f.run(t)

	checkOnce(t, f.ledger(t), ids)
	if calls[ids[2]] != 2 {
		t.Errorf("the failing event was handled %d times, want 2 (fail, then apply)", calls[ids[2]])
	}
	if !strings.Contains(f.log.String(), "the account service is down") {
		t.Errorf("the failure was not logged; log:\n%s", f.log)
	}
}

// TestMessageWithoutIDIsRejected: a message without Nats-Msg-Id cannot be
// deduplicated, so Run terminates it (a nak would bring it back without
// the header, forever) and writes nothing for it. It is not lost: it stays
// in the stream, the server announces the termination with its sequence,
// and the log names it. The messages around it are applied.
func TestMessageWithoutIDIsRejected(t *testing.T) {
	f := newFixture(t, jetstream.StreamConfig{})
	ctx := context.Background()
	advisories, err := f.srv.Conn(t).SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.OUTBOX.billing")
	if err != nil {
		t.Fatal(err)
	}
	ids := f.publish(t, 1)
	bad, err := f.js.PublishMsg(ctx, &nats.Msg{Subject: "outbox.order.created", Data: []byte(`{"amount": 7}`)})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, f.publish(t, 1)...)

	info := f.run(t)

	checkOnce(t, f.ledger(t), ids)
	if n := f.count(t, "inbox"); n != len(ids) {
		t.Errorf("inbox holds %d rows, want %d", n, len(ids))
	}
	if info.Delivered.Consumer != 3 {
		t.Errorf("%d deliveries, want 3: the rejected message was delivered again", info.Delivered.Consumer)
	}
	stream, err := f.js.Stream(ctx, "OUTBOX")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetMsg(ctx, bad.Sequence); err != nil {
		t.Errorf("the rejected message %d is gone from the stream: %v", bad.Sequence, err)
	}
	advisory, err := advisories.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no termination advisory: %v", err)
	}
	var term struct {
		StreamSeq uint64 `json:"stream_seq"`
		Reason    string `json:"reason"`
	}
	if err := json.Unmarshal(advisory.Data, &term); err != nil {
		t.Fatal(err)
	}
	if term.StreamSeq != bad.Sequence || term.Reason != "no Nats-Msg-Id header" {
		t.Errorf("advisory: sequence %d, reason %q; want %d, %q", term.StreamSeq, term.Reason, bad.Sequence, "no Nats-Msg-Id header")
	}
	logged := f.log.String()
	for _, want := range []string{"message rejected", "Nats-Msg-Id", fmt.Sprintf("sequence %d", bad.Sequence)} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}
}

// TestApplyWithoutID checks Apply's error for each form of a missing id:
// it names the message and the fix, and nothing is written.
func TestApplyWithoutID(t *testing.T) {
	f := newFixture(t, jetstream.StreamConfig{})
	ctx := context.Background()
	tests := []struct {
		name   string
		header nats.Header
	}{
		{name: "no header", header: nil},
		{name: "blank", header: nats.Header{jetstream.MsgIDHeader: []string{"  "}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := &nats.Msg{Subject: "outbox.order.created", Header: tt.header, Data: []byte(`{"amount": 1}`)}
			if _, err := f.js.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
			got, err := f.cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer got.Term() //nolint:errcheck // only keeps it from coming back in the next case
			applied, err := f.c.Apply(ctx, got)
			if applied || !errors.Is(err, consumer.ErrNoMessageID) {
				t.Fatalf("Apply = %v, %v; want false, ErrNoMessageID", applied, err)
			}
			for _, want := range []string{`subject "outbox.order.created"`, "stream OUTBOX sequence", "publish it with Nats-Msg-Id"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if n := f.count(t, "inbox") + f.count(t, "ledger"); n != 0 {
				t.Errorf("%d rows written for a rejected message", n)
			}
		})
	}
}

// TestConcurrentDeliveriesApplyOnce: two copies of one message in flight
// at once (two instances of the consumer, the first slower than AckWait).
// The second's inbox insert waits for the first transaction and then adds
// nothing.
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	f := newFixture(t, jetstream.StreamConfig{})
	ctx := context.Background()
	ids := f.publish(t, 1)
	msg, err := f.cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	slow, fast := *f.c, *f.c
	slow.DB, fast.DB = f.connect(t), f.connect(t)
	slow.Handle = func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
		close(entered)
		<-release
		return writeLedger(ctx, tx, msg)
	}
	var g errgroup.Group
	var slowApplied, fastApplied bool
	g.Go(func() (err error) { slowApplied, err = slow.Apply(ctx, msg); return err })
	<-entered
	g.Go(func() (err error) { fastApplied, err = fast.Apply(ctx, msg); return err })
	waitForLock(t, f.db)
	close(release)
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if !slowApplied || fastApplied {
		t.Errorf("applied: first %v, second %v; want true, false", slowApplied, fastApplied)
	}
	checkOnce(t, f.ledger(t), ids)
}

// waitForLock waits until a session of the database waits for a lock: the second
// inbox insert, blocked by the first transaction's uncommitted row.
func waitForLock(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO inbox%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second delivery's inbox insert never waited for the first transaction")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsumerConfig checks that a Consumer set up wrong is refused before
// it touches a message, with the field's name and the fix.
func TestConsumerConfig(t *testing.T) {
	valid := consumer.Consumer{Name: "billing", DB: &pgx.Conn{}, Handle: writeLedger}
	tests := []struct {
		name    string
		change  func(*consumer.Consumer)
		wantErr string
	}{
		{name: "no name", change: func(c *consumer.Consumer) { c.Name = "" }, wantErr: "Name is empty: set it to the durable consumer's name"},
		{name: "no database", change: func(c *consumer.Consumer) { c.DB = nil }, wantErr: "DB is nil"},
		{name: "no handler", change: func(c *consumer.Consumer) { c.Handle = nil }, wantErr: "Handle is nil"},
		{name: "negative delay", change: func(c *consumer.Consumer) { c.RetryDelay = -time.Second }, wantErr: "RetryDelay is -1s: want 0 (default 1s) or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.change(&c)
			err := c.Run(context.Background(), nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.wantErr)
			}
			if _, err := c.Apply(context.Background(), nil); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Apply = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
