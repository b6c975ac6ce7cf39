package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/outbox"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// channelSize bounds the events handed from the decoder to the publisher,
// and batchChannelSize the batches of replication messages (each up to
// 256) from the stream to the decoder; with the publisher's window they
// bound memory (invariant 6).
const (
	channelSize      = 1024
	batchChannelSize = 8
)

func newJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second), jetstream.WithPublishAsyncMaxPending(65536))
}

// runSession runs one replication session: preflight, resume point, then
// the pipeline replication → decoder → sink → checkpoint until ctx is done
// (a clean stop returns nil) or a stage fails. The stream's warnings are
// logged by the first session only (warned), not on every reconnect.
func runSession(ctx context.Context, cfg runConfig, nc *nats.Conn, log zerolog.Logger, warned *bool, obs *observability) error {
	js, err := newJetStream(nc)
	if err != nil {
		return err
	}
	warnings, err := sink.EnsureStream(ctx, js, cfg.Stream, cfg.template, cfg.CreateStream)
	if err != nil {
		return err
	}
	if cfg.DeadLetter != "" {
		if _, err := sink.CheckDeadLetter(ctx, js, cfg.DeadLetter); err != nil {
			return err
		}
	}
	if !*warned {
		durability, err := sink.CheckDurability(ctx, js, cfg.Stream, cfg.NATSMonitorURL)
		if err != nil {
			log.Warn().Err(err).Str("stream", cfg.Stream).Msg("cannot check whether acknowledged messages survive a power failure")
		}
		for _, w := range append(warnings, durability...) {
			log.Warn().Str("stream", cfg.Stream).Msg(w)
		}
		*warned = true
	}
	store, err := openStore(ctx, cfg, nc)
	if err != nil {
		return err
	}
	slot, err := preflight(ctx, cfg)
	if err != nil {
		return err
	}
	stream, err := replication.Connect(ctx, replication.Config{
		ConnString: cfg.PGURL, Slot: cfg.Slot, Publication: cfg.Publication,
		StatusInterval: cfg.StatusInterval, ReadLinger: cfg.ReadLinger, Logger: log,
		Streaming: cfg.PGStreaming, Messages: true,
	})
	if err != nil {
		return err
	}
	// Until the pipeline runs (it closes the stream itself), every failure
	// below must close the replication connection.
	streaming := false
	defer func() {
		if !streaming {
			stream.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the setup error is the one to report
		}
	}()
	decCfg := decoder.Config{Schema: cfg.table.Schema, Table: cfg.table.Name, Columns: cfg.columns, Messages: true}
	if cfg.Messages {
		decCfg.EnvelopePrefix = outbox.MessagePrefix
	}
	if stream.Streaming() {
		// A session's spool holds only transactions still in progress: a
		// new session gets them re-sent from their start.
		spool, err := decoder.NewSpool(cfg.SpoolDir)
		if err != nil {
			return &fatalError{fmt.Errorf("--spool-dir: %w", err)}
		}
		defer spool.Close()
		decCfg.Spool = spool
	}
	dec, err := decoder.New(decCfg)
	if err != nil {
		return &fatalError{err}
	}
	start, err := resumePoint(ctx, cfg, stream, store, slot, log)
	if err != nil {
		return err
	}
	var kept keptRows
	if cfg.retentionOn {
		if kept, err = prepareRetention(ctx, cfg, &start, nc.MaxPayload(), log); err != nil {
			return err
		}
	}
	if start.Replace {
		// The checkpoint holds a position the user gave up (--allow-gap),
		// or what it says of the rows before the slot changed: replace it
		// now, or the next start would stop on it again, or forget.
		cp := start.Checkpoint
		cp.SavedAt = time.Now().UTC()
		if err := store.Save(ctx, cp); err != nil {
			return err
		}
	}
	tracker := checkpoint.NewTracker(start.LSN)
	ckpt := checkpoint.NewCheckpointer(checkpoint.CheckpointerConfig{
		Store: store, Tracker: tracker, Identity: start.Checkpoint, Start: start.LSN,
		Interval: cfg.CheckpointEvery, Logger: log,
	})
	fast, err := fastPublishing(ctx, cfg, js, log)
	if err != nil {
		return err
	}
	publish, err := newSink(cfg, js, nc, fast, tracker, obs.metrics, log)
	if err != nil {
		return &fatalError{err}
	}
	p := &pipeline{stream: stream, decoder: dec, tracker: tracker, publish: publish, checkpointer: ckpt,
		skipBefore: start.LSN, committedBy: start.CommittedBy, restored: start.Restored, from: start.From,
		deadLetters: cfg.DeadLetter != "", shutdownTimeout: cfg.ShutdownTimeout, log: log}
	p.checked.Store(start.From >= start.LSN)
	if cfg.retentionOn {
		p.retention = newRetention(cfg, kept, p.confirmable, obs.metrics, log)
	}
	if cfg.Heartbeat > 0 {
		p.heartbeat = &heartbeat{pgPeriodic{pgURL: cfg.PGURL, interval: cfg.Heartbeat, what: "heartbeat",
			log: log.With().Str("component", "heartbeat").Logger()}}
	}
	if err := stream.Start(ctx, start.From, p.confirmable); err != nil {
		return err
	}
	log.Info().Str("slot", cfg.Slot).Str("lsn", start.LSN.String()).Str("from", start.From.String()).Str("stream", cfg.Stream).
		Str("checkpoint", store.String()).Bool("pg_streaming", stream.Streaming()).Bool("fast_batches", fast).Msg("streaming")

	streaming = true
	detach := obs.metrics.Attach(sessionProgress{stream: stream, tracker: tracker})
	defer detach()
	if ctx.Err() == nil {
		obs.health.Set(telemetry.Streaming, "")
	}
	err = p.run(ctx)
	if replication.MissingPublication(err) {
		return publicationDropped(ctx, cfg, store, err)
	}
	return err
}

// fastPublishing resolves --publish-mode: whether this session publishes
// in fast batches. auto uses them where the server and stream take them
// (and not with --exclusive-stream); fast without them is an error that
// says what is missing.
func fastPublishing(ctx context.Context, cfg runConfig, js jetstream.JetStream, log zerolog.Logger) (bool, error) {
	if cfg.Sink == sinkNull || cfg.PublishMode == publishAsync || cfg.Exclusive {
		return false, nil
	}
	err := sink.CheckFastBatch(ctx, js, cfg.Stream)
	var unsupported *sink.FastBatchError
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &unsupported):
		return false, err
	case cfg.PublishMode == publishFast:
		return false, &fatalError{fmt.Errorf("--publish-mode fast: %w", err)}
	}
	log.Info().Str("stream", cfg.Stream).Str("reason", unsupported.Problem).Msg("publishing asynchronously: no fast batches")
	return false, nil
}

// newSink returns the Run of the sink --sink names, acknowledging to
// tracker: the JetStream publisher (in fast batches if fast), or the
// benchmark's null sink.
func newSink(cfg runConfig, js jetstream.JetStream, nc *nats.Conn, fast bool, tracker *checkpoint.Tracker,
	observer sink.Observer, log zerolog.Logger) (func(context.Context, <-chan sink.Item) error, error) {
	if cfg.Sink == sinkNull {
		log.Warn().Msg("--sink null: events are acknowledged without being published (benchmarks only)")
		return func(ctx context.Context, in <-chan sink.Item) error { return sink.Null{}.Run(ctx, in, tracker) }, nil
	}
	publisher, err := sink.NewPublisher(js, nc.MaxPayload(), sink.Config{
		Stream: cfg.Stream, Subject: cfg.template, MaxInFlight: cfg.MaxInFlight, DeadLetter: cfg.DeadLetter, Exclusive: cfg.Exclusive, Fast: fast, Linger: cfg.PublishLinger, LogPayloads: cfg.LogPayloads, Logger: log,
		Observer: observer,
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, in <-chan sink.Item) error { return publisher.Run(ctx, in, tracker) }, nil
}

// connectPostgres opens a normal (not replication) connection to
// --pg-url; its error names the flag, for the commands that take it.
func connectPostgres(ctx context.Context, pgURL string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL (--pg-url): %w", err)
	}
	return conn, nil
}

// preflight checks the database on a normal connection.
func preflight(ctx context.Context, cfg runConfig) (replication.SlotState, error) {
	conn, err := pgx.Connect(ctx, cfg.PGURL)
	if err != nil {
		return replication.SlotState{}, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	slot, err := replication.Preflight(ctx, conn, replication.PreflightConfig{
		Slot: cfg.Slot, Publication: cfg.Publication, Table: cfg.table,
		CheckColumns: cfg.checkColumns, Read: append(cfg.columns.Names(), cfg.template.Columns()...),
	})
	if err == nil && cfg.retentionOn {
		err = checkRetention(ctx, conn, cfg.table, cfg.CreatedAtZone)
	}
	return slot, err
}

// resume is where a session starts streaming and what it skips.
type resume struct {
	// Checkpoint is the identity every save carries, and in LSN the
	// resume point: transactions that commit before it are dropped.
	checkpoint.Checkpoint
	// From is where replication starts: the slot's position, so that the
	// transactions between it and the resume point (after a crash) are
	// seen, and checked, before they are dropped.
	From pglogrepl.LSN
	// CommittedBy is the latest commit time a dropped transaction can
	// have (the checkpoint's save time with margin for clock skew); zero
	// when there is no saved checkpoint to hold it to.
	CommittedBy time.Time
	// Restored is the way out when a dropped transaction turns out to
	// have committed after CommittedBy.
	Restored string
	// Replace is set when a saved checkpoint is not the resume point (a
	// gap the user accepted): it is overwritten before streaming.
	Replace bool
}

// clockSkew is how far the database's clock may run ahead of outboxd's
// before a transaction dropped at resume seems committed after the
// checkpoint that holds it.
const clockSkew = 5 * time.Minute

// resumePoint decides where streaming starts (DESIGN.md invariant 5): the
// checkpoint or the slot's confirmed_flush_lsn, whichever is later. It
// stops outboxd, unless --allow-gap, when the two cannot both be true: a
// slot ahead of the checkpoint or missing while a checkpoint exists (events
// never published), a checkpoint or slot past the server's WAL (the
// database was restored from an older copy). It creates the slot when
// missing.
func resumePoint(ctx context.Context, cfg runConfig, stream *replication.Stream, store checkpoint.Store,
	slot replication.SlotState, log zerolog.Logger) (resume, error) {
	identity := checkpoint.Checkpoint{SystemID: stream.SystemID(), Timeline: stream.Timeline(), Slot: cfg.Slot}
	r := resume{Checkpoint: identity}
	saved, err := store.Load(ctx)
	hasCheckpoint := err == nil
	if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
		return r, fmt.Errorf("load checkpoint from %s: %w", store, err)
	}
	if hasCheckpoint {
		if err := saved.Matches(identity.SystemID, identity.Timeline, identity.Slot); err != nil {
			return r, &fatalError{fmt.Errorf("checkpoint %s: %w", store, err)}
		}
	}
	if err := pastServerWAL(cfg, stream, store, saved, hasCheckpoint, slot); err != nil {
		if !cfg.AllowGap {
			return r, &fatalError{err}
		}
		log.Warn().Err(err).Msg("--allow-gap: resuming from the replication slot")
		hasCheckpoint, r.Replace = false, true
	}
	gapFix := fmt.Sprintf("find and republish the rows committed in between, then restart with --allow-gap; or delete the checkpoint in %s to start from the slot", store)
	if !slot.Exists {
		if hasCheckpoint && !cfg.AllowGap {
			return r, &fatalError{fmt.Errorf("replication slot %q does not exist but checkpoint %s is at %s: the slot was dropped, so events committed since then are not in WAL any more; %s",
				cfg.Slot, store, saved.LSN, gapFix)}
		}
		consistent, before, err := createSlot(ctx, cfg, stream)
		if err != nil {
			return r, err
		}
		log.Info().Str("slot", cfg.Slot).Str("lsn", consistent.String()).Str("before_slot", before).Msg("created replication slot")
		slot = replication.SlotState{Exists: true, ConfirmedFlush: consistent}
		// Saved at once: what the slot's snapshot tells of the rows before
		// it is gone with the snapshot.
		r.BeforeSlot, r.Replace, hasCheckpoint = before, true, false
	}
	r.LSN, r.From = slot.ConfirmedFlush, slot.ConfirmedFlush
	if !hasCheckpoint {
		return r, nil
	}
	r.BeforeSlot = saved.BeforeSlot
	if slot.ConfirmedFlush > saved.LSN {
		if !cfg.AllowGap {
			return r, &fatalError{fmt.Errorf("replication slot %q is at %s, ahead of checkpoint %s at %s: something outside outboxd advanced or recreated the slot, so events in between were never published; %s",
				cfg.Slot, slot.ConfirmedFlush, store, saved.LSN, gapFix)}
		}
		r.Replace = true
		return r, nil
	}
	r.LSN = saved.LSN
	if !saved.SavedAt.IsZero() {
		r.CommittedBy = saved.SavedAt.Add(clockSkew)
		r.Restored = resumeFromSlotFix(cfg.Slot, slot.ConfirmedFlush.String(), store, false)
	}
	return r, nil
}

// createSlot creates the replication slot and reads, in the snapshot it
// exports, which rows of the table it will never send: those committed
// before it (checkpoint.Checkpoint.BeforeSlot).
func createSlot(ctx context.Context, cfg runConfig, stream *replication.Stream) (pglogrepl.LSN, string, error) {
	snap, err := stream.CreateSlotExportingSnapshot(ctx)
	if err != nil {
		return 0, "", err
	}
	before := ""
	if cfg.Table != "" {
		if before, err = replication.RowsBeforeSlot(ctx, cfg.PGURL, snap.Name, cfg.table); err != nil {
			return 0, "", err
		}
	}
	if before == "" {
		before = checkpoint.NoneBeforeSlot
	}
	return snap.ConsistentPoint, before, nil
}

// resumeFromSlotFix is the way out of a checkpoint that belongs to a
// history the restored database no longer has: resume from the slot,
// which was restored with the database.
func resumeFromSlotFix(slot, from string, store checkpoint.Store, allowGap bool) string {
	how := fmt.Sprintf("delete the checkpoint (%s)", store.DeleteCommand())
	if allowGap {
		how += ", or restart once with --allow-gap"
	}
	return fmt.Sprintf("to recover, %s: outboxd then resumes from replication slot %q at %s, which was restored with the "+
		"database, and publishes every transaction since (JetStream drops those it holds within the stream's duplicate "+
		"window); events published before the restore that the restored database lacks stay in the stream (see the "+
		"runbook, \"Database restored from a copy\")", how, slot, from)
}

// pastServerWAL reports a checkpoint or slot past the end of the server's
// WAL. Both only ever hold positions the server sent, so the database has
// gone back in time: restored from a copy, snapshot or backup of the same
// cluster (same system identifier and timeline) taken before outboxd last
// ran. Resuming from there would drop every transaction committed since
// the restore until the WAL passes that position again.
func pastServerWAL(cfg runConfig, stream *replication.Stream, store checkpoint.Store, saved checkpoint.Checkpoint,
	hasCheckpoint bool, slot replication.SlotState) error {
	end := stream.ServerWALEnd()
	const restored = "the database was restored from a copy of itself taken before outboxd last ran " +
		"(a file system or volume snapshot, a copy of a stopped server, a backup without a new timeline), " +
		"so transactions committed since the restore are at positions outboxd would skip"
	if slot.Exists && slot.ConfirmedFlush > end {
		return fmt.Errorf("replication slot %q is at %s, past the end of the server's WAL at %s: %s; PostgreSQL itself "+
			"will not send them from this slot: drop it (outboxd slot drop --force) and recover the rows committed since "+
			"the restore from the outbox table with outboxd backfill (see the runbook, \"Database restored from a copy\"); "+
			"--allow-gap starts anyway and loses them", cfg.Slot, slot.ConfirmedFlush, end, restored)
	}
	if hasCheckpoint && saved.LSN > end {
		from := "the position it gets"
		if slot.Exists {
			from = slot.ConfirmedFlush.String()
		}
		return fmt.Errorf("checkpoint %s is at %s, past the end of the server's WAL at %s: %s; %s",
			store, saved.LSN, end, restored, resumeFromSlotFix(cfg.Slot, from, store, true))
	}
	return nil
}

// pipeline is one session's running stages.
type pipeline struct {
	stream       *replication.Stream
	decoder      *decoder.Decoder
	tracker      *checkpoint.Tracker
	publish      func(context.Context, <-chan sink.Item) error // the sink's Run, acking to tracker
	checkpointer *checkpoint.Checkpointer
	skipBefore   pglogrepl.LSN
	committedBy  time.Time // see resume.CommittedBy
	restored     string    // see resume.Restored
	skipping     bool      // the current transaction is before skipBefore
	// from is where streaming started (the slot's position); until every
	// transaction between it and skipBefore has been seen and checked
	// (checked), nothing past it is confirmed to PostgreSQL.
	from            pglogrepl.LSN
	checked         atomic.Bool
	deadLetters     bool // rows that cannot be published go to a dead-letter subject
	heartbeat       *heartbeat
	retention       *retention
	shutdownTimeout time.Duration
	log             zerolog.Logger
}

// run starts the stages and waits for them. When ctx is done it stops
// receiving, lets the publisher drain what is in flight, saves the
// checkpoint, and sends the final status update; all of that within
// shutdownTimeout, after which everything is cancelled.
func (p *pipeline) run(ctx context.Context) error {
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	g, gctx := errgroup.WithContext(hard)
	receiving, stopReceiving := context.WithCancel(gctx)
	defer stopReceiving()
	stopOnSignal := context.AfterFunc(ctx, stopReceiving)
	defer stopOnSignal()
	checkpointing, stopCheckpointing := context.WithCancel(gctx)
	defer stopCheckpointing()

	raw := make(chan []replication.Message, batchChannelSize)
	items := make(chan sink.Item, channelSize)
	g.Go(func() error { return p.stream.Run(receiving, raw) })
	// A row that cannot be published (and no dead-letter subject) stops
	// the session, but only once every event before it is published and
	// confirmed: receiving stops, the publisher drains, and run returns
	// the row's error then.
	var badRow error
	g.Go(func() error {
		err := p.decode(gctx, raw, items)
		var rowErr *event.RowError
		if errors.As(err, &rowErr) {
			badRow = err
			stopReceiving()
			return nil
		}
		return err
	})
	g.Go(func() error {
		if err := p.publish(gctx, items); err != nil {
			return err
		}
		// Drained: everything received is acknowledged. Save it before
		// the final status update confirms it (invariant 5).
		defer stopCheckpointing()
		return p.checkpointer.Flush(gctx)
	})
	g.Go(func() error { return p.checkpointer.Run(checkpointing) })
	if p.heartbeat != nil {
		g.Go(func() error { return p.heartbeat.Run(receiving) })
	}
	if p.retention != nil {
		g.Go(func() error { return p.retention.Run(receiving) })
	}

	done := make(chan struct{})
	var watchdog sync.WaitGroup
	watchdog.Add(1)
	go func() {
		defer watchdog.Done()
		p.cancelAfterShutdownTimeout(ctx, done, cancelHard)
	}()
	err := g.Wait()
	close(done)
	watchdog.Wait()

	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	closeErr := p.stream.Close(closeCtx)
	if err != nil {
		return err
	}
	if closeErr != nil {
		return fmt.Errorf("final status update: %w", closeErr)
	}
	if badRow != nil {
		return badRow
	}
	p.log.Info().Str("lsn", p.checkpointer.Durable().String()).Msg("drained and confirmed")
	return nil
}

// cancelAfterShutdownTimeout cancels the pipeline when a stop takes longer
// than the shutdown timeout (NATS unreachable, say): what was not
// acknowledged stays unconfirmed and is replayed on the next start.
func (p *pipeline) cancelAfterShutdownTimeout(ctx context.Context, done <-chan struct{}, cancel context.CancelFunc) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	timer := time.NewTimer(p.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.log.Warn().Dur("shutdown_timeout", p.shutdownTimeout).Int("in_flight", p.tracker.InFlight()).
			Msg("shutdown timeout: stopping with messages unacknowledged; they are replayed on the next start")
		cancel()
	}
}

// decode turns replication messages into publisher items, registering each
// event and transaction end with the tracker before handing it on, so the
// tracker always knows what is in flight.
func (p *pipeline) decode(ctx context.Context, raw <-chan []replication.Message, items chan<- sink.Item) error {
	defer close(items)
	for batch := range raw {
		for _, msg := range batch {
			if err := p.decodeOne(ctx, msg, items); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeOne decodes one replication message and hands on what it holds.
func (p *pipeline) decodeOne(ctx context.Context, msg replication.Message, items chan<- sink.Item) error {
	if msg.Data == nil {
		if !p.decoder.InTransaction() {
			// The walsender has decoded up to here: every transaction
			// that commits before it was sent.
			p.passed(msg.ServerWALEnd)
			p.tracker.Idle(msg.ServerWALEnd)
		}
		return nil
	}
	change, err := p.decoder.Decode(msg.WALStart, msg.Data)
	if err != nil {
		return p.deadLetter(ctx, err, items)
	}
	if change.Kind == decoder.StreamCommit {
		return p.replay(ctx, change, items)
	}
	return p.handle(ctx, change, items)
}

// replay hands on a streamed transaction that just committed, read back
// from the spool, or drops it whole when it is before the resume point.
func (p *pipeline) replay(ctx context.Context, commit decoder.Change, items chan<- sink.Item) error {
	if skip, err := p.skip(commit.Tx); skip || err != nil {
		if err != nil {
			return err
		}
		return p.decoder.Discard(commit.Tx.Xid)
	}
	for change, err := range p.decoder.Replay(commit.Tx.Xid) {
		if err != nil {
			if err := p.deadLetter(ctx, err, items); err != nil {
				return err
			}
			continue
		}
		if err := p.handle(ctx, change, items); err != nil {
			return err
		}
	}
	return nil
}

// deadLetter sends a row the decoder could not turn into an event to the
// dead-letter subject when one is set; any other error, or a row error
// without a dead-letter subject, is returned and stops the pipeline.
func (p *pipeline) deadLetter(ctx context.Context, err error, items chan<- sink.Item) error {
	var rowErr *event.RowError
	if !p.deadLetters || !errors.As(err, &rowErr) {
		return err
	}
	// A non-transactional message comes outside any transaction: no
	// Commit follows to close it.
	alone := rowErr.Message && !p.decoder.InTransaction()
	if p.skipping || (alone && rowErr.LSN < p.skipBefore) {
		return nil // before the resume point: it was dead-lettered already
	}
	select {
	case items <- sink.Item{Seq: p.tracker.Add(), Dead: rowErr}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if alone {
		// Confirmable once its dead letter is acked; confirming its own
		// LSN (not past it) means a restart may send it again, which the
		// dead letter's Nats-Msg-Id absorbs.
		p.tracker.Commit(rowErr.LSN)
	}
	return nil
}

// confirmable is the position PostgreSQL may be told is flushed: the
// saved checkpoint, once the transactions before it that the slot sends
// again have all been checked (see skip); until then the slot's own
// position, so that a history that changed under the checkpoint can still
// be recovered from the slot.
func (p *pipeline) confirmable() pglogrepl.LSN {
	if !p.checked.Load() {
		return p.from
	}
	return p.checkpointer.Durable()
}

// passed records that the stream has reached lsn: at the resume point,
// every transaction before it was checked.
func (p *pipeline) passed(lsn pglogrepl.LSN) {
	if lsn >= p.skipBefore && !p.checked.Load() {
		p.checked.Store(true)
	}
}

// skip reports whether tx commits before the resume point, so it was
// published before the checkpoint was saved. One that committed after the
// checkpoint was saved cannot have been: the database's history changed
// under the checkpoint (restored from an older copy, and written to past
// the checkpoint's position since), and dropping it would lose it.
func (p *pipeline) skip(tx event.TxInfo) (bool, error) {
	if tx.CommitLSN >= p.skipBefore {
		p.passed(tx.CommitLSN)
		return false, nil
	}
	if !p.committedBy.IsZero() && tx.CommitTime.After(p.committedBy) {
		return true, &fatalError{fmt.Errorf("transaction xid %d committed at %s, before the checkpoint's position %s but after the checkpoint was saved (%s, allowing %s of clock skew): "+
			"the database was restored from a copy of itself taken before outboxd last ran, and has written past that position since; "+
			"outboxd stops instead of dropping its events; %s",
			tx.Xid, tx.CommitTime.Format(time.RFC3339), p.skipBefore, p.committedBy.Add(-clockSkew).Format(time.RFC3339), clockSkew, p.restored)}
	}
	return true, nil
}

// handle applies one decoded change.
func (p *pipeline) handle(ctx context.Context, change decoder.Change, items chan<- sink.Item) error {
	switch change.Kind {
	case decoder.Begin:
		// Published before the checkpoint was saved: drop it whole
		// (a transaction ends after its commit record starts).
		skip, err := p.skip(change.Tx)
		if err != nil {
			return err
		}
		p.skipping = skip
	case decoder.Insert:
		if p.skipping {
			return nil
		}
		item := sink.Item{Seq: p.tracker.Add(), Event: change.Event}
		select {
		case items <- item:
		case <-ctx.Done():
			return ctx.Err()
		}
	case decoder.Commit:
		if !p.skipping {
			p.tracker.Commit(change.EndLSN)
		}
		p.skipping = false
	case decoder.Message:
		// A heartbeat outside any transaction: everything before it was
		// received, so it may be confirmed once nothing is in flight.
		if m := change.Message; !m.Transactional && m.Prefix == heartbeatPrefix && !p.decoder.InTransaction() {
			p.passed(m.LSN)
			p.tracker.Idle(m.LSN)
		}
	}
	return nil
}
