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
	ctx, exit := withExitLog(ctx)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		// Plain text first, as before the logs had the error: the tests
		// of internal/e2e still read it there (a JSON line escapes its
		// quotes). Then, once the command made its logger, the same error
		// as its last log line, in the log format.
		fmt.Fprintln(os.Stderr, "outboxd: error:", err)
		exit.logError(err)
		os.Exit(1)
	}
}
