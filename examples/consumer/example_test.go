package consumer_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/examples/consumer"
)

// A billing service that credits an account once per OrderPaid event. It
// compiles with the package; it is not run, since it needs the servers.
func ExampleConsumer() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, consumer.InboxTable); err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "OUTBOX", jetstream.ConsumerConfig{
		Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: "outbox.order.OrderPaid", MaxDeliver: 20,
	})
	if err != nil {
		log.Fatal(err)
	}
	c := &consumer.Consumer{Name: "billing", DB: db,
		Handle: func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
			var paid struct {
				Customer int     `json:"customerId"`
				Amount   float64 `json:"amount"`
			}
			if err := json.Unmarshal(msg.Data(), &paid); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2", paid.Amount, paid.Customer)
			return err
		}}
	if err := c.Run(ctx, cons); err != nil {
		log.Fatal(err)
	}
}
