package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/inbox"
)

// A billing service credits accounts once per payment event, the events
// of one account in order and different accounts in parallel. The test
// suite runs it against a real PostgreSQL (DATABASE_URL) and nats-server
// (NATS_URL).
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := inbox.CreateTable(ctx, pool, "inbox"); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE accounts (id text PRIMARY KEY, balance numeric NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}

	cfg := inbox.Config{
		Name:       "billing",
		Stream:     "OUTBOX",
		Table:      "inbox",
		Subject:    "outbox.*.*", // outboxd --subject 'outbox.{aggregate_type}.{aggregate_id|safe}'
		Partitions: 4,
		DeadLetter: "inbox.dead-letter.billing",
		Retention:  7 * 24 * time.Hour,
		Handler: func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
			var paid struct {
				Amount float64 `json:"amount"`
			}
			if err := json.Unmarshal(m.Data, &paid); err != nil {
				return fmt.Errorf("payload of %s: %w", m, err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO accounts (id, balance) VALUES ($1, $2)
				ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + $2`, m.AggregateID(), paid.Amount)
			return err
		},
	}

	// The operator's part, done here so that the example runs: outboxd's
	// stream with the partition transform, and a stream for dead letters.
	transform := cfg.Transform()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute, SubjectTransform: &transform}); err != nil {
		log.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD_LETTER", Subjects: []string{"inbox.dead-letter.>"}}); err != nil {
		log.Fatal(err)
	}

	// outboxd's part: each event published with its id.
	for _, ev := range []struct{ id, account, amount string }{
		{"e1", "acc-1", "10"}, {"e2", "acc-2", "7"}, {"e3", "acc-1", "5"},
	} {
		msg := nats.NewMsg("outbox.account." + ev.account)
		msg.Header.Set(jetstream.MsgIDHeader, ev.id)
		msg.Header.Set(inbox.HeaderAggregateID, ev.account)
		msg.Data = []byte(`{"amount": ` + ev.amount + `}`)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			log.Fatal(err)
		}
	}

	c, err := inbox.New(ctx, js, pool, cfg)
	if err != nil {
		log.Fatal(err)
	}
	// A service runs until SIGTERM; the example until the events are in.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	waitForRows(ctx, pool, 3)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	rows, _ := pool.Query(ctx, "SELECT id, balance::text FROM accounts ORDER BY id")
	var id, balance string
	if _, err := pgx.ForEachRow(rows, []any{&id, &balance}, func() error {
		fmt.Println(id, balance)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// acc-1 15
	// acc-2 7
}

// waitForRows waits until the inbox holds n rows.
func waitForRows(ctx context.Context, pool *pgxpool.Pool, n int) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var got int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM inbox").Scan(&got); err != nil {
			log.Fatal(err)
		}
		if got >= n {
			return
		}
	}
	log.Fatalf("the inbox holds fewer than %d rows after 10s", n)
}
