package outbox

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DefaultTable is the table `outboxd migrate` creates.
var DefaultTable = pgx.Identifier{"public", "outbox"}

// MessagePrefix is the logical decoding message prefix outboxd publishes.
const MessagePrefix = "outbox"

// Config configures a Writer.
type Config struct {
	// Table is the outbox table, schema and name as stored (unquoted; they
	// are quoted when the SQL is built, so mixed case and any character
	// are safe). It needs outboxd's default columns (id, aggregate_type,
	// aggregate_id, event_type, payload, headers). Default DefaultTable.
	Table pgx.Identifier
	// Messages emits each event as a transactional logical decoding
	// message with prefix MessagePrefix instead of a row: nothing is
	// written to any table, and Table is unused. outboxd publishes these
	// the same way as rows.
	Messages bool
}

// Writer emits events in the caller's transaction. It holds no connection
// and no state: one Writer may serve any number of goroutines.
type Writer struct {
	table    pgx.Identifier
	insert   string
	messages bool
}

// New checks cfg and returns a Writer.
func New(cfg Config) (*Writer, error) {
	table := cfg.Table
	if len(table) == 0 {
		table = DefaultTable
	}
	if len(table) > 2 {
		return nil, fmt.Errorf("outbox: table %s has %d parts: use schema and name, e.g. pgx.Identifier{\"public\", \"outbox\"}", table.Sanitize(), len(table))
	}
	for _, part := range table {
		if part == "" {
			return nil, fmt.Errorf("outbox: table %q has an empty part: use schema and name, e.g. pgx.Identifier{\"public\", \"outbox\"}", []string(table))
		}
	}
	return &Writer{
		table: table,
		insert: "INSERT INTO " + table.Sanitize() +
			" (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4, $5, $6)",
		messages: cfg.Messages,
	}, nil
}

var defaultWriter, _ = New(Config{})

// Emit writes one event into public.outbox in tx and returns its ID. See
// Writer.Emit.
func Emit(ctx context.Context, tx pgx.Tx, ev Event) (uuid.UUID, error) {
	return defaultWriter.Emit(ctx, tx, ev)
}

// EmitBatch writes events into public.outbox in tx and returns their IDs.
// See Writer.EmitBatch.
func EmitBatch(ctx context.Context, tx pgx.Tx, events []Event) ([]uuid.UUID, error) {
	return defaultWriter.EmitBatch(ctx, tx, events)
}

// Emit writes one event in tx and returns its ID (ev.ID, or the one
// generated for a zero ev.ID). The event becomes visible to outboxd only if
// tx commits.
//
// Errors: an *EventError (errors.Is ErrInvalidEvent) when the event is
// invalid, before anything is sent; otherwise the database's error (a
// *pgconn.PgError for, say, a missing table or a duplicate ID), after which
// the transaction is aborted, as with any failed statement.
func (w *Writer) Emit(ctx context.Context, tx pgx.Tx, ev Event) (uuid.UUID, error) {
	ids, err := w.EmitBatch(ctx, tx, []Event{ev})
	if err != nil {
		return uuid.Nil, err
	}
	return ids[0], nil
}

// EmitBatch writes events in tx, in order, and returns their IDs in the same
// order. Every event is checked before any is sent: one invalid event means
// none is written. Rows go in with one COPY (CopyFrom); messages with one
// statement. Errors are those of Emit; an *EventError's Index names the event.
func (w *Writer) EmitBatch(ctx context.Context, tx pgx.Tx, events []Event) ([]uuid.UUID, error) {
	if len(events) == 0 {
		return nil, nil
	}
	events = append([]Event(nil), events...) // IDs are filled in below; the caller's slice stays as it was
	ids := make([]uuid.UUID, len(events))
	for i := range events {
		ev := &events[i]
		if ev.ID == uuid.Nil {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("outbox: generate event id: %w", err)
			}
			ev.ID = id
		}
		if err := ev.check(i); err != nil {
			return nil, err
		}
		ids[i] = ev.ID
	}
	var err error
	switch {
	case w.messages:
		err = w.emitMessages(ctx, tx, events)
	case len(events) == 1:
		// One round trip either way; a plain INSERT also works through
		// poolers and proxies that do not pass COPY.
		ev := &events[0]
		if _, err = tx.Exec(ctx, w.insert, ev.ID, ev.AggregateType, ev.AggregateID, ev.EventType, []byte(ev.Payload), ev.headersValue()); err != nil {
			err = fmt.Errorf("outbox: insert event into %s: %w", w.table.Sanitize(), err)
		}
	default:
		err = w.copyRows(ctx, tx, events)
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func (w *Writer) copyRows(ctx context.Context, tx pgx.Tx, events []Event) error {
	columns := []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers"}
	i := 0
	_, err := tx.CopyFrom(ctx, w.table, columns, pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(events) {
			return nil, nil
		}
		ev := &events[i]
		i++
		return []any{ev.ID, ev.AggregateType, ev.AggregateID, ev.EventType, []byte(ev.Payload), ev.headersValue()}, nil
	}))
	if err != nil {
		return fmt.Errorf("outbox: copy %d events into %s: %w", len(events), w.table.Sanitize(), err)
	}
	return nil
}

func (w *Writer) emitMessages(ctx context.Context, tx pgx.Tx, events []Event) error {
	envelopes := make([]string, len(events))
	for i := range events {
		b, err := events[i].envelope()
		if err != nil {
			return &EventError{Index: i, Field: "Payload", Reason: "cannot be encoded: " + err.Error()}
		}
		envelopes[i] = string(b)
	}
	// unnest keeps the array's order, so the messages are in WAL (and
	// stream) in the order given.
	_, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, m) FROM unnest($2::text[]) WITH ORDINALITY AS e(m, n) ORDER BY n",
		MessagePrefix, envelopes)
	if err != nil {
		return fmt.Errorf("outbox: emit %d events as logical messages: %w", len(events), err)
	}
	return nil
}
