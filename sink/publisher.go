package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/event"
)

// This file holds the Publisher's configuration and Run. Run publishes in
// one of two loops: async mode's (async.go, with exclusive mode's rules in
// exclusive.go) or fast mode's (fast.go). The messages are built in
// message.go; the in-flight window is queue.go's.

// MaxInFlightLimit is the largest Config.MaxInFlight.
const MaxInFlightLimit = 65536

// Config configures a Publisher.
type Config struct {
	// Stream is the JetStream stream the messages must land in; every publish
	// carries Nats-Expected-Stream so a subject captured elsewhere is refused.
	Stream string
	// Subject renders each event's subject. Required.
	Subject *Template
	// DeadLetter, when set, is the subject a row that can never be
	// published goes to instead of stopping the pipeline; its headers name
	// the reason, the original subject, the row id, xid and LSN.
	DeadLetter string
	// Exclusive declares outboxd the only writer to Stream. Publishes then
	// carry Nats-Expected-Last-Sequence, which the stream leader checks
	// against every sequence it has assigned, so a message lost with a
	// failed leader makes the later ones fail instead of overtaking it.
	// Another writer to the stream makes those expectations fail, each
	// failure costing a retry round. Off by default.
	Exclusive bool
	// Fast publishes with JetStream fast-ingest batches instead of one
	// PublishAsync per message (see fast.go). The stream must take them:
	// check with CheckFastBatch. Not with Exclusive, whose expectations
	// need every message's own PubAck. Off by default.
	Fast bool
	// Atomic publishes each transaction of two or more events as one
	// JetStream atomic batch (see atomic.go): the stream stores all of it
	// or none. The stream must take them: check with CheckAtomicBatch. Not
	// with Exclusive. Off by default.
	Atomic bool
	// AtomicLimit is the most events a transaction may have to go as one
	// batch: the server's limit (max_batch_size, default 1000). Larger
	// transactions go message by message, marked with HeaderTxSplit.
	// Default MaxAtomicBatch.
	AtomicLimit int
	// AckTimeout is how long fast and atomic mode wait for the server to acknowledge
	// a batch before it republishes. Default 10s.
	AckTimeout time.Duration
	// Linger is how long an open fast batch waits for the next item before
	// it commits: longer makes fewer, larger batches (less work for the
	// server and this process per message) and adds up to Linger to each
	// message's latency. Default 1ms.
	Linger time.Duration
	// LogPayloads logs each message's payload at debug level. Off by
	// default: payloads may hold personal data.
	LogPayloads bool
	// MaxInFlight bounds unacknowledged publishes: 1 to MaxInFlightLimit.
	// Default 4096.
	MaxInFlight int
	// RetryMin and RetryMax bound the backoff between republish rounds.
	// Defaults 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// Logger receives state changes. Default zerolog.Nop().
	Logger zerolog.Logger
	// Observer is told every publish outcome, for metrics. Default none.
	Observer Observer
	// Sampler, when set, is told of acknowledged messages whose stream
	// sequence the acknowledgement names, for a later check that the
	// stream still holds them. Default none.
	Sampler Sampler
}

// Sampler takes samples of stored messages (see Config.Sampler). Stored is
// on the publisher's hot path: it must return at once when it wants no
// sample.
type Sampler interface {
	// Stored says the stream acknowledged msg at sequence seq.
	Stored(msg *nats.Msg, seq uint64)
}

// Validate reports the first setting of c a Publisher cannot run with: a
// value out of range, named as the user knows it (max-in-flight) with the
// range it takes, or Fast with Exclusive. It checks the values as they
// stand: NewPublisher puts the defaults into zero fields before it calls
// Validate, but to Validate itself a MaxInFlight of 0 is out of range, as a
// user's max-in-flight 0 is.
func (c Config) Validate() error {
	if c.MaxInFlight < 1 || c.MaxInFlight > MaxInFlightLimit {
		return fmt.Errorf("max-in-flight %d is out of range: use 1 to %d", c.MaxInFlight, MaxInFlightLimit)
	}
	if c.Atomic && c.AtomicLimit < 2 {
		return fmt.Errorf("atomic batch limit %d is out of range: use 2 or more (the server's max_batch_size)", c.AtomicLimit)
	}
	if c.Atomic && c.Exclusive {
		return errors.New("atomic transactions cannot be combined with exclusive mode, whose Nats-Expected-Last-Sequence a batch takes on its first message only: turn one of them off")
	}
	if c.Fast && c.Exclusive {
		return errors.New("fast batch publishing cannot be combined with exclusive mode, whose Nats-Expected-Last-Sequence needs each message's own PubAck: use async publishing")
	}
	return nil
}

// withDefaults returns c with the defaults in its zero fields.
func (c Config) withDefaults() Config {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 4096
	}
	if c.AtomicLimit == 0 {
		c.AtomicLimit = MaxAtomicBatch
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 10 * time.Second
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 5 * time.Second
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// Item is one event to publish with its sequence number from the ack tracker.
type Item struct {
	Seq   uint64
	Event *event.Event
	// Dead is set for a row the decoder could not turn into an event
	// (Event is nil then): it goes to the dead-letter subject.
	Dead *event.RowError
	// TxEnd marks the last item of its transaction. Atomic mode
	// (Config.Atomic) gathers a transaction's items up to it; a
	// transaction whose last item never comes (the stream stopped in the
	// middle) is not published there.
	TxEnd bool
	// split is why atomic mode publishes the item's transaction message
	// by message; its message says so in HeaderTxSplit.
	split string
}

// acker receives acknowledgements in publish order (checkpoint.Tracker).
// An error means the sequence number was never handed out: a bug.
type acker interface {
	Ack(seq uint64) error
}

// Publisher publishes events to JetStream in order with a bounded window.
type Publisher struct {
	js         jetstream.JetStream
	cfg        Config
	maxPayload int64
	log        zerolog.Logger
	lastTx     txFields // one goroutine's only: atomic mode's gatherer has a copy of the Publisher
}

// NewPublisher checks cfg and returns a publisher on js. maxPayload is the
// server's max_payload (nats.Conn.MaxPayload), which headers count against.
//
// The connection under js must not buffer publishes while reconnecting
// (nats.ReconnectBufSize(-1)): the client would send the buffered, newer
// messages before the Publisher republishes the older ones lost with the
// old connection, and the stream would leave commit order.
func NewPublisher(js jetstream.JetStream, maxPayload int64, cfg Config) (*Publisher, error) {
	if cfg.Subject == nil {
		return nil, errors.New("BUG: sink.Config.Subject is nil")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	return &Publisher{js: js, cfg: cfg, maxPayload: maxPayload,
		log: cfg.Logger.With().Str("component", "sink").Str("stream", cfg.Stream).Logger()}, nil
}

// Run publishes every item received on in, in order, and reports each
// acknowledgement to acks in the same order. When in is closed it waits for
// everything in flight and returns nil. It returns early with ctx's error
// when ctx is done, or with a *event.RowError for an event that cannot be
// published, once every message before that event is acknowledged.
func (p *Publisher) Run(ctx context.Context, in <-chan Item, acks acker) error {
	if p.cfg.Atomic {
		return p.runAtomic(ctx, in, acks)
	}
	return p.runSingly(ctx, in, acks, func() int { return len(in) })
}

// runSingly is Run in fast or async mode: message by message, whatever
// the transactions. waiting counts the items waiting (see runFast).
func (p *Publisher) runSingly(ctx context.Context, in <-chan Item, acks acker, waiting func() int) error {
	if p.cfg.Fast {
		return p.runFast(ctx, in, acks, waiting)
	}
	return p.runAsync(ctx, in, acks, nil)
}

// prepare builds the message for an item, ready to send.
func (p *Publisher) prepare(item Item) (pending, error) {
	msg, err := p.build(item)
	if err != nil {
		return pending{}, err
	}
	if p.cfg.LogPayloads {
		p.log.Debug().Str("event_id", msg.Header.Get(jetstream.MsgIDHeader)).Str("subject", msg.Subject).
			Bytes("payload", msg.Data).Msg("publish")
	}
	pm := pending{seq: item.Seq, msg: msg, dead: msg.Subject == p.cfg.DeadLetter && isDeadLetter(msg)}
	if item.Event != nil {
		pm.committed = item.Event.Tx.CommitTime
	}
	return pm, nil
}

// acked reports the acknowledgement of pm to the observer and to acks,
// and to the sampler when the acknowledgement named its stream sequence
// seq (0 when not).
func (p *Publisher) acked(pm pending, duplicate bool, seq uint64, acks acker) error {
	if seq != 0 && !pm.dead && p.cfg.Sampler != nil {
		p.cfg.Sampler.Stored(pm.msg, seq)
	}
	if duplicate {
		p.log.Debug().Str("event_id", pm.msg.Header.Get(jetstream.MsgIDHeader)).Msg("duplicate absorbed by JetStream")
	}
	if pm.dead {
		p.cfg.Observer.DeadLettered()
	} else {
		p.cfg.Observer.Published(pm.committed, duplicate)
	}
	if err := acks.Ack(pm.seq); err != nil {
		return fmt.Errorf("BUG: acknowledge message %d: %w", pm.seq, err)
	}
	return nil
}
