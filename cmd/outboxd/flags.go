package main

import (
	"fmt"
	"strings"

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
