package relay

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

func TestPermanent(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("session: %w", err) }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"fatalError", &fatalError{errors.New("checkpoint mismatch")}, true},
		{"wrapped fatalError", wrap(&fatalError{errors.New("gap")}), true},
		{"SchemaError", wrap(&decoder.SchemaError{Table: "public.outbox", Column: "id", Reason: "is missing"}), true},
		{"RowError", wrap(&event.RowError{EventID: "e1", Xid: 7, Column: "payload", Reason: "is NULL"}), true},
		{"StreamError", wrap(&sink.StreamError{Stream: "OUTBOX", Problem: "does not exist", Fix: "--create-stream"}), true},
		{"ErrMalformed", fmt.Errorf("decode at 0/1: %w", decoder.ErrMalformed), true},
		{"PreflightError", wrap(&replication.PreflightError{Object: "publication", Problem: "missing", Fix: "migrate"}), true},
		{"PgError undefined_object", wrap(&pgconn.PgError{Code: "42704", Message: "publication does not exist"}), true},
		{"plain error", errors.New("connection reset by peer"), false},
		{"context deadline", wrap(context.DeadlineExceeded), false},
		{"context canceled", context.Canceled, false},
		{"PgError object_in_use (slot active)", wrap(&pgconn.PgError{Code: "55006"}), false},
		{"PgError admin_shutdown", wrap(&pgconn.PgError{Code: "57P01"}), false},
		{"ErrSlotActive", wrap(replication.ErrSlotActive), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Permanent(tt.err); got != tt.want {
				t.Errorf("Permanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestWithRowFix: without --dead-letter, the error of a row that cannot be
// published names --dead-letter SUBJECT, and for a value that cannot fill
// the subject, the --subject template in use; other errors, and any error
// with --dead-letter set, are left as they are.
func TestWithRowFix(t *testing.T) {
	subject := &event.RowError{EventID: "e1", Xid: 7, LSN: 0x16B3748, Column: "aggregate_type",
		Reason: `cannot fill subject placeholder {aggregate_type}: value "order.v2" is not a valid subject token`}
	payload := &event.RowError{EventID: "e2", Xid: 7, LSN: 0x16B3748, Column: "payload",
		Reason: "makes a message of 9120 bytes (payload 9000 + headers) exceeds the server's max_payload of 8192 bytes; raise max_payload on the NATS server or make the payload smaller"}
	template, err := sink.ParseTemplate("orders.{aggregate_type}.{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		deadLetter string
		err        error
		want       string // "" for err unchanged
	}{
		{
			name: "subject value",
			err:  fmt.Errorf("publish: %w", subject),
			want: `publish: outbox row id "e1" (xid 7, lsn 0/16B3748): column "aggregate_type" cannot fill subject placeholder {aggregate_type}: value "order.v2" is not a valid subject token; ` +
				`the subject template in use is --subject "orders.{aggregate_type}.{event_type}": change it so that the row fits, or, ` +
				`to go on past it, set --dead-letter SUBJECT: rows that cannot be published are sent there instead`,
		},
		{
			name: "payload too large",
			err:  payload,
			want: `outbox row id "e2" (xid 7, lsn 0/16B3748): column "payload" makes a message of 9120 bytes (payload 9000 + headers) exceeds the server's max_payload of 8192 bytes; ` +
				`raise max_payload on the NATS server or make the payload smaller; to go on past it, set --dead-letter SUBJECT: rows that cannot be published are sent there instead`,
		},
		{
			name: "headers",
			err:  &event.RowError{EventID: "e3", Column: "headers", Reason: `has header "retries": want a string`},
			want: `outbox row id "e3" (xid 0, lsn 0/0): column "headers" has header "retries": want a string; to go on past it, set --dead-letter SUBJECT: rows that cannot be published are sent there instead`,
		},
		{name: "with --dead-letter", deadLetter: "outbox.dead", err: subject},
		{name: "not a row", err: &sink.StreamError{Stream: "OUTBOX", Problem: "does not exist", Fix: "--create-stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Subject: template, DeadLetter: tt.deadLetter}
			got := withRowFix(cfg, tt.err)
			if tt.want == "" {
				if got != tt.err {
					t.Errorf("withRowFix() = %v, want %v unchanged", got, tt.err)
				}
				return
			}
			if got.Error() != tt.want {
				t.Errorf("withRowFix() =\n%s\nwant\n%s", got, tt.want)
			}
			if !Permanent(got) {
				t.Errorf("withRowFix() = %v is no longer Permanent", got)
			}
		})
	}
}
