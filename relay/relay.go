package relay

import (
	"context"
	"errors"
	"fmt"
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
// restarting) is retried with capped exponential backoff, one that finds
// the slot held by another process stands by; state changes are logged
// once, not every attempt. An error that retrying cannot fix (Permanent)
// is returned.
func Run(ctx context.Context, cfg Config, env Env) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, nc := env.Log, env.NATS
	env.Health.SetNATS(func() (bool, string) { return nc.IsConnected(), nc.Status().String() })
	stopping := context.AfterFunc(ctx, func() { env.Health.Set(telemetry.Stopping, "asked to stop") })
	defer stopping()

	const minBackoff, maxBackoff = 200 * time.Millisecond, 10 * time.Second
	backoff := minBackoff
	var lastErr string
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
			return err
		}
		wait := backoff
		if errors.Is(err, replication.ErrSlotActive) {
			// Another outboxd streams from the slot: stand by and take
			// over as soon as PostgreSQL lets it go.
			if !standingBy {
				log.Info().Str("slot", cfg.Slot).Dur("retry_every", cfg.StandbyRetry).
					Msg("replication slot is active in another process (SQLSTATE 55006); standing by")
				env.Health.Set(telemetry.Standby, fmt.Sprintf("replication slot %q is active in another process; retrying every %s", cfg.Slot, cfg.StandbyRetry))
				standingBy, lastErr = true, ""
			}
			wait, retrying = cfg.StandbyRetry, false
		} else {
			if time.Since(started) > time.Minute {
				backoff = minBackoff // it ran for a while: this is a new outage
			}
			if err.Error() != lastErr {
				log.Warn().Err(err).Dur("retry_in", backoff).Msg("session interrupted; retrying")
				lastErr = err.Error()
			}
			env.Health.Set(telemetry.Retrying, err.Error())
			standingBy, retrying = false, true
			wait = backoff
			backoff = min(backoff*2, maxBackoff)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
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
