package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/inbox"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// Names the tests share: outboxd's stream and a stream of dead letters.
const (
	streamName = "OUTBOX"
	deadLetter = "inbox.dead-letter.billing"
)

// effectsTable is the business table: one row per handler call that
// committed, without a unique key, so that an event applied twice shows
// as two rows, and seq in commit order, so that an aggregate's order
// shows.
const effectsTable = `CREATE TABLE effects (
    seq          bigserial PRIMARY KEY,
    event_id     text NOT NULL,
    aggregate_id text NOT NULL,
    n            int  NOT NULL
)`

// env is one test's servers: a stream (partitioned when the test asks),
// a dead-letter stream, and a database with the inbox and effects tables.
type env struct {
	srv  *natstest.Server
	js   jetstream.JetStream
	dsn  string
	pool *pgxpool.Pool
}

type envOptions struct {
	partitions int           // of the stream's transform; 0 or 1 for none
	duplicates time.Duration // the stream's duplicate window; 0 for 2m
	maxAge     time.Duration
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{srv: natstest.Start(t)}
	e.js = e.srv.JetStream(t)
	stream := jetstream.StreamConfig{Name: streamName, Subjects: []string{"outbox.>"}, Duplicates: o.duplicates, MaxAge: o.maxAge}
	if o.partitions > 1 {
		tr := inbox.Config{Partitions: o.partitions}.Transform()
		stream.SubjectTransform = &tr
	}
	if _, err := e.js.CreateStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD", Subjects: []string{"inbox.dead-letter.>"}}); err != nil {
		t.Fatal(err)
	}
	e.dsn = pgtest.Shared(t).NewDatabase(t)
	e.pool = newPool(t, e.dsn, 10)
	if err := inbox.CreateTable(ctx, e.pool, "inbox"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, effectsTable); err != nil {
		t.Fatal(err)
	}
	return e
}

func newPool(t testing.TB, dsn string, size int) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// config is a consumer of the env's stream with short waits, so that
// redeliveries come within a test's time.
func (e *env) config(partitions int) inbox.Config {
	return inbox.Config{
		Name: "billing", Stream: streamName, Table: "inbox", Partitions: partitions,
		DeadLetter: deadLetter, Handler: writeEffect,
		AckWait: time.Second, Backoff: []time.Duration{50 * time.Millisecond},
	}
}

// event is what the tests publish: the n-th event of an aggregate.
type event struct {
	ID        string `json:"id"`
	Aggregate string `json:"aggregate"`
	N         int    `json:"n"`
}

// writeEffect is the business write: one effects row per call.
func writeEffect(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	var ev event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	_, err := tx.Exec(ctx, "INSERT INTO effects (event_id, aggregate_id, n) VALUES ($1, $2, $3)", m.ID, m.AggregateID(), ev.N)
	return err
}

// events makes n events for each of aggregates aggregates, interleaved as
// a busy outbox would be: aggregate by aggregate, round after round.
func events(aggregates, n int) []event {
	var out []event
	for i := 1; i <= n; i++ {
		for a := range aggregates {
			out = append(out, event{ID: uuid.NewString(), Aggregate: "a" + strconv.Itoa(a), N: i})
		}
	}
	return out
}

// outboxMsg is ev as outboxd publishes it.
func outboxMsg(ev event) *nats.Msg {
	data, _ := json.Marshal(ev)
	return &nats.Msg{
		Subject: "outbox.order." + ev.Aggregate,
		Header: nats.Header{jetstream.MsgIDHeader: []string{ev.ID}, inbox.HeaderAggregateID: []string{ev.Aggregate},
			"Outbox-Aggregate-Type": []string{"order"}},
		Data: data,
	}
}

// publish publishes evs asynchronously from one connection, so that the
// stream stores them in this order, and waits for every PubAck.
func publish(t testing.TB, js jetstream.JetStream, evs []event) {
	t.Helper()
	for start := 0; start < len(evs); start += 500 {
		for _, ev := range evs[start:min(start+500, len(evs))] {
			if _, err := js.PublishMsgAsync(outboxMsg(ev)); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			t.Fatal("publish: no PubAck after 30s")
		}
	}
}

// start runs c until the test ends and fails the test if Run fails.
func start(t testing.TB, c *inbox.Consumer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// effects returns each aggregate's applied n, in commit order, and the
// count of effect rows of each event id.
func (e *env) effects(t testing.TB) (order map[string][]int, perID map[string]int) {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT event_id, aggregate_id, n FROM effects ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	order, perID = map[string][]int{}, map[string]int{}
	for rows.Next() {
		var id, agg string
		var n int
		if err := rows.Scan(&id, &agg, &n); err != nil {
			t.Fatal(err)
		}
		order[agg] = append(order[agg], n)
		perID[id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return order, perID
}

func (e *env) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitApplied waits until the effects table holds n rows.
func (e *env) waitApplied(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	testsync.Eventually(t, timeout, func() string {
		if got := e.count(t, "SELECT count(*) FROM effects"); got < n {
			return fmt.Sprintf("%d of %d events applied", got, n)
		}
		return ""
	})
}

// checkExactlyOnceInOrder fails t unless every event of evs was applied
// once, nothing else was, and each aggregate's events in publish order.
func checkExactlyOnceInOrder(t testing.TB, e *env, evs []event) {
	t.Helper()
	order, perID := e.effects(t)
	want := map[string][]int{}
	for _, ev := range evs {
		want[ev.Aggregate] = append(want[ev.Aggregate], ev.N)
		if perID[ev.ID] != 1 {
			t.Errorf("event %s (%s #%d) applied %d times, want 1", ev.ID, ev.Aggregate, ev.N, perID[ev.ID])
		}
	}
	if len(perID) != len(evs) {
		t.Errorf("%d events applied, want %d", len(perID), len(evs))
	}
	for agg, ns := range want {
		if fmt.Sprint(order[agg]) != fmt.Sprint(ns) {
			t.Errorf("aggregate %s applied in order %v, want %v", agg, order[agg], ns)
		}
	}
}

// deadLetters returns the messages stored on the dead-letter subject.
func (e *env) deadLetters(t testing.TB) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	stream, err := e.js.Stream(ctx, "DEAD")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msg)
	}
	return out
}

// settled waits until none of c's durable consumers has a message to
// deliver or to be acked.
func (e *env) settled(t testing.TB, cfg inbox.Config, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	testsync.Eventually(t, timeout, func() string {
		for p := range cfg.Partitions {
			cons, err := e.js.Consumer(ctx, cfg.Stream, cfg.Durable(p))
			if err != nil {
				return err.Error()
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return err.Error()
			}
			if info.NumPending+uint64(info.NumAckPending) > 0 {
				return fmt.Sprintf("consumer %s: %d to deliver, %d unacknowledged", info.Name, info.NumPending, info.NumAckPending)
			}
		}
		return ""
	})
}

// testLogger writes the consumer's log to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
