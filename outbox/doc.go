// Package outbox writes outbox events from Go, inside the caller's pgx
// transaction, for outboxd to relay to NATS JetStream:
//
//	tx, _ := conn.Begin(ctx)
//	// ... the business change ...
//	id, err := outbox.Emit(ctx, tx, outbox.Event{
//		AggregateType: "order", AggregateID: "42", EventType: "order.created",
//		Payload: json.RawMessage(`{"total": 9.5}`),
//	})
//	// ... tx.Commit(ctx): the event exists exactly when the change does.
//
// With outboxd's default subject template,
// outbox.{aggregate_type}.{event_type|tokens}, this event is published on
// outbox.order.order.created.
//
// Every event is checked before anything is written, with the rules outboxd
// applies when it publishes (non-empty type fields, valid JSON payload,
// header names and values a NATS message can carry), so a bad event fails
// the caller's transaction with an *EventError instead of stopping the relay
// or going to the dead-letter subject later.
//
// A Writer writes rows into the outbox table (default public.outbox, the
// table `outboxd migrate` creates), or, with Config.Messages, emits
// transactional logical decoding messages in outboxd's envelope format and
// writes no row at all.
package outbox
