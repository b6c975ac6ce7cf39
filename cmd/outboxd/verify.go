package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/relay"
)

func newVerifyCommand() *cobra.Command {
	var since, until string
	cmd := &cobra.Command{
		Use:   "verify --since TIME|LSN [--until TIME]",
		Short: "Check that the stream holds every outbox row created in a time range exactly once, in order",
		Long: `Compare the outbox rows created (by created_at) from --since until --until with
the stream's messages, by Nats-Msg-Id: it reads the stream's headers since
--since (less a minute for the clocks' difference) and the table's rows in
(created_at, id) order, and prints how many rows are lost (no message),
duplicated (stored more than once) and out of created_at order within their
aggregate, with examples. It exits 1 when a row is lost or duplicated.

--until defaults to a minute before the checkpoint was saved: rows created
later may not be published yet. Rows deleted from the table (by --retention
or by hand) cannot be verified; messages of no row in the range are counted,
not faults. It changes nothing but an ephemeral consumer and a temporary
table on its own PostgreSQL session, both gone when it ends: it copies the
stream's message ids to the table in chunks of 10,000 and compares in SQL,
so its memory stays the same however many rows it verifies. The role needs
the TEMP privilege, and --pg-url the primary (a standby cannot create a
temporary table). On a terminal it draws a progress bar on stderr while it
reads the stream.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&since, "since", "", "first created_at to verify (RFC 3339, e.g. 2026-12-06T14:00:00Z), or an LSN (e.g. 0/1A2B3C8): the commit time, less a minute, of the first event in the stream committed at or after it; required")
	cmd.Flags().StringVar(&until, "until", "", "created_at to verify up to, exclusive (RFC 3339); default: a minute before the checkpoint was saved")
	withRunSettings(cmd, func(cmd *cobra.Command, run runConfig) error {
		cfg, err := verifyConfig(run, since, until)
		if err != nil {
			return err
		}
		env, err := oneOffEnv(cmd.Context(), run, "verify")
		if err != nil {
			return err
		}
		defer env.NATS.Close()
		cfg.Progress, cfg.Terminal = os.Stderr, isTerminal(os.Stderr)
		report, err := relay.Verify(cmd.Context(), cfg, env)
		if err != nil && !errors.Is(err, relay.ErrVerifyFailed) {
			return err
		}
		if werr := report.WriteText(cmd.OutOrStdout()); werr != nil {
			return werr
		}
		return err
	}, runFlagsExcept(relayOnlyFlags...)...)
	return cmd
}

// verifyConfig is verify's configuration from run's settings and its own
// flags, in RFC 3339.
func verifyConfig(run runConfig, since, until string) (relay.VerifyConfig, error) {
	cfg := relay.VerifyConfig{Config: run.relay}
	if since == "" {
		return cfg, errors.New("--since is required: the first created_at to verify, e.g. --since 2026-12-06T14:00:00Z")
	}
	var err error
	if strings.Contains(since, "/") {
		if cfg.SinceLSN, err = pglogrepl.ParseLSN(since); err != nil || cfg.SinceLSN == 0 {
			return cfg, fmt.Errorf("--since %q is not an LSN: write it as PostgreSQL does, e.g. 0/1A2B3C8 (or give a time, RFC 3339)", since)
		}
	} else if cfg.Since, err = time.Parse(time.RFC3339Nano, since); err != nil {
		return cfg, fmt.Errorf("--since %q is not a time or an LSN: use RFC 3339, e.g. 2026-12-06T14:00:00Z, or an LSN, e.g. 0/1A2B3C8", since)
	}
	if until != "" {
		if cfg.Until, err = time.Parse(time.RFC3339Nano, until); err != nil {
			return cfg, fmt.Errorf("--until %q is not a time: use RFC 3339, e.g. 2026-12-06T15:00:00Z", until)
		}
		if cfg.SinceLSN == 0 && !cfg.Until.After(cfg.Since) {
			return cfg, fmt.Errorf("--until %s is not after --since %s: give a later --until", until, since)
		}
	}
	return cfg, nil
}
