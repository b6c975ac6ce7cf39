package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "outboxd",
		Short: "Relay transactional-outbox rows from PostgreSQL to NATS JetStream",
		Long: `outboxd reads committed INSERTs on the outbox table through PostgreSQL logical
replication (pgoutput), publishes each row to a NATS JetStream stream in commit
order, and confirms the WAL position to PostgreSQL only after JetStream has
acknowledged it. Every flag can also be set with the environment variable named
in its help text, or with its name as a key in the YAML file given with --config;
outboxd config prints what is in effect and where each value came from.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newConfigCommand())
	root.AddCommand(newRunCommand(), newStatusCommand(), newSlotCommand(), newBackfillCommand(), newMigrateCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of outboxd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "outboxd", buildVersion())
			return nil
		},
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
