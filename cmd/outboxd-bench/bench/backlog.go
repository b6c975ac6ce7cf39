package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/migrations"
)

const (
	// outboxTable is where outboxd reads from (the migrations' table and
	// publication); pollingTable is the same shape with the sent_at column
	// and partial index a polling relay needs.
	outboxTable  = "public.outbox"
	pollingTable = "public.outbox_polling"
	publication  = "outboxd"
	// relayRole is the role both relays connect as, so pg_stat_statements
	// can tell their queries from the driver's.
	relayRole = "bench_relay"
)

// schemaSQL runs after the migrations. Autovacuum is off on the outbox
// table so that no vacuum runs in the middle of a drain (the table only
// ever gets inserts and a TRUNCATE between runs). The polling table keeps
// autovacuum, as a team running a polling relay would: it lives on updates.
// bench_write commits total rows in transactions of per_tx rows inside the
// server, so that writing a backlog of a million one-row transactions takes
// seconds, not a million round trips.
var schemaSQL = []string{
	`ALTER TABLE public.outbox SET (autovacuum_enabled = false)`,
	`CREATE TABLE IF NOT EXISTS public.outbox_polling (LIKE public.outbox INCLUDING ALL, sent_at timestamptz)`,
	`CREATE INDEX IF NOT EXISTS outbox_polling_unsent ON public.outbox_polling (created_at) WHERE sent_at IS NULL`,
	`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
	`DO $$ BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '` + relayRole + `') THEN
			CREATE ROLE ` + relayRole + ` LOGIN SUPERUSER REPLICATION;
		END IF;
	END $$`,
	`CREATE OR REPLACE PROCEDURE bench_write(polling boolean, total int, per_tx int, pad text)
	LANGUAGE plpgsql AS $$
	DECLARE
		done int := 0;
		n int;
	BEGIN
		WHILE done < total LOOP
			n := least(per_tx, total - done);
			IF polling THEN
				INSERT INTO public.outbox_polling (id, aggregate_type, aggregate_id, event_type, payload)
				SELECT gen_random_uuid(), 'order', ((done + g) % 1000)::text, 'OrderPlaced',
				       jsonb_build_object('seq', done + g, 'customer', 'c-' || ((done + g) % 1000), 'pad', pad)
				FROM generate_series(1, n) g;
			ELSE
				INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload)
				SELECT gen_random_uuid(), 'order', ((done + g) % 1000)::text, 'OrderPlaced',
				       jsonb_build_object('seq', done + g, 'customer', 'c-' || ((done + g) % 1000), 'pad', pad)
				FROM generate_series(1, n) g;
			END IF;
			COMMIT;
			done := done + n;
		END LOOP;
	END $$`,
}

// prepareSchema migrates the database and adds the benchmark's objects.
func prepareSchema(ctx context.Context, conn *pgx.Conn) error {
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, sql := range schemaSQL {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("prepare the benchmark schema: %w (in %.60s...)", err, strings.TrimSpace(sql))
		}
	}
	return nil
}

// payloadPad returns the pad that brings the payload's JSON text
// ({"pad": "...", "seq": 123456, "customer": "c-456"}) to about size bytes.
func payloadPad(size int) string {
	const rest = len(`{"pad": "", "seq": 123456, "customer": "c-456"}`)
	return strings.Repeat("x", max(size-rest, 0))
}

// payload is the same JSON as bench_write makes, for the load generator.
func payload(seq int, pad string) string {
	return fmt.Sprintf(`{"pad": %q, "seq": %d, "customer": "c-%d"}`, pad, seq, seq%1000)
}

// writeBacklog commits total rows in transactions of perTx rows and returns
// the WAL position after the last commit.
func writeBacklog(ctx context.Context, conn *pgx.Conn, polling bool, total, perTx int, pad string) (pglogrepl.LSN, error) {
	if _, err := conn.Exec(ctx, "CALL bench_write($1, $2, $3, $4)", polling, total, perTx, pad); err != nil {
		return 0, fmt.Errorf("write a backlog of %d rows in transactions of %d: %w", total, perTx, err)
	}
	return currentLSN(ctx, conn)
}

func currentLSN(ctx context.Context, conn *pgx.Conn) (pglogrepl.LSN, error) {
	var s string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		return 0, fmt.Errorf("read pg_current_wal_lsn: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}

func createSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
		return fmt.Errorf("create slot %s: %w", name, err)
	}
	return nil
}

// dropSlots drops the given slots if they exist.
func dropSlots(ctx context.Context, conn *pgx.Conn, names ...string) error {
	for _, name := range names {
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name)
			FROM pg_replication_slots WHERE slot_name = $1`, name); err != nil {
			return fmt.Errorf("drop slot %s: %w", name, err)
		}
	}
	return nil
}

// resetTables empties both tables and lets the server recycle the WAL the
// last run wrote, so every run starts from the same state.
func resetTables(ctx context.Context, conn *pgx.Conn) error {
	for _, sql := range []string{"TRUNCATE public.outbox, public.outbox_polling", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("reset: %s: %w", sql, err)
		}
	}
	return nil
}

// slotState is a slot's confirmed_flush_lsn and whether a process streams
// from it.
type slotState struct {
	confirmed pglogrepl.LSN
	active    bool
}

func readSlot(ctx context.Context, conn *pgx.Conn, name string) (slotState, error) {
	var confirmed string
	var st slotState
	err := conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn, '0/0')::text, active
		FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&confirmed, &st.active)
	if err != nil {
		return st, fmt.Errorf("read slot %s: %w", name, err)
	}
	st.confirmed, err = pglogrepl.ParseLSN(confirmed)
	return st, err
}

// slotLag returns how many bytes of WAL the slot has not confirmed.
func slotLag(ctx context.Context, conn *pgx.Conn, name string) (int64, error) {
	var lag int64
	err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn() - confirmed_flush_lsn
		FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&lag)
	if err != nil {
		return 0, fmt.Errorf("read the lag of slot %s: %w", name, err)
	}
	return lag, nil
}
