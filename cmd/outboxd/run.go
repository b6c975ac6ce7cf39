package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/relay/natsconn"
)

func newRunCommand() *cobra.Command {
	return newRunCommandWith(func(ctx context.Context, cfg runConfig) error {
		log, level := newCommandLogger(ctx, cfg.LogLevel)
		stopProfile, err := startProfiles(cfg.CPUProfile, cfg.Trace)
		if err != nil {
			return err
		}
		defer stopProfile()
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
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
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
		Example: `  # The outbox table of outboxd migrate, a local NATS, the stream created if missing
  outboxd run --pg-url postgres://outboxd@db:5432/app --nats-url nats://nats:4222 --create-stream

  # Settings from the environment (as in a container) or a file
  OUTBOXD_PG_URL=postgres://outboxd@db:5432/app OUTBOXD_NATS_CREDS=/etc/outboxd/nats.creds outboxd run
  outboxd run --config /etc/outboxd/outboxd.yaml

  # An existing table: map its columns, route by a column, park bad rows
  outboxd run --table '"Sales"."Outbox"' --columns 'id=Id,payload=Body,event_type=Type' \
    --subject 'sales.{event_type}' --dead-letter outbox.dead

  # Check the set-up first, and what is in effect
  outboxd status && outboxd config`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		return run(cmd.Context(), cfg)
	})
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
	err = connectAndRun(relayCtx, cfg, log, obs)
	stopTasks()
	return errors.Join(err, tasks.Wait())
}

// connectAndRun connects to NATS once, for every session, and runs the
// relay until ctx is done.
func connectAndRun(ctx context.Context, cfg runConfig, log zerolog.Logger, obs *observability) error {
	nc, err := natsconn.Connect(cfg.NATSURL, cfg.natsAuth, log, func() { obs.metrics.Reconnected(telemetry.TargetNATS) })
	if err != nil {
		return err
	}
	defer nc.Close()
	return relay.Run(ctx, cfg.relay, relay.Env{NATS: nc, Metrics: obs.metrics, Health: obs.health, Log: log})
}
