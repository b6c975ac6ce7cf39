package cliconfig

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// EnvName is the environment variable that sets a flag: OUTBOXD_ and the
// flag's name in upper case with dashes as underscores.
func EnvName(flag string) string {
	return "OUTBOXD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// DocumentEnv appends each flag's environment variable to its usage, so
// --help lists both names and the default for every setting. It may run
// again on a flag set (after withRunSettings added run's flags, say):
// a flag already documented, or command-line only, is left as it is.
func DocumentEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		suffix := fmt.Sprintf(" (env %s)", EnvName(f.Name))
		if f.Name != "help" && !IsCommandLineOnly(f) && !strings.HasSuffix(f.Usage, suffix) {
			f.Usage += suffix
		}
	})
}
