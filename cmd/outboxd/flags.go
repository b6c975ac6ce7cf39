package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envName is the environment variable that sets a flag: OUTBOXD_ and the
// flag's name in upper case with dashes as underscores.
func envName(flag string) string {
	return "OUTBOXD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// documentEnv appends each flag's environment variable to its usage, so
// --help lists both names and the default for every setting.
func documentEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			f.Usage += fmt.Sprintf(" (env %s)", envName(f.Name))
		}
	})
}

// applyEnv sets every flag not given on the command line from its
// environment variable, so a flag wins over the environment, which wins over
// the default. A bad value names the variable and the value.
func applyEnv(cmd *cobra.Command, _ []string) error {
	var errs []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		value, ok := os.LookupEnv(envName(f.Name))
		if !ok || f.Changed || f.Name == "help" {
			return
		}
		if err := f.Value.Set(value); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not a valid --%s (%s): %v", envName(f.Name), value, f.Name, f.Value.Type(), err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
