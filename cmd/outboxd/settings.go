package main

import (
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/internal/cliconfig"
)

// runSettingsAnnotation marks a command that takes run's settings.
const runSettingsAnnotation = "outboxd/run-settings"

// withRunSettings gives cmd every setting of `outboxd run` (flags,
// environment variables, config file, validation) and calls run with them parsed. The
// commands that inspect or repair what a relay uses (status, slot) take
// them too, so one set of flags or variables points them all at the same
// database, slot, stream and checkpoint.
func withRunSettings(cmd *cobra.Command, run func(cmd *cobra.Command, cfg runConfig) error) *cobra.Command {
	cfg := defaultRunConfig()
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[runSettingsAnnotation] = "true"
	cmd.PreRunE = cliconfig.Apply
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.validate(); err != nil {
			return cliconfig.WithSource(cmd.Flags(), err)
		}
		cfg.levelFromFile = cliconfig.FileLogLevel(cmd)
		// Checks against the database (a placeholder naming no column)
		// name the flag too: say where its value came from.
		return cliconfig.WithSource(cmd.Flags(), run(cmd, cfg))
	}
	cfg.addFlags(cmd.Flags())
	cliconfig.AddConfigFlag(cmd.Flags())
	cliconfig.DocumentEnv(cmd.Flags())
	return cmd
}
