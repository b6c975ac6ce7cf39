// Command outboxd-demo runs outboxd end to end on a throwaway local
// PostgreSQL it starts itself (initdb, wal_level=logical, a temporary
// folder and a free port; needs the PostgreSQL server binaries) and an
// embedded NATS server with JetStream: it migrates, writes sample outbox
// events, streams them with the relay and prints each one as JetStream
// acknowledges it, announcing each step as it starts. Everything is removed
// on exit; with --keep, only on Ctrl-C, after printing how to watch the
// stream and write another event. scripts/demo runs it.
//
// It is a command of its own so that the production binary, outboxd,
// does not link nats-server.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outboxd-demo: error:", err)
		os.Exit(1)
	}
}

// run parses args and runs the demo; the log goes to logOut.
func run(ctx context.Context, args []string, out, logOut io.Writer) error {
	fs := pflag.NewFlagSet("outboxd-demo", pflag.ContinueOnError)
	fs.SetOutput(logOut)
	events := fs.Int("events", 20, "how many sample events to write (1-1000000)")
	logLevel := fs.String("log-level", "warn", "the relay's log level during the demo: debug, info, warn or error")
	keep := fs.Bool("keep", false, "after printing the events, keep PostgreSQL, NATS and outboxd running until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: outboxd-demo takes only --events, --log-level and --keep", fs.Arg(0))
	}
	if *events < 1 || *events > 1_000_000 {
		return fmt.Errorf("--events %d is out of range: use 1 to 1000000", *events)
	}
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil || *logLevel == "" {
		return fmt.Errorf("--log-level %q is not a level: use debug, info, warn or error", *logLevel)
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: logOut, TimeFormat: time.TimeOnly}).Level(level).With().Timestamp().Logger()
	return runDemo(ctx, out, demoOptions{events: *events, keep: *keep}, log)
}
