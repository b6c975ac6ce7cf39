package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/relay/natsconn"
)

// relayOnlyFlags are run's flags that mean nothing to a one-off backfill:
// it does not take them (their variables and config keys leave it alone).
var relayOnlyFlags = []string{"metrics-addr", "status-interval", "checkpoint-interval", "shutdown-timeout",
	"standby-retry", "heartbeat-interval", "pg-streaming", "spool-dir", "allow-gap", "nats-monitor-url",
	"retention", "retention-batch", "retention-pause", "retention-wait", "atomic-transactions", "stream-check-interval"}

func newBackfillCommand() *cobra.Command {
	var where, since, orderBy string
	cmd := &cobra.Command{
		Use:   "backfill --where PREDICATE | --since TIME",
		Short: "Create the slot and publish the rows an old relay has not sent, from the slot's snapshot",
		Long: `Create the replication slot and publish, from the snapshot PostgreSQL exports at
the slot's consistent point, every outbox row that matches --where: the rows a
polling relay has not sent yet (e.g. --where '"ProcessedAt" IS NULL'). A row
committed before that point is in the snapshot, a later one is in the slot, so
after backfill, outboxd run on the same slot publishes the rest: no row is in
neither. Messages carry Nats-Msg-Id = row id, the subject and headers outboxd run
gives the same row, and the header Outbox-Backfill: true, so JetStream drops
what the old relay publishes of them within the stream's duplicate window.

With --since TIME it publishes the rows created (by created_at) since TIME that
the stream does not hold yet, reading the ids the stream holds since TIME first:
the recovery from a slot that can no longer be read, as the error that stops
outboxd run then says (a dropped publication). --where then narrows it further.

Rows go out in (created_at, id) order, or in the order of the columns given to
--order-by: rows of one transaction share created_at when it defaults to now(),
so give a column that counts inserts (MassTransit's SequenceNumber, Watermill's
offset) to keep their insert order. backfill fails if the slot exists (its
snapshot is gone) or a checkpoint for it exists. On any failure after creating
the slot it drops the slot again, so it can simply be run again. It exits when
every row is acknowledged; then start outboxd run with the same settings.
It takes run's flags, less those only a running relay uses (metrics, retention,
intervals).`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&where, "where", "", `SQL predicate on the outbox table selecting the rows to publish, e.g. '"ProcessedAt" IS NULL' or '"Status" = 0' (runs read-only in the snapshot)`)
	cmd.Flags().StringVar(&since, "since", "", `publish the rows created since this time (RFC 3339, e.g. 2026-12-05T14:00:00Z, by the created_at column) that the stream does not hold yet`)
	cmd.Flags().StringVar(&orderBy, "order-by", "", `columns whose order the rows are published in, comma-separated, exact names (e.g. SequenceNumber, or created_at,offset); none: the columns created_at and id are mapped to`)
	withRunSettings(cmd, func(cmd *cobra.Command, run runConfig) error {
		cfg, err := backfillConfig(run, where, since)
		if err != nil {
			return err
		}
		if cfg.OrderBy, err = parseOrderBy(orderBy); err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		env, err := oneOffEnv(cmd.Context(), run, "backfill")
		if err != nil {
			return err
		}
		defer env.NATS.Close()
		return relay.Backfill(cmd.Context(), cfg, env, cmd.OutOrStdout())
	}, runFlagsExcept(relayOnlyFlags...)...)
	return cmd
}

// oneOffEnv is what a one-off command (backfill, verify, replay) gives
// the relay library: its logger and a NATS connection, waited for; the
// caller closes it.
func oneOffEnv(ctx context.Context, run runConfig, component string) (relay.Env, error) {
	log, _ := newLogger(run.LogLevel)
	log = log.With().Str("component", component).Logger()
	nc, err := natsconn.Connect(run.NATSURL, run.natsAuth, log, func() {})
	if err != nil {
		return relay.Env{}, err
	}
	if err := waitConnected(ctx, nc, natsConnectWait); err != nil {
		nc.Close()
		return relay.Env{}, err
	}
	return relay.Env{NATS: nc, Log: log}, nil
}

// natsConnectWait is how long backfill waits for a NATS server that does
// not answer yet; run retries for ever instead.
const natsConnectWait = 10 * time.Second

// waitConnected waits until nc is connected: connectNATS hands back a
// connection that keeps trying in the background when the server does not
// answer, and a one-off command should say so rather than fail later on
// its first request.
func waitConnected(ctx context.Context, nc *nats.Conn, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			last := ""
			if err := nc.LastError(); err != nil {
				last = " (last error: " + err.Error() + ")"
			}
			return fmt.Errorf("connect to NATS at --nats-url: no server answered within %s%s; check the URL and that the server runs", wait, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// isTerminal reports whether f is a terminal, where backfill draws a
// progress bar instead of printing lines.
func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// backfillConfig is backfill's configuration from run's settings and its
// own flags: --since in RFC 3339, which makes --where default to every
// row; checked whole.
func backfillConfig(run runConfig, where, since string) (relay.BackfillConfig, error) {
	cfg, err := snapshotConfig(run, where, since)
	if err != nil {
		return cfg, err
	}
	if !cfg.Since.IsZero() && strings.TrimSpace(cfg.Where) == "" {
		cfg.Where = "true" // every row created since then
	}
	return cfg, cfg.Validate()
}

// snapshotConfig is what backfill and replay read rows by: run's settings,
// --where, and --since in RFC 3339.
func snapshotConfig(run runConfig, where, since string) (relay.BackfillConfig, error) {
	cfg := relay.BackfillConfig{Config: run.relay, Where: where, Progress: os.Stderr, Terminal: isTerminal(os.Stderr)}
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return cfg, fmt.Errorf("--since %q is not a time: use RFC 3339, e.g. 2026-12-05T14:00:00Z", since)
		}
		cfg.Since = t
	}
	return cfg, nil
}

// parseOrderBy reads --order-by: column names separated by commas, exact
// (case-sensitive, no SQL quoting); as in --columns, a name holding a
// comma or a quote is written in double quotes, "" standing for one quote.
// Empty means the default order.
func parseOrderBy(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var cols []string
	for rest := s; ; {
		rest = strings.TrimLeft(rest, " ")
		var col string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; ; i++ {
				if i >= len(rest) {
					return nil, fmt.Errorf("--order-by %q: unterminated quoted column name", s)
				}
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(rest[i])
			}
			col, rest = b.String(), strings.TrimLeft(rest[i+1:], " ")
			if rest != "" && rest[0] != ',' {
				return nil, fmt.Errorf("--order-by %q: unexpected %q after the quoted name %q", s, rest[0], col)
			}
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			col, rest = strings.TrimRight(rest[:end], " "), rest[end:]
			if strings.Contains(col, `"`) {
				return nil, fmt.Errorf("--order-by %q: column name %q holds a quote: quote the whole name, e.g. \"My\"\"Col\"", s, col)
			}
		}
		if col == "" {
			return nil, fmt.Errorf("--order-by %q names an empty column: give column names separated by commas, e.g. --order-by SequenceNumber", s)
		}
		cols = append(cols, col)
		if rest == "" {
			return cols, nil
		}
		rest = rest[1:] // the comma
	}
}
