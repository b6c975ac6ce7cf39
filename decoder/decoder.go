package decoder

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/event"
)

// Columns names the outbox table's column for each Event field.
type Columns struct {
	// ID is the event id column (uuid, text, varchar, smallint, integer or
	// bigint; an integer id is its decimal text). Default "id".
	ID string
	// AggregateType is a text or varchar column; "" means the table has
	// none. Default "aggregate_type".
	AggregateType string
	// AggregateID is a text or varchar column; "" means the table has none.
	// Default "aggregate_id".
	AggregateID string
	// EventType is a text or varchar column; "" means the table has none.
	// Default "event_type".
	EventType string
	// Payload is a jsonb, json, text, varchar or bytea column. Default "payload".
	Payload string
	// Headers is a jsonb, json, text or varchar column holding a JSON
	// object (event.ParseHeaders' rules); "" means the table has none.
	// Default "headers".
	Headers string
	// CreatedAt is a timestamptz or timestamp column; "" means the table has
	// none. Default "created_at".
	CreatedAt string
	// PayloadPath, when set, makes the payload the value at this path in
	// the Payload column (then jsonb, json, text or varchar holding JSON):
	// its JSON text, or for a JSON string its content. A row where the
	// path leads nowhere is a *RowError. Default: the whole column.
	PayloadPath JSONPath
	// HeadersPath, when set, reads the headers from the object at this
	// path in the Headers column. Default: the whole column.
	HeadersPath JSONPath
	// HeadersFormat is how the Headers column is written: HeadersJSON (the
	// default, "") or HeadersProperties (Java properties text, as
	// Debezium's tracingspancontext).
	HeadersFormat HeadersFormat
	// HeaderColumns are headers each read from a column of their own (its
	// text value; NULL leaves the header out), set after those of the
	// Headers column: a name in both gets the column's value. Default none.
	HeaderColumns []HeaderColumn
}

// HeaderColumn is one header whose value is a column's.
type HeaderColumn struct {
	// Name is the header's name: a valid NATS header name outside the
	// Nats- and Outbox- prefixes, which JetStream and outboxd set.
	Name string
	// Column is the table's column, any type but bytea; the header is
	// its text form (a uuid, an integer, a timestamp as PostgreSQL writes it).
	Column string
}

// HeadersFormat is the text format of the Headers column.
type HeadersFormat string

// The formats of the Headers column.
const (
	// HeadersJSON is a JSON object (event.ParseHeaders).
	HeadersJSON HeadersFormat = ""
	// HeadersProperties is Java properties text (event.ParseProperties).
	HeadersProperties HeadersFormat = "properties"
)

// isZero reports whether c is the zero value, which means DefaultColumns.
func (c Columns) isZero() bool {
	return fieldColumns(c) == [numFields]string{} && c.PayloadPath.IsZero() && c.HeadersPath.IsZero() &&
		c.HeadersFormat == HeadersJSON && len(c.HeaderColumns) == 0
}

// DefaultColumns returns the column names of the outbox table that
// outboxd's migrations create.
func DefaultColumns() Columns {
	return Columns{
		ID:            "id",
		AggregateType: "aggregate_type",
		AggregateID:   "aggregate_id",
		EventType:     "event_type",
		Payload:       "payload",
		Headers:       "headers",
		CreatedAt:     "created_at",
	}
}

// Config selects the outbox table and maps its columns.
type Config struct {
	// Schema is the outbox table's schema, as pgoutput sends it (unquoted,
	// case-sensitive). Default "public".
	Schema string
	// Table is the outbox table's name, unquoted and case-sensitive.
	// Default "outbox".
	Table string
	// Columns maps the table's columns to Event fields. The zero value means
	// DefaultColumns(); a partly filled value is used as is: ID and Payload
	// must then be set, and a field left "" is not read (its Event field
	// stays empty). ParseColumns reads the --columns form.
	Columns Columns
	// Messages makes logical decoding messages decode to Kind Message
	// (start replication with the pgoutput option messages 'true' to get
	// them). Default false: they decode to None, unread.
	Messages bool
	// EnvelopePrefix, when set, is the prefix of the logical messages that
	// carry an outbox event (message mode; outboxd's is "outbox"): each
	// transactional one decodes to Kind Insert with the Event its Envelope
	// describes, in its place in the transaction, whatever Messages says.
	// A non-transactional one, or one whose content is not a valid
	// Envelope, is a *RowError with Message set. Start replication with
	// messages 'true'. Default "": no message is an event.
	EnvelopePrefix string
	// IDPrefix is prepended to every event's ID, from a row or a message
	// (so also to RowError.EventID): ids of two tables or databases that
	// publish to one stream then stay apart in its duplicate window.
	// Default "".
	IDPrefix string
	// AllowNullPayload makes a row whose payload column is NULL an Event
	// with NullPayload set and an empty Payload, for the caller to skip or
	// publish. Default false: such a row is a *RowError.
	AllowNullPayload bool
	// Spool enables pgoutput protocol version 2 with streaming of
	// in-progress transactions (options proto_version '2', streaming 'on'):
	// changes sent between Stream Start and Stream Stop go to the Spool's
	// files, and Replay yields a transaction once its Stream Commit
	// arrived. New discards whatever the Spool held. Default nil: protocol
	// version 1, where the server never streams, and stream messages
	// decode to None; do not request streaming then.
	Spool *Spool
	// Partitions are the relation ids (OIDs) of the outbox table's
	// partitions, when it is partitioned. The publication must send their
	// rows as the table's (publish_via_partition_root): a Relation message
	// of one of them means it sends them as the partition's, and its rows
	// would otherwise be skipped as another table's. It is a *SchemaError
	// instead, as is every Insert into it.
	Partitions []uint32
}

// Kind says what a decoded message means to the caller.
type Kind uint8

// The kinds of Change. Relation messages and every message outboxd does not
// act on decode to None.
const (
	// None: nothing to do (Relation, Origin, Type, Update, Delete, Truncate,
	// logical messages unless Config.Messages, Stream Start, Stream Stop,
	// Stream Abort, the changes of a stream segment (spooled), and Inserts
	// into other tables).
	None Kind = iota
	// Begin: a transaction starts; Change.Tx is set.
	Begin
	// Insert: an outbox row, or a message carrying an event (with
	// Config.EnvelopePrefix); Change.Event and Change.Tx are set.
	Insert
	// Commit: the transaction ends; Change.Tx and Change.EndLSN are set.
	Commit
	// Message: a logical decoding message (only with Config.Messages);
	// Change.Message is set, and Change.Tx too when it is transactional.
	Message
	// StreamCommit: a streamed transaction committed (only with
	// Config.Spool); Change.Tx and Change.EndLSN are set. The caller must
	// then Replay it (or Discard it) before the next Decode.
	StreamCommit
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case None:
		return "None"
	case Begin:
		return "Begin"
	case Insert:
		return "Insert"
	case Commit:
		return "Commit"
	case Message:
		return "Message"
	case StreamCommit:
		return "StreamCommit"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Change is the result of decoding one pgoutput message.
type Change struct {
	// Kind says which other fields are set.
	Kind Kind
	// Tx is the current transaction for Begin, Insert, Commit and a
	// transactional Message; for StreamCommit, the transaction to Replay.
	Tx event.TxInfo
	// Event is the outbox row, for Insert only.
	Event *event.Event
	// EndLSN is the Commit message's transaction end LSN, for Commit and
	// StreamCommit only: the position to confirm once every event of the
	// transaction is acked.
	EndLSN pglogrepl.LSN
	// Message is the logical decoding message, for Message only.
	Message *LogicalMessage
}

// Decoder turns pgoutput messages (protocol version 1, or 2 with a Spool)
// into outbox events. It keeps the Relation cache and the open transaction
// between calls, so one Decoder serves one replication stream, in order,
// from one goroutine.
type Decoder struct {
	schema   string
	table    string
	columns  Columns
	messages bool
	envelope string // EnvelopePrefix
	idPrefix string
	nullOK   bool // AllowNullPayload
	spool    *Spool
	// partitions holds Config.Partitions.
	partitions map[uint32]bool

	rels    map[uint32]*relation
	inTx    bool
	tx      event.TxInfo
	events  int    // the current transaction's events so far (RowError.Ordinal)
	scratch []byte // reused to gather an event's strings into one allocation

	// pending is the streamed transaction whose Stream Commit was decoded
	// and that Replay has not finished (or Discard dropped) yet.
	pending   *committedStream
	replaying bool
}

// New returns a Decoder for the configured outbox table. It fails when a
// required column name is empty after defaulting.
func New(cfg Config) (*Decoder, error) {
	if cfg.Schema == "" {
		cfg.Schema = "public"
	}
	if cfg.Table == "" {
		cfg.Table = "outbox"
	}
	if cfg.Columns.isZero() {
		cfg.Columns = DefaultColumns()
	}
	def := DefaultColumns()
	cols := fieldColumns(cfg.Columns)
	defs := fieldColumns(def)
	for f := range numFields {
		if cols[f] == "" && fieldRequired(f) {
			return nil, fmt.Errorf("decoder config: Columns.%s is empty: set it to the outbox table's column name (default %q)", fieldNames[f], defs[f])
		}
		if !cfg.Columns.path(f).IsZero() && cols[f] == "" {
			return nil, fmt.Errorf("decoder config: Columns.%sPath is set, but Columns.%s is empty: name the column the path reads", fieldNames[f], fieldNames[f])
		}
	}
	if err := cfg.Columns.CheckHeaders(); err != nil {
		return nil, fmt.Errorf("decoder config: %w", err)
	}
	if cfg.Spool != nil {
		if err := cfg.Spool.reset(); err != nil {
			return nil, fmt.Errorf("decoder config: Spool: %w", err)
		}
	}
	partitions := make(map[uint32]bool, len(cfg.Partitions))
	for _, id := range cfg.Partitions {
		partitions[id] = true
	}
	return &Decoder{
		partitions: partitions,
		schema:     cfg.Schema,
		table:      cfg.Table,
		columns:    cfg.Columns,
		messages:   cfg.Messages,
		envelope:   cfg.EnvelopePrefix,
		idPrefix:   cfg.IDPrefix,
		nullOK:     cfg.AllowNullPayload,
		spool:      cfg.Spool,
		rels:       make(map[uint32]*relation),
	}, nil
}

// InTransaction reports whether the last Begin has not yet been matched by
// its Commit, or a Stream Commit has not yet been replayed: while it is
// true, part of a received transaction is not yet in the caller's hands,
// so no keepalive position may be confirmed. Between (and inside) the
// segments of a streamed transaction it is false: nothing of that
// transaction has been handed on, a keepalive's WAL end is still before its
// commit record (so a restart does not skip it), and PostgreSQL holds the
// slot's restart_lsn back for it (so a restart sends it again whole).
func (d *Decoder) InTransaction() bool { return d.inTx || d.pending != nil }

// OpenStreams counts the streamed transactions that have at least started
// and are neither committed nor aborted yet; 0 without a Spool.
func (d *Decoder) OpenStreams() int {
	if d.spool == nil {
		return 0
	}
	return d.spool.open()
}

// Decode decodes one pgoutput message: the payload of an XLogData message
// whose WAL start is walStart. The returned Event (or LogicalMessage) keeps
// slices of data (its Payload, and the row behind Event.Column), so data
// must not be modified or reused afterwards; the decoder itself never
// writes to it. Inside a stream segment nothing is kept: the message is
// copied to the Spool.
//
// Errors: one wrapping ErrMalformed for a bad byte stream or protocol order,
// a *SchemaError for an outbox table whose columns do not fit the mapping
// (from its Relation message and every Insert into it after), and a
// *RowError for an outbox row that cannot become an event. With a Spool,
// also an error from its files (disk full, say), and one when a Stream
// Commit is still waiting for Replay or Discard. Inside a stream segment,
// schema and row errors wait for Replay: the transaction may yet abort.
func (d *Decoder) Decode(walStart pglogrepl.LSN, data []byte) (Change, error) {
	if len(data) == 0 {
		return Change{}, malformed("empty message")
	}
	if d.pending != nil {
		return Change{}, fmt.Errorf("decode: the Stream Commit of xid %d has not been replayed: call Replay or Discard first", d.pending.tx.Xid)
	}
	if d.spool != nil {
		if d.spool.closed {
			return Change{}, fmt.Errorf("decode: %w", errSpoolClosed)
		}
		switch data[0] {
		case 'S':
			return d.decodeStreamStart(data[1:])
		case 'E':
			return d.decodeStreamStop(data[1:])
		case 'c':
			return d.decodeStreamCommit(data[1:])
		case 'A':
			return d.decodeStreamAbort(data[1:])
		}
		if d.spool.inSegment() {
			return d.decodeInStream(walStart, data)
		}
	}
	return d.decodeV1(walStart, data)
}

// decodeV1 decodes a message in protocol version 1 form: any message
// outside a stream segment, and every spooled record at replay.
func (d *Decoder) decodeV1(walStart pglogrepl.LSN, data []byte) (Change, error) {
	body := data[1:]
	switch data[0] {
	case 'B':
		return d.decodeBegin(body)
	case 'C':
		return d.decodeCommit(body)
	case 'R':
		return d.decodeRelation(body)
	case 'I':
		return d.decodeInsert(walStart, body)
	case 'M':
		return d.decodeMessage(body)
	case 'O', 'Y', 'U', 'D', 'T', 'S', 'E', 'c', 'A':
		// Origin, Type, Update, Delete and Truncate carry nothing outboxd
		// publishes; stream messages reach here only without a Spool
		// (protocol version 1, where the server sends none).
		return Change{}, nil
	}
	// Two-phase messages ('b', 'P', 'K', 'r', 'p') belong to protocol
	// version 3; ignoring them would drop prepared transactions' events.
	version := 1
	if d.spool != nil {
		version = 2
	}
	return Change{}, malformed("unknown message type %q for pgoutput protocol version %d", data[0], version)
}

// pgEpochUnix is 2000-01-01 00:00:00 UTC in Unix seconds.
const pgEpochUnix = 946684800

// pgTime converts microseconds since the PostgreSQL epoch. Splitting seconds
// from microseconds keeps any int64 from overflowing.
func pgTime(us int64) time.Time {
	return time.Unix(pgEpochUnix+us/1_000_000, (us%1_000_000)*1000).UTC()
}

func (d *Decoder) decodeBegin(body []byte) (Change, error) {
	r := reader{b: body}
	finalLSN := r.u64("final lsn")
	ts := r.u64("commit time")
	xid := r.u32("xid")
	if err := r.check("begin"); err != nil {
		return Change{}, err
	}
	if d.inTx {
		return Change{}, malformed("begin of xid %d inside transaction xid %d", xid, d.tx.Xid)
	}
	d.begin(event.TxInfo{Xid: xid, CommitLSN: pglogrepl.LSN(finalLSN), CommitTime: pgTime(int64(ts))})
	return Change{Kind: Begin, Tx: d.tx}, nil
}

// begin enters transaction tx.
func (d *Decoder) begin(tx event.TxInfo) {
	d.inTx, d.tx, d.events = true, tx, 0
}

func (d *Decoder) decodeCommit(body []byte) (Change, error) {
	r := reader{b: body}
	r.u8("flags")
	r.u64("commit lsn")
	endLSN := r.u64("end lsn")
	r.u64("commit time")
	if err := r.check("commit"); err != nil {
		return Change{}, err
	}
	if !d.inTx {
		return Change{}, malformed("commit without begin")
	}
	tx := d.tx
	d.inTx = false
	d.tx = event.TxInfo{}
	return Change{Kind: Commit, Tx: tx, EndLSN: pglogrepl.LSN(endLSN)}, nil
}
