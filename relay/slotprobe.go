package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/telemetry"
)

// slotProbeInterval is how often the slot's lag and retained WAL are read.
const slotProbeInterval = 2 * time.Second

// SlotProbe returns the task that reads the slot's lag and retained WAL
// into metrics every slotProbeInterval until its context is done; a failed
// read is logged and tried again, never stops the relay.
func SlotProbe(pgURL, slot string, metrics *telemetry.Metrics, log zerolog.Logger) func(context.Context) error {
	probe := pgPeriodic{pgURL: pgURL, interval: slotProbeInterval, what: "slot probe", log: log}
	return func(ctx context.Context) error {
		return probe.run(ctx, func(ctx context.Context, conn *pgx.Conn) error { return probeSlot(ctx, conn, slot, metrics) })
	}
}

// probeSlot reads the slot's lag (current WAL minus confirmed_flush_lsn)
// and retained WAL (current WAL minus restart_lsn). A missing slot is not
// an error: it is created when a session starts.
func probeSlot(ctx context.Context, conn *pgx.Conn, slot string, metrics *telemetry.Metrics) error {
	var lag, retained int64
	err := conn.QueryRow(ctx, `SELECT COALESCE((pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, 0),
	       COALESCE((pg_current_wal_lsn() - restart_lsn)::bigint, 0)
	  FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag, &retained)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read slot %q: %w", slot, err)
	}
	metrics.SetSlotWAL(max(lag, 0), max(retained, 0))
	return nil
}
