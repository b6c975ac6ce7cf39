package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

func newRunCommand() *cobra.Command {
	return newRunCommandWith(func(ctx context.Context, cfg runConfig) error {
		stopProfile, err := startProfiles(cfg.CPUProfile, cfg.Trace)
		if err != nil {
			return err
		}
		defer stopProfile()
		log, level := newLogger(cfg.LogLevel)
		stop := reloadOnHangup(log, level, cfg.reloadLogLevel)
		defer stop()
		return runRelay(ctx, cfg, log)
	})
}

// startProfiles starts a pprof CPU profile into cpuPath and an execution
// trace into tracePath (each none if empty) and returns the function that
// stops them and closes the files.
func startProfiles(cpuPath, tracePath string) (func(), error) {
	stopCPU, err := startProfile("--cpu-profile", cpuPath, pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return nil, err
	}
	stopTrace, err := startProfile("--trace", tracePath, trace.Start, trace.Stop)
	if err != nil {
		stopCPU()
		return nil, err
	}
	return func() { stopTrace(); stopCPU() }, nil
}

// startProfile runs start on a new file at path (nothing if path is
// empty); flag names the setting in errors.
func startProfile(flag, path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, &fatalError{fmt.Errorf("%s: %w", flag, err)}
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, &fatalError{fmt.Errorf("%s %s: %w", flag, path, err)}
	}
	return func() {
		stop()
		f.Close()
	}, nil
}

// newRunCommandWith builds `outboxd run` around run, which gets the
// configuration after flags, environment and validation: tests pass their
// own run to see what was parsed without connecting anywhere.
func newRunCommandWith(run func(context.Context, runConfig) error) *cobra.Command {
	return withRunSettings(&cobra.Command{
		Use:   "run",
		Short: "Stream outbox rows to JetStream until SIGINT or SIGTERM",
		Long: `Stream committed outbox rows to JetStream until SIGINT or SIGTERM. On a signal,
outboxd stops reading, waits for the acknowledgements in flight (at most
--shutdown-timeout), saves the checkpoint, confirms it to PostgreSQL and exits 0.
Connection losses are retried with backoff; errors that retrying cannot fix
(configuration, missing objects, a row that cannot be published) exit 1.`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		return run(cmd.Context(), cfg)
	})
}

// fatalError marks a condition outboxd detects itself that retrying cannot fix.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// permanent reports whether err stops outboxd instead of being retried.
func permanent(err error) bool {
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

// runRelay serves the metrics address, connects to NATS once and runs
// relay sessions until ctx is done. The metrics address keeps serving
// while the last session drains, and stops after it.
func runRelay(ctx context.Context, cfg runConfig, log zerolog.Logger) error {
	obs, err := newObservability(cfg, log)
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancelCause(ctx)
	defer stopRelay(nil)
	tasksCtx, stopTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTasks()
	var tasks errgroup.Group
	for _, task := range obs.tasks {
		tasks.Go(func() error {
			err := task(tasksCtx)
			if err != nil {
				stopRelay(err)
			}
			return err
		})
	}
	err = connectAndRelay(relayCtx, cfg, log, obs)
	stopTasks()
	return errors.Join(err, tasks.Wait())
}

// connectAndRelay connects to NATS once and runs relay sessions until ctx
// is done. A session that fails with a transient error (connection lost,
// server restarting, slot held by another process) is retried with capped
// exponential backoff; state changes are logged once, not every attempt.
func connectAndRelay(ctx context.Context, cfg runConfig, log zerolog.Logger, obs *observability) error {
	nc, err := connectNATS(ctx, cfg, log, obs.metrics)
	if err != nil {
		return err
	}
	defer nc.Close()
	obs.health.SetNATS(func() (bool, string) { return nc.IsConnected(), nc.Status().String() })
	stopping := context.AfterFunc(ctx, func() { obs.health.Set(telemetry.Stopping, "asked to stop") })
	defer stopping()

	const minBackoff, maxBackoff = 200 * time.Millisecond, 10 * time.Second
	backoff := minBackoff
	var lastErr string
	standingBy, warned, retrying := false, false, false
	for {
		if retrying {
			obs.metrics.Reconnected(telemetry.TargetReplication)
		}
		started := time.Now()
		err := runSession(ctx, cfg, nc, log, &warned, obs)
		switch {
		case err == nil:
			log.Info().Msg("stopped")
			return nil
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			return nil
		case permanent(err):
			return err
		}
		wait := backoff
		if errors.Is(err, replication.ErrSlotActive) {
			// Another outboxd streams from the slot: stand by and take
			// over as soon as PostgreSQL lets it go.
			if !standingBy {
				log.Info().Str("slot", cfg.Slot).Dur("retry_every", cfg.StandbyRetry).
					Msg("replication slot is active in another process (SQLSTATE 55006); standing by")
				obs.health.Set(telemetry.Standby, fmt.Sprintf("replication slot %q is active in another process; retrying every %s", cfg.Slot, cfg.StandbyRetry))
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
			obs.health.Set(telemetry.Retrying, err.Error())
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

func connectNATS(ctx context.Context, cfg runConfig, log zerolog.Logger, metrics *telemetry.Metrics) (*nats.Conn, error) {
	log = log.With().Str("component", "nats").Logger()
	auth, err := natsAuthOptions(cfg.natsAuth)
	if err != nil {
		return nil, &fatalError{err}
	}
	perms := newPermissionLog(log)
	opts := []nats.Option{
		nats.Name("outboxd"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		// Publishes fail at once while reconnecting instead of waiting in a
		// buffer that would be flushed ahead of the republished window.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // our own Close at shutdown
			}
			log.Warn().Err(err).Msg("disconnected from NATS; nothing is confirmed past the last acknowledgement")
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			perms.reset()
			metrics.Reconnected(telemetry.TargetNATS)
			log.Info().Str("url", c.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		// A publish the user may not make is not answered by JetStream: the
		// server reports it here, asynchronously, and the publish times out.
		// This log line names the subject and the permission.
		nats.ErrorHandler(perms.handle),
	}
	opts = append(opts, auth...)
	nc, err := nats.Connect(cfg.NATSURL, append(opts, nats.RetryOnFailedConnect(false))...)
	if err != nil && !retryConnect(err) {
		// Authentication and TLS errors do not heal by retrying.
		return nil, &fatalError{fmt.Errorf("connect to NATS at --nats-url: %s", redactErr(err, cfg.natsAuth))}
	}
	if err != nil {
		if nc, err = nats.Connect(cfg.NATSURL, opts...); err != nil {
			return nil, &fatalError{fmt.Errorf("connect to NATS at --nats-url: %s", redactErr(err, cfg.natsAuth))}
		}
	}
	return nc, nil
}

// retryConnect reports whether a first connection error is worth retrying
// in the background (the server is not up yet) rather than stopping:
// refused credentials and certificates stay refused.
func retryConnect(err error) bool {
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired), errors.Is(err, nats.ErrSecureConnRequired),
		errors.Is(err, nats.ErrSecureConnWanted), errors.Is(err, nats.ErrClientCertOrRootCAsRequired),
		errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostErr):
		return false
	}
	return !strings.Contains(err.Error(), "tls:") && !strings.Contains(err.Error(), "x509:")
}

// openStore opens the checkpoint store named by --checkpoint.
func openStore(ctx context.Context, cfg runConfig, nc *nats.Conn) (checkpoint.Store, error) {
	if cfg.location.Kind == "file" {
		return checkpoint.NewFileStore(cfg.location.Path), nil
	}
	js, err := newJetStream(nc)
	if err != nil {
		return nil, err
	}
	store, err := checkpoint.NewKVStore(ctx, js, cfg.location.Bucket, cfg.Slot)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint bucket %q: %w", cfg.location.Bucket, err)
	}
	return store, nil
}
