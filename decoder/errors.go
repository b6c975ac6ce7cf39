package decoder

import (
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every error about the byte stream itself: a
// truncated or over-long message, an unknown message or value kind, an Insert
// for a relation never described, or messages out of protocol order (Commit
// without Begin, Begin inside a transaction, Insert outside one, Stream Stop
// without Stream Start, a later stream segment of a transaction whose first
// one never came). Nothing after such an error can be trusted; the caller
// should stop and reconnect.
var ErrMalformed = errors.New("malformed pgoutput message")

// SchemaError reports that the configured outbox table, as described by a
// pgoutput Relation message, lacks a mapped column or has one of a type
// outboxd cannot read. Every later Insert into that table returns the same
// error until a Relation message with a usable layout arrives.
type SchemaError struct {
	// Table is the schema-qualified table name, e.g. "public.outbox".
	Table string
	// Column is the table column at fault (the configured name); "" when
	// the fault is the table's (a partition sent as itself).
	Column string
	// Reason says what is wrong and how to fix it.
	Reason string
}

// Error names the table, the column and the fix.
func (e *SchemaError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("outbox table %s: %s", e.Table, e.Reason)
	}
	return fmt.Sprintf("outbox table %s: column %q %s", e.Table, e.Column, e.Reason)
}
