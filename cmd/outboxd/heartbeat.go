package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// heartbeatPrefix marks outboxd's own logical decoding messages; they are
// never published.
const heartbeatPrefix = "outboxd-heartbeat"

// heartbeat writes a non-transactional logical decoding message every
// interval. On a database whose WAL is busy with tables outside the
// publication, the message comes back through the slot and lets an idle
// outboxd confirm past that WAL, so the slot does not retain it.
type heartbeat struct {
	pgURL    string
	interval time.Duration
	log      zerolog.Logger
}

// Run emits heartbeats until ctx is done. A failed heartbeat is logged once
// (and once when they work again) and retried at the next tick: it never
// stops the relay.
func (h *heartbeat) Run(ctx context.Context) error {
	ticker := time.NewTicker(h.interval)
	defer ticker.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		err := h.emit(ctx, &conn)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			h.log.Warn().Err(err).Msg("heartbeat failed; retrying every interval")
			failing = true
		case err == nil && failing:
			h.log.Info().Msg("heartbeat works again")
			failing = false
		}
	}
}

func (h *heartbeat) emit(ctx context.Context, conn **pgx.Conn) error {
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgx.Connect(ctx, h.pgURL)
		if err != nil {
			return err
		}
		*conn = c
	}
	_, err := (*conn).Exec(ctx, "SELECT pg_logical_emit_message(false, $1, now()::text)", heartbeatPrefix)
	if err != nil {
		(*conn).Close(ctx) //nolint:errcheck // reconnect at the next tick
		*conn = nil
	}
	return err
}
