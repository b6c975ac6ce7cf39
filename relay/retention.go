package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

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
// Some confirmed rows must stay all the same (keptRows): those committed
// before the slot existed, which outboxd never published (the checkpoint
// records which, see checkpoint.Checkpoint.BeforeSlot), and with a
// dead-letter subject those whose payload is too large for a dead letter,
// whose only copy is the row.
type retention struct {
	pgPeriodic
	table     replication.Table
	createdAt string        // the created_at column; read only when age > 0
	age       time.Duration // rows younger than this (by createdAt) stay
	kept      keptRows
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

// keptRows is what retention reads of the table, beyond the flags, to
// know which confirmed rows it must keep or how old they are.
type keptRows struct {
	// createdAtZone is --created-at-zone when created_at is a timestamp
	// without time zone, whose values mean nothing without one; "" for a
	// timestamptz.
	createdAtZone string
	// beforeSlot is the pg_snapshot of the rows committed before the slot
	// (checkpoint.Checkpoint.BeforeSlot); "" when there are none.
	beforeSlot string
	// largePayload is the SQL expression of the row's payload and id size
	// in a dead letter, and bodyRoom the size from which its body may be
	// dropped; "" when no dead-letter subject is set (a row too large to
	// publish then stops outboxd, and is never confirmed).
	largePayload string
	bodyRoom     int64
}

func newRetention(cfg Config, kept keptRows, durable func() pglogrepl.LSN, metrics *telemetry.Metrics, log zerolog.Logger) *retention {
	r := &retention{
		pgPeriodic: pgPeriodic{pgURL: cfg.PGURL, interval: cfg.Retention.Pause, what: "retention",
			log: log.With().Str("component", "retention").Logger()},
		table: cfg.Table, age: cfg.Retention.Age, kept: kept, batch: cfg.Retention.Batch, durable: durable, counted: metrics,
		poll: 20 * time.Millisecond, hold: cfg.Retention.Wait,
	}
	if column, ok := cfg.Columns.Mapped("created_at"); ok {
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
// only those whose created_at is at least age old (a NULL one stays),
// leaving the kept rows. Selecting ctids first keeps a batch small whatever
// the table's keys are.
func (r *retention) deleteSQL() (string, []any) {
	args := []any{r.batch}
	param := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var where []string
	if r.age > 0 {
		cutoff := "now() - " + param(r.age.Microseconds()) + "::int8 * interval '1 microsecond'"
		if r.kept.createdAtZone != "" {
			// The column's wall-clock values are in that zone: compare
			// them with the cutoff's wall clock there, not in the
			// session's TimeZone.
			cutoff = "(" + cutoff + ") AT TIME ZONE " + param(r.kept.createdAtZone)
		}
		where = append(where, pgx.Identifier{r.createdAt}.Sanitize()+" <= "+cutoff)
	}
	if r.kept.beforeSlot != "" {
		where = append(where, "NOT "+replication.BeforeSlotCondition(param(r.kept.beforeSlot)))
	}
	if r.kept.largePayload != "" {
		where = append(where, r.kept.largePayload+" < "+param(r.kept.bodyRoom))
	}
	table := r.table.String()
	filter := ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	return fmt.Sprintf(`DELETE FROM %s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %s%s LIMIT $1))`, table, table, filter), args
}

// checkRetention is the preflight check of --retention: the role must be
// allowed to delete from the table, and PostgreSQL must know
// --created-at-zone.
func checkRetention(ctx context.Context, conn *pgx.Conn, table replication.Table, zone string) error {
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
	if _, err := conn.Exec(ctx, "SELECT now() AT TIME ZONE $1", zone); err != nil {
		return &fatalError{fmt.Errorf("--created-at-zone %q: PostgreSQL does not know this time zone (%v): use a name from pg_timezone_names, e.g. UTC or Europe/Berlin", zone, err)}
	}
	return nil
}

// prepareRetention reads what retention needs of the table (keptRows) and
// settles which rows predate the slot in start.BeforeSlot, marking the
// checkpoint for saving when that changed:
//   - unknown (a slot created outside outboxd run and backfill, or by an
//     outboxd before it recorded them): the rows in the table now stand in
//     for them, which keeps some published rows too, but no unpublished one;
//   - a snapshot of which no row is left: none any more, so that retention
//     no longer tests each row against it.
//
// Rows kept because they predate the slot are logged with their number.
func prepareRetention(ctx context.Context, cfg Config, start *resume, maxPayload int64, log zerolog.Logger) (keptRows, error) {
	var kept keptRows
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return kept, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if column, ok := cfg.Columns.Mapped("created_at"); ok && cfg.Retention.Age > 0 {
		typ, err := columnType(ctx, conn, cfg.Table, column)
		if err != nil {
			return kept, err
		}
		if typ == "timestamp without time zone" {
			kept.createdAtZone = cfg.Retention.CreatedAtZone
		}
	}
	if cfg.DeadLetter != "" && maxPayload > 0 {
		if kept.largePayload, err = deadLetterSize(ctx, conn, cfg); err != nil {
			return kept, err
		}
		kept.bodyRoom = maxPayload - sink.DeadLetterHeaderRoom
	}

	unknown := start.BeforeSlot == ""
	before := start.BeforeSlot
	if unknown {
		if before, err = replication.RowsBeforeSlot(ctx, cfg.PGURL, "", cfg.Table); err != nil {
			return kept, err
		}
	}
	var rows int64
	if before != checkpoint.NoneBeforeSlot && before != "" {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+cfg.Table.String()+" WHERE "+replication.BeforeSlotCondition("$1"),
			before).Scan(&rows); err != nil {
			return kept, fmt.Errorf("count the rows of %s that predate slot %q: %w", cfg.Table, cfg.Slot, err)
		}
	}
	if rows == 0 {
		before = checkpoint.NoneBeforeSlot
	}
	if before != start.BeforeSlot {
		start.BeforeSlot, start.Replace = before, true
	}
	if before == checkpoint.NoneBeforeSlot {
		return kept, nil
	}
	kept.beforeSlot = before
	msg := "--retention keeps the rows committed before the slot existed: outboxd never published them; " +
		"publish them (outboxd backfill on a new slot) or delete them yourself (see \"Deleting published rows\")"
	if unknown {
		msg = "--retention keeps the rows in the table now: outboxd does not know which rows were committed before the slot existed " +
			"(the slot was created outside outboxd run and backfill, or by an older outboxd), so some it published stay too; " +
			"delete them yourself once you know they are published (see \"Deleting published rows\")"
	}
	log.Warn().Str("slot", cfg.Slot).Int64("rows", rows).Str("before_slot", before).Msg(msg)
	return kept, nil
}

// columnType is the SQL type of a column of table, e.g. "jsonb".
func columnType(ctx context.Context, conn *pgx.Conn, table replication.Table, column string) (string, error) {
	var typ string
	err := conn.QueryRow(ctx, `SELECT format_type(atttypid, NULL) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped`, table.String(), column).Scan(&typ)
	if err != nil {
		return "", fmt.Errorf("read the type of column %q of %s: %w", column, table, err)
	}
	return typ, nil
}

// deadLetterSize is the SQL expression of a row's payload and id size in
// its dead letter: the payload as the body (bytea decoded, any other type
// in its text form, as pgoutput sends it) and the id as Nats-Msg-Id.
func deadLetterSize(ctx context.Context, conn *pgx.Conn, cfg Config) (string, error) {
	payload, _ := cfg.Columns.Mapped("payload")
	id, _ := cfg.Columns.Mapped("id")
	typ, err := columnType(ctx, conn, cfg.Table, payload)
	if err != nil {
		return "", err
	}
	body := pgx.Identifier{payload}.Sanitize()
	if typ != "bytea" {
		body += "::text"
	}
	return fmt.Sprintf("coalesce(octet_length(%s), 0) + coalesce(octet_length(%s::text), 0)", body, pgx.Identifier{id}.Sanitize()), nil
}
