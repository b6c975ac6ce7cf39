package event

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// TxInfo identifies the transaction an event was committed in. It comes from
// the pgoutput Begin message, so it is known before the first row arrives.
type TxInfo struct {
	// Xid is the transaction id.
	Xid uint32
	// CommitLSN is the LSN of the transaction's commit record (Begin's final LSN).
	CommitLSN pglogrepl.LSN
	// CommitTime is the commit timestamp reported by the server.
	CommitTime time.Time
}

// Header is one key/value pair from the row's headers column, kept in the
// order the server sent them so output is deterministic.
type Header struct {
	// Key is the JSON object key.
	Key string
	// Value is the key's string value.
	Value string
}

// Event is one outbox row, mapped from the table's columns to outboxd's fields.
type Event struct {
	// Tx is the transaction the row was committed in.
	Tx TxInfo
	// LSN is the WAL position of the Insert message that carried the row.
	// Many rows can share one LSN: never deduplicate by it.
	LSN pglogrepl.LSN
	// ID is the event id (the row's id column, text form, or the
	// message's id) after the decoder's IDPrefix; it becomes Nats-Msg-Id.
	ID string
	// AggregateType is the aggregate_type column, e.g. "order"; empty when
	// NULL or not mapped.
	AggregateType string
	// AggregateID is the aggregate_id column: the entity the event is about;
	// empty when NULL or not mapped.
	AggregateID string
	// EventType is the event_type column, e.g. "order.created"; empty when
	// NULL or not mapped.
	EventType string
	// Payload is the payload column's bytes exactly as the server sent them
	// (bytea columns are decoded from hex to raw bytes), or the value at
	// the mapping's JSON path. Except for bytea and an unescaped JSON
	// string it aliases the message passed to Decoder.Decode. Nil when
	// NullPayload.
	Payload []byte
	// Headers holds the pairs of the headers column (a JSON object of
	// strings) in the order sent; nil when the column is NULL, not mapped or
	// an empty object.
	Headers []Header
	// CreatedAt is the created_at column, in UTC; zero when NULL or not
	// mapped, and for an event from a logical message.
	CreatedAt time.Time
	// FromMessage is true for an event carried by a logical decoding
	// message (an Envelope) rather than an outbox row.
	FromMessage bool
	// NullPayload is true for a row whose payload column is NULL, which
	// the decoder lets through only when asked to (a Debezium tombstone,
	// say): it is published with an empty body, or skipped.
	NullPayload bool
	// Row reads the row's other columns by name (the decoder's, aliasing
	// the message); nil for an event from a logical message.
	Row Columns
}

// Columns reads the columns of a row by name, as text.
type Columns interface {
	// Column returns the column's text value; ok is false when the row
	// has no such column or its value is NULL.
	Column(name string) (value string, ok bool)
}

// Column returns the text value of any column of the row by name, for subject
// templates. ok is false when the table has no such column or its value is NULL
// (or an unchanged TOAST value). Names are matched exactly, as pgoutput sends
// them (unquoted, case-sensitive). A name that is no column of the table but
// a mapped field's (FieldNames, e.g. "event_type" mapped to "Topic") reads
// that field's column, so the default template works with a mapped table.
// An event from a logical message has the columns id, aggregate_type,
// aggregate_id and event_type: its envelope's keys.
func (e *Event) Column(name string) (value string, ok bool) {
	if e.FromMessage {
		switch name {
		case "id":
			return e.ID, true
		case "aggregate_type":
			return e.AggregateType, true
		case "aggregate_id":
			return e.AggregateID, true
		case "event_type":
			return e.EventType, true
		}
		return "", false
	}
	if e.Row == nil {
		return "", false
	}
	return e.Row.Column(name)
}
