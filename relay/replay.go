package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// ReplayConfig is what outboxd replay publishes again: the rows of IDs,
// or, as backfill selects them, those of Where created since Since.
type ReplayConfig struct {
	BackfillConfig
	// IDs selects rows by id, as the stream shows them (with --id-prefix)
	// or as the table holds them.
	IDs []string
	// DryRun lists the rows instead of publishing them.
	DryRun bool
}

// Validate checks that the rows are chosen one way: by id, or by --since
// and --where.
func (cfg ReplayConfig) Validate() error {
	switch {
	case len(cfg.IDs) > 0 && (strings.TrimSpace(cfg.Where) != "" || !cfg.Since.IsZero()):
		return errors.New("--ids chooses the rows by itself: leave out --where and --since, or choose by those instead")
	case len(cfg.IDs) == 0 && strings.TrimSpace(cfg.Where) == "" && cfg.Since.IsZero():
		return errors.New("choose the rows to publish again: --ids ID,... (e.g. those outboxd verify reports lost), or --since TIME, or --where PREDICATE")
	}
	return cfg.selection().Validate()
}

// selection is the backfill configuration that reads the chosen rows:
// --ids as a predicate on the id column, or --where (every row with
// --since alone).
func (cfg ReplayConfig) selection() BackfillConfig {
	b := cfg.BackfillConfig
	switch {
	case len(cfg.IDs) > 0:
		idCol, _ := cfg.Columns.Mapped("id")
		quoted := make([]string, len(cfg.IDs))
		for i, id := range cfg.IDs {
			quoted[i] = "'" + strings.ReplaceAll(strings.TrimPrefix(id, cfg.IDPrefix), "'", "''") + "'"
		}
		b.Where = fmt.Sprintf("%s::text IN (%s)", pgx.Identifier{idCol}.Sanitize(), strings.Join(quoted, ", "))
	case strings.TrimSpace(b.Where) == "":
		b.Where = "true"
	}
	return b
}

// Replay publishes the chosen rows again, in (created_at, id) order (or
// --order-by), with their own message ids: JetStream drops those it holds
// within the stream's duplicate window. With --since, the rows the stream
// holds since then are left out, as backfill --since does. It creates no
// slot and saves no checkpoint. With DryRun it lists the rows' ids on out
// instead.
func Replay(ctx context.Context, cfg ReplayConfig, env Env, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	bf := cfg.selection()
	log, nc := env.Log.With().Str("component", "replay").Logger(), env.NATS
	js, err := newJetStream(nc)
	if err != nil {
		return err
	}
	if _, err := sink.EnsureStream(ctx, js, cfg.Stream, cfg.Subject, false, sink.WithDeadLetter(cfg.DeadLetter)); err != nil {
		return err
	}
	var published map[string]struct{}
	if !bf.Since.IsZero() {
		if bf.Where, err = bf.sinceWhere(ctx); err != nil {
			return err
		}
		if published, err = publishedSince(ctx, js, bf.Stream, bf.Since.Add(-sinceSkew)); err != nil {
			return err
		}
	}
	if err := checkSnapshotRead(ctx, bf); err != nil {
		return err
	}
	if cfg.DryRun {
		return listReplay(ctx, bf, published, out)
	}
	lsn, err := currentWAL(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	// The rows a snapshot taken now sees committed before this position.
	counts, err := publishSnapshot(ctx, bf, js, nc, replication.SlotSnapshot{ConsistentPoint: lsn}, time.Now(), published, log)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "replayed %d rows of %s where %s into stream %s (%d of them dropped by the stream as held within its duplicate window, %d dead-lettered; %d left out as in the stream since --since)\n",
		counts.done.Load()-counts.held.Load(), bf.Table, bf.Where, bf.Stream, counts.duplicates.Load(), counts.dead.Load(), counts.held.Load())
	return err
}

// listReplay prints the ids of the rows Replay would publish, in order,
// and how many.
func listReplay(ctx context.Context, cfg BackfillConfig, published map[string]struct{}, out io.Writer) error {
	read, err := replication.BeginSnapshotRead(ctx, cfg.PGURL, "", cfg.snapshotQuery())
	if err != nil {
		return err
	}
	defer read.Close(context.WithoutCancel(ctx))
	rows, err := cfg.snapshotReader(read, event.TxInfo{})
	if err != nil {
		return err
	}
	var b strings.Builder
	n, held := 0, 0
	err = read.Rows(ctx, func(values [][]byte) error {
		ev, err := rows.Event(values)
		var rowErr *event.RowError
		switch {
		case errors.As(err, &rowErr):
			fmt.Fprintf(&b, "%s (cannot be published: %s)\n", rowErr.EventID, rowErr.Reason)
		case err != nil:
			return err
		case inSet(published, ev.ID):
			held++
			return nil
		default:
			fmt.Fprintf(&b, "%s\n", ev.ID)
		}
		n++
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "--dry-run: would publish these %d rows of %s where %s to stream %s, in this order (%d left out as in the stream); nothing was published\n",
		n, cfg.Table, cfg.Where, cfg.Stream, held)
	_, err = io.WriteString(out, b.String())
	return err
}

// currentWAL is the server's current WAL position.
func currentWAL(ctx context.Context, pgURL string) (pglogrepl.LSN, error) {
	conn, err := ConnectPostgres(ctx, pgURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return 0, fmt.Errorf("read the current WAL position: %w", err)
	}
	return pglogrepl.ParseLSN(lsn)
}
