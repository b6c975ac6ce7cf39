// Package cliconfig gives a cobra command tree its settings from three
// sources besides the defaults, with flag > environment variable > config
// file: OUTBOXD_* variables, and a YAML file (--config) whose keys are the
// flags' names. It records where each value came from, says so in errors,
// documents the variables in --help, and suggests the nearest key for a
// misspelt one.
package cliconfig

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ConfigFlag names the YAML file of settings. Its own value comes from the
// command line or OUTBOXD_CONFIG, never from a file.
const ConfigFlag = "config"

// Where a setting's value came from, highest precedence first.
const (
	SourceFlag    = "flag"
	SourceEnv     = "env"
	SourceFile    = "file"
	SourceDefault = "default"
)

// sourceAnnotation is the pflag annotation Apply records each
// flag's source under, so that `outboxd config` and error messages can
// say where a value came from without state outside the command.
const sourceAnnotation = "outboxd/source"

// commandLineOnlyAnnotation marks a flag that neither an environment
// variable nor the config file may set: an action's safety switch (a
// forced drop, say) must be typed each time, never inherited.
const commandLineOnlyAnnotation = "outboxd/command-line-only"

// CommandLineOnly marks the named flags of fs as settable only on the
// command line, and says so in their usage instead of an environment
// variable. Call it after DocumentEnv (withRunSettings calls that).
func CommandLineOnly(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("BUG: CommandLineOnly: no flag --" + name)
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[commandLineOnlyAnnotation] = []string{"true"}
		f.Usage = strings.TrimSuffix(f.Usage, fmt.Sprintf(" (env %s)", EnvName(f.Name))) + " (command line only)"
	}
}

func IsCommandLineOnly(f *pflag.Flag) bool { return len(f.Annotations[commandLineOnlyAnnotation]) > 0 }

// AddConfigFlag adds --config to fs.
func AddConfigFlag(fs *pflag.FlagSet) {
	fs.String(ConfigFlag, "", "YAML file of settings: each key is a flag name without the dashes (pg-url: postgres://..., max-in-flight: 512); flags and environment variables win over it")
}

// Apply sets every flag not given on the command line from its
// environment variable or, failing that, from its key in the --config
// file, so flag > environment > file > default. It records each flag's
// source. Bad values are all reported, each naming the variable or the
// file and key, the value and what is accepted; a misspelt OUTBOXD_*
// variable is an error that names the one meant.
func Apply(cmd *cobra.Command, _ []string) error {
	if err := CheckEnv(cmd); err != nil {
		return err
	}
	fs := cmd.Flags()
	path, err := configPath(fs)
	if err != nil {
		return err
	}
	fileValues, err := readConfigFile(path, cmd.Root())
	if err != nil {
		return err
	}
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == ConfigFlag {
			return
		}
		envValue, inEnv := os.LookupEnv(EnvName(f.Name))
		fileValue, inFile := fileValues[f.Name]
		switch {
		case f.Changed:
			setSource(f, SourceFlag)
		case IsCommandLineOnly(f):
			setSource(f, SourceDefault)
		case inEnv:
			setSource(f, SourceEnv)
			if err := f.Value.Set(envValue); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q is not a valid --%s: %s", EnvName(f.Name), envValue, f.Name, accepted(f, err)))
			}
		case inFile:
			setSource(f, SourceFile)
			if err := f.Value.Set(fileValue); err != nil {
				errs = append(errs, fmt.Sprintf("config file %s: key %q: %q is not valid: %s", path, f.Name, fileValue, accepted(f, err)))
			}
		default:
			setSource(f, SourceDefault)
		}
	})
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// configPath is the --config file's path (or OUTBOXD_CONFIG's), "" for none.
func configPath(fs *pflag.FlagSet) (string, error) {
	f := fs.Lookup(ConfigFlag)
	if f == nil {
		return "", nil // a command that takes no file
	}
	if f.Changed {
		setSource(f, SourceFlag)
		return f.Value.String(), nil
	}
	if v, ok := os.LookupEnv(EnvName(ConfigFlag)); ok {
		setSource(f, SourceEnv)
		return v, f.Value.Set(v)
	}
	setSource(f, SourceDefault)
	return "", nil
}

// readConfigFile reads the YAML file at path (none if "") into the text of
// each value, as a flag would take it. A key that is no flag of any
// command is an error that suggests the nearest one: a misspelt key
// silently ignored is a setting silently at its default.
func readConfigFile(path string, root *cobra.Command) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	known, lineOnly := knownKeys(root)
	if st, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--config %q does not exist: give the path of a YAML file of settings", path)
		}
		return nil, fmt.Errorf("--config %q: %w", path, err)
	} else if st.IsDir() {
		return nil, fmt.Errorf("--config %q is a folder: give the path of a YAML file of settings", path)
	}
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config file %s is not a YAML mapping of settings: %v", path, err)
	}
	values := map[string]string{}
	keys := k.Keys()
	sort.Strings(keys)
	for _, key := range keys {
		if key == ConfigFlag {
			return nil, fmt.Errorf("config file %s: key %q: a config file cannot name another; give one --config", path, key)
		}
		if slices.Contains(lineOnly, key) {
			return nil, fmt.Errorf("config file %s: key %q: --%s can only be given on the command line; remove the key", path, key, key)
		}
		if !slices.Contains(known, key) {
			hint := "the keys are the flag names of `outboxd run --help` without the dashes"
			if near := nearest(key, known); near != "" {
				hint = fmt.Sprintf("did you mean %q? (%s)", near, hint)
			}
			return nil, fmt.Errorf("config file %s: unknown key %q: %s", path, key, hint)
		}
		text, err := scalarText(k.Get(key))
		if err != nil {
			return nil, fmt.Errorf("config file %s: key %q: %v", path, key, err)
		}
		values[key] = text
	}
	return values, nil
}

// scalarText is a YAML scalar as the text a flag parses. YAML reads 512 as
// a number and "512" as a string; a flag takes either.
func scalarText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case time.Time:
		return "", fmt.Errorf("%s is a timestamp, not a setting: quote it if it is meant as text", v.Format(time.RFC3339))
	case nil:
		return "", errors.New("has no value: give one, or remove the key to use the default (\"\" for an empty text)")
	case []any:
		return "", fmt.Errorf("is a list (%d items): give one value (a comma-separated text where a flag takes several)", len(v))
	}
	return "", fmt.Errorf("is a %T: give a single text, number or true/false", v)
}

// accepted explains what flag f accepts, after err from its Set.
func accepted(f *pflag.Flag, err error) string {
	switch f.Value.Type() {
	case "duration":
		return "use a number with a unit, e.g. 500ms, 30s or 5m"
	case "int":
		return "use a whole number"
	case "bool":
		return "use true or false"
	}
	return err.Error()
}

func setSource(f *pflag.Flag, source string) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[sourceAnnotation] = []string{source}
}

// SourceOf is where Apply took f's value from.
func SourceOf(f *pflag.Flag) string {
	if s := f.Annotations[sourceAnnotation]; len(s) == 1 {
		return s[0]
	}
	if f.Changed {
		return SourceFlag
	}
	return SourceDefault
}

// knownKeys is every flag name of every command under root that a config
// file may set (one file may serve run, migrate and the rest, each reading
// its own keys), and the names of the command-line-only flags.
func knownKeys(root *cobra.Command) (known, lineOnly []string) {
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && f.Name != ConfigFlag {
				seen[f.Name] = seen[f.Name] || !IsCommandLineOnly(f)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for k, fileOK := range seen {
		if fileOK {
			known = append(known, k)
		} else {
			lineOnly = append(lineOnly, k)
		}
	}
	sort.Strings(known)
	sort.Strings(lineOnly)
	return known, lineOnly
}

// nearest is the known key closest to key in edit distance, if it is close
// enough to be a likely typo ("" otherwise).
func nearest(key string, known []string) string {
	best, bestDist := "", max(2, len(key)/3)+1
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, with '.' and
// '_' counted as '-' so nats.url and nats_url find nats-url.
func editDistance(a, b string) int {
	return levenshtein.ComputeDistance(strings.NewReplacer(".", "-", "_", "-").Replace(a), b)
}

// FileLogLevel returns what re-reads the log level from the --config file
// for SIGHUP, or nil when there is no file or a flag or environment
// variable sets the level. A key removed from the file means the default.
func FileLogLevel(cmd *cobra.Command) func() (string, error) {
	path, level := cmd.Flags().Lookup(ConfigFlag), cmd.Flags().Lookup("log-level")
	if path == nil || level == nil || path.Value.String() == "" {
		return nil
	}
	if s := SourceOf(level); s != SourceFile && s != SourceDefault {
		return nil
	}
	file, root := path.Value.String(), cmd.Root()
	return func() (string, error) {
		values, err := readConfigFile(file, root)
		if err != nil {
			return "", err
		}
		if v, ok := values[level.Name]; ok {
			return v, nil
		}
		return level.DefValue, nil
	}
}

// flagInErrorRe finds the flag a validation error is about: its messages
// start with the flag's name ("--max-in-flight 0 is out of range ...").
var flagInErrorRe = regexp.MustCompile(`^--([a-z0-9-]+)`)

// WithSource adds to a validation error where the bad value came from
// when that was not the command line: the environment variable, or the
// key and the config file. The flag's name alone would send the reader
// looking for a flag that was never typed.
func WithSource(fs *pflag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	m := flagInErrorRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	f := fs.Lookup(m[1])
	if f == nil {
		return err
	}
	switch SourceOf(f) {
	case SourceEnv:
		return fmt.Errorf("%w (set by %s)", err, EnvName(f.Name))
	case SourceFile:
		return fmt.Errorf("%w (set by key %q in config file %s)", err, f.Name, fs.Lookup(ConfigFlag).Value.String())
	}
	return err
}
