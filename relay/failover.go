package relay

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/replication"
)

// prepareFailover makes the slot a failover slot where --slot-failover
// asks and the server has them (PostgreSQL 17+), and warns of what in the
// primary's set-up would lose events at a failover, with the settings that
// fix it (docs/operations.md, "Primary failover"). It runs before
// streaming, while the slot is free.
func prepareFailover(ctx context.Context, cfg Config, stream *replication.Stream, log zerolog.Logger) error {
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	setup, err := replication.InspectFailover(ctx, conn, cfg.Slot)
	if err != nil {
		return err
	}
	if setup.Major < replication.FailoverSlotsMajor {
		if cfg.SlotFailover {
			log.Info().Int("postgres", setup.Major).Msg("this PostgreSQL has no failover slots (17+): after a primary failover the slot is gone; see the runbook, \"Primary failover\"")
		}
		return nil
	}
	if cfg.SlotFailover && !setup.SlotFailover {
		if err := stream.MakeFailoverSlot(ctx); err != nil {
			return err
		}
		setup.SlotFailover = true
		log.Info().Str("slot", cfg.Slot).Msg("made the replication slot a failover slot (--slot-failover)")
	}
	for _, problem := range setup.Problems(cfg.Slot, cfg.SlotFailover) {
		log.Warn().Str("slot", cfg.Slot).Msg("failover set-up: " + problem)
	}
	return nil
}
