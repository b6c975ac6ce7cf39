package migrations_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestOutboxEmit calls outbox_emit as an application would and reads the
// row back: the returned id is the row's, the defaults fill the rest.
func TestOutboxEmit(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)

	var id uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT outbox_emit('order', '42', 'order.created', '{"total": 9.5}', '{"Trace-Id": "abc"}')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var withoutHeaders uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT outbox_emit(aggregate_type => 'order', aggregate_id => '43',
		event_type => 'order.paid', payload => '[1, 2]')`).Scan(&withoutHeaders); err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID                                    uuid.UUID
		AggregateType, AggregateID, EventType string
		Payload                               string
		Headers                               *string
	}
	rows, err := conn.Query(ctx, `SELECT id, aggregate_type, aggregate_id, event_type, payload::text, headers::text
		FROM outbox ORDER BY aggregate_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	headers := `{"Trace-Id": "abc"}`
	want := []row{
		{id, "order", "42", "order.created", `{"total": 9.5}`, &headers},
		{withoutHeaders, "order", "43", "order.paid", `[1, 2]`, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows = %+v, want %+v", got, want)
	}
}

// TestOutboxEmitRollback: an event emitted in a transaction that rolls back
// leaves nothing behind, by either function.
func TestOutboxEmitRollback(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	peek := pgtest.MessageSlot(t, conn, "emit_test", "outbox")
	for _, fn := range []string{"outbox_emit", "outbox_emit_message"} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT "+fn+"('order', '1', 'order.created', '{}')"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n); err != nil || n != 0 {
		t.Errorf("outbox rows after rollback = %d (%v), want 0", n, err)
	}
	if got := peek(); len(got) != 0 {
		t.Errorf("logical messages after rollback = %q, want none", got)
	}
}

// TestOutboxEmitMessage: outbox_emit_message writes no row and emits one
// transactional message with prefix 'outbox' whose envelope carries the id
// it returned.
func TestOutboxEmitMessage(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	peek := pgtest.MessageSlot(t, conn, "emit_test", "outbox")

	var id, plain uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT outbox_emit_message('order', '42', 'order.created', '{"total": 9.5}', '{"Trace-Id": "abc"}')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT outbox_emit_message('order', '43', 'order.paid', 'null')`).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n); err != nil || n != 0 {
		t.Errorf("outbox rows = %d (%v), want 0: message mode writes no row", n, err)
	}
	got := peek()
	if len(got) != 2 {
		t.Fatalf("messages = %q, want 2", got)
	}
	want := []map[string]any{
		{"id": id.String(), "aggregate_type": "order", "aggregate_id": "42", "event_type": "order.created",
			"payload": map[string]any{"total": 9.5}, "headers": map[string]any{"Trace-Id": "abc"}},
		{"id": plain.String(), "aggregate_type": "order", "aggregate_id": "43", "event_type": "order.paid", "payload": nil},
	}
	for i, content := range got {
		var envelope map[string]any
		if err := json.Unmarshal([]byte(content), &envelope); err != nil {
			t.Fatalf("message %d %q: %v", i, content, err)
		}
		if !reflect.DeepEqual(envelope, want[i]) {
			t.Errorf("message %d = %v, want %v", i, envelope, want[i])
		}
		// outboxd's decoder accepts what the function writes.
		if env, err := event.ParseEnvelope([]byte(content)); err != nil || env.ID != want[i]["id"] {
			t.Errorf("message %d %s: ParseEnvelope = %+v, %v; want id %v", i, content, env, err, want[i]["id"])
		}
	}
}

// TestOutboxEmitBadInput: every bad argument fails the call with an error
// naming it, and nothing is written.
func TestOutboxEmitBadInput(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	tests := []struct {
		name, args, wantCode, wantErr string
	}{
		{"null aggregate type", `NULL, '1', 'e', '{}'`, "22023", "aggregate_type is empty"},
		{"empty aggregate id", `'order', '', 'e', '{}'`, "22023", "aggregate_id is empty"},
		{"blank event type", `'order', '1', '  ', '{}'`, "22023", "event_type is empty"},
		{"control character", `'order', E'1\r\nX: y', 'e', '{}'`, "22023", "aggregate_id '1"},
		{"null payload", `'order', '1', 'e', NULL`, "22004", "payload is NULL"},
		{"headers array", `'order', '1', 'e', '{}', '["a"]'`, "22023", "headers is a JSON array"},
		{"header number", `'order', '1', 'e', '{}', '{"Attempt": 3}'`, "22023", `header 'Attempt' is a JSON number`},
		{"header name space", `'order', '1', 'e', '{}', '{"Trace Id": "x"}'`, "22023", "header name 'Trace Id'"},
		{"header name colon", `'order', '1', 'e', '{}', '{"a:b": "x"}'`, "22023", "header name 'a:b'"},
		{"header name bracket", `'order', '1', 'e', '{}', '{"a]": "x"}'`, "22023", "header name 'a]'"},
		{"header name backslash", `'order', '1', 'e', '{}', '{"a\\\\b": "x"}'`, "22023", `header name E'a\\\\b'`},
		{"header name control", `'order', '1', 'e', '{}', '{"a\\u0001": "x"}'`, "22023", "not a valid NATS header name"},
		{"nats header", `'order', '1', 'e', '{}', '{"Nats-Msg-Id": "x"}'`, "22023", "reserved for JetStream"},
		{"header value newline", `'order', '1', 'e', '{}', '{"A": "x\ny"}'`, "22023", "header 'A' holds a control character"},
	}
	for _, fn := range []string{"outbox_emit", "outbox_emit_message"} {
		for _, tt := range tests {
			t.Run(fn+"/"+tt.name, func(t *testing.T) {
				_, err := conn.Exec(ctx, "SELECT "+fn+"("+tt.args+")")
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != tt.wantCode || !strings.Contains(pgErr.Message, tt.wantErr) || pgErr.Hint == "" {
					t.Fatalf("err = %v, want SQLSTATE %s mentioning %q with a hint", err, tt.wantCode, tt.wantErr)
				}
			})
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n); err != nil || n != 0 {
		t.Errorf("outbox rows = %d (%v), want 0", n, err)
	}
	// Printable punctuation the NATS client accepts passes, and so does a
	// tab in a value, as in outboxd's own check.
	if _, err := conn.Exec(ctx, `SELECT outbox_emit('order', '1', 'e', '{}', '{"X-Trace_Id.v2!": "a\tb \u00e9"}')`); err != nil {
		t.Errorf("valid header refused: %v", err)
	}
}
