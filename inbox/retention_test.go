package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd/inbox"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// addRows inserts n inbox rows of consumer, received age ago.
func (e *env) addRows(t *testing.T, consumer string, n int, age time.Duration) {
	t.Helper()
	_, err := e.pool.Exec(context.Background(), `INSERT INTO inbox (consumer, message_id, subject, received_at)
		SELECT $1, $2 || i, 'outbox.order.x', now() - $3 * interval '1 second' FROM generate_series(1, $4) i`,
		consumer, fmt.Sprintf("%s-%s-", consumer, age), age.Seconds(), n)
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeleteExpired deletes the consumer's rows older than Retention, in
// batches, and keeps younger rows and other consumers' rows.
func TestDeleteExpired(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	cfg := e.config(1)
	cfg.Retention = 2 * time.Hour
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.addRows(t, "billing", 25000, 3*time.Hour)
	e.addRows(t, "billing", 5, time.Hour)
	e.addRows(t, "shipping", 7, 3*time.Hour)

	n, err := c.DeleteExpired(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	if n != 25000 {
		t.Errorf("DeleteExpired deleted %d rows, want 25000", n)
	}
	for consumer, want := range map[string]int{"billing": 5, "shipping": 7} {
		if got := e.count(t, "SELECT count(*) FROM inbox WHERE consumer = $1", consumer); got != want {
			t.Errorf("%s keeps %d rows, want %d", consumer, got, want)
		}
	}
}

// TestRunExpiresRows: with Retention set, Run deletes expired rows every
// RetentionInterval while it applies messages, and waits for that
// goroutine when it returns (the leak check in TestMain would see it).
func TestRunExpiresRows(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	cfg := e.config(1)
	cfg.Retention, cfg.RetentionInterval = 2*time.Hour, 50*time.Millisecond
	c, err := inbox.New(context.Background(), e.js, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(2, 2)
	publish(t, e.js, evs)
	start(t, c)
	e.waitApplied(t, len(evs), 15*time.Second)
	e.addRows(t, "billing", 3, 3*time.Hour)

	testsync.Eventually(t, 10*time.Second, func() string {
		if n := e.count(t, "SELECT count(*) FROM inbox WHERE received_at < now() - interval '2 hours'"); n > 0 {
			return fmt.Sprintf("%d expired rows left", n)
		}
		return ""
	})
	if n := e.count(t, "SELECT count(*) FROM inbox"); n != len(evs) {
		t.Errorf("inbox holds %d rows, want the %d applied just now", n, len(evs))
	}
}

// TestCreateTable: the table is made once, in a schema too, and a second
// call changes nothing.
func TestCreateTable(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, "CREATE SCHEMA billing"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := inbox.CreateTable(ctx, e.pool, "billing.Inbox"); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM pg_indexes WHERE schemaname = 'billing' AND tablename = 'Inbox'`); n != 2 {
		t.Errorf("%d indexes on billing.\"Inbox\", want 2 (key and received_at)", n)
	}
	if err := inbox.CreateTable(ctx, e.pool, "a.b.c"); err == nil {
		t.Error("CreateTable took a three-part name")
	}
}
