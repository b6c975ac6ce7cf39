package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/relay/natsconn"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// Env is what a relay runs with besides its Config: the NATS connection
// (the caller connects it, with its credentials, and closes it after Run),
// the metrics and health the relay reports to, and the logger.
type Env struct {
	NATS    *nats.Conn
	Metrics *telemetry.Metrics
	Health  *telemetry.Health
	Log     zerolog.Logger
}

// fatalError marks a condition outboxd detects itself that retrying cannot fix.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Permanent reports whether err stops the relay instead of being retried:
// a condition outboxd detected itself, a table or row that cannot be
// published, a stream that refuses, a checkpoint that does not decode, or
// a replication error that retrying cannot fix.
func Permanent(err error) bool {
	var (
		fatal     *fatalError
		schemaErr *decoder.SchemaError
		rowErr    *event.RowError
		streamErr *sink.StreamError
	)
	return errors.As(err, &fatal) || errors.As(err, &schemaErr) || errors.As(err, &rowErr) ||
		errors.As(err, &streamErr) ||
		errors.Is(err, decoder.ErrMalformed) || errors.Is(err, checkpoint.ErrCorrupt) || replication.Permanent(err)
}

// Run runs relay sessions until ctx is done; a clean stop returns nil. A
// session that fails with a transient error (connection lost, server
// restarting) is retried with capped exponential backoff (retryWait),
// each retry logged with its cause, attempt and wait (retries.failed says
// when a long outage logs less); one that finds the slot held by another
// process stands by, which is logged once. An error that retrying cannot
// fix (Permanent) is returned.
func Run(ctx context.Context, cfg Config, env Env) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, nc := env.Log, env.NATS
	env.Health.SetNATS(func() (bool, string) { return nc.IsConnected(), nc.Status().String() })
	stopping := context.AfterFunc(ctx, func() { env.Health.Set(telemetry.Stopping, "asked to stop") })
	defer stopping()

	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	var failures retries
	standingBy, warned, retrying := false, false, false
	for {
		if retrying {
			env.Metrics.Reconnected(telemetry.TargetReplication)
		}
		started := time.Now()
		err := natsconn.Explain(nc, runSession(ctx, cfg, env, &warned))
		switch {
		case err == nil:
			log.Info().Msg("stopped")
			return nil
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			return nil
		case Permanent(err):
			return withRowFix(cfg, err)
		}
		var wait time.Duration
		if errors.Is(err, replication.ErrSlotActive) {
			// Another outboxd streams from the slot: stand by and take
			// over as soon as PostgreSQL lets it go.
			if !standingBy {
				log.Info().Str("slot", cfg.Slot).Dur("retry_every", cfg.StandbyRetry).
					Msg("replication slot is active in another process (SQLSTATE 55006); standing by")
				env.Health.Set(telemetry.Standby, fmt.Sprintf("replication slot %q is active in another process; retrying every %s", cfg.Slot, cfg.StandbyRetry))
			}
			standingBy, retrying, failures = true, false, retries{}
			wait = cfg.StandbyRetry
		} else {
			now := time.Now()
			attempt, logIt := failures.failed(err, now.Sub(started), now)
			wait = retryWait(attempt, rnd)
			if logIt {
				log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", wait).Msg("session interrupted; retrying")
			}
			env.Health.Set(telemetry.Retrying, err.Error())
			standingBy, retrying = false, true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// withRowFix adds to the error of a row that cannot be published, which
// stops the relay when no --dead-letter is set, the ways to go on: a
// --subject the row's value fits, when the subject was the problem (the
// row itself cannot change: it is in the WAL), and --dead-letter.
func withRowFix(cfg Config, err error) error {
	var rowErr *event.RowError
	if cfg.DeadLetter != "" || !errors.As(err, &rowErr) {
		return err
	}
	const deadLetter = "to go on past it, set --dead-letter SUBJECT: rows that cannot be published are sent there instead"
	// The sink's reason for a value that cannot fill the subject
	// template (sink.Publisher.message).
	if strings.Contains(rowErr.Reason, "subject placeholder {"+rowErr.Column+"}") {
		return fmt.Errorf("%w; the subject template in use is --subject %q: change it so that the row fits, or, %s", err, cfg.Subject, deadLetter)
	}
	return fmt.Errorf("%w; %s", err, deadLetter)
}

// The reconnect backoff (docs/operations.md, "Failures that are retried").
const (
	minBackoff    = 200 * time.Millisecond // the first retry's longest wait
	maxBackoff    = 10 * time.Second       // the cap
	backoffFactor = 2                      // from one retry to the next
	// newOutageAfter is how long a session must run for its failure to
	// count as a new outage: the backoff starts again from minBackoff.
	newOutageAfter = time.Minute
	// logAtLeastEvery is how often a retry with the same error is logged
	// once the backoff is at its cap.
	logAtLeastEvery = time.Minute
)

// backoffCeiling is the longest wait before retry attempt n (1 for the
// first): minBackoff × backoffFactor^(n-1), capped at maxBackoff.
func backoffCeiling(attempt int) time.Duration {
	ceiling := minBackoff
	for i := 1; i < attempt && ceiling < maxBackoff; i++ {
		ceiling *= backoffFactor
	}
	return min(ceiling, maxBackoff)
}

// retryWait is the wait before retry attempt n, with "equal jitter": a
// random time, in whole milliseconds, from half of backoffCeiling(n) to
// all of it. Several outboxd that lost one server spread their retries,
// yet none retries at once. rnd is the randomness; tests seed their own.
func retryWait(attempt int, rnd *rand.Rand) time.Duration {
	ceiling := backoffCeiling(attempt).Milliseconds()
	half := ceiling / 2
	return time.Duration(half+rnd.Int64N(ceiling-half+1)) * time.Millisecond
}

// retries counts the sessions that failed in a row and decides which
// failures are logged: every one until the backoff reaches its cap, then
// one whose error differs from the last logged, and otherwise one per
// logAtLeastEvery, so that a long outage neither floods the log nor goes
// quiet.
type retries struct {
	attempt  int       // sessions failed in a row; 0 after a new outage
	logged   string    // the error last logged
	loggedAt time.Time // when
}

// failed records a session that ran for ran and failed with err at now:
// it returns the retry's attempt number and whether to log it.
func (r *retries) failed(err error, ran time.Duration, now time.Time) (attempt int, log bool) {
	if ran >= newOutageAfter {
		*r = retries{}
	}
	r.attempt++
	growing := backoffCeiling(r.attempt-1) < maxBackoff // up to the first wait at the cap
	log = growing || err.Error() != r.logged || now.Sub(r.loggedAt) >= logAtLeastEvery
	if log {
		r.logged, r.loggedAt = err.Error(), now
	}
	return r.attempt, log
}

// openStore opens the checkpoint store named by --checkpoint.
func openStore(ctx context.Context, cfg Config, nc *nats.Conn) (checkpoint.Store, error) {
	if cfg.Checkpoint.Kind == "file" {
		return checkpoint.NewFileStore(cfg.Checkpoint.Path), nil
	}
	js, err := newJetStream(nc)
	if err != nil {
		return nil, err
	}
	store, err := checkpoint.NewKVStore(ctx, js, cfg.Checkpoint.Bucket, cfg.Slot)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint bucket %q: %w", cfg.Checkpoint.Bucket, err)
	}
	return store, nil
}
