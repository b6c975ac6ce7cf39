package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/internal/statuspage"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/replication"
)

// slotProbeInterval is how often the slot's lag and retained WAL are read.
const slotProbeInterval = 2 * time.Second

// observability is what outboxd shows on --metrics-addr: metrics, health
// and the status page. The metrics and health are always kept (they cost
// a few atomic adds); the server and the probe run only with an address.
type observability struct {
	metrics *telemetry.Metrics
	health  *telemetry.Health
	// tasks serve and probe until their context is done; none without
	// --metrics-addr.
	tasks []func(context.Context) error
}

// newObservability listens on --metrics-addr, so a busy port stops
// outboxd at once with an error that names it.
func newObservability(cfg runConfig, log zerolog.Logger) (*observability, error) {
	o := &observability{metrics: telemetry.NewMetrics(cfg.Stream)}
	o.health = telemetry.NewHealth(o.metrics)
	if cfg.MetricsAddr == "" {
		return o, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, &fatalError{fmt.Errorf("--metrics-addr %q: %w: choose a free host:port, or \"\" to serve no metrics", cfg.MetricsAddr, err)}
	}
	log.Info().Str("component", "telemetry").Str("addr", ln.Addr().String()).
		Msg("serving metrics, health and the status page")
	probe := pgPeriodic{pgURL: cfg.PGURL, interval: slotProbeInterval, what: "slot probe",
		log: log.With().Str("component", "telemetry").Str("slot", cfg.Slot).Logger()}
	history := statuspage.NewRecorder(o.health.Snapshot, statuspage.DefaultInterval, statuspage.DefaultWindow)
	page := statuspage.Handler(o.health.Snapshot, history)
	o.tasks = []func(context.Context) error{
		func(ctx context.Context) error { return telemetry.Serve(ctx, ln, telemetry.Handler(o.health, page)) },
		history.Run,
		func(ctx context.Context) error {
			return probe.run(ctx, func(ctx context.Context, conn *pgx.Conn) error { return o.probeSlot(ctx, conn, cfg.Slot) })
		},
	}
	return o, nil
}

// probeSlot reads the slot's lag (current WAL minus confirmed_flush_lsn)
// and retained WAL (current WAL minus restart_lsn). A missing slot is not
// an error: it is created when a session starts.
func (o *observability) probeSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
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
	o.metrics.SetSlotWAL(max(lag, 0), max(retained, 0))
	return nil
}

// sessionProgress is a running session's position, for the metrics.
type sessionProgress struct {
	stream  *replication.Stream
	tracker *checkpoint.Tracker
}

func (s sessionProgress) Received() pglogrepl.LSN  { return s.stream.Received() }
func (s sessionProgress) Confirmed() pglogrepl.LSN { return s.stream.Confirmed() }
func (s sessionProgress) InFlight() int            { return s.tracker.InFlight() }
