package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/outbox"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

func newJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second), jetstream.WithPublishAsyncMaxPending(65536))
}

// runSession runs one replication session: preflight, resume point, then
// the pipeline replication → decoder → sink → checkpoint until ctx is done
// (a clean stop returns nil) or a stage fails. The stream's warnings are
// logged by the first session only (warned), not on every reconnect.
func runSession(ctx context.Context, cfg Config, env Env, warned *bool) error {
	nc, log := env.NATS, env.Log
	js, err := newJetStream(nc)
	if err != nil {
		return err
	}
	warnings, err := sink.EnsureStream(ctx, js, cfg.Stream, cfg.Subject, cfg.CreateStream, sink.WithDeadLetter(cfg.DeadLetter))
	if err != nil {
		return err
	}
	if cfg.DeadLetter != "" {
		if _, err := sink.CheckDeadLetter(ctx, js, cfg.DeadLetter); err != nil {
			return err
		}
	}
	firstSession := !*warned
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
	slot, partitions, err := preflight(ctx, cfg)
	if errors.Is(err, replication.ErrSlotInvalidated) {
		return slotInvalidated(ctx, cfg, store, err)
	}
	if err != nil {
		return err
	}
	stream, err := replication.Connect(ctx, replication.Config{
		ConnString: cfg.PGURL, Slot: cfg.Slot, Publication: cfg.Publication,
		StatusInterval: cfg.StatusInterval, ReadLinger: cfg.ReadLinger, Logger: log,
		Streaming: cfg.PGStreaming, Messages: true, Failover: cfg.SlotFailover,
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
	decCfg := cfg.decoderConfig()
	decCfg.Messages = true
	decCfg.Partitions = partitions
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
	if err := prepareFailover(ctx, cfg, stream, firstSession, log); err != nil {
		return err
	}
	var kept keptRows
	if cfg.Retention.On {
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
		Interval: cfg.CheckpointInterval, Logger: log,
	})
	pub, err := resolvePublishing(ctx, cfg, js, log)
	if err != nil {
		return err
	}
	var check *streamCheck
	if cfg.StreamCheck > 0 && !cfg.NullSink {
		check = newStreamCheck(js, cfg, env.Metrics, log)
	}
	publish, err := newSink(cfg, js, nc, pub, tracker, env.Metrics, check, log)
	if err != nil {
		return &fatalError{err}
	}
	p := &pipeline{stream: stream, decoder: dec, tracker: tracker, publish: publish, checkpointer: ckpt,
		skipBefore: start.LSN, committedBy: start.CommittedBy, restored: start.Restored, from: start.From,
		deadLetters: cfg.DeadLetter != "", skipNull: cfg.NullPayload == NullPayloadSkip, metrics: env.Metrics,
		shutdownTimeout: cfg.ShutdownTimeout, log: log}
	p.checked.Store(start.From >= start.LSN)
	if cfg.Retention.On {
		p.retention = newRetention(cfg, kept, p.confirmable, env.Metrics, log)
	}
	p.streamCheck = check
	if cfg.Heartbeat > 0 {
		p.heartbeat = &heartbeat{pgPeriodic{pgURL: cfg.PGURL, interval: cfg.Heartbeat, what: "heartbeat",
			log: log.With().Str("component", "heartbeat").Logger()}}
	}
	if err := stream.Start(ctx, start.From, p.confirmable); err != nil {
		return err
	}
	log.Info().Str("slot", cfg.Slot).Str("lsn", start.LSN.String()).Str("from", start.From.String()).Str("stream", cfg.Stream).
		Str("checkpoint", store.String()).Bool("pg_streaming", stream.Streaming()).Bool("fast_batches", pub.fast).Bool("atomic_transactions", pub.atomic).Msg("streaming")

	streaming = true
	detach := env.Metrics.Attach(sessionProgress{stream: stream, tracker: tracker})
	defer detach()
	if ctx.Err() == nil {
		env.Health.Set(telemetry.Streaming, "")
	}
	err = p.run(ctx)
	if replication.MissingPublication(err) {
		return publicationDropped(ctx, cfg, store, err)
	}
	return err
}

// publishing is how a session publishes: in fast batches or not, and each
// transaction as an atomic batch or not.
type publishing struct {
	fast, atomic bool
}

// resolvePublishing resolves --publish-mode and --atomic-transactions for
// the server and stream (see resolveFast and resolveAtomic).
func resolvePublishing(ctx context.Context, cfg Config, js jetstream.JetStream, log zerolog.Logger) (publishing, error) {
	fast, err := resolveFast(ctx, cfg, js, log)
	if err != nil {
		return publishing{}, err
	}
	atomic, err := resolveAtomic(ctx, cfg, js, log)
	return publishing{fast: fast, atomic: atomic}, err
}

// resolveFast resolves --publish-mode: whether this session publishes in
// fast batches. auto uses them where the server and stream take them (and
// not with --exclusive-stream); fast without them is an error that says
// what is missing.
func resolveFast(ctx context.Context, cfg Config, js jetstream.JetStream, log zerolog.Logger) (bool, error) {
	if cfg.NullSink || cfg.PublishMode == PublishAsync || cfg.Exclusive {
		return false, nil
	}
	use, missing, err := resolveBatches(sink.CheckFastBatch(ctx, js, cfg.Stream), cfg.PublishMode == PublishFast, "--publish-mode fast")
	if missing != nil {
		log.Info().Str("stream", cfg.Stream).Str("reason", missing.Problem).Msg("publishing asynchronously: no fast batches")
	}
	return use, err
}

// resolveAtomic resolves --atomic-transactions likewise: auto publishes
// each transaction as an atomic batch where the server and stream take
// them (and not with --exclusive-stream).
func resolveAtomic(ctx context.Context, cfg Config, js jetstream.JetStream, log zerolog.Logger) (bool, error) {
	if cfg.NullSink || cfg.AtomicTransactions == AtomicOff || cfg.Exclusive {
		return false, nil
	}
	use, missing, err := resolveBatches(sink.CheckAtomicBatch(ctx, js, cfg.Stream), cfg.AtomicTransactions == AtomicOn, "--atomic-transactions on")
	if missing != nil {
		log.Info().Str("stream", cfg.Stream).Str("reason", missing.Problem).Str("fix", missing.Fix).
			Msg("transactions published message by message: no atomic batches")
	}
	return use, err
}

// resolveBatches turns a batch check's outcome into whether to use them.
// Without them, setting (the one that requires them, when required) is an
// error; otherwise missing says what the server or stream lacks.
func resolveBatches(checked error, required bool, setting string) (use bool, missing *sink.BatchError, err error) {
	switch {
	case checked == nil:
		return true, nil, nil
	case !errors.As(checked, &missing):
		return false, nil, checked
	case required:
		return false, nil, &fatalError{fmt.Errorf("%s: %w", setting, checked)}
	}
	return false, missing, nil
}

// newSink returns the Run of the sink --sink names, acknowledging to
// tracker: the JetStream publisher (as pub says, offering check its
// samples when set), or the benchmark's null sink.
func newSink(cfg Config, js jetstream.JetStream, nc *nats.Conn, pub publishing, tracker *checkpoint.Tracker,
	observer sink.Observer, check *streamCheck, log zerolog.Logger) (func(context.Context, <-chan sink.Item) error, error) {
	if cfg.NullSink {
		log.Warn().Msg("--sink null: events are acknowledged without being published (benchmarks only)")
		return func(ctx context.Context, in <-chan sink.Item) error { return sink.Null{}.Run(ctx, in, tracker) }, nil
	}
	sc := cfg.sinkConfig(pub, observer, log)
	if check != nil { // not a nil *streamCheck in the interface
		sc.Sampler = check
	}
	publisher, err := sink.NewPublisher(js, nc.MaxPayload(), sc)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, in <-chan sink.Item) error { return publisher.Run(ctx, in, tracker) }, nil
}

// ConnectPostgres opens a normal (not replication) connection to
// --pg-url; its error names the flag, for the commands that take it.
func ConnectPostgres(ctx context.Context, pgURL string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL (--pg-url): %w", err)
	}
	return conn, nil
}

// preflight checks the database on a normal connection, and lists the
// outbox table's partitions, if any, for the decoder.
func preflight(ctx context.Context, cfg Config) (slot replication.SlotState, partitions []uint32, err error) {
	conn, err := pgx.Connect(ctx, cfg.PGURL)
	if err != nil {
		return slot, nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	slot, err = replication.Preflight(ctx, conn, replication.PreflightConfig{
		Slot: cfg.Slot, Publication: cfg.Publication, Table: cfg.Table,
		CheckColumns: cfg.checkColumns, Read: append(cfg.Columns.Names(), cfg.Subject.Columns()...),
	})
	if err == nil && cfg.Retention.On {
		err = checkRetention(ctx, conn, cfg.Table, cfg.Retention.CreatedAtZone)
	}
	if err == nil && !cfg.messagesOnly() {
		partitions, err = replication.TablePartitions(ctx, conn, cfg.Table)
	}
	return slot, partitions, err
}

// sessionProgress is a running session's position, for the metrics.
type sessionProgress struct {
	stream  *replication.Stream
	tracker *checkpoint.Tracker
}

func (s sessionProgress) Received() pglogrepl.LSN  { return s.stream.Received() }
func (s sessionProgress) Confirmed() pglogrepl.LSN { return s.stream.Confirmed() }
func (s sessionProgress) InFlight() int            { return s.tracker.InFlight() }

// sinkConfig is the publisher's configuration for this relay, used by run
// and backfill alike: events publish the same way from the stream and from
// a snapshot. pub is the resolved publishing (see resolvePublishing).
func (cfg Config) sinkConfig(pub publishing, observer sink.Observer, log zerolog.Logger) sink.Config {
	return sink.Config{
		Stream: cfg.Stream, Subject: cfg.Subject, MaxInFlight: cfg.MaxInFlight, DeadLetter: cfg.DeadLetter,
		Exclusive: cfg.Exclusive, Fast: pub.fast, Atomic: pub.atomic, Linger: cfg.PublishLinger, LogPayloads: cfg.LogPayloads,
		Logger: log, Observer: observer,
	}
}

// newPublisher is the one publisher of run and backfill, for this relay's
// settings and the server's max_payload.
func (cfg Config) newPublisher(js jetstream.JetStream, nc *nats.Conn, pub publishing, observer sink.Observer, log zerolog.Logger) (*sink.Publisher, error) {
	return sink.NewPublisher(js, nc.MaxPayload(), cfg.sinkConfig(pub, observer, log))
}
