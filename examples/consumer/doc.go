// Package consumer is a small, complete example of the consuming side of
// the outbox pattern: a JetStream consumer whose business effects happen
// once per event although JetStream delivers a message at least once (an
// ack lost in a crash, an ack wait that expired, a nak, or a copy published
// again after the stream's duplicate window).
//
// The rule: in the consumer's own database transaction, record the
// message's Nats-Msg-Id (outboxd sets it to the event id) in an inbox table
// with INSERT ... ON CONFLICT DO NOTHING; do the business write only if
// that insert added a row; commit; and only then ack. A message delivered
// again finds its id in the inbox: the business write is skipped and the
// message is acked again. A crash before the commit rolls back the inbox
// row with the business write, so the redelivery applies it.
//
//	cons, err := js.CreateOrUpdateConsumer(ctx, "OUTBOX", jetstream.ConsumerConfig{
//		Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "outbox.order.>",
//	})
//	c := &consumer.Consumer{Name: "billing", DB: pool,
//		Handle: func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
//			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2", ...)
//			return err
//		}}
//	err = c.Run(ctx, cons)
//
// The README section "Consuming events idempotently" explains it. It is
// the smallest form of the pattern, an example to read, not an API that
// outboxd promises to keep: applications import
// github.com/outboxd/outboxd/inbox, the supported package, which adds
// per-aggregate order over parallel partitions, dead letters and inbox
// retention (docs/inbox.md).
package consumer
