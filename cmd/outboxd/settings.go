package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/internal/cliconfig"
)

// runSettingsAnnotation marks a command that takes run's settings.
const runSettingsAnnotation = "outboxd/run-settings"

// withRunSettings gives cmd run's settings (flags, environment variables,
// config file, validation) and calls run with them parsed. The commands
// that inspect or repair what a relay uses take them too, so one set of
// flags or variables points them all at the same database, slot, stream and
// checkpoint. Given take, cmd takes only those of run's settings (a slot
// command needs no NATS): on its command line the others are unknown flags,
// and their variables and config keys leave it alone; without take it
// takes all of them.
func withRunSettings(cmd *cobra.Command, run func(cmd *cobra.Command, cfg runConfig) error, take ...string) *cobra.Command {
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
	all := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	cfg.addFlags(all)
	all.VisitAll(func(f *pflag.Flag) {
		if len(take) == 0 || slices.Contains(take, f.Name) {
			cmd.Flags().AddFlag(f)
		}
	})
	for _, name := range take {
		if all.Lookup(name) == nil {
			panic("BUG: withRunSettings: run has no flag --" + name)
		}
	}
	cliconfig.AddConfigFlag(cmd.Flags())
	cliconfig.DocumentEnv(cmd.Flags())
	cmd.SetUsageFunc(groupedUsage)
	return cmd
}

// runFlagsExcept is the names of run's flags less those named.
func runFlagsExcept(names ...string) []string {
	cfg := defaultRunConfig()
	all := pflag.NewFlagSet("run", pflag.ContinueOnError)
	cfg.addFlags(all)
	var take []string
	all.VisitAll(func(f *pflag.Flag) {
		if !slices.Contains(names, f.Name) {
			take = append(take, f.Name)
		}
	})
	return take
}

// flagGroup is a titled group of run's flags in --help.
type flagGroup struct {
	title string
	flags []string
}

// runFlagGroups orders run's --help by what a flag is about; a flag in no
// group (a command's own) is listed under "Other".
var runFlagGroups = []flagGroup{
	{"PostgreSQL", []string{"pg-url", "slot", "publication", "table", "messages", "allow-gap",
		"slot-failover", "pg-streaming", "spool-dir", "read-linger", "status-interval", "heartbeat-interval"}},
	{"NATS", []string{"nats-url", "nats-context", "nats-creds", "nats-nkey", "nats-user", "nats-password",
		"nats-token", "nats-tls-ca", "nats-tls-cert", "nats-tls-key", "nats-monitor-url"}},
	{"Stream, subjects and mapping", []string{"stream", "create-stream", "subject", "columns", "headers-format", "id-prefix", "null-payload", "dead-letter"}},
	{"Delivery", []string{"publish-mode", "atomic-transactions", "publish-linger", "max-in-flight", "exclusive-stream",
		"checkpoint", "checkpoint-interval", "shutdown-timeout"}},
	{"Retention", []string{"retention", "retention-batch", "retention-pause", "retention-wait", "created-at-zone"}},
	{"Operations", []string{"config", "log-level", "log-payloads", "metrics-addr", "standby-retry", "stream-check-interval"}},
}

// groupedFlagUsages is cmd's flags under the titles of runFlagGroups, each
// group aligned on its own; hidden flags are left out.
func groupedFlagUsages(fs *pflag.FlagSet) []flagGroup {
	placed := map[string]bool{}
	var groups []flagGroup
	add := func(title string, names []string) {
		var shown []string
		for _, name := range names {
			if f := fs.Lookup(name); f != nil && !f.Hidden && !placed[name] {
				shown = append(shown, name)
				placed[name] = true
			}
		}
		if len(shown) > 0 {
			groups = append(groups, flagGroup{title, shown})
		}
	}
	for _, g := range runFlagGroups {
		add(g.title, g.flags)
	}
	var rest []string
	fs.VisitAll(func(f *pflag.Flag) { rest = append(rest, f.Name) })
	add("Other", rest)
	return groups
}

// groupedUsage is the usage of a command that takes run's settings: its
// examples, then its flags by group.
func groupedUsage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	for _, g := range groupedFlagUsages(c.Flags()) {
		group := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		for _, name := range g.flags {
			group.AddFlag(c.Flags().Lookup(name))
		}
		fmt.Fprintf(w, "\n%s flags:\n%s", g.title, group.FlagUsages())
	}
	fmt.Fprintf(w, "\nEvery flag is also an environment variable (shown) and a key of --config; docs/configuration.md lists them all.\n")
	return nil
}
