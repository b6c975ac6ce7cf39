package cliconfig

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// unknownFlagRe finds the flag pflag did not know: "unknown flag: --name".
var unknownFlagRe = regexp.MustCompile(`^unknown flag: --([^=\s]+)`)

// FlagError is a cobra FlagErrorFunc: an unknown flag gets the nearest flag
// of the command ("did you mean --nats-url?"), or the commands that do take
// it when it belongs to another (`slot drop --retention`), so that a typo or
// a flag given to the wrong command says what was meant.
func FlagError(cmd *cobra.Command, err error) error {
	m := unknownFlagRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	name := m[1]
	var own []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			own = append(own, f.Name)
		}
	})
	if near := nearest(name, own); near != "" {
		return fmt.Errorf("%w: did you mean --%s? (%s --help lists its flags)", err, near, cmd.CommandPath())
	}
	if others := commandsWithFlag(cmd.Root(), name); len(others) > 0 {
		return fmt.Errorf("%w: --%s is a flag of %s, not of %s", err, name, joinAnd(others), cmd.CommandPath())
	}
	return fmt.Errorf("%w (%s --help lists its flags)", err, cmd.CommandPath())
}

// joinAnd joins items as a sentence does: "a", "a and b", "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// commandsWithFlag is the path of every command under root that takes the
// flag name.
func commandsWithFlag(root *cobra.Command, name string) []string {
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup(name); f != nil && !f.Hidden {
			paths = append(paths, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return paths
}

// envPrefix starts the name of every variable that sets a flag.
const envPrefix = "OUTBOXD_"

// checkEnvNames reports an OUTBOXD_* variable in environ that sets no flag
// of any command under root but is a likely typo of one that does
// (OUTBOXD_NATS_UR for OUTBOXD_NATS_URL): such a variable silently ignored
// is a setting silently at its default. A variable far from every setting
// is left alone: other tools may use the prefix.
func checkEnvNames(environ []string, root *cobra.Command) error {
	known, lineOnly := knownKeys(root)
	for _, kv := range environ {
		key, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(key, envPrefix) {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(key, envPrefix), "_", "-"))
		if name == ConfigFlag || slices.Contains(known, name) || slices.Contains(lineOnly, name) {
			continue
		}
		if near := nearest(name, known); near != "" {
			return fmt.Errorf("environment variable %s sets nothing: did you mean %s? (a setting's variable is OUTBOXD_ and its flag's name in capitals: --%s is %s)",
				key, EnvName(near), near, EnvName(near))
		}
	}
	return nil
}

// CheckEnv is checkEnvNames on the process's environment.
func CheckEnv(cmd *cobra.Command) error { return checkEnvNames(os.Environ(), cmd.Root()) }
