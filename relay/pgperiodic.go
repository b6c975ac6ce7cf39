package relay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// pgPeriodic runs a statement on a normal PostgreSQL connection every
// interval, for work beside the replication connection (heartbeats, the
// slot probe). It connects when needed and reconnects after a failure.
type pgPeriodic struct {
	pgURL    string
	interval time.Duration
	what     string // names the work in log lines
	log      zerolog.Logger
}

// run calls do every interval until ctx is done. A failure is logged once
// (and once when do works again) and retried at the next tick: it never
// stops the relay.
func (p pgPeriodic) run(ctx context.Context, do func(context.Context, *pgx.Conn) error) error {
	ticker := time.NewTicker(p.interval)
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
		err := p.once(ctx, &conn, do)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			p.log.Warn().Err(err).Msg(p.what + " failed; retrying every interval")
			failing = true
		case err == nil && failing:
			p.log.Info().Msg(p.what + " works again")
			failing = false
		}
	}
}

func (p pgPeriodic) once(ctx context.Context, conn **pgx.Conn, do func(context.Context, *pgx.Conn) error) error {
	if *conn == nil || (*conn).IsClosed() {
		c, err := pgx.Connect(ctx, p.pgURL)
		if err != nil {
			return err
		}
		*conn = c
	}
	err := do(ctx, *conn)
	if err != nil {
		(*conn).Close(ctx) //nolint:errcheck // reconnect at the next tick
		*conn = nil
	}
	return err
}
