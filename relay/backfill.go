package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// headerBackfill marks a message that outboxd backfill published from the
// slot's snapshot rather than from the replication stream.
const headerBackfill = "Outbox-Backfill"

// BackfillConfig is a backfill's settings: the relay's, and the rows.
type BackfillConfig struct {
	Config
	// Where is the SQL predicate on the outbox table that selects the rows
	// to publish (the rows an old relay has not sent).
	Where string
	// Since, when set, selects only rows created since then (by created_at)
	// and leaves out those whose id the stream holds since then: the
	// recovery of a slot that can no longer be read (a dropped
	// publication), see publicationDropped.
	Since time.Time
	// OrderBy (order-by) are the columns, exact names, whose order the
	// rows are published in; default created_at then id, by the columns
	// --columns maps them to (id alone when created_at is not mapped).
	// Rows of one transaction share created_at when it defaults to now(),
	// so a column that counts inserts (MassTransit's "SequenceNumber",
	// Watermill's "offset") is what keeps their insert order.
	OrderBy []string
	// Progress receives the progress bar or lines (stderr); Terminal
	// draws a bar instead of lines.
	Progress io.Writer
	Terminal bool
}

// Validate checks the relay's settings and the rows': a table to read,
// a predicate, created_at to select rows by Since, and order columns
// named once each. That they are columns of the table is checked at start.
func (cfg BackfillConfig) Validate() error {
	if err := cfg.Config.Validate(); err != nil {
		return err
	}
	if cfg.messagesOnly() {
		return errors.New("--table is empty: backfill reads the rows of an outbox table; name it (logical messages leave no rows to backfill)")
	}
	if _, ok := cfg.Columns.Mapped("created_at"); !ok && !cfg.Since.IsZero() {
		return fmt.Errorf("--since %s selects rows by created_at, and --columns maps none: map it (e.g. created_at=CreatedAt), or select the rows with --where",
			cfg.Since.Format(time.RFC3339Nano))
	}
	if strings.TrimSpace(cfg.Where) == "" {
		return errors.New(`--where is empty: give the predicate of the rows the old relay has not sent, e.g. --where '"ProcessedAt" IS NULL', or --where true for every row`)
	}
	for i, col := range cfg.OrderBy {
		if col == "" {
			return fmt.Errorf("--order-by %q names an empty column: give column names separated by commas, e.g. --order-by SequenceNumber", strings.Join(cfg.OrderBy, ","))
		}
		if slices.Contains(cfg.OrderBy[:i], col) {
			return fmt.Errorf("--order-by %q names column %q twice: name each column once", strings.Join(cfg.OrderBy, ","), col)
		}
	}
	return nil
}

// Backfill checks everything it can before creating the slot, creates
// it, publishes the snapshot's matching rows and reports on out. After the
// slot exists, a failure drops it again. env.NATS must be connected.
func Backfill(ctx context.Context, cfg BackfillConfig, env Env, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, nc := env.Log.With().Str("component", "backfill").Logger(), env.NATS
	js, err := newJetStream(nc)
	if err != nil {
		return err
	}
	if err := checkBackfillTargets(ctx, cfg, js, nc, log); err != nil {
		return err
	}
	var published map[string]struct{}
	if !cfg.Since.IsZero() {
		if cfg.Where, err = cfg.sinceWhere(ctx); err != nil {
			return err
		}
		if published, err = publishedSince(ctx, js, cfg.Stream, cfg.Since.Add(-sinceSkew)); err != nil {
			return err
		}
		log.Info().Time("since", cfg.Since).Int("in_stream", len(published)).Msg("read the ids the stream holds since --since")
	}
	if err := checkSnapshotRead(ctx, cfg); err != nil {
		return err
	}

	stream, err := replication.Connect(ctx, replication.Config{ConnString: cfg.PGURL, Slot: cfg.Slot, Publication: cfg.Publication,
		Failover: cfg.SlotFailover, Logger: log})
	if err != nil {
		return err
	}
	snap, err := stream.CreateSlotExportingSnapshot(ctx)
	if err != nil {
		stream.Close(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was streamed
		if errors.Is(err, replication.ErrSlotExists) {
			return slotExistsError(cfg.Slot)
		}
		return err
	}
	created := time.Now()
	log.Info().Str("slot", cfg.Slot).Str("consistent_point", snap.ConsistentPoint.String()).Str("snapshot", snap.Name).
		Msg("created replication slot with an exported snapshot")
	// The replication connection stays open and idle until the read is
	// done: closing it, or any command on it, ends the exported snapshot.
	counts, err := publishSnapshot(ctx, cfg, js, nc, snap, created, published, log)
	stream.Close(context.WithoutCancel(ctx)) //nolint:errcheck // a walsender not streaming has nothing to confirm
	if err != nil {
		return abandonSlot(ctx, cfg.Config, err)
	}
	// Every row before the slot is published now (or, left out by
	// --where, was by the old relay): retention may delete them.
	if err := saveBackfilled(ctx, cfg.Config, nc, stream, snap.ConsistentPoint); err != nil {
		log.Warn().Err(err).Msg("the backfill is complete, but its checkpoint was not saved: --retention will keep the rows that were in the table before the slot")
	}
	fmt.Fprintf(out, "backfilled %d rows of %s where %s from the snapshot at %s into stream %s (%d of them acknowledged as held already, %d dead-lettered)\n",
		counts.done.Load()-counts.held.Load(), cfg.Table, cfg.Where, snap.ConsistentPoint, cfg.Stream, counts.duplicates.Load(), counts.dead.Load())
	if published != nil {
		fmt.Fprintf(out, "left out %d rows created since %s that the stream holds already\n", counts.held.Load(), cfg.Since.Format(time.RFC3339))
	}
	fmt.Fprintf(out, "replication slot %q holds every commit after %s: start outboxd run with the same settings to publish them\n",
		cfg.Slot, snap.ConsistentPoint)
	return nil
}

// saveBackfilled saves the checkpoint of a complete backfill: the slot's
// consistent point, with no row before the slot left unpublished.
func saveBackfilled(ctx context.Context, cfg Config, nc *nats.Conn, stream *replication.Stream, consistent pglogrepl.LSN) error {
	store, err := openStore(ctx, cfg, nc)
	if err != nil {
		return err
	}
	return store.Save(ctx, checkpoint.Checkpoint{LSN: consistent, SystemID: stream.SystemID(), Timeline: stream.Timeline(),
		Slot: cfg.Slot, SavedAt: time.Now().UTC(), BeforeSlot: checkpoint.NoneBeforeSlot})
}

// checkBackfillTargets checks, before the slot exists, what run checks at
// start (stream, dead-letter subject, database objects) and that this is a
// first start: no slot and no checkpoint for it yet.
func checkBackfillTargets(ctx context.Context, cfg BackfillConfig, js jetstream.JetStream, nc *nats.Conn, log zerolog.Logger) error {
	warnings, err := sink.EnsureStream(ctx, js, cfg.Stream, cfg.Subject, cfg.CreateStream, sink.WithDeadLetter(cfg.DeadLetter))
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn().Str("stream", cfg.Stream).Msg(w)
	}
	if cfg.DeadLetter != "" {
		if _, err := sink.CheckDeadLetter(ctx, js, cfg.DeadLetter); err != nil {
			return err
		}
	}
	store, err := openStore(ctx, cfg.Config, nc)
	if err != nil {
		return err
	}
	saved, err := store.Load(ctx)
	if err == nil {
		return fmt.Errorf("checkpoint %s already holds position %s for slot %q: outboxd has streamed with this slot before, so backfill would publish rows it already published and run would refuse the new slot as a gap; pass another --slot (a new checkpoint key), or delete the checkpoint if that slot is gone for good",
			store, saved.LSN, cfg.Slot)
	}
	if !errors.Is(err, checkpoint.ErrNotFound) {
		return fmt.Errorf("load checkpoint from %s: %w", store, err)
	}
	slot, _, err := preflight(ctx, cfg.Config)
	if err != nil {
		return err
	}
	if err := checkOrderBy(ctx, cfg); err != nil {
		return err
	}
	if slot.Exists {
		return slotExistsError(cfg.Slot)
	}
	return nil
}

func slotExistsError(slot string) error {
	return fmt.Errorf("replication slot %q already exists: backfill needs the snapshot PostgreSQL exports only while it creates a slot; if outboxd already streams from this slot there is nothing to backfill (start outboxd run), otherwise drop it (SELECT pg_drop_replication_slot('%s')) or pass another --slot",
		slot, slot)
}

// abandonSlot drops the slot backfill created after cause stopped it, so
// that backfill can be run again (a slot nobody reads keeps WAL forever).
func abandonSlot(ctx context.Context, cfg Config, cause error) error {
	if ctx.Err() != nil && errors.Is(cause, context.Canceled) {
		cause = errors.New("backfill interrupted (SIGINT or SIGTERM) before every row was acknowledged")
	}
	dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := dropSlot(dropCtx, cfg.PGURL, cfg.Slot); err != nil {
		return fmt.Errorf("%w; dropping replication slot %q failed too (%v): drop it (SELECT pg_drop_replication_slot('%s')) before running backfill again",
			cause, cfg.Slot, err, cfg.Slot)
	}
	return fmt.Errorf("%w; replication slot %q was dropped again, so backfill can be run again once that is fixed (rows it published are deduplicated by Nats-Msg-Id within the stream's duplicate window)",
		cause, cfg.Slot)
}

// dropSlot drops the slot, retrying while the walsender that created it is
// still releasing it.
func dropSlot(ctx context.Context, pgURL, slot string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// publishSnapshot imports the slot's snapshot in a read-only transaction,
// publishes every row matching the predicate through the run's publisher
// and returns the counts of what was acknowledged.
func publishSnapshot(ctx context.Context, cfg BackfillConfig, js jetstream.JetStream, nc *nats.Conn,
	snap replication.SlotSnapshot, created time.Time, published map[string]struct{}, log zerolog.Logger) (*backfillProgress, error) {
	read, err := replication.BeginSnapshotRead(ctx, cfg.PGURL, snap.Name, cfg.snapshotQuery())
	if err != nil {
		return nil, err
	}
	defer read.Close(context.WithoutCancel(ctx))
	// Every row committed before the consistent point, at a time no later
	// than the slot's creation; its own xid is not known.
	rows, err := cfg.snapshotReader(read, event.TxInfo{CommitLSN: snap.ConsistentPoint, CommitTime: created})
	if err != nil {
		return nil, err
	}
	total, err := read.Count(ctx)
	if err != nil {
		return nil, err
	}
	log.Info().Int64("rows", total).Str("where", cfg.Where).Strs("order_by", cfg.orderBy()).Str("publication_row_filter", read.RowFilter()).
		Msg("publishing the snapshot's rows")
	// --publish-mode is resolved as run resolves it. A snapshot's rows
	// are not transactions: no atomic batches.
	fast, err := resolveFast(ctx, cfg.Config, js, log)
	if err != nil {
		return nil, err
	}
	progress := newProgress(cfg.Progress, cfg.Terminal, total)
	publisher, err := cfg.newPublisher(js, nc, publishing{fast: fast}, progress, log)
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	items := make(chan sink.Item, channelSize)
	g.Go(func() error {
		defer close(items)
		return sendRows(gctx, read, rows, cfg.DeadLetter != "", cfg.skipNullPayload(log), published, progress, items)
	})
	g.Go(func() error { return publisher.Run(gctx, items, progress) })
	err = g.Wait()
	progress.finish()
	if err != nil {
		return progress, err
	}
	return progress, read.Commit(ctx)
}

// snapshotQuery selects the predicate's rows in --order-by order, by
// default in (created_at, id) order, by the columns --columns maps them
// to (id alone when created_at is not mapped): the order the old relay
// most likely used, stable across runs.
func (cfg BackfillConfig) snapshotQuery() replication.SnapshotQuery {
	return replication.SnapshotQuery{Table: cfg.Table, Where: cfg.Where, OrderBy: cfg.orderBy(), Publication: cfg.Publication}
}

// orderBy is --order-by, or its default.
func (cfg BackfillConfig) orderBy() []string {
	if len(cfg.OrderBy) > 0 {
		return cfg.OrderBy
	}
	var order []string
	if cfg.Columns.CreatedAt != "" {
		order = append(order, cfg.Columns.CreatedAt)
	}
	return append(order, cfg.Columns.ID)
}

// checkOrderBy checks, against the catalog and before the slot exists,
// that every --order-by column is a column of the table. The names are
// exact: SQL would fold an unquoted SequenceNumber to sequencenumber, and
// quote them as identifiers in ORDER BY.
func checkOrderBy(ctx context.Context, cfg BackfillConfig) error {
	if len(cfg.OrderBy) == 0 {
		return nil
	}
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	have, err := replication.TableColumns(ctx, conn, cfg.Table)
	if err != nil {
		return err
	}
	names := make([]string, len(have))
	for i, c := range have {
		names[i] = strconv.Quote(c.Name)
	}
	for _, col := range cfg.OrderBy {
		if slices.ContainsFunc(have, func(c replication.Column) bool { return c.Name == col }) {
			continue
		}
		fix := "name columns of the table, separated by commas, exact case as the catalog has them (e.g. --order-by SequenceNumber)"
		if i := slices.IndexFunc(have, func(c replication.Column) bool { return strings.EqualFold(c.Name, col) }); i >= 0 {
			fix = fmt.Sprintf("write it as the catalog has it: %s (names are exact and case-sensitive)", have[i].Name)
		}
		return &replication.PreflightError{
			Object:  fmt.Sprintf("--order-by %q", strings.Join(cfg.OrderBy, ",")),
			Problem: fmt.Sprintf("names %q, which is no column of table %s (it has %s)", col, cfg.Table, strings.Join(names, ", ")),
			Fix:     fix,
		}
	}
	return nil
}

// snapshotReader maps the read's rows to events with the decoder that run
// uses, configured the same way.
func (cfg BackfillConfig) snapshotReader(read *replication.SnapshotRead, tx event.TxInfo) (*decoder.SnapshotReader, error) {
	dec, err := decoder.New(cfg.decoderConfig())
	if err != nil {
		return nil, err
	}
	cols := make([]decoder.SnapshotColumn, len(read.Columns()))
	for i, c := range read.Columns() {
		cols[i] = decoder.SnapshotColumn{Name: c.Name, TypeOID: c.TypeOID}
	}
	return dec.Snapshot(cols, tx)
}

// checkSnapshotRead checks, in a read-only transaction of its own and
// before the slot exists, that the table fits the mapping and that
// PostgreSQL accepts the predicate, so that a typo costs no slot.
func checkSnapshotRead(ctx context.Context, cfg BackfillConfig) error {
	read, err := replication.BeginSnapshotRead(ctx, cfg.PGURL, "", cfg.snapshotQuery())
	if err != nil {
		return err
	}
	defer read.Close(context.WithoutCancel(ctx))
	if _, err := cfg.snapshotReader(read, event.TxInfo{}); err != nil {
		return err
	}
	return read.Check(ctx)
}

// skipNullPayload is what backfill does with a row --null-payload skip
// leaves out (log it, as run does), or nil under the other policies.
func (cfg BackfillConfig) skipNullPayload(log zerolog.Logger) func(*event.Event) {
	if cfg.NullPayload != NullPayloadSkip {
		return nil
	}
	return func(ev *event.Event) {
		log.Warn().Str("event_id", ev.ID).Msg("row with a NULL payload not published (--null-payload skip)")
	}
}

// sendRows reads the selected rows and hands each on as an event (or, with
// a dead-letter subject, a row that cannot be one as a dead letter). A row
// whose id is in published is left out and counted held by progress; one
// with a NULL payload under --null-payload skip goes to skipNull and
// counts as done.
func sendRows(ctx context.Context, read *replication.SnapshotRead, rows *decoder.SnapshotReader, deadLetters bool,
	skipNull func(*event.Event), published map[string]struct{}, progress *backfillProgress, items chan<- sink.Item) error {
	var seq uint64
	return read.Rows(ctx, func(values [][]byte) error {
		var item sink.Item
		ev, err := rows.Event(values)
		var rowErr *event.RowError
		switch {
		case err == nil && inSet(published, ev.ID):
			return progress.leftOut()
		case err == nil && ev.NullPayload && skipNull != nil:
			skipNull(ev)
			return progress.Ack(0)
		case err == nil:
			ev.Headers = append(ev.Headers, event.Header{Key: headerBackfill, Value: "true"})
			item.Event = ev
		case errors.As(err, &rowErr) && deadLetters && rowErr.EventID != "":
			item.Dead = rowErr
		case errors.As(err, &rowErr) && deadLetters:
			// A streamed row's dead letter is told apart by its LSN; rows
			// read from the snapshot have none, so a second id-less row's
			// dead letter would be dropped as a duplicate of the first.
			return fmt.Errorf("snapshot %w; backfill cannot dead-letter a row without an id: give the row an id, or leave it out with --where", err)
		case errors.As(err, &rowErr):
			// Read from the snapshot, it has no xid or LSN: they show 0.
			return fmt.Errorf("snapshot %w", err)
		default:
			return err
		}
		seq++
		item.Seq = seq
		select {
		case items <- item:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

func inSet(set map[string]struct{}, key string) bool {
	_, ok := set[key]
	return ok
}
