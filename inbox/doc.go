// Package inbox is the consuming side of the outbox pattern: it applies the
// messages outboxd publishes to JetStream to the consumer's own PostgreSQL
// database, each message's effect exactly once, the events of one
// aggregate in order and different aggregates in parallel.
//
// It imports only the standard library, pgx and nats.go, so that an
// application gets none of outboxd's own dependencies with it. It logs
// through log/slog.
//
// # Exactly once
//
// JetStream delivers each message at least once: again when an ack was
// lost, when AckWait ran out, after a nak, and a copy published again after
// the stream's duplicate window is stored and delivered as a new message.
// For each delivery a worker, in one transaction of the consumer's
// database, inserts the message's Nats-Msg-Id (outboxd sets it to the event
// id) into the inbox table with ON CONFLICT DO NOTHING; only if that added
// the row does it call the Handler, which does the business write in the
// same transaction; it commits, and only then acks. A crash before the
// commit rolls back the row with the business write, and the redelivery
// applies it; a crash between commit and ack leaves the row, and the
// redelivery is acked without effect. Two copies in flight at once are safe
// too: the second insert waits for the first transaction.
//
// # Order per aggregate, parallel across aggregates
//
// The stream gives each subject a partition token, a hash of the
// aggregate's subject tokens, with a subject transform that the server
// applies as it stores a message (Config.Transform):
//
//	outbox.*.*  →  outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(8,1,2)}}
//
// Each partition has a durable pull consumer filtered on its token with
// MaxAckPending 1, and one worker. The server delivers a partition's next
// message only after the previous one is acked or terminated, so order
// holds across crashes, AckWait expiries, naks and any number of consumer
// instances, with no lock of our own: JetStream's own rule does it. The
// alternatives fall short. One consumer fetching in batches and
// dispatching by aggregate inside the process reorders after a crash: the
// server redelivers the dead process's messages only once their AckWait
// ends, and delivers newer ones meanwhile. Filter subjects without a
// transform cannot hash, so they cannot spread aggregates over workers
// unless the subject already carries a partition. Priority groups with
// pinned clients choose which instance reads a consumer, but do not
// partition it; with MaxAckPending 1 several instances may share the
// partitions safely, so pinning is not needed.
//
// The aggregate's id must be in the subject for the transform to hash it:
// outboxd's default subject (outbox.{aggregate_type}.{event_type|tokens})
// does not hold it, so run outboxd with, e.g.,
// --subject 'outbox.{aggregate_type}.{aggregate_id|safe}'. New checks the
// stream and says what to set when the transform is missing or differs.
// One partition needs no transform.
//
// # Poison messages
//
// A handler error rolls back the transaction and naks the message with
// Config.Backoff's delay; after Config.MaxAttempts deliveries it is
// published to Config.DeadLetter with the reason in the
// Outbox-Dead-Letter-Reason header and where it came from
// (Outbox-Original-Subject, Inbox-Stream-Sequence, Inbox-Deliveries), and
// terminated. A message whose deliveries keep ending without a verdict (it
// crashes the process, or outlives AckWait) is dead-lettered on the
// delivery after MaxAttempts before its handler runs again. So nothing is
// redelivered for ever, and a poison message holds back the later messages
// of its partition only until it is dead-lettered. Failures of the
// database itself (a lost connection, a deadlock, a serialization failure)
// are not the message's fault: the worker retries them while it holds the
// message, costing no attempt.
//
// # Retention
//
// A row is what turns a late copy into a no-op, so rows may be deleted
// only once no copy can arrive. With Config.Retention set, Run deletes
// older rows every RetentionInterval (DeleteExpired); New refuses a
// Retention not longer than Config.Horizon, the longest of the stream's
// duplicate window, its MaxAge and the consumer's redelivery span.
//
// docs/inbox.md in the repository describes the setup step by step.
package inbox
