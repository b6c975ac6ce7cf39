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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outboxd: error:", err)
		os.Exit(1)
	}
}
