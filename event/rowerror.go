package event

import (
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
)

// RowError reports one outbox row that cannot become an event: a required
// column is NULL, the id is empty, a value was not sent in text form, the
// headers are not a JSON object of header values (ParseHeaders), a JSON
// path of the mapping leads nowhere in the row, or created_at does not
// parse.
// The row is still well-formed protocol; the caller decides whether to stop
// or dead-letter it, but must not skip it silently.
//
// In message mode it also reports a logical message with the event prefix
// that cannot become an event: its content is not a valid Envelope, or it
// was emitted non-transactionally. Message is true then.
type RowError struct {
	// EventID is the row's id (after the decoder's IDPrefix, as the
	// message id would be), or "" when the id itself is the problem.
	EventID string
	// Xid is the transaction the row was committed in.
	Xid uint32
	// LSN is the WAL position of the Insert message.
	LSN pglogrepl.LSN
	// Column is the table column at fault; for a message, the envelope key
	// at fault, or "" when the whole message is.
	Column string
	// Reason says what is wrong with the value.
	Reason string
	// Message is true when the event came in a logical decoding message
	// (Xid is 0 for a non-transactional one, LSN is the message's).
	Message bool
	// Content is, for a message that is not a valid envelope, a copy of
	// its content: it exists nowhere else once the position passes it, so
	// a dead-letter message carries it.
	Content []byte
	// Row is, for a table row, the row as far as it could be read: the
	// fields that decoded, and the payload as sent (the column's text when
	// it does not decode). A dead letter carries its body and subject, so
	// nothing of the row is lost once the position passes it. Nil for a
	// message (see Content).
	Row *Event
	// Ordinal is the row's (or message's) place among its transaction's
	// events, 1 for the first. Rows of one multi-row INSERT or COPY share
	// an LSN: Xid, LSN and Ordinal together tell them apart, the same on
	// every replay of the transaction.
	Ordinal int
}

// Error names the row (or message) id, or "unknown", the xid, the LSN and
// the reason.
func (e *RowError) Error() string {
	id := "unknown"
	if e.EventID != "" {
		id = strconv.Quote(e.EventID)
	}
	what, part := "row", "column"
	if e.Message {
		what, part = "message", "envelope key"
	}
	if e.Column == "" {
		return fmt.Sprintf("outbox %s id %s (xid %d, lsn %s): %s", what, id, e.Xid, e.LSN, e.Reason)
	}
	return fmt.Sprintf("outbox %s id %s (xid %d, lsn %s): %s %q %s", what, id, e.Xid, e.LSN, part, e.Column, e.Reason)
}
