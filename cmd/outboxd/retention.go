package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/replication"
)

// retentionOff is the --retention value that turns the job off (default).
const retentionOff = "off"

// retention deletes outbox rows that are confirmed (JetStream acknowledged
// them and the checkpoint holding them is saved) and older than age, one
// batch per pause.
//
// Which rows are confirmed? A row's created_at says when it was written,
// not when its transaction committed, and commit order is what the stream
// and the checkpoint follow: a transaction open for an hour commits an
// hour-old row after newer ones were confirmed. So a round asks PostgreSQL
// instead:
//
//  1. It begins a REPEATABLE READ transaction whose first statement reads
//     pg_current_wal_insert_lsn(). The snapshot is taken before the
//     statement runs, so every transaction the snapshot sees as committed
//     had written its commit record, and ended, before that position: the
//     horizon.
//  2. It waits until the durable checkpoint reaches the horizon. Then
//     every transaction the snapshot sees is confirmed (commit order), and
//     so is every row the snapshot sees.
//  3. Its DELETE runs under that same snapshot, so it sees, and deletes,
//     only those rows. Rows committed after the snapshot, or still
//     uncommitted (however old their created_at), are invisible to it.
//
// Rows that were in the table before outboxd's slot existed are
// "confirmed" by this rule too, yet outboxd never published them (that is
// the backfill's job): turn retention on after the cut-over.
type retention struct {
	pgPeriodic
	table     replication.Table
	createdAt string        // the created_at column; read only when age > 0
	age       time.Duration // rows younger than this (by createdAt) stay
	batch     int
	durable   func() pglogrepl.LSN // the checkpointer's: saved, never ahead of the store
	counted   interface{ RetentionDeleted(rows int64) }
	// poll is how often a round checks whether the horizon is confirmed.
	poll time.Duration
	// hold is how long a round keeps its snapshot open waiting for the
	// confirmed position to reach it (--retention-wait). When outboxd lags
	// further behind (NATS down, say), the round deletes nothing and the
	// next one tries again.
	hold time.Duration
}

func newRetention(cfg runConfig, durable func() pglogrepl.LSN, metrics *telemetry.Metrics, log zerolog.Logger) *retention {
	r := &retention{
		pgPeriodic: pgPeriodic{pgURL: cfg.PGURL, interval: cfg.RetentionPause, what: "retention",
			log: log.With().Str("component", "retention").Logger()},
		table: cfg.table, age: cfg.retentionAge, batch: cfg.RetentionBatch, durable: durable, counted: metrics,
		poll: 20 * time.Millisecond, hold: cfg.RetentionWait,
	}
	if column, ok := cfg.columns.Mapped("created_at"); ok {
		r.createdAt = column
	}
	return r
}

// Run deletes a batch every pause until ctx is done; a failed round is
// logged and retried, it never stops the relay.
func (r *retention) Run(ctx context.Context) error {
	return r.run(ctx, r.round)
}

// round deletes at most one batch of confirmed rows.
func (r *retention) round(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var horizon pglogrepl.LSN
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&horizon); err != nil {
		return fmt.Errorf("read the WAL position: %w", err)
	}
	r.log.Debug().Str("horizon", horizon.String()).Msg("retention round: waiting for the snapshot to be confirmed")
	if !r.waitConfirmed(ctx, horizon) {
		if ctx.Err() == nil {
			r.log.Debug().Str("horizon", horizon.String()).Str("durable", r.durable().String()).Dur("held", r.hold).
				Msg("retention round: the confirmed position did not reach the snapshot; nothing deleted")
		}
		return nil
	}
	sql, args := r.deleteSQL()
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" {
			// A row of the snapshot was updated since (an old relay
			// marking it sent, say): try again with a new snapshot.
			r.log.Debug().Msg("retention round: a row changed under the snapshot; retrying next round")
			return nil
		}
		return fmt.Errorf("delete from %s: %w", r.table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("delete from %s: %w", r.table, err)
	}
	r.counted.RetentionDeleted(tag.RowsAffected())
	r.log.Debug().Int64("deleted", tag.RowsAffected()).Str("horizon", horizon.String()).Msg("retention round")
	return nil
}

// waitConfirmed waits, at most hold, until the durable checkpoint is at or
// past lsn.
func (r *retention) waitConfirmed(ctx context.Context, lsn pglogrepl.LSN) bool {
	deadline := time.Now().Add(r.hold)
	ticker := time.NewTicker(r.poll)
	defer ticker.Stop()
	for r.durable() < lsn {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
		}
	}
	return true
}

// deleteSQL deletes up to batch rows of the snapshot and, with an age,
// only those whose created_at is at least age old (a NULL one stays).
// Selecting ctids first keeps a batch small whatever the table's keys are.
func (r *retention) deleteSQL() (string, []any) {
	table := r.table.String()
	if r.age == 0 {
		return fmt.Sprintf(`DELETE FROM %s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %s LIMIT $1))`, table, table), []any{r.batch}
	}
	return fmt.Sprintf(`DELETE FROM %s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %s
		WHERE %s <= now() - $1::int8 * interval '1 microsecond' LIMIT $2))`, table, table, pgx.Identifier{r.createdAt}.Sanitize()),
		[]any{r.age.Microseconds(), r.batch}
}

// checkRetention is the preflight check of --retention: the role must be
// allowed to delete from the table.
func checkRetention(ctx context.Context, conn *pgx.Conn, table replication.Table) error {
	var role string
	var allowed bool
	if err := conn.QueryRow(ctx, "SELECT current_user, has_table_privilege($1, 'DELETE')", table.String()).Scan(&role, &allowed); err != nil {
		return fmt.Errorf("check DELETE on %s for --retention: %w", table, err)
	}
	if !allowed {
		return &replication.PreflightError{
			Object:  "table " + table.String(),
			Problem: fmt.Sprintf("role %q may not DELETE from it, which --retention needs", role),
			Fix:     fmt.Sprintf("GRANT DELETE ON %s TO %s, or run without --retention", table, pgx.Identifier{role}.Sanitize()),
		}
	}
	return nil
}
