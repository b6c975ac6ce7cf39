package decoder

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// Columns names the outbox table's column for each Event field.
type Columns struct {
	// ID is the event id column (uuid, text or varchar). Default "id".
	ID string
	// AggregateType is a text or varchar column. Default "aggregate_type".
	AggregateType string
	// AggregateID is a text or varchar column. Default "aggregate_id".
	AggregateID string
	// EventType is a text or varchar column. Default "event_type".
	EventType string
	// Payload is a jsonb, json, text, varchar or bytea column. Default "payload".
	Payload string
	// Headers is a jsonb or json column holding an object of strings;
	// "" means the table has none. Default "headers".
	Headers string
	// CreatedAt is a timestamptz or timestamp column; "" means the table has
	// none. Default "created_at".
	CreatedAt string
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
	// DefaultColumns(); a partly filled value is used as is, so every
	// required name must then be set.
	Columns Columns
}

// Kind says what a decoded message means to the caller.
type Kind uint8

// The kinds of Change. Relation messages and every message outboxd does not
// act on decode to None.
const (
	// None: nothing to do (Relation, Origin, Type, Update, Delete, Truncate,
	// logical Message, stream messages, and Inserts into other tables).
	None Kind = iota
	// Begin: a transaction starts; Change.Tx is set.
	Begin
	// Insert: an outbox row; Change.Event and Change.Tx are set.
	Insert
	// Commit: the transaction ends; Change.Tx and Change.EndLSN are set.
	Commit
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
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Change is the result of decoding one pgoutput message.
type Change struct {
	// Kind says which other fields are set.
	Kind Kind
	// Tx is the current transaction for Begin, Insert and Commit.
	Tx TxInfo
	// Event is the outbox row, for Insert only.
	Event *Event
	// EndLSN is the Commit message's transaction end LSN, for Commit only:
	// the position to confirm once every event of the transaction is acked.
	EndLSN pglogrepl.LSN
}

// Decoder turns pgoutput protocol version 1 messages into outbox events. It
// keeps the Relation cache and the open transaction between calls, so one
// Decoder serves one replication stream, in order, from one goroutine.
type Decoder struct {
	schema  string
	table   string
	columns Columns

	rels    map[uint32]*relation
	inTx    bool
	tx      TxInfo
	scratch []byte // reused to gather an event's strings into one allocation
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
	if cfg.Columns == (Columns{}) {
		cfg.Columns = DefaultColumns()
	}
	def := DefaultColumns()
	cols := fieldColumns(cfg.Columns)
	defs := fieldColumns(def)
	for f := range numFields {
		if cols[f] == "" && fieldRequired(f) {
			return nil, fmt.Errorf("decoder config: Columns.%s is empty: set it to the outbox table's column name (default %q)", fieldNames[f], defs[f])
		}
	}
	return &Decoder{
		schema:  cfg.Schema,
		table:   cfg.Table,
		columns: cfg.Columns,
		rels:    make(map[uint32]*relation),
	}, nil
}

// InTransaction reports whether the last Begin has not yet been matched by
// its Commit.
func (d *Decoder) InTransaction() bool { return d.inTx }

// Decode decodes one pgoutput message: the payload of an XLogData message
// whose WAL start is walStart. The returned Event keeps slices of data (its
// Payload, and the row behind Event.Column), so data must not be modified
// or reused afterwards; the decoder itself never writes to it.
//
// Errors: one wrapping ErrMalformed for a bad byte stream or protocol order,
// a *SchemaError for an outbox table whose columns do not fit the mapping
// (from its Relation message and every Insert into it after), and a
// *RowError for an outbox row that cannot become an event.
func (d *Decoder) Decode(walStart pglogrepl.LSN, data []byte) (Change, error) {
	if len(data) == 0 {
		return Change{}, malformed("empty message")
	}
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
	case 'O', 'Y', 'U', 'D', 'T', 'M', 'S', 'E', 'c', 'A':
		// Origin, Type, Update, Delete, Truncate, logical Message and the
		// stream messages carry nothing outboxd publishes.
		return Change{}, nil
	}
	// Two-phase messages ('b', 'P', 'K', 'r', 'p') belong to protocol
	// version 3; ignoring them would drop prepared transactions' events.
	return Change{}, malformed("unknown message type %q for pgoutput protocol version 1", data[0])
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
	d.inTx = true
	d.tx = TxInfo{Xid: xid, CommitLSN: pglogrepl.LSN(finalLSN), CommitTime: pgTime(int64(ts))}
	return Change{Kind: Begin, Tx: d.tx}, nil
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
	d.tx = TxInfo{}
	return Change{Kind: Commit, Tx: tx, EndLSN: pglogrepl.LSN(endLSN)}, nil
}
