package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/internal/cliconfig"
	"github.com/outboxd/outboxd/internal/version"
)

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
		// --version prints what the version command prints.
		Version: version.Get().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// Every command: an unknown flag suggests the one meant.
	root.SetFlagErrorFunc(cliconfig.FlagError)
	root.AddCommand(newConfigCommand())
	root.AddCommand(newRunCommand(), newStatusCommand(), newSlotCommand(), newBackfillCommand(), newVerifyCommand(), newReplayCommand(), newMigrateCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version of outboxd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			fmt.Fprintln(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON (version, commit, date, goVersion)")
	// version reads no environment or config file: say so in the reference.
	cliconfig.CommandLineOnly(cmd.Flags(), "json")
	return cmd
}
