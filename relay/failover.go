package relay

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/replication"
)

// prepareFailover makes the slot a failover slot where --slot-failover
// asks and the server has them (PostgreSQL 17+), and warns of what in the
// primary's set-up would lose events at a failover, with the settings that
// fix it (docs/operations.md, "Primary failover"). It runs before
// streaming, while the slot is free, in every session (a failover changes
// the set-up); that a server has no failover slots is said in the first
// only.
func prepareFailover(ctx context.Context, cfg Config, stream *replication.Stream, firstSession bool, log zerolog.Logger) error {
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
		if cfg.SlotFailover && firstSession {
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
	problems := setup.Problems(cfg.Slot, cfg.SlotFailover)
	if cfg.SlotFailover {
		problems = append(problems, standbyProblems(ctx, cfg, setup.StandbySlots)...)
	}
	for _, problem := range problems {
		log.Warn().Str("slot", cfg.Slot).Msg("failover set-up: " + problem)
	}
	return nil
}

// standbyProblems checks each standby among --pg-url's hosts (several
// hosts, target_session_attrs=read-write): the settings that let it keep
// a copy of the slot and take over without loss. A host that does not
// answer is a problem too; a primary is skipped.
func standbyProblems(ctx context.Context, cfg Config, standbySlots []string) []string {
	pgcfg, err := pgx.ParseConfig(cfg.PGURL)
	if err != nil {
		return nil // run's own connection reports a bad URL
	}
	var problems []string
	for _, tries := range pgHosts(pgcfg) {
		// One host, with its own fallbacks (sslmode=prefer: TLS, then not).
		one := pgcfg.Copy()
		one.Host, one.Port, one.TLSConfig, one.Fallbacks, one.ValidateConnect = tries[0].Host, tries[0].Port, tries[0].TLSConfig, tries[1:], nil
		name := net.JoinHostPort(tries[0].Host, strconv.Itoa(int(tries[0].Port)))
		setup, err := inspectStandby(ctx, one, cfg.Slot)
		if err != nil {
			problems = append(problems, fmt.Sprintf("cannot check host %s of --pg-url as a standby: %v", name, err))
			continue
		}
		problems = append(problems, setup.Problems(name, standbySlots)...)
	}
	return problems
}

// inspectStandby reads one host's failover settings.
func inspectStandby(ctx context.Context, one *pgx.ConnConfig, slot string) (replication.StandbySetup, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, one)
	if err != nil {
		return replication.StandbySetup{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return replication.InspectStandby(ctx, conn, slot)
}

// pgHosts groups the ways a connection string tries its hosts (the first,
// then its fallbacks) by host, in order: a host's TLS and plain attempts
// of sslmode=prefer stay together.
func pgHosts(c *pgx.ConnConfig) [][]*pgconn.FallbackConfig {
	all := append([]*pgconn.FallbackConfig{{Host: c.Host, Port: c.Port, TLSConfig: c.TLSConfig}}, c.Fallbacks...)
	var hosts [][]*pgconn.FallbackConfig
	for _, try := range all {
		i := slices.IndexFunc(hosts, func(h []*pgconn.FallbackConfig) bool { return h[0].Host == try.Host && h[0].Port == try.Port })
		if i < 0 {
			hosts = append(hosts, []*pgconn.FallbackConfig{try})
			continue
		}
		hosts[i] = append(hosts[i], try)
	}
	return hosts
}
