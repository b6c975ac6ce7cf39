package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
			if got := permanent(tt.err); got != tt.want {
				t.Errorf("permanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestStartProfiles: --cpu-profile and --trace each write their file, and
// a path that cannot be created is named with its flag.
func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "run.trace")
	stop, err := startProfiles(cpu, tr)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, f := range []string{cpu, tr} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want a non-empty file", f, err)
		}
	}
	_, err = startProfiles("", filepath.Join(dir, "missing", "run.trace"))
	if err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Errorf("startProfiles with an impossible trace path = %v, want an error naming --trace", err)
	}
}
