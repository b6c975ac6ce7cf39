package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/relay"
)

func newReplayCommand() *cobra.Command {
	var ids, where, since string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "replay --ids ID,... | --since TIME [--where PREDICATE] [--dry-run]",
		Short: "Publish chosen outbox rows again, in order, with their own message ids",
		Long: `Publish again the outbox rows of --ids (e.g. those outboxd verify reports lost),
or those created since --since that the stream does not hold (narrowed by
--where), in (created_at, id) order or --order-by, with the message ids,
subjects and headers outboxd run gives them, and the header
Outbox-Backfill: true. JetStream drops a row it holds within the stream's
duplicate window; past the window a row given by --ids is stored again.
It reads the table in a read-only transaction, creates no slot and saves no
checkpoint, so it runs beside outboxd run. --dry-run lists the rows' ids
in order and publishes nothing.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&ids, "ids", "", "ids of the rows to publish again, comma-separated, as the stream shows them (Nats-Msg-Id) or as the table holds them")
	cmd.Flags().StringVar(&where, "where", "", "with --since: SQL predicate on the outbox table narrowing the rows")
	cmd.Flags().StringVar(&since, "since", "", "publish the rows created since this time (RFC 3339, by the created_at column) that the stream does not hold")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the ids of the rows that would be published, in order, and publish nothing")
	withRunSettings(cmd, func(cmd *cobra.Command, run runConfig) error {
		bf, err := snapshotConfig(run, where, since)
		if err != nil {
			return err
		}
		cfg := relay.ReplayConfig{BackfillConfig: bf, DryRun: dryRun}
		for _, id := range strings.Split(ids, ",") {
			if id = strings.TrimSpace(id); id != "" {
				cfg.IDs = append(cfg.IDs, id)
			}
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		env, err := oneOffEnv(cmd.Context(), run, "replay")
		if err != nil {
			return err
		}
		defer env.NATS.Close()
		return relay.Replay(cmd.Context(), cfg, env, cmd.OutOrStdout())
	}, runFlagsExcept(relayOnlyFlags...)...)
	return cmd
}
