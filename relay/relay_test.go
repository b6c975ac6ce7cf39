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
