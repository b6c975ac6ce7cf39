// Command outboxd-bench measures outboxd against the limits of PostgreSQL
// and JetStream on the same machine in one run, beside a polling relay.
// scripts/bench runs it; README "Measured" shows its output.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/cmd/outboxd-bench/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outboxd-bench:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	cfg := bench.DefaultConfig()
	var quick, keep bool
	var outDir, workDir, moduleDir string
	cmd := &cobra.Command{
		Use:   "outboxd-bench",
		Short: "Benchmark outboxd against pg_recvlogical, nats bench and a polling relay",
		Long: `Start a private PostgreSQL (wal_level=logical) and two nats-server processes (one
with sync_interval: always), or use the servers given, and measure on the same
backlogs: the decode limit (pg_recvlogical), the broker limit (nats bench js pub
async and fast), outboxd draining into JetStream and into the null sink, outboxd
into the durable server, a polling relay, and the latency of both relays at
steady offered loads. Prints Markdown tables and writes DATE.json and DATE.png
into --out.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if quick {
				applyQuick(&cfg, cmd.Flags())
			}
			return run(cmd.Context(), cfg, outDir, workDir, moduleDir, keep, strings.Join(os.Args, " "))
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	fs := cmd.Flags()
	fs.BoolVar(&quick, "quick", false, "small preset (one run, 20,000-event backlogs, 10 s of load): a look in a few minutes; flags given explicitly win")
	fs.IntSliceVar(&cfg.Sizes, "sizes", cfg.Sizes, "backlog sizes in events")
	fs.IntSliceVar(&cfg.Shapes, "shapes", cfg.Shapes, "rows per transaction of the backlogs")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs of each figure (the table shows medians)")
	fs.IntSliceVar(&cfg.Rates, "rates", cfg.Rates, "offered loads of the steady-state runs, events/s")
	fs.DurationVar(&cfg.LatencyFor, "latency-for", cfg.LatencyFor, "length of each steady-state run")
	fs.IntVar(&cfg.DurableSize, "durable-size", cfg.DurableSize, "backlog drained into the sync_interval: always server and the default one, per shape (0: none)")
	fs.IntVar(&cfg.PollingMaxSize, "polling-max-size", cfg.PollingMaxSize, "largest backlog the polling relay drains")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", cfg.PayloadBytes, "size of each event's JSON payload")
	fs.StringArrayVar(&cfg.OutboxdArgs, "outboxd-arg", nil, "argument added to every outboxd run, repeatable (e.g. --outboxd-arg=--publish-mode=async)")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", cfg.PollInterval, "polling relay: sleep between polls that found less than a batch")
	fs.IntVar(&cfg.PollBatch, "poll-batch", cfg.PollBatch, "polling relay: rows per poll (LIMIT)")
	fs.StringVar(&cfg.PGURL, "pg-url", "", "existing PostgreSQL (wal_level=logical, on this machine) instead of a private cluster")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "existing NATS server instead of starting one")
	fs.StringVar(&cfg.DurableNATSURL, "durable-nats-url", "", "existing NATS server with sync_interval: always instead of starting one")
	fs.StringVar(&cfg.Outboxd, "outboxd", "", "outboxd binary (default: built from --module)")
	fs.StringVar(&cfg.NATSServer, "nats-server", "", "nats-server binary (default: built from go.mod's nats-server/v2)")
	fs.StringVar(&cfg.NATSCLI, "nats-cli", "", "nats CLI (default: GOBIN/nats, else PATH, else go install natscli v0.5.0)")
	fs.StringVar(&cfg.PGRecvlogical, "pg-recvlogical", "", "pg_recvlogical (default: PATH, else /usr/lib/postgresql/*/bin)")
	fs.StringVar(&moduleDir, "module", ".", "the outboxd module's folder, to build outboxd and nats-server")
	fs.StringVar(&outDir, "out", "scripts/bench-results", "folder for DATE.json, DATE.md, DATE.png and the CPU profiles")
	fs.StringVar(&workDir, "work-dir", "", "folder for the servers' data and the logs (default: a temporary one)")
	fs.BoolVar(&keep, "keep", false, "keep --work-dir (its logs) after the run")
	cmd.AddCommand(newPollingRelayCommand(), newWALReaderCommand(), newSyncRelayCommand())
	return cmd
}

// applyQuick sets the quick preset's values where no flag was given.
func applyQuick(cfg *bench.Config, fs *pflag.FlagSet) {
	q := bench.QuickConfig()
	set := func(name string, apply func()) {
		if !fs.Changed(name) {
			apply()
		}
	}
	set("sizes", func() { cfg.Sizes = q.Sizes })
	set("runs", func() { cfg.Runs = q.Runs })
	set("latency-for", func() { cfg.LatencyFor = q.LatencyFor })
	set("durable-size", func() { cfg.DurableSize = q.DurableSize })
	set("polling-max-size", func() { cfg.PollingMaxSize = q.PollingMaxSize })
}

func run(ctx context.Context, cfg bench.Config, outDir, workDir, moduleDir string, keep bool, command string) (err error) {
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "outboxd-bench-"); err != nil {
			return err
		}
	}
	if !keep {
		defer func() { err = errors.Join(err, os.RemoveAll(workDir)) }()
	}
	if cfg.WorkDir, err = filepath.Abs(workDir); err != nil {
		return err
	}
	if cfg.Self, err = os.Executable(); err != nil {
		return err
	}
	stamp := time.Now().UTC().Format("2006-01-02T1504Z")
	cfg.ProfileDir = filepath.Join(outDir, stamp+"-profiles")
	for _, dir := range []string{outDir, cfg.ProfileDir, filepath.Join(cfg.WorkDir, "bin")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	cfg.Progress = os.Stderr
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := bench.BuildPrograms(ctx, &cfg, moduleDir, filepath.Join(cfg.WorkDir, "bin")); err != nil {
		return err
	}
	r, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	r.Command = command
	return write(r, outDir, stamp)
}

// write prints the tables and saves them, the JSON and the chart.
func write(r *bench.Results, outDir, stamp string) error {
	base := filepath.Join(outDir, stamp)
	var table strings.Builder
	r.WriteTable(&table)
	fmt.Print(table.String())
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(table.String()), 0o644); err != nil {
		return err
	}
	if err := bench.WriteChart(r, base+".png"); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s.json, %s.md and %s.png\n", base, base, base)
	return nil
}

func newPollingRelayCommand() *cobra.Command {
	r := bench.PollingRelay{Interval: 100 * time.Millisecond, Batch: 100}
	cmd := &cobra.Command{
		Use:    "polling-relay",
		Short:  "Run the polling relay the benchmark compares outboxd with, until SIGINT or SIGTERM",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.PGURL == "" || r.NATSURL == "" || r.Batch < 1 || r.Interval <= 0 {
				return fmt.Errorf("polling-relay needs --pg-url, --nats-url, --poll-batch ≥ 1 and --poll-interval > 0")
			}
			return r.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&r.PGURL, "pg-url", "", "PostgreSQL holding public.outbox_polling")
	cmd.Flags().StringVar(&r.NATSURL, "nats-url", "", "NATS server")
	cmd.Flags().DurationVar(&r.Interval, "poll-interval", r.Interval, "sleep between polls that found less than a batch")
	cmd.Flags().IntVar(&r.Batch, "poll-batch", r.Batch, "rows per poll")
	return cmd
}

func newSyncRelayCommand() *cobra.Command {
	var r bench.SyncRelay
	cmd := &cobra.Command{
		Use:    "sync-relay",
		Short:  "Run the synchronous relay the benchmark compares outboxd with, until SIGINT or SIGTERM",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.PGURL == "" || r.Slot == "" || r.Publication == "" || r.NATSURL == "" {
				return fmt.Errorf("sync-relay needs --pg-url, --slot, --publication and --nats-url")
			}
			return r.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&r.PGURL, "pg-url", "", "PostgreSQL to read")
	cmd.Flags().StringVar(&r.Slot, "slot", "", "logical slot (pgoutput) to read")
	cmd.Flags().StringVar(&r.Publication, "publication", "", "publication to read")
	cmd.Flags().StringVar(&r.NATSURL, "nats-url", "", "NATS server")
	return cmd
}

func newWALReaderCommand() *cobra.Command {
	var r bench.WALReader
	cmd := &cobra.Command{
		Use:    "wal-reader",
		Short:  "Read a slot with pgoutput, noting each commit's latency, until SIGINT or SIGTERM",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.PGURL == "" || r.Slot == "" || r.Publication == "" || r.Out == "" {
				return fmt.Errorf("wal-reader needs --pg-url, --slot, --publication and --out")
			}
			return r.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&r.PGURL, "pg-url", "", "PostgreSQL to read")
	cmd.Flags().StringVar(&r.Slot, "slot", "", "logical slot (pgoutput) to read")
	cmd.Flags().StringVar(&r.Publication, "publication", "", "publication to read")
	cmd.Flags().StringVar(&r.Out, "out", "", "file for the result (JSON)")
	cmd.Flags().StringVar(&r.Samples, "samples", "", "file for one line per transaction: commit time and latency, in µs")
	return cmd
}
