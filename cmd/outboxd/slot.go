package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/internal/cliconfig"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/replication"
)

func newSlotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slot",
		Short: "Create, inspect or drop outboxd's logical replication slot",
		Long: `Create, inspect or drop the logical replication slot (pgoutput) named by --slot,
in the database of --pg-url. outboxd run creates the slot itself when it is
missing; these commands are for preparing a database ahead of time and for
repairs.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSlotCreateCommand(), newSlotInfoCommand(), newSlotDropCommand())
	return cmd
}

// slotTimeout bounds a slot command; --force may wait up to
// replication.DropOptions.Wait on top.
const slotTimeout = 30 * time.Second

func newSlotCreateCommand() *cobra.Command {
	return withRunSettings(&cobra.Command{
		Use:   "create",
		Short: "Create the logical replication slot (pgoutput) as outboxd run would",
		Long: `Create the logical replication slot --slot with the pgoutput plugin, the way
outboxd run does when it is missing, and print its consistent point: outboxd
streams every transaction that commits after it. A slot of that name that
exists already is an error; nothing is changed then.`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		if err := replication.ValidSlotName(cfg.Slot); err != nil {
			return fmt.Errorf("--slot: %w", err)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), slotTimeout)
		defer cancel()
		lsn, err := replication.CreateSlot(ctx, replication.Config{
			ConnString: cfg.PGURL, Slot: cfg.Slot, Publication: cfg.Publication, Failover: cfg.SlotFailover})
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "created replication slot %q (plugin %s) at consistent point %s: outboxd run streams every transaction committed after it\n",
			cfg.Slot, replication.Plugin, lsn)
		return nil
	}, "pg-url", "slot", "publication", "slot-failover")
}

func newSlotInfoCommand() *cobra.Command {
	var asJSON bool
	cmd := withRunSettings(&cobra.Command{
		Use:   "info",
		Short: "Show the replication slot: plugin, holder, positions, WAL it retains, lag",
		Long: `Show the replication slot --slot as outboxd status does (the same fields, and
with --json the same JSON object as status's "slot"). A missing slot is an error
that says how to create it.`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		info, err := inspectSlot(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		report := relay.NewSlotReport(info)
		if asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(report)
		}
		return report.WriteText(cmd.OutOrStdout())
	}, "pg-url", "slot")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the slot as JSON (the \"slot\" object of outboxd status --json)")
	cliconfig.DocumentEnv(cmd.Flags())
	return cmd
}

// inspectSlot reads --slot on a normal connection.
func inspectSlot(ctx context.Context, cfg runConfig) (replication.SlotInfo, error) {
	if err := replication.ValidSlotName(cfg.Slot); err != nil {
		return replication.SlotInfo{}, fmt.Errorf("--slot: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, slotTimeout)
	defer cancel()
	conn, err := relay.ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return replication.SlotInfo{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return replication.InspectSlot(ctx, conn, cfg.Slot)
}

func newSlotDropCommand() *cobra.Command {
	var yes, force bool
	cmd := withRunSettings(&cobra.Command{
		Use:   "drop",
		Short: "Drop the replication slot (needs --yes; events not yet published are lost)",
		Long: `Drop the replication slot --slot. It always prints what dropping means first,
and drops only with --yes:

  - PostgreSQL forgets the slot's position and recycles the WAL it held, so
    events committed but not yet published (after confirmed_flush_lsn) are
    lost: no outboxd can read them again.
  - A new slot (outboxd slot create, or outboxd run) starts at its own
    consistent point and streams only what commits after it.
  - While a checkpoint of the old slot exists, outboxd run refuses to start on
    the new one (a gap): republish the lost events, then start it once with
    --allow-gap.

A slot held by a running process (an outboxd streaming) is refused, naming
its PID; --force terminates that process first. Stop outboxd instead where
you can: an outboxd without a checkpoint would create the slot again at once.
Slots of another plugin, or physical ones, are never dropped: another tool
reads them.`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		info, err := inspectSlot(cmd.Context(), cfg)
		if errors.Is(err, replication.ErrSlotNotFound) {
			return replication.NothingToDrop(cfg.Slot)
		}
		if err != nil {
			return err
		}
		if err := info.Droppable(true); err != nil {
			return err // not outboxd's slot: no --yes makes it so
		}
		out := cmd.OutOrStdout()
		relay.ExplainDrop(out, info)
		if !yes {
			return fmt.Errorf("replication slot %q not dropped: pass --yes to drop it%s", cfg.Slot, forceHint(info, force))
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), slotTimeout)
		defer cancel()
		conn, err := relay.ConnectPostgres(ctx, cfg.PGURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		before, err := replication.DropSlot(ctx, conn, cfg.Slot, replication.DropOptions{Force: force})
		if err != nil {
			return err
		}
		if before.Active {
			fmt.Fprintf(out, "terminated server process %d, which held the slot\n", before.ActivePID)
		}
		fmt.Fprintf(out, "dropped replication slot %q (it was at confirmed_flush_lsn %s)\n", cfg.Slot, before.ConfirmedFlush)
		return nil
	}, "pg-url", "slot")
	cmd.Flags().BoolVar(&yes, "yes", false, "really drop the slot (events not yet published are lost)")
	cmd.Flags().BoolVar(&force, "force", false, "terminate the process holding an active slot, then drop it")
	cliconfig.DocumentEnv(cmd.Flags())
	// A drop must be typed each time: OUTBOXD_YES in a unit's environment
	// would drop the slot of every later run.
	cliconfig.CommandLineOnly(cmd.Flags(), "yes", "force")
	return cmd
}

func forceHint(s replication.SlotInfo, force bool) string {
	if s.Active && !force {
		return fmt.Sprintf(", and --force to terminate server process %d, which holds it", s.ActivePID)
	}
	return ""
}
