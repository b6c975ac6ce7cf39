package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/internal/cliconfig"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/relay/natsconn"
	"github.com/outboxd/outboxd/replication"
)

// statusOptions are the flags of `outboxd status` beside run's settings.
type statusOptions struct {
	JSON        bool
	RetainedMiB int64
	Timeout     time.Duration
}

func newStatusCommand() *cobra.Command {
	opts := statusOptions{RetainedMiB: 1024, Timeout: 10 * time.Second}
	cmd := withRunSettings(&cobra.Command{
		Use:   "status",
		Short: "Show the slot, publication, stream and checkpoint outboxd run uses, with warnings",
		Long: `Read, without changing anything, what outboxd run with the same settings would
use: the PostgreSQL server (wal_level, system identifier, timeline), the
replication slot (position, WAL it holds, lag), the publication and its tables,
the JetStream stream, and the saved checkpoint; then list what needs attention.
A missing object is shown as missing with the command that creates it.
--json prints the same report for scripts (field names are stable; see docs/operations.md).

Exits 0 when nothing blocks outboxd run, warnings or not. Exits 1, after printing
the whole report, when something does: listed under "blocking outboxd run"
("blocks_run": true in --json), it is what run refuses to start on (wal_level
not logical, a missing publication, a stream missing without --create-stream,
a checkpoint of another cluster or past the server's WAL, ...) or a server that
does not answer. Bad settings also exit 1, before any report.`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		if err := opts.validate(cfg); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), opts.Timeout)
		defer cancel()
		report := relay.Status(ctx, cfg.relay, relay.StatusOptions{
			RetainedMiB: opts.RetainedMiB,
			ConnectNATS: func() (*nats.Conn, error) { return natsconn.ConnectOnce(cfg.NATSURL, cfg.natsAuth, "outboxd status") },
		})
		var err error
		if opts.JSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			err = enc.Encode(report)
		} else {
			err = report.WriteText(cmd.OutOrStdout())
		}
		if err == nil && report.BlocksRun {
			// Printed by main as one line; the report above says what and how to fix it.
			err = errors.New("status found problems that block outboxd run (see above)")
		}
		return err
	})
	cmd.Flags().BoolVar(&opts.JSON, "json", opts.JSON, "print the report as JSON (stable field names, documented in docs/operations.md)")
	cmd.Flags().Int64Var(&opts.RetainedMiB, "warn-retained-mib", opts.RetainedMiB, "warn when an inactive slot retains more than this much WAL, in MiB (0 or more)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", opts.Timeout, "how long to wait for PostgreSQL and NATS altogether (1s-10m)")
	cliconfig.DocumentEnv(cmd.Flags())
	return cmd
}

func (o statusOptions) validate(cfg runConfig) error {
	if o.RetainedMiB < 0 {
		return fmt.Errorf("--warn-retained-mib %d is out of range: use 0 or more MiB (default 1024)", o.RetainedMiB)
	}
	if o.Timeout < time.Second || o.Timeout > 10*time.Minute {
		return fmt.Errorf("--timeout %s is out of range: use 1s to 10m", o.Timeout)
	}
	return replication.ValidSlotName(cfg.Slot)
}
