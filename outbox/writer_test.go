package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/outbox"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// inTx runs f in a transaction and commits it.
func inTx(t *testing.T, conn *pgx.Conn, f func(pgx.Tx) error) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, conn, f); err != nil {
		t.Fatal(err)
	}
}

type storedRow struct {
	ID                                    uuid.UUID
	AggregateType, AggregateID, EventType string
	Payload                               string
	Headers                               *string
}

func readRows(t *testing.T, conn *pgx.Conn, table string) []storedRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT id, aggregate_type, aggregate_id, event_type, payload::text, headers::text
		FROM `+table+` ORDER BY created_at, aggregate_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[storedRow])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func order(id, payload string) outbox.Event {
	return outbox.Event{AggregateType: "order", AggregateID: id, EventType: "order.created", Payload: json.RawMessage(payload)}
}

// TestEmit writes one event and a batch (given IDs kept, zero IDs
// generated) and reads the rows back.
func TestEmit(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	given := uuid.MustParse("0193a1b2-0000-7000-8000-000000000001")
	var one uuid.UUID
	var batch []uuid.UUID
	events := []outbox.Event{order("2", `[1, 2]`), order("3", `"text"`)}
	events[0].ID = given
	events[1].Headers = map[string]string{"Trace-Id": "abc", "Tenant": "t\t1"}
	inTx(t, conn, func(tx pgx.Tx) error {
		ev := order("1", `{"total": 9.5}`)
		ev.Headers = map[string]string{"Trace-Id": "abc"}
		var err error
		if one, err = outbox.Emit(ctx, tx, ev); err != nil {
			return err
		}
		batch, err = outbox.EmitBatch(ctx, tx, events)
		return err
	})
	if one == uuid.Nil || one.Version() != 7 {
		t.Errorf("Emit id = %s, want a generated version 7 UUID", one)
	}
	if len(batch) != 2 || batch[0] != given || batch[1] == uuid.Nil || batch[1] == one {
		t.Fatalf("EmitBatch ids = %v, want [%s, a new one]", batch, given)
	}
	if events[1].ID != uuid.Nil {
		t.Errorf("EmitBatch changed the caller's event: ID %s", events[1].ID)
	}
	h1, h3 := `{"Trace-Id": "abc"}`, `{"Tenant": "t\t1", "Trace-Id": "abc"}`
	want := []storedRow{
		{one, "order", "1", "order.created", `{"total": 9.5}`, &h1},
		{given, "order", "2", "order.created", `[1, 2]`, nil},
		{batch[1], "order", "3", "order.created", `"text"`, &h3},
	}
	if got := readRows(t, conn, "outbox"); !reflect.DeepEqual(got, want) {
		t.Errorf("rows =\n%+v\nwant\n%+v", got, want)
	}
}

// TestEmitRollback: events of a transaction that rolls back are not there,
// as rows or as messages.
func TestEmitRollback(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	peek := pgtest.MessageSlot(t, conn, "rollback_test", outbox.MessagePrefix)
	messages, err := outbox.New(outbox.Config{Messages: true})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Emit(ctx, tx, order("1", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.EmitBatch(ctx, tx, []outbox.Event{order("2", `{}`), order("3", `{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := messages.EmitBatch(ctx, tx, []outbox.Event{order("4", `{}`), order("5", `{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, conn, "outbox"); len(got) != 0 {
		t.Errorf("rows after rollback = %+v, want none", got)
	}
	if got := peek(); len(got) != 0 {
		t.Errorf("messages after rollback = %q, want none", got)
	}
}

// TestEmitMessages: message mode writes no row; each event is one
// transactional message, in order, in the envelope outboxd decodes.
func TestEmitMessages(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	peek := pgtest.MessageSlot(t, conn, "messages_test", outbox.MessagePrefix)
	w, err := outbox.New(outbox.Config{Messages: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	inTx(t, conn, func(tx pgx.Tx) error {
		first := order("1", `{"total": 9.5}`)
		first.Headers = map[string]string{"Trace-Id": "abc"}
		id, err := w.Emit(ctx, tx, first)
		if err != nil {
			return err
		}
		more, err := w.EmitBatch(ctx, tx, []outbox.Event{order("2", `null`), order("3", `[1]`)})
		ids = append([]uuid.UUID{id}, more...)
		return err
	})
	if got := readRows(t, conn, "outbox"); len(got) != 0 {
		t.Errorf("rows = %+v, want none in message mode", got)
	}
	want := []string{
		`{"id":"` + ids[0].String() + `","aggregate_type":"order","aggregate_id":"1","event_type":"order.created","payload":{"total":9.5},"headers":{"Trace-Id":"abc"}}`,
		`{"id":"` + ids[1].String() + `","aggregate_type":"order","aggregate_id":"2","event_type":"order.created","payload":null}`,
		`{"id":"` + ids[2].String() + `","aggregate_type":"order","aggregate_id":"3","event_type":"order.created","payload":[1]}`,
	}
	got := peek()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages =\n%q\nwant\n%q", got, want)
	}
	// outboxd's decoder accepts each as the event emitted.
	for i, content := range got {
		env, err := event.ParseEnvelope([]byte(content))
		if err != nil {
			t.Errorf("message %d %s: outboxd refuses it: %v", i, content, err)
			continue
		}
		if env.ID != ids[i].String() || env.AggregateID != strconv.Itoa(i+1) {
			t.Errorf("message %d parses as %+v, want id %s, aggregate %d", i, env, ids[i], i+1)
		}
	}
}

// TestEmitTable writes into a table whose schema and name need quoting.
func TestEmitTable(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	table := pgx.Identifier{"Sales Dept", `Out"box`}
	if _, err := conn.Exec(ctx, `CREATE SCHEMA "Sales Dept";
		CREATE TABLE "Sales Dept"."Out""box" (LIKE public.outbox INCLUDING ALL)`); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.New(outbox.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	inTx(t, conn, func(tx pgx.Tx) error {
		if _, err := w.Emit(ctx, tx, order("1", `{}`)); err != nil {
			return err
		}
		_, err := w.EmitBatch(ctx, tx, []outbox.Event{order("2", `{}`), order("3", `{}`)})
		return err
	})
	if got := readRows(t, conn, table.Sanitize()); len(got) != 3 {
		t.Errorf("rows in %s = %+v, want 3", table.Sanitize(), got)
	}
	if got := readRows(t, conn, "outbox"); len(got) != 0 {
		t.Errorf("rows in public.outbox = %+v, want none", got)
	}

	for _, bad := range []pgx.Identifier{{"a", "b", "c"}, {"", "outbox"}, {"public", ""}} {
		if _, err := outbox.New(outbox.Config{Table: bad}); err == nil {
			t.Errorf("New(Table: %q) = nil error, want one", []string(bad))
		}
	}
	// A table that does not exist is the database's error, wrapped.
	missing, err := outbox.New(outbox.Config{Table: pgx.Identifier{"public", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := missing.EmitBatch(ctx, tx, []outbox.Event{order("1", `{}`), order("2", `{}`)})
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("batch into a missing table: err = %v, want undefined_table", err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := missing.Emit(ctx, tx, order("1", `{}`))
		return err
	})
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("one event into a missing table: err = %v, want undefined_table", err)
	}
}

// TestEmitInvalid: each bad event is refused with an *EventError naming the
// field, before anything is sent: the transaction stays usable and its
// other events commit, the bad batch leaves nothing.
func TestEmitInvalid(t *testing.T) {
	ctx := context.Background()
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	tests := []struct {
		name      string
		edit      func(*outbox.Event)
		wantField string
		wantErr   string
	}{
		{"empty aggregate type", func(e *outbox.Event) { e.AggregateType = "" }, "AggregateType", "is empty"},
		{"blank aggregate id", func(e *outbox.Event) { e.AggregateID = "  " }, "AggregateID", "is empty"},
		{"empty event type", func(e *outbox.Event) { e.EventType = "" }, "EventType", "is empty"},
		{"newline in event type", func(e *outbox.Event) { e.EventType = "a\r\nNats-Msg-Id: x" }, "EventType", "control character"},
		{"bad utf-8 aggregate id", func(e *outbox.Event) { e.AggregateID = "\xff" }, "AggregateID", "UTF-8"},
		{"no payload", func(e *outbox.Event) { e.Payload = nil }, "Payload", "is empty"},
		{"payload not json", func(e *outbox.Event) { e.Payload = json.RawMessage(`{"a":`) }, "Payload", "not valid JSON"},
		{"payload bad utf-8", func(e *outbox.Event) { e.Payload = json.RawMessage("\"\xff\"") }, "Payload", "not valid JSON"},
		{"header name space", func(e *outbox.Event) { e.Headers = map[string]string{"Trace Id": "x"} }, "Headers", "not a valid NATS header name"},
		{"header name colon", func(e *outbox.Event) { e.Headers = map[string]string{"a:b": "x"} }, "Headers", "not a valid NATS header name"},
		{"empty header name", func(e *outbox.Event) { e.Headers = map[string]string{"": "x"} }, "Headers", "not a valid NATS header name"},
		{"nats header", func(e *outbox.Event) { e.Headers = map[string]string{"nats-msg-id": "x"} }, "Headers", "reserved for JetStream"},
		{"header value newline", func(e *outbox.Event) { e.Headers = map[string]string{"A": "x\ny"} }, "Headers", "control character"},
		{"header value bad utf-8", func(e *outbox.Event) { e.Headers = map[string]string{"A": "\xff"} }, "Headers", "UTF-8"},
	}
	var good uuid.UUID
	inTx(t, conn, func(tx pgx.Tx) error {
		for _, tt := range tests {
			ev := order("1", `{}`)
			tt.edit(&ev)
			check := func(how string, index int, err error) {
				var evErr *outbox.EventError
				if !errors.Is(err, outbox.ErrInvalidEvent) || !errors.As(err, &evErr) ||
					evErr.Field != tt.wantField || evErr.Index != index || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("%s %s: err = %v, want an EventError for event %d field %s mentioning %q", tt.name, how, err, index, tt.wantField, tt.wantErr)
				}
			}
			_, err := outbox.Emit(ctx, tx, ev)
			check("Emit", 0, err)
			_, err = outbox.EmitBatch(ctx, tx, []outbox.Event{order("2", `{}`), ev})
			check("EmitBatch", 1, err)
		}
		var err error
		good, err = outbox.Emit(ctx, tx, order("3", `{}`))
		return err
	})
	if got := readRows(t, conn, "outbox"); len(got) != 1 || got[0].ID != good {
		t.Errorf("rows = %+v, want only the valid event %s", got, good)
	}
}
