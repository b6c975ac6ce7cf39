package relay

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// PublishMode is how events are published to JetStream.
type PublishMode string

// The publish modes.
const (
	PublishAuto  PublishMode = "auto"  // fast where the server and stream take it, else async
	PublishFast  PublishMode = "fast"  // JetStream fast-ingest batches; refuse to start without them
	PublishAsync PublishMode = "async" // one PublishAsync and PubAck per message
)

// AtomicMode is whether each transaction is published as one JetStream
// atomic batch.
type AtomicMode string

// The atomic modes.
const (
	AtomicAuto AtomicMode = "auto" // where the server and stream take atomic batches
	AtomicOn   AtomicMode = "on"   // refuse to start without them
	AtomicOff  AtomicMode = "off"  // message by message, as fast or async mode sends them
)

// NullPayload is what the relay does with a row whose payload column is
// NULL.
type NullPayload string

// The NULL payload policies.
const (
	// NullPayloadStop: the row cannot be published; it goes to the
	// dead-letter subject, or stops the relay with an error naming it.
	NullPayloadStop NullPayload = "stop"
	// NullPayloadSkip: the row is not published; it is counted
	// (outboxd_null_payloads_skipped_total) and logged at warn level, and
	// its position is confirmed with its transaction's.
	NullPayloadSkip NullPayload = "skip"
	// NullPayloadEmpty: the row is published with an empty body and the
	// header Outbox-Null-Payload: true (Debezium's tombstones).
	NullPayloadEmpty NullPayload = "empty"
)

// maxIDPrefix bounds --id-prefix: it is part of every Nats-Msg-Id, which
// retention's estimate of a dead letter's size allows some room for.
const maxIDPrefix = 64

// Config is one relay's settings, parsed. The zero value is not usable:
// start from DefaultConfig. Each field names the key that sets it: the
// config file's key, and with two dashes the flag. Validate's errors name
// settings as flags (--max-in-flight), as outboxd's users meet them.
type Config struct {
	// PGURL (pg-url) is the database holding the outbox table; its role
	// needs REPLICATION.
	PGURL string
	// Slot (slot, default outboxd) is the logical replication slot, created
	// with pgoutput when missing.
	Slot string
	// Publication (publication, default outboxd) holds the outbox table.
	Publication string
	// Table (table, default public.outbox) is the outbox table; the zero
	// Table publishes only logical-message events (needs Messages).
	Table replication.Table
	// Messages (messages, default true) publishes the events emitted as
	// transactional logical decoding messages with prefix "outbox".
	Messages bool
	// Columns (columns) maps outboxd's fields to the table's columns.
	Columns decoder.Columns
	// IDPrefix (id-prefix, default "", up to 64 bytes without white space
	// or control characters) is put before every message id: Nats-Msg-Id,
	// and the id in dead letters, errors and logs. Integer ids of two
	// tables or databases that publish to one stream then stay apart in
	// its duplicate window.
	IDPrefix string
	// NullPayload (null-payload, default stop; "" means stop) is what a
	// row whose payload column is NULL becomes.
	NullPayload NullPayload
	// Stream (stream, default OUTBOX) is the JetStream stream published to.
	Stream string
	// Subject (subject, default DefaultSubject) is the subject template:
	// {column} placeholders, each with optional transforms
	// ({TypeName|first(,)|last(.)}); see sink.ParseTemplate.
	Subject *sink.Template
	// Checkpoint (checkpoint, default kv:outboxd) is where the LSN
	// checkpoint is kept.
	Checkpoint checkpoint.Location
	// CreateStream (create-stream) creates a missing stream.
	CreateStream bool
	// DeadLetter (dead-letter, default none: such a row stops the relay)
	// is the subject of rows that can never be published.
	DeadLetter string
	// Exclusive (exclusive-stream) publishes with
	// Nats-Expected-Last-Sequence: outboxd is the stream's only writer.
	Exclusive bool
	// AllowGap (allow-gap) starts even when the slot is ahead of the
	// checkpoint or was recreated; events in the gap are not published.
	AllowGap bool
	// SlotFailover (slot-failover, default true) makes the slot a failover
	// slot on PostgreSQL 17+, synchronised to standbys so that it survives
	// a promotion; older servers have none.
	SlotFailover bool
	// PublishMode (publish-mode, default auto).
	PublishMode PublishMode
	// AtomicTransactions (atomic-transactions, default off) publishes each
	// transaction of two or more events as one atomic batch. Off by
	// default: on a file stream such a transaction costs several times
	// the CPU and drain time of fast batches (docs/benchmarks.md).
	AtomicTransactions AtomicMode
	// MaxInFlight (max-in-flight, default 4096, 1 to sink.MaxInFlightLimit)
	// bounds the messages published but not yet acknowledged.
	MaxInFlight int
	// PublishLinger (publish-linger, default sink.DefaultLinger, 100µs to
	// 100ms) is how long an open fast batch waits for the next event.
	PublishLinger time.Duration
	// ReadLinger (read-linger, default replication.DefaultReadLinger, 0 to
	// replication.MaxReadLinger) batches the reads of a trickle of WAL.
	ReadLinger time.Duration
	// StatusInterval (status-interval, default 1s, 10ms to 1m) is how often
	// the confirmed position is sent to PostgreSQL.
	StatusInterval time.Duration
	// CheckpointInterval (checkpoint-interval, default 200ms, 10ms to 1m)
	// is how often the acknowledged position is saved.
	CheckpointInterval time.Duration
	// ShutdownTimeout (shutdown-timeout, default 30s, positive) bounds the
	// wait for in-flight acknowledgements when the relay stops.
	ShutdownTimeout time.Duration
	// StandbyRetry (standby-retry, default 2s, 100ms to 1m) is how often a
	// standby tries to take over the slot another process holds.
	StandbyRetry time.Duration
	// StreamCheck (stream-check-interval, default 1m; 0: off; else 1s to
	// 24h) is how often run samples an acknowledged message and checks,
	// an interval later, that the stream still holds it (see streamCheck).
	StreamCheck time.Duration
	// Heartbeat (heartbeat-interval, default 0: off; else 1s to 1h) writes
	// a logical decoding heartbeat so a slot on a busy database advances.
	Heartbeat time.Duration
	// Retention deletes confirmed rows; see Retention.
	Retention Retention
	// PGStreaming (pg-streaming, default true) asks PostgreSQL 14+ to
	// stream large in-progress transactions, spooled in SpoolDir.
	PGStreaming bool
	// SpoolDir (spool-dir, default the system's temporary folder).
	SpoolDir string
	// NATSMonitorURL (nats-monitor-url) is read at start to check that a
	// single-replica stream's server fsyncs every write.
	NATSMonitorURL string
	// LogPayloads (log-payloads) logs every published payload at debug level.
	LogPayloads bool
	// NullSink (sink=null, benchmarks only) acknowledges events without
	// publishing them.
	NullSink bool
}

// Retention is the deletion of rows once they are confirmed.
type Retention struct {
	// On (retention is not "off") turns it on.
	On bool
	// Age (retention) is how old, by created_at, a confirmed row must be;
	// 0 deletes it as soon as it is confirmed.
	Age time.Duration
	// Batch (retention-batch, default 1000, 1 to 100000) is the most rows
	// deleted at a time.
	Batch int
	// Pause (retention-pause, default 100ms, 10ms to 1h) is the pause
	// between two batches.
	Pause time.Duration
	// Wait (retention-wait, default 1m, 1s to 1h) is how long a batch
	// waits for the confirmed position to reach its snapshot.
	Wait time.Duration
	// CreatedAtZone (created-at-zone, default UTC) is the zone a timestamp
	// (without time zone) created_at holds its values in.
	CreatedAtZone string
}

// DefaultSubject is the default subject template. An event type may hold
// dots, as in the examples of outbox_emit and package outbox
// ('order.created'): |tokens publishes it as several subject tokens
// (outbox.order.order.created) instead of stopping the relay at the row.
// Its filter is outbox.*.>; the stream --create-stream makes captures
// outbox.>.
const DefaultSubject = "outbox.{aggregate_type}.{event_type|tokens}"

// DefaultConfig is the relay's defaults; the caller sets at least the
// connection and the mapping it does not take as they are.
func DefaultConfig() Config {
	return Config{
		PGURL:              "postgres://postgres@127.0.0.1:5432/postgres",
		Slot:               "outboxd",
		Publication:        "outboxd",
		Table:              replication.Table{Schema: "public", Name: "outbox"},
		Messages:           true,
		Columns:            decoder.DefaultColumns(),
		NullPayload:        NullPayloadStop,
		Stream:             "OUTBOX",
		Subject:            defaultTemplate(),
		Checkpoint:         checkpoint.Location{Kind: "kv", Bucket: "outboxd"},
		PublishMode:        PublishAuto,
		AtomicTransactions: AtomicOff,
		StreamCheck:        time.Minute,
		MaxInFlight:        4096,
		PublishLinger:      sink.DefaultLinger,
		ReadLinger:         replication.DefaultReadLinger,
		StatusInterval:     time.Second,
		CheckpointInterval: 200 * time.Millisecond,
		ShutdownTimeout:    30 * time.Second,
		StandbyRetry:       2 * time.Second,
		Retention: Retention{
			Batch: 1000, Pause: 100 * time.Millisecond, Wait: time.Minute, CreatedAtZone: "UTC",
		},
		PGStreaming:  true,
		SlotFailover: true,
	}
}

// decoderConfig configures a decoder for the relay's table, mapping, id
// prefix and NULL payload policy; run and backfill decode alike, so a row
// backfilled and the same row streamed become the same message.
func (c Config) decoderConfig() decoder.Config {
	return decoder.Config{Schema: c.Table.Schema, Table: c.Table.Name, Columns: c.Columns, IDPrefix: c.IDPrefix,
		AllowNullPayload: c.NullPayload == NullPayloadSkip || c.NullPayload == NullPayloadEmpty}
}

// messagesOnly reports whether the relay reads no table, only logical
// messages.
func (c Config) messagesOnly() bool { return c.Table == (replication.Table{}) }

// Validate checks every range and combination, and reports the first bad
// setting: its error starts with the setting's flag, then the value and
// what is accepted.
func (c Config) Validate() error {
	switch {
	case c.messagesOnly() && !c.Messages:
		return fmt.Errorf("--table is empty and --messages=false: outboxd would publish nothing; name the outbox table or turn --messages on")
	case c.Subject == nil:
		return fmt.Errorf("--subject is not set: give a subject template, e.g. outbox.{aggregate_type}.{event_type}")
	case c.Stream == "":
		return fmt.Errorf("--stream is empty: name the JetStream stream, e.g. OUTBOX")
	}
	if err := replication.ValidSlotName(c.Slot); err != nil {
		return fmt.Errorf("--slot: %w", err)
	}
	switch c.NullPayload {
	case "", NullPayloadStop, NullPayloadSkip, NullPayloadEmpty:
	default:
		return fmt.Errorf("--null-payload %q is not a policy: use %s, %s or %s", c.NullPayload, NullPayloadStop, NullPayloadSkip, NullPayloadEmpty)
	}
	if err := c.Columns.CheckHeaders(); err != nil {
		return fmt.Errorf("--headers-format or --columns: %w", err)
	}
	if i := strings.IndexFunc(c.IDPrefix, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 || len(c.IDPrefix) > maxIDPrefix {
		return fmt.Errorf("--id-prefix %q is not a usable prefix: use up to %d bytes without white space or control characters, e.g. sales-db1:", c.IDPrefix, maxIDPrefix)
	}
	// The publisher holds the range of its window: its error names the
	// setting as a key, which a flag spells with two dashes.
	if err := c.sinkConfig(publishing{}, nil, zerolog.Nop()).Validate(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if c.PublishLinger < 100*time.Microsecond || c.PublishLinger > 100*time.Millisecond {
		return fmt.Errorf("--publish-linger %s is out of range: use 100µs to 100ms", c.PublishLinger)
	}
	if c.ReadLinger < 0 || c.ReadLinger > replication.MaxReadLinger {
		return fmt.Errorf("--read-linger %s is out of range: use 0 to %s", c.ReadLinger, replication.MaxReadLinger)
	}
	switch {
	case c.PublishMode != PublishAuto && c.PublishMode != PublishFast && c.PublishMode != PublishAsync:
		return fmt.Errorf("--publish-mode %q is not a mode: use %s, %s or %s", c.PublishMode, PublishAuto, PublishFast, PublishAsync)
	case c.PublishMode == PublishFast && c.Exclusive:
		return fmt.Errorf("--publish-mode fast cannot be combined with --exclusive-stream, whose Nats-Expected-Last-Sequence needs each message's own PubAck: use --publish-mode auto or async")
	case c.AtomicTransactions != AtomicAuto && c.AtomicTransactions != AtomicOn && c.AtomicTransactions != AtomicOff:
		return fmt.Errorf("--atomic-transactions %q is not a mode: use %s, %s or %s", c.AtomicTransactions, AtomicAuto, AtomicOn, AtomicOff)
	case c.AtomicTransactions == AtomicOn && c.Exclusive:
		return fmt.Errorf("--atomic-transactions on cannot be combined with --exclusive-stream, whose Nats-Expected-Last-Sequence an atomic batch takes on its first message only: use --atomic-transactions auto or off")
	}
	for _, d := range []struct {
		key   string
		value time.Duration
	}{{"status-interval", c.StatusInterval}, {"checkpoint-interval", c.CheckpointInterval}} {
		if d.value < 10*time.Millisecond || d.value > time.Minute {
			return fmt.Errorf("--%s %s is out of range: use 10ms to 1m", d.key, d.value)
		}
	}
	if c.StandbyRetry < 100*time.Millisecond || c.StandbyRetry > time.Minute {
		return fmt.Errorf("--standby-retry %s is out of range: use 100ms to 1m", c.StandbyRetry)
	}
	if err := c.validateRetention(); err != nil {
		return err
	}
	if c.StreamCheck != 0 && (c.StreamCheck < time.Second || c.StreamCheck > 24*time.Hour) {
		return fmt.Errorf("--stream-check-interval %s is out of range: use 0 (off) or 1s to 24h", c.StreamCheck)
	}
	if c.Heartbeat != 0 && (c.Heartbeat < time.Second || c.Heartbeat > time.Hour) {
		return fmt.Errorf("--heartbeat-interval %s is out of range: use 0 (off) or 1s to 1h", c.Heartbeat)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("--shutdown-timeout %s must be positive, e.g. 30s", c.ShutdownTimeout)
	}
	return nil
}

// validateRetention checks what retention needs: a table, a published
// stream, and a created_at column to measure an age by.
func (c Config) validateRetention() error {
	r := c.Retention
	if !r.On {
		return nil
	}
	age := shortDuration(r.Age)
	switch {
	case c.messagesOnly():
		return fmt.Errorf("--retention %s with --table '': there is no table to delete from; use --retention off", age)
	case c.NullSink:
		return fmt.Errorf("--retention %s with --sink null would delete rows that were never published; use --retention off", age)
	}
	if _, ok := c.Columns.Mapped("created_at"); !ok && r.Age > 0 {
		return fmt.Errorf("--retention %s needs the rows' age, and --columns maps no created_at: map it (e.g. created_at=CreatedAt), or use --retention 0s to delete rows as soon as they are confirmed", age)
	}
	switch {
	case r.Batch < 1 || r.Batch > 100000:
		return fmt.Errorf("--retention-batch %d is out of range: use 1 to 100000", r.Batch)
	case r.Pause < 10*time.Millisecond || r.Pause > time.Hour:
		return fmt.Errorf("--retention-pause %s is out of range: use 10ms to 1h", r.Pause)
	case r.Wait < time.Second || r.Wait > time.Hour:
		return fmt.Errorf("--retention-wait %s is out of range: use 1s to 1h", r.Wait)
	case strings.TrimSpace(r.CreatedAtZone) == "":
		return fmt.Errorf("--created-at-zone is empty: name the zone a timestamp created_at column holds its values in, e.g. UTC")
	}
	return nil
}

// shortDuration writes d as a user writes it: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// defaultTemplate is DefaultSubject parsed; it is a constant that parses.
func defaultTemplate() *sink.Template {
	t, err := sink.ParseTemplate(DefaultSubject)
	if err != nil {
		panic("relay: DefaultSubject does not parse: " + err.Error())
	}
	return t
}
