package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// DB is the database of the inbox and of the business tables, normally a
// *pgxpool.Pool with at least Partitions connections (one more with
// Retention). A *pgx.Conn, which runs one statement at a time, serves one
// partition without retention only.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Execer
}

// Consumer applies the messages of one stream to PostgreSQL, each at most
// once with effect and each aggregate's in order. Make it with New; its
// methods are safe for concurrent use.
type Consumer struct {
	cfg       Config
	js        jetstream.JetStream
	db        DB
	sql       statements
	consumers []jetstream.Consumer
	log       *slog.Logger
	// afterCommit, when set, runs between a message's commit and its ack:
	// the tests crash the process there.
	afterCommit func(Message)
}

// New checks cfg against the servers and sets up the durable consumers:
//
//   - cfg itself (Config.Validate);
//   - the stream exists and, with more than one partition, adds the
//     partition token with the transform Config.Transform gives (on
//     itself or on a source);
//   - Retention is longer than the redelivery horizon (Config.Horizon);
//   - a stream captures DeadLetter;
//   - the inbox table exists with its columns;
//   - each partition's durable consumer exists with Config.ConsumerConfig
//     (created or updated), and none was made for another layout.
//
// Every refusal is a *ConfigError that names the value and the fix, or an
// error from a server. New starts nothing: Run does.
func New(ctx context.Context, js jetstream.JetStream, db DB, cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := checkDB(db, cfg); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, &ConfigError{"JetStream", "nil", "is not set", "pass jetstream.New(nc) of a connection to the stream's server"}
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, &ConfigError{"Stream", strconv.Quote(cfg.Stream), "does not exist", "name the stream outboxd publishes to (outboxd --stream, default OUTBOX)"}
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: read stream %s: %w", cfg.Stream, err)
	}
	filters, err := cfg.filters(stream.CachedInfo().Config)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkRetention(stream.CachedInfo().Config); err != nil {
		return nil, err
	}
	if err := checkDeadLetterStream(ctx, js, cfg.DeadLetter); err != nil {
		return nil, err
	}
	sql, err := newStatements(cfg.Table)
	if err != nil {
		return nil, err
	}
	if err := checkTable(ctx, db, cfg.Table, sql); err != nil {
		return nil, err
	}
	consumers, err := cfg.setUpConsumers(ctx, js, filters)
	if err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, js: js, db: db, sql: sql, consumers: consumers,
		log: cfg.Logger.With("component", "inbox", "consumer", cfg.Name)}
	c.warnSmallPool()
	return c, nil
}

func checkDB(db DB, cfg Config) error {
	if db == nil {
		return &ConfigError{"DB", "nil", "is not set", "pass a *pgxpool.Pool of the database that holds the inbox and the business tables"}
	}
	if _, ok := db.(*pgx.Conn); !ok || cfg.Partitions == 1 && cfg.Retention == 0 {
		return nil
	}
	users := fmt.Sprintf("%d workers", cfg.Partitions)
	if cfg.Partitions == 1 {
		users = "a worker and retention"
	}
	return &ConfigError{"DB", "*pgx.Conn", "runs one statement at a time, too few for " + users, "pass a *pgxpool.Pool (pgxpool.New)"}
}

// warnSmallPool logs when workers would queue for connections: not an
// error, since it only costs throughput.
func (c *Consumer) warnSmallPool() {
	pool, ok := c.db.(*pgxpool.Pool)
	if !ok {
		return
	}
	need := int32(c.cfg.Partitions)
	if c.cfg.Retention > 0 {
		need++
	}
	if have := pool.Config().MaxConns; have < need {
		c.log.Warn("the pool has fewer connections than the workers need: they will wait for each other; raise pool_max_conns",
			"pool_max_conns", have, "want", need)
	}
}

func checkTable(ctx context.Context, db DB, table string, sql statements) error {
	_, err := db.Exec(ctx, sql.check)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"):
		return &ConfigError{"Table", strconv.Quote(table), "does not exist", "create it with inbox.CreateTable, or run the SQL of inbox.TableDDL in a migration"}
	case errors.As(err, &pgErr) && pgErr.Code == "42703":
		return &ConfigError{"Table", strconv.Quote(table), "lacks a column of the inbox (" + pgErr.Message + ")",
			"name the inbox table, or create it with inbox.CreateTable"}
	}
	return fmt.Errorf("inbox: read table %s: %w", table, err)
}

// checkDeadLetterStream checks that a stream stores the dead letters: a
// publish nobody stores would lose the message it was meant to keep.
func checkDeadLetterStream(ctx context.Context, js jetstream.JetStream, subject string) error {
	_, err := js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return &ConfigError{"DeadLetter", strconv.Quote(subject), "is captured by no stream",
			fmt.Sprintf("create one (nats stream add DEAD_LETTER --subjects '%s' --storage file) or choose a subject a stream captures", subject)}
	}
	if err != nil {
		return fmt.Errorf("inbox: find the stream of dead-letter subject %s: %w", subject, err)
	}
	return nil
}

// Config returns the consumer's configuration, defaults filled in.
func (c *Consumer) Config() Config { return c.cfg }

// Run applies messages until ctx is done, one worker per partition, and,
// with Config.Retention, deletes expired inbox rows every
// RetentionInterval. It returns nil once ctx is done and every worker has
// finished its message, or the first error that stopped a worker (the
// durable consumer was deleted, the connection closed), after stopping the
// others. A message a worker holds when ctx ends is nak'ed, so that
// another instance takes it at once.
func (c *Consumer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(c.consumers))
	for p, cons := range c.consumers {
		wg.Go(func() {
			if errs[p] = c.work(ctx, p, cons); errs[p] != nil {
				cancel()
			}
		})
	}
	if c.cfg.Retention > 0 {
		wg.Go(func() { c.expireEvery(ctx, c.cfg.RetentionInterval) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// work is one partition's worker: it takes the partition's messages one by
// one, in stream order.
func (c *Consumer) work(ctx context.Context, p int, cons jetstream.Consumer) error {
	durable := c.cfg.Durable(p)
	// MaxAckPending 1 lets the server send one message at a time whatever
	// the pull asks for; asking for more keeps a pull request open, so the
	// next message comes as soon as the ack lands.
	it, err := cons.Messages(jetstream.PullMaxMessages(8))
	if err != nil {
		return fmt.Errorf("inbox: consumer %s: subscribe: %w", durable, err)
	}
	defer it.Stop()
	w := worker{Consumer: c, log: c.log.With("durable", durable)}
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			if err == nil {
				nak(w.log, msg, 0) // taken as Run stopped: let another instance have it now
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("inbox: consumer %s: next message: %w", durable, err)
		}
		w.settle(ctx, msg)
	}
}

// expireEvery runs DeleteExpired every interval until ctx is done. The
// first run comes after one interval, not at once: a consumer that was
// down for long gets the redeliveries it owes first.
func (c *Consumer) expireEvery(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := c.DeleteExpired(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			c.log.Warn("inbox retention failed; it runs again at the next interval", "error", err, "interval", interval)
		case n > 0:
			c.log.Info("inbox rows expired", "rows", n, "retention", c.cfg.Retention)
		}
	}
}
