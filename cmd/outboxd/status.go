package main

import (
	"context"
	"encoding/json"
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
use: the replication slot (position, WAL it holds, lag), the publication and its
tables, the JetStream stream, and the saved checkpoint; then list what needs
attention. A missing object is shown as missing with the command that creates it.
--json prints the same report for scripts (field names are stable; see docs/operations.md).
Exits 0 when the report was printed, whatever it says; 1 on bad settings.`,
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
		if opts.JSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(report)
		}
		return report.WriteText(cmd.OutOrStdout())
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
