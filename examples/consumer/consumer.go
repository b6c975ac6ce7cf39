package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// InboxTable creates the inbox: one row per message a consumer applied.
// The key holds the consumer's name too, so that two consumers writing to
// one database (billing and shipping, say) each apply the same event once.
//
// Delete rows only once no copy of their message can arrive any more
// (after the stream's MaxAge, if it has one): a row is what turns a late
// copy into a no-op.
const InboxTable = `CREATE TABLE IF NOT EXISTS inbox (
    consumer    text        NOT NULL,
    message_id  text        NOT NULL,
    subject     text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
)`

// recordInbox adds msg's row to the inbox, or nothing if a delivery of the
// same message got there first. When that delivery is still in its
// transaction, the insert waits for it to commit (then adds nothing) or
// roll back (then adds the row): two copies in flight at once are safe too.
const recordInbox = `INSERT INTO inbox (consumer, message_id, subject) VALUES ($1, $2, $3)
ON CONFLICT (consumer, message_id) DO NOTHING`

// defaultRetryDelay is Consumer.RetryDelay's default.
const defaultRetryDelay = time.Second

// Handler does the business write of one message in tx. An error rolls
// back tx, the inbox row too, and the message is redelivered later.
type Handler func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error

// Beginner starts a transaction: a *pgxpool.Pool, or a *pgx.Conn for one
// Consumer at a time.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrNoMessageID is what Apply returns, wrapped with the message's subject
// and stream sequence, for a message without a Nats-Msg-Id header: a
// redelivery of it could not be told from a new event.
var ErrNoMessageID = errors.New("message has no Nats-Msg-Id header")

// Consumer applies the messages of one JetStream consumer to PostgreSQL,
// each message once however often it is delivered. The JetStream consumer
// must acknowledge explicitly (jetstream.AckExplicitPolicy).
type Consumer struct {
	// Name identifies the consumer in the inbox; required. Use the durable
	// consumer's name and never reuse it for another handler.
	Name string
	// DB is the database of the inbox and of the business tables.
	DB Beginner
	// Handle does the business write of one message.
	Handle Handler
	// RetryDelay is how long a message whose transaction failed waits
	// before JetStream delivers it again. Default 1s.
	RetryDelay time.Duration
	// Logger reports messages that failed or were rejected. Default: none.
	Logger zerolog.Logger
}

// Apply runs c.Handle for msg at most once, whatever the number of
// deliveries: in one transaction it records msg's id in the inbox and,
// only if that row is new, calls c.Handle; then it commits. applied is
// false for a message already in the inbox. Apply does not ack: the caller
// acks after Apply returns nil, so a crash in between is a redelivery that
// Apply turns into a no-op. A message without Nats-Msg-Id gets an error
// that wraps ErrNoMessageID, and nothing is written.
func (c *Consumer) Apply(ctx context.Context, msg jetstream.Msg) (applied bool, err error) {
	if err := c.validate(); err != nil {
		return false, err
	}
	id := strings.TrimSpace(msg.Headers().Get(jetstream.MsgIDHeader))
	if id == "" {
		return false, fmt.Errorf("%w: %s: publish it with Nats-Msg-Id set to the event id (outboxd does)", ErrNoMessageID, describe(msg))
	}
	err = pgx.BeginFunc(ctx, c.DB, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, recordInbox, c.Name, id, msg.Subject())
		if err != nil {
			return fmt.Errorf("record it in the inbox: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil // an earlier delivery applied it
		}
		applied = true
		return c.Handle(ctx, tx, msg)
	})
	if err != nil {
		return false, fmt.Errorf("apply message %s (%s): %w", id, describe(msg), err)
	}
	return applied, nil
}

// Run applies the messages of cons until ctx is done, and acks each after
// its transaction committed. A message whose transaction failed is nak'ed
// with RetryDelay and comes again (bound the attempts with the JetStream
// consumer's MaxDeliver). A message without Nats-Msg-Id is terminated: a
// redelivery would not add the header, so a nak would only repeat the
// failure. Run returns nil when ctx is done, or the error that ended the
// subscription.
func (c *Consumer) Run(ctx context.Context, cons jetstream.Consumer) error {
	if err := c.validate(); err != nil {
		return err
	}
	// Few messages buffered ahead, so none waits out its AckWait unread.
	it, err := cons.Messages(jetstream.PullMaxMessages(16))
	if err != nil {
		return fmt.Errorf("consumer %s: subscribe: %w", c.Name, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("consumer %s: next message: %w", c.Name, err)
		}
		c.settle(ctx, msg)
	}
}

// settle applies one message and tells JetStream the outcome. The ack is
// what may get lost: the inbox makes that harmless.
func (c *Consumer) settle(ctx context.Context, msg jetstream.Msg) {
	log := c.Logger.With().Str("subject", msg.Subject()).Str("message_id", msg.Headers().Get(jetstream.MsgIDHeader)).Logger()
	_, err := c.Apply(ctx, msg)
	switch {
	case errors.Is(err, ErrNoMessageID):
		// The message stays in the stream (unless the stream's retention
		// is WorkQueue or Interest, which drop what is terminated), and the
		// server publishes $JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED with
		// its sequence and this reason.
		log.Error().Err(err).Msg("message rejected")
		if err := msg.TermWithReason("no Nats-Msg-Id header"); err != nil {
			log.Warn().Err(err).Msg("term failed; the message will be delivered and rejected again")
		}
	case err != nil:
		log.Warn().Err(err).Msg("message not applied; it will be delivered again")
		if err := msg.NakWithDelay(c.retryDelay()); err != nil {
			log.Warn().Err(err).Msg("nak failed; the message will be delivered again after its AckWait")
		}
	default:
		if err := msg.Ack(); err != nil {
			log.Warn().Err(err).Msg("ack failed; the message will be delivered again and skipped")
		}
	}
}

func (c *Consumer) validate() error {
	switch {
	case c.Name == "":
		return errors.New("consumer: Name is empty: set it to the durable consumer's name, which keys the inbox")
	case c.DB == nil:
		return fmt.Errorf("consumer %s: DB is nil: set it to the pool of the inbox's database", c.Name)
	case c.Handle == nil:
		return fmt.Errorf("consumer %s: Handle is nil: set it to the business write", c.Name)
	case c.RetryDelay < 0:
		return fmt.Errorf("consumer %s: RetryDelay is %s: want 0 (default %s) or more", c.Name, c.RetryDelay, defaultRetryDelay)
	}
	return nil
}

func (c *Consumer) retryDelay() time.Duration {
	if c.RetryDelay == 0 {
		return defaultRetryDelay
	}
	return c.RetryDelay
}

// describe names msg for an error: its subject and, when it came from a
// stream, its stream sequence and delivery count.
func describe(msg jetstream.Msg) string {
	meta, err := msg.Metadata()
	if err != nil {
		return fmt.Sprintf("subject %q", msg.Subject())
	}
	return fmt.Sprintf("subject %q, stream %s sequence %d, delivery %d", msg.Subject(), meta.Stream, meta.Sequence.Stream, meta.NumDelivered)
}
