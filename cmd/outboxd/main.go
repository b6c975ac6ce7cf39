// Command outboxd relays transactional-outbox rows from PostgreSQL logical
// replication to NATS JetStream. It parses flags, environment and the
// config file into the configurations of package relay and wires the
// commands; docs/configuration.md lists every setting.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
)

func main() {
	// Durations in log lines read "400ms", not 400. zerolog keeps the
	// format in a package variable: it is set here, once, before any
	// logger exists.
	zerolog.DurationFieldFormat = zerolog.DurationFormatString
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outboxd: error:", err)
		os.Exit(1)
	}
}
