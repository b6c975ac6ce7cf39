package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/internal/cliconfig"
)

// writeConfig writes a YAML config file for the test and returns its path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outboxd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFilePrecedence sets four settings at four depths: each is
// taken from the highest level that has it (flag > env > file > default).
func TestConfigFilePrecedence(t *testing.T) {
	path := writeConfig(t, `
slot: file_slot
publication: file_pub
table: file.outbox
max-in-flight: 512
shutdown-timeout: 5s
create-stream: true
`)
	env := map[string]string{"OUTBOXD_PUBLICATION": "env_pub", "OUTBOXD_TABLE": "env.outbox"}
	args := []string{"--config", path, "--table", "flag.outbox"}
	cfg, err := parseRun(t, args, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"stream (default)", cfg.Stream, "OUTBOX"},
		{"slot (file)", cfg.Slot, "file_slot"},
		{"publication (env over file)", cfg.Publication, "env_pub"},
		{"table (flag over env and file)", cfg.Table, "flag.outbox"},
		{"parsed table", cfg.relay.Table.Schema, "flag"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if cfg.MaxInFlight != 512 || cfg.ShutdownTimeout != 5*time.Second || !cfg.CreateStream {
		t.Errorf("typed values from the file: max-in-flight %d, shutdown-timeout %s, create-stream %v",
			cfg.MaxInFlight, cfg.ShutdownTimeout, cfg.CreateStream)
	}

	// OUTBOXD_CONFIG names the file when --config is not given, and
	// --config wins over it.
	cfg, err = parseRun(t, nil, map[string]string{"OUTBOXD_CONFIG": path})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Slot != "file_slot" {
		t.Errorf("OUTBOXD_CONFIG: slot %q, want file_slot", cfg.Slot)
	}
	other := writeConfig(t, "slot: other_slot\n")
	cfg, err = parseRun(t, []string{"--config", other}, map[string]string{"OUTBOXD_CONFIG": path})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Slot != "other_slot" {
		t.Errorf("--config over OUTBOXD_CONFIG: slot %q, want other_slot", cfg.Slot)
	}
}

// TestConfigFileSharedByCommands: one file serves every command; a key of
// another command is no error, and each command reads its own.
func TestConfigFileSharedByCommands(t *testing.T) {
	// max-in-flight 0 stops run at validation, after the file was read:
	// the error is about it, not about migrate's key.
	path := writeConfig(t, "max-in-flight: 0\nrole: outboxd_app\n")
	_, _, err := execute(t, newRootCommand(), []string{"run", "--config", path}, nil)
	checkErr(t, err, []string{"--max-in-flight 0 is out of range", `key "max-in-flight"`, path})
}

var badConfigFile = []struct {
	name    string
	yaml    string
	wantErr []string
}{
	{"unknown key, a typo", "max-inflight: 5\n", []string{`unknown key "max-inflight"`, `did you mean "max-in-flight"`}},
	{"unknown key, nested", "nats:\n  url: nats://x:4222\n", []string{`unknown key "nats.url"`, `did you mean "nats-url"`}},
	{"unknown key, underscores", "pg_url: postgres://x/y\n", []string{`unknown key "pg_url"`, `did you mean "pg-url"`}},
	{"unknown key, nothing near", "colour: blue\n", []string{`unknown key "colour"`, "flag names"}},
	{"config names a config", "config: other.yaml\n", []string{`key "config"`, "cannot name another"}},
	{"duration without a unit", "shutdown-timeout: 30\n", []string{`key "shutdown-timeout"`, `"30"`, "500ms, 30s or 5m"}},
	{"duration not a duration", "standby-retry: soon\n", []string{`key "standby-retry"`, `"soon"`, "500ms, 30s or 5m"}},
	{"int not a number", "max-in-flight: lots\n", []string{`key "max-in-flight"`, `"lots"`, "whole number"}},
	{"int with a fraction", "max-in-flight: 1.5\n", []string{`key "max-in-flight"`, `"1.5"`, "whole number"}},
	{"bool yes", "create-stream: maybe\n", []string{`key "create-stream"`, `"maybe"`, "true or false"}},
	{"list value", "slot:\n  - a\n  - b\n", []string{`key "slot"`, "list (2 items)"}},
	{"no value", "slot:\n", []string{`key "slot"`, "has no value"}},
	{"not a mapping", "- slot\n", []string{"is not a YAML mapping"}},
	{"bad YAML", "slot: [unclosed\n", []string{"is not a YAML mapping", "line"}},
	{"int out of range", "max-in-flight: 0\n", []string{"--max-in-flight 0 is out of range", "1 to 65536", `key "max-in-flight"`}},
	{"duration out of range", "status-interval: 5m\n", []string{"--status-interval 5m0s is out of range", "10ms to 1m", `key "status-interval"`}},
	{"malformed pg-url", "pg-url: postgres://u:pw@db:99999/app\n", []string{"--pg-url", "invalid port", `key "pg-url"`, "postgres://user@host:5432/dbname"}},
	{"malformed nats-url", "nats-url: nats://bad host:4222\n", []string{"--nats-url", `"nats://bad host:4222"`, `key "nats-url"`, "nats://host:4222"}},
	{"bad template", "subject: outbox.{event_type\n", []string{"--subject", `"outbox.{event_type"`, "unclosed", `key "subject"`}},
	{"bad checkpoint", "checkpoint: s3:bucket\n", []string{"--checkpoint", `"s3:bucket"`, `key "checkpoint"`}},
	{"bad log level", "log-level: loud\n", []string{"--log-level", `"loud"`, "debug, info, warn or error", `key "log-level"`}},
}

// TestBadConfigFile: every bad file names the file, the key, the value
// and what is accepted, and stops before anything connects.
func TestBadConfigFile(t *testing.T) {
	for _, tt := range badConfigFile {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.yaml)
			_, err := parseRun(t, []string{"--config", path}, nil)
			checkErr(t, err, append([]string{path}, tt.wantErr...))

			start := time.Now()
			_, _, err = execute(t, newRootCommand(), []string{"run", "--config", path}, nil)
			checkErr(t, err, append([]string{path}, tt.wantErr...))
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s: the error did not come from validation", d)
			}
		})
	}
}

func TestBadConfigPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string
	}{
		{"missing file", []string{"--config", missing}, nil, []string{"--config", missing, "does not exist"}},
		{"missing file from the environment", nil, map[string]string{"OUTBOXD_CONFIG": missing}, []string{missing, "does not exist"}},
		{"a folder", []string{"--config", t.TempDir()}, nil, []string{"--config", "is a folder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRun(t, tt.args, tt.env)
			checkErr(t, err, tt.wantErr)
		})
	}
}

// TestValidationNamesTheEnvironment: a value out of range names the
// variable it came from, not only the flag nobody typed.
func TestValidationNamesTheEnvironment(t *testing.T) {
	_, err := parseRun(t, nil, map[string]string{"OUTBOXD_MAX_IN_FLIGHT": "0"})
	checkErr(t, err, []string{"--max-in-flight 0 is out of range", "set by OUTBOXD_MAX_IN_FLIGHT"})
	_, err = parseRun(t, []string{"--max-in-flight", "0"}, nil)
	if err == nil || strings.Contains(err.Error(), "set by") {
		t.Errorf("a flag's error says where it was set: %v", err)
	}
}

// TestHangupRereadsConfigFile: SIGHUP's reload reads the file's log level
// again, unless the environment (or a flag) set it.
func TestHangupRereadsConfigFile(t *testing.T) {
	path := writeConfig(t, "log-level: warn\n")
	cfg, err := parseRun(t, []string{"--config", path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reread := func(want string, wantErr ...string) {
		t.Helper()
		got, err := cfg.reloadLogLevel()
		if len(wantErr) > 0 {
			checkErr(t, err, wantErr)
			return
		}
		if err != nil || got != want {
			t.Errorf("reload: %q, %v; want %q", got, err, want)
		}
	}
	reread("warn")
	if err := os.WriteFile(path, []byte("log-level: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reread("debug")
	if err := os.WriteFile(path, []byte("slot: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reread("info") // the key removed: the default
	if err := os.WriteFile(path, []byte("log-levl: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reread("", `unknown key "log-levl"`, `did you mean "log-level"`)

	if err := os.WriteFile(path, []byte("log-level: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseRun(t, []string{"--config", path}, map[string]string{"OUTBOXD_LOG_LEVEL": "error"})
	if err != nil {
		t.Fatal(err)
	}
	reread("error") // the environment wins, and it cannot change
}

// TestCommandLineOnly: a flag marked command-line only ignores its
// environment variable, is refused as a config file key, and works when
// typed.
func TestCommandLineOnly(t *testing.T) {
	newRoot := func(force *bool) *cobra.Command {
		root := &cobra.Command{Use: "outboxd", SilenceUsage: true, SilenceErrors: true}
		drop := &cobra.Command{Use: "drop", Args: cobra.NoArgs}
		drop.Flags().BoolVar(force, "force", false, "drop even while active")
		withRunSettings(drop, func(*cobra.Command, runConfig) error { return nil })
		cliconfig.CommandLineOnly(drop.Flags(), "force")
		root.AddCommand(drop)
		return root
	}
	var force bool
	if _, _, err := execute(t, newRoot(&force), []string{"drop"}, map[string]string{"OUTBOXD_FORCE": "true"}); err != nil || force {
		t.Errorf("OUTBOXD_FORCE=true: force %v, err %v; want false, nil", force, err)
	}
	path := writeConfig(t, "force: true\n")
	_, _, err := execute(t, newRoot(&force), []string{"drop", "--config", path}, nil)
	checkErr(t, err, []string{path, `key "force"`, "only be given on the command line"})
	if _, _, err := execute(t, newRoot(&force), []string{"drop", "--force"}, nil); err != nil || !force {
		t.Errorf("--force: force %v, err %v; want true, nil", force, err)
	}
	help, _, err := execute(t, newRoot(&force), []string{"drop", "--help"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if line := flagLine(t, help, "force"); !strings.Contains(line, "(command line only)") || strings.Contains(line, "OUTBOXD_FORCE") {
		t.Errorf("--help line of --force: %q", line)
	}
}

// TestDocumentEnvTwice: documenting a flag set again (as a command that
// adds flags after withRunSettings does) names each variable once.
func TestDocumentEnvTwice(t *testing.T) {
	cmd := withRunSettings(&cobra.Command{Use: "x"}, func(*cobra.Command, runConfig) error { return nil })
	cmd.Flags().Bool("json", false, "print JSON")
	cliconfig.DocumentEnv(cmd.Flags())
	for _, name := range []string{"slot", "json", "config"} {
		usage := cmd.Flags().Lookup(name).Usage
		if n := strings.Count(usage, "(env "+cliconfig.EnvName(name)+")"); n != 1 {
			t.Errorf("--%s usage names its variable %d times: %q", name, n, usage)
		}
	}
}
