package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/inbox"
)

// TestPartitionsKeepAggregateOrder: 8 workers apply 40 aggregates' events
// at once, with handlers of uneven speed, and each aggregate's events land
// in publish order.
func TestPartitionsKeepAggregateOrder(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 8})
	cfg := e.config(8)
	var busy, most atomic.Int32
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		n := busy.Add(1)
		defer busy.Add(-1)
		for {
			old := most.Load()
			if n <= old || most.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(time.Duration(m.Sequence%3) * time.Millisecond)
		return writeEffect(ctx, tx, m)
	}
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(40, 10)
	publish(t, e.js, evs)
	start(t, c)

	e.waitApplied(t, len(evs), 30*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs)
	if most.Load() < 2 {
		t.Errorf("at most %d handlers ran at once: the partitions were not applied in parallel", most.Load())
	}
}

// TestRedeliveryChangesNothing applies every event once while JetStream
// delivers it again in the ways it does: deliveries that committed and
// were never acked (their consumer lost its connection between commit and
// ack, so AckWait ran out), and copies published again after the stream's
// duplicate window, which the stream stores twice.
func TestRedeliveryChangesNothing(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1, duplicates: 100 * time.Millisecond})
	cfg := e.config(1)
	ctx := context.Background()
	evs := events(3, 4)
	publish(t, e.js, evs)
	var lost []string
	for range 2 {
		lost = append(lost, runUntilLostAck(t, e, cfg))
	}
	republished := republishAfterWindow(t, e, evs[:3])
	c, err := inbox.New(ctx, e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	e.waitApplied(t, len(evs), 15*time.Second)
	e.settled(t, cfg, 15*time.Second)

	checkExactlyOnceInOrder(t, e, evs)
	if n := e.count(t, "SELECT count(*) FROM inbox"); n != len(evs) {
		t.Errorf("inbox holds %d rows, want %d", n, len(evs))
	}
	info := consumerInfo(t, e, cfg, 0)
	if want := uint64(len(evs) + len(lost) + republished); info.Delivered.Consumer < want {
		t.Errorf("the server made %d deliveries, want at least %d: the test did not redeliver", info.Delivered.Consumer, want)
	}
}

// runUntilLostAck runs a consumer on a connection of its own that it
// closes right after its first commit, so that the ack is lost, and waits
// for Run to fail on the closed connection. It returns the id of the
// message whose ack was lost.
func runUntilLostAck(t *testing.T, e *env, cfg inbox.Config) string {
	t.Helper()
	nc := e.srv.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := inbox.New(context.Background(), js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	inbox.SetAfterCommit(c, func(m inbox.Message) {
		if id == "" {
			id = m.ID
			nc.Close()
		}
	})
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			t.Fatalf("Run = %v, want it to fail on the closed connection", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not fail within 10s of its connection closing")
	}
	return id
}

// republishAfterWindow publishes evs again once the stream's duplicate
// window has passed, so that the stream stores a second copy of each.
func republishAfterWindow(t *testing.T, e *env, evs []event) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, ev := range evs {
		for {
			ack, err := e.js.PublishMsg(context.Background(), outboxMsg(ev))
			if err != nil {
				t.Fatal(err)
			}
			if !ack.Duplicate {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stream still deduplicates %s after 10s", ev.ID)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return len(evs)
}

func consumerInfo(t testing.TB, e *env, cfg inbox.Config, p int) *jetstream.ConsumerInfo {
	t.Helper()
	cons, err := e.js.Consumer(context.Background(), cfg.Stream, cfg.Durable(p))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestFailedHandlerRollsBackTheRow: a handler error rolls back the inbox
// row with the business write, so the redelivery applies the event; and
// the aggregate's later events wait for it. An inbox row committed on its
// own would lose the event.
func TestFailedHandlerRollsBackTheRow(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	cfg := e.config(1)
	evs := events(1, 3)
	var mu sync.Mutex
	calls := map[string]int{}
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := writeEffect(ctx, tx, m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		calls[m.ID]++
		if m.ID == evs[0].ID && calls[m.ID] < 3 {
			return errors.New("the account service is down")
		}
		return nil
	}
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, e.js, evs)
	start(t, c)

	e.waitApplied(t, len(evs), 15*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs)
	mu.Lock()
	defer mu.Unlock()
	if calls[evs[0].ID] != 3 {
		t.Errorf("the failing event was handled %d times, want 3 (fail, fail, apply)", calls[evs[0].ID])
	}
}

// TestDatabaseFailureCostsNoAttempt: a failure of the database (here a
// serialization failure, which passes by itself) is retried by the worker
// while it holds the message, without a new delivery, however often: it
// is not the message's fault, so it never dead-letters it.
func TestDatabaseFailureCostsNoAttempt(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	cfg := e.config(1)
	cfg.MaxAttempts = 2
	var calls atomic.Int32
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if calls.Add(1) <= 6 {
			return &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
		}
		return writeEffect(ctx, tx, m)
	}
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(1, 1)
	publish(t, e.js, evs)
	start(t, c)

	e.waitApplied(t, 1, 15*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs)
	if info := consumerInfo(t, e, cfg, 0); info.Delivered.Consumer != 1 {
		t.Errorf("%d deliveries, want 1: the retries cost deliveries", info.Delivered.Consumer)
	}
	if n := len(e.deadLetters(t)); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// TestPoisonMessageIsDeadLettered: a message whose handler always fails is
// tried MaxAttempts times with the backoff between, then stored on the
// dead-letter subject with the reason and terminated; the aggregate's
// later events, held back meanwhile, are applied after it. Nothing loops.
func TestPoisonMessageIsDeadLettered(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 2})
	cfg := e.config(2)
	cfg.MaxAttempts = 3
	evs := events(2, 3)
	poison := evs[0] // a0 #1
	var poisonCalls atomic.Int32
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if m.ID == poison.ID {
			poisonCalls.Add(1)
			return errors.New("amount is negative")
		}
		return writeEffect(ctx, tx, m)
	}
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, e.js, evs)
	start(t, c)

	e.waitApplied(t, len(evs)-1, 15*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs[1:])
	if n := poisonCalls.Load(); n != 3 {
		t.Errorf("the poison message was handled %d times, want MaxAttempts 3", n)
	}
	dead := e.deadLetters(t)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	h := dead[0].Header
	for name, want := range map[string]string{
		inbox.HeaderDeadLetterReason: "handler failed on delivery 3 of 3: handler: amount is negative",
		inbox.HeaderOriginalSubject:  "outbox.order.a0.",
		inbox.HeaderConsumer:         "billing",
		inbox.HeaderStream:           streamName,
		inbox.HeaderSequence:         "1",
		inbox.HeaderDeliveries:       "3",
		inbox.HeaderAggregateID:      "a0",
		jetstream.MsgIDHeader:        "billing:" + poison.ID,
	} {
		if got := h.Get(name); !strings.HasPrefix(got, want) {
			t.Errorf("dead letter header %s = %q, want %q", name, got, want)
		}
	}
	if string(dead[0].Data) != string(outboxMsg(poison).Data) {
		t.Errorf("dead letter body %s, want the original's", dead[0].Data)
	}
}

// TestMessageWithoutIDIsDeadLettered: a message without Nats-Msg-Id cannot
// be deduplicated, so it goes to the dead letters at once (a redelivery
// would still lack the header) and nothing is written for it.
func TestMessageWithoutIDIsDeadLettered(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	cfg := e.config(1)
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(1, 2)
	publish(t, e.js, evs[:1])
	bad := outboxMsg(event{Aggregate: "a0", N: 99})
	bad.Header.Del(jetstream.MsgIDHeader)
	if _, err := e.js.PublishMsg(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	publish(t, e.js, evs[1:])
	start(t, c)

	e.waitApplied(t, len(evs), 15*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs)
	dead := e.deadLetters(t)
	if len(dead) != 1 || !strings.HasPrefix(dead[0].Header.Get(inbox.HeaderDeadLetterReason), "no Nats-Msg-Id header") {
		t.Fatalf("dead letters %v, want the message without id", dead)
	}
	if info := consumerInfo(t, e, cfg, 0); info.Delivered.Consumer != 3 {
		t.Errorf("%d deliveries, want 3: the message without id came again", info.Delivered.Consumer)
	}
}

// TestCrashLoopIsDeadLettered: a message whose deliveries all end without
// a verdict (the process dies in the handler, or the handler outlives
// AckWait) is dead-lettered on the delivery after MaxAttempts, before its
// handler runs again, so that it cannot kill the consumer for ever.
func TestCrashLoopIsDeadLettered(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	cfg := e.config(1)
	cfg.MaxAttempts = 2
	cfg.AckWait = 200 * time.Millisecond
	var calls atomic.Int32
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		calls.Add(1)
		return writeEffect(ctx, tx, m)
	}
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(1, 2)
	publish(t, e.js, evs)
	// Two deliveries of the first message that die without an ack: what a
	// consumer killed in its handler leaves behind.
	cons, err := e.js.Consumer(context.Background(), streamName, cfg.Durable(0))
	if err != nil {
		t.Fatal(err)
	}
	for range cfg.MaxAttempts {
		if _, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	start(t, c)

	e.waitApplied(t, 1, 15*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs[1:])
	if calls.Load() != 1 {
		t.Errorf("handler called %d times, want once (for the second event)", calls.Load())
	}
	dead := e.deadLetters(t)
	if len(dead) != 1 || !strings.Contains(dead[0].Header.Get(inbox.HeaderDeadLetterReason), "delivered 3 times and never applied") {
		t.Fatalf("dead letters %v, want the first event, delivered 3 times", dead)
	}
}

// TestConcurrentDeliveriesApplyOnce: two copies of one message in flight
// at once (a second instance got it after AckWait while the first was
// still in its transaction). The test plays the slow first instance: it
// takes the message, inserts its inbox row and holds the transaction open.
// The consumer's insert of the redelivery waits for it, then adds nothing:
// the handler does not run, and the message is acked.
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	ctx := context.Background()
	cfg := e.config(1)
	cfg.AckWait = 300 * time.Millisecond
	var calls atomic.Int32
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		calls.Add(1)
		return writeEffect(ctx, tx, m)
	}
	c, err := inbox.New(ctx, e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(1, 2)
	publish(t, e.js, evs)
	cons, err := e.js.Consumer(ctx, streamName, cfg.Durable(0))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	slow, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := slow.Exec(ctx, `INSERT INTO inbox (consumer, message_id, subject) VALUES ('billing', $1, $2)`, evs[0].ID, msg.Subject()); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitForInboxLock(t, e)
	if err := writeEffect(ctx, slow, inbox.Message{ID: evs[0].ID, Header: msg.Headers(), Data: msg.Data()}); err != nil {
		t.Fatal(err)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	e.waitApplied(t, len(evs), 15*time.Second)
	e.settled(t, cfg, 10*time.Second)

	checkExactlyOnceInOrder(t, e, evs)
	if calls.Load() != 1 {
		t.Errorf("handler called %d times, want once (the second event): the copy in flight was applied again", calls.Load())
	}
}

// waitForInboxLock waits until a session waits for a lock in its inbox
// insert: the second delivery, blocked by the first's uncommitted row.
func waitForInboxLock(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.count(t, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO "inbox"%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second delivery's inbox insert never waited for the first transaction")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunStopsWhenTheConsumerIsDeleted: Run returns an error naming the
// durable consumer when the server deletes it, and stops every worker.
func TestRunStopsWhenTheConsumerIsDeleted(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 2})
	cfg := e.config(2)
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	time.Sleep(200 * time.Millisecond)
	if err := e.js.DeleteConsumer(context.Background(), streamName, cfg.Durable(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "billing-1") {
			t.Errorf("Run = %v, want an error naming billing-1", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run still runs 15s after its consumer was deleted")
	}
}
