package inbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers that outboxd sets and that dead letters carry.
const (
	// HeaderAggregateID is the event's aggregate id, set by outboxd.
	HeaderAggregateID = "Outbox-Aggregate-Id"
	// HeaderDeadLetterReason says why a message was dead-lettered. outboxd
	// uses the same header for the rows it dead-letters.
	HeaderDeadLetterReason = "Outbox-Dead-Letter-Reason"
	// HeaderOriginalSubject is the subject a dead letter was stored under.
	HeaderOriginalSubject = "Outbox-Original-Subject"
	// HeaderConsumer names the inbox consumer that dead-lettered a message.
	HeaderConsumer = "Inbox-Consumer"
	// HeaderStream and HeaderSequence locate the original in its stream.
	HeaderStream   = "Inbox-Stream"
	HeaderSequence = "Inbox-Stream-Sequence"
	// HeaderDeliveries is how often the original was delivered.
	HeaderDeliveries = "Inbox-Deliveries"
)

// Handler does the business write of one message in tx, the transaction
// that also records the message in the inbox. It runs at most once per
// message id with effect: an error (or a crash) rolls tx back, the inbox
// row with it, and the message comes again. It must not commit or roll
// back tx, and must finish within Config.AckWait.
type Handler func(ctx context.Context, tx pgx.Tx, msg Message) error

// Message is one delivery of a stream message. It has no ack methods: the
// consumer acks after the commit, which is the whole point.
type Message struct {
	// ID is the Nats-Msg-Id header, the event id for outboxd's messages.
	ID string
	// Subject is the subject as stored, partition token included.
	Subject string
	Header  nats.Header
	Data    []byte
	// Stream and Sequence locate the message in its stream.
	Stream   string
	Sequence uint64
	// Delivery counts this message's deliveries to the consumer, from 1.
	Delivery uint64
}

// AggregateID returns the Outbox-Aggregate-Id header.
func (m Message) AggregateID() string { return m.Header.Get(HeaderAggregateID) }

// String names the message for logs and errors.
func (m Message) String() string {
	return fmt.Sprintf("message %q (subject %s, stream %s sequence %d, delivery %d)", m.ID, m.Subject, m.Stream, m.Sequence, m.Delivery)
}

// newMessage reads msg's id and metadata. A message with no metadata did
// not come from a JetStream consumer, which is a bug in the caller.
func newMessage(msg jetstream.Msg) (Message, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return Message{}, fmt.Errorf("inbox: message on %s has no JetStream metadata: %w", msg.Subject(), err)
	}
	return Message{
		ID:       strings.TrimSpace(msg.Headers().Get(jetstream.MsgIDHeader)),
		Subject:  msg.Subject(),
		Header:   msg.Headers(),
		Data:     msg.Data(),
		Stream:   meta.Stream,
		Sequence: meta.Sequence.Stream,
		Delivery: meta.NumDelivered,
	}, nil
}
