package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/internal/cliconfig"
	"github.com/outboxd/outboxd/internal/version"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/replication"
)

// clearEnv unsets every OUTBOXD_ variable for the test, so the caller's
// environment cannot change what the test sees. t.Setenv restores them.
func clearEnv(t testing.TB) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "OUTBOXD_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

// execute runs cmd with args and env and returns stdout, stderr and the error.
// A deadline keeps a test from hanging if validation ever stops failing early
// and the command tries to connect.
func execute(t testing.TB, cmd *cobra.Command, args []string, env map[string]string) (string, string, error) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

// parseRun runs `outboxd run` with args and env up to the point where it
// would connect, and returns the configuration it would have run with.
func parseRun(t testing.TB, args []string, env map[string]string) (runConfig, error) {
	t.Helper()
	var got *runConfig
	root := &cobra.Command{Use: "outboxd", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newRunCommandWith(func(_ context.Context, cfg runConfig) error {
		got = &cfg
		return nil
	}))
	_, _, err := execute(t, root, append([]string{"run"}, args...), env)
	if err != nil {
		if got != nil {
			t.Fatalf("BUG in test: run was reached and an error returned: %v", err)
		}
		return runConfig{}, err
	}
	if got == nil {
		t.Fatal("run was not reached and no error returned")
	}
	return *got, nil
}

// flagLine returns the --help line that documents flag name.
func flagLine(t testing.TB, help, name string) string {
	t.Helper()
	for _, line := range strings.Split(help, "\n") {
		// pflag indents a flag's line by six spaces, or two and its
		// shorthand ("  -h, --help"); examples name flags too, but
		// indented otherwise.
		flag, ok := strings.CutPrefix(line, "      ")
		if !ok && len(line) > 6 && strings.HasPrefix(line, "  -") && line[4:6] == ", " {
			flag, ok = line[6:], true
		}
		if ok && (strings.HasPrefix(flag, "--"+name+" ") || flag == "--"+name) {
			return line
		}
	}
	t.Fatalf("--help has no line for --%s:\n%s", name, help)
	return ""
}

// defaultText is how pflag shows a flag's default in --help, or "" when it
// shows none (zero values).
func defaultText(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]":
		return ""
	}
	if f.Value.Type() == "string" {
		return `(default "` + f.DefValue + `")`
	}
	return "(default " + f.DefValue + ")"
}

func TestHelpShowsEnvAndDefaults(t *testing.T) {
	for _, sub := range []string{"run", "migrate"} {
		t.Run(sub, func(t *testing.T) {
			help, _, err := execute(t, newRootCommand(), []string{sub, "--help"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cmd, _, err := newRootCommand().Find([]string{sub})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" {
					return
				}
				if f.Hidden {
					if strings.Contains(help, "--"+f.Name+" ") {
						t.Errorf("hidden --%s is listed in --help", f.Name)
					}
					return
				}
				n++
				line := flagLine(t, help, f.Name)
				if want := "(env " + cliconfig.EnvName(f.Name) + ")"; !strings.Contains(line, want) {
					t.Errorf("--%s: help line lacks %s:\n%s", f.Name, want, line)
				}
				if want := defaultText(f); want != "" && !strings.Contains(line, want) {
					t.Errorf("--%s: help line lacks %s:\n%s", f.Name, want, line)
				}
			})
			if n == 0 {
				t.Errorf("%s has no flags", sub)
			}
		})
	}
}

// TestRunContractFlags pins the flags and defaults that users and scripts
// rely on.
func TestRunContractFlags(t *testing.T) {
	help, _, err := execute(t, newRootCommand(), []string{"run", "--help"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flag, env, def string // def "" means no default is shown
	}{
		{"pg-url", "OUTBOXD_PG_URL", `"postgres://postgres@127.0.0.1:5432/postgres"`},
		{"nats-url", "OUTBOXD_NATS_URL", `"nats://127.0.0.1:4222"`},
		{"stream", "OUTBOXD_STREAM", `"OUTBOX"`},
		{"slot", "OUTBOXD_SLOT", `"outboxd"`},
		{"publication", "OUTBOXD_PUBLICATION", `"outboxd"`},
		{"table", "OUTBOXD_TABLE", `"public.outbox"`},
		{"columns", "OUTBOXD_COLUMNS", `"id=id,aggregate_type=aggregate_type,aggregate_id=aggregate_id,event_type=event_type,payload=payload,headers=headers,created_at=created_at"`},
		{"subject", "OUTBOXD_SUBJECT", `"outbox.{aggregate_type}.{event_type|tokens}"`},
		{"checkpoint", "OUTBOXD_CHECKPOINT", `"kv:outboxd"`},
		{"create-stream", "OUTBOXD_CREATE_STREAM", ""},
		{"messages", "OUTBOXD_MESSAGES", "true"},
		{"metrics-addr", "OUTBOXD_METRICS_ADDR", `"127.0.0.1:9187"`},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			line := flagLine(t, help, tt.flag)
			if !strings.Contains(line, "(env "+tt.env+")") {
				t.Errorf("help line lacks (env %s):\n%s", tt.env, line)
			}
			if tt.def != "" && !strings.Contains(line, "(default "+tt.def+")") {
				t.Errorf("help line lacks (default %s):\n%s", tt.def, line)
			}
			if tt.def == "" && strings.Contains(line, "(default ") {
				t.Errorf("help line shows a default, want none:\n%s", line)
			}
		})
	}
	// The parsed defaults, not only the help text.
	cfg, err := parseRun(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultRunConfig()
	if cfg.PGURL != want.PGURL || cfg.NATSURL != want.NATSURL || cfg.Stream != "OUTBOX" || cfg.Slot != "outboxd" ||
		cfg.Publication != "outboxd" || cfg.Table != "public.outbox" ||
		cfg.Subject != "outbox.{aggregate_type}.{event_type|tokens}" || cfg.Checkpoint != "kv:outboxd" || cfg.CreateStream {
		t.Errorf("defaults: %+v", cfg)
	}
	if !cfg.Messages {
		t.Error("--messages is off by default, want on")
	}
	if cfg, err := parseRun(t, []string{"--table", ""}, nil); err != nil || cfg.relay.Table != (replication.Table{}) {
		t.Errorf("--table '': table %+v, err %v; want no table", cfg.relay.Table, err)
	}
	if cfg.relay.Table.Schema != "public" || cfg.relay.Table.Name != "outbox" || cfg.relay.Checkpoint.Kind != "kv" ||
		cfg.relay.Checkpoint.Bucket != "outboxd" || cfg.relay.Subject == nil {
		t.Errorf("parsed forms of the defaults: table %+v, location %+v, template %v", cfg.relay.Table, cfg.relay.Checkpoint, cfg.relay.Subject)
	}
}

// TestVersion: version and --version print the same line, with version,
// commit, date and Go version; --json prints the fields for scripts.
func TestVersion(t *testing.T) {
	want := version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := execute(t, newRootCommand(), args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out != want || !strings.HasPrefix(out, "outboxd ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v printed %q, want %q", args, out, want)
		}
	}
	out, _, err := execute(t, newRootCommand(), []string{"version", "--json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info version.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil || info != version.Get() {
		t.Errorf("version --json printed %q (%v), want %+v", out, err, version.Get())
	}
	if _, _, err := execute(t, newRootCommand(), []string{"version", "extra"}, nil); err == nil {
		t.Error("version with an argument: no error")
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(runConfig) any
		val  any
	}{
		{"stream default", nil, nil, func(c runConfig) any { return c.Stream }, "OUTBOX"},
		{"stream env", nil, map[string]string{"OUTBOXD_STREAM": "FROM_ENV"}, func(c runConfig) any { return c.Stream }, "FROM_ENV"},
		{"stream flag over env", []string{"--stream", "FROM_FLAG"}, map[string]string{"OUTBOXD_STREAM": "FROM_ENV"},
			func(c runConfig) any { return c.Stream }, "FROM_FLAG"},
		{"stream flag", []string{"--stream=FROM_FLAG"}, nil, func(c runConfig) any { return c.Stream }, "FROM_FLAG"},
		{"max-in-flight env", nil, map[string]string{"OUTBOXD_MAX_IN_FLIGHT": "10"},
			func(c runConfig) any { return c.MaxInFlight }, 10},
		{"max-in-flight flag over env", []string{"--max-in-flight", "20"}, map[string]string{"OUTBOXD_MAX_IN_FLIGHT": "10"},
			func(c runConfig) any { return c.MaxInFlight }, 20},
		{"publish-linger default", nil, nil, func(c runConfig) any { return c.PublishLinger }, time.Millisecond},
		{"publish-linger env", nil, map[string]string{"OUTBOXD_PUBLISH_LINGER": "5ms"},
			func(c runConfig) any { return c.PublishLinger }, 5 * time.Millisecond},
		{"read-linger default", nil, nil, func(c runConfig) any { return c.ReadLinger }, time.Duration(0)},
		{"read-linger off by env", nil, map[string]string{"OUTBOXD_READ_LINGER": "0s"},
			func(c runConfig) any { return c.ReadLinger }, time.Duration(0)},
		{"create-stream env", nil, map[string]string{"OUTBOXD_CREATE_STREAM": "true"},
			func(c runConfig) any { return c.CreateStream }, true},
		{"create-stream flag over env", []string{"--create-stream=false"}, map[string]string{"OUTBOXD_CREATE_STREAM": "true"},
			func(c runConfig) any { return c.CreateStream }, false},
		{"shutdown-timeout env", nil, map[string]string{"OUTBOXD_SHUTDOWN_TIMEOUT": "5s"},
			func(c runConfig) any { return c.ShutdownTimeout }, 5 * time.Second},
		{"shutdown-timeout flag over env", []string{"--shutdown-timeout", "7s"}, map[string]string{"OUTBOXD_SHUTDOWN_TIMEOUT": "5s"},
			func(c runConfig) any { return c.ShutdownTimeout }, 7 * time.Second},
		{"bad env ignored when the flag is given", []string{"--shutdown-timeout", "7s"}, map[string]string{"OUTBOXD_SHUTDOWN_TIMEOUT": "abc"},
			func(c runConfig) any { return c.ShutdownTimeout }, 7 * time.Second},
		{"table env is parsed", nil, map[string]string{"OUTBOXD_TABLE": `"Sales"."Outbox"`},
			func(c runConfig) any { return c.relay.Table.Schema + "|" + c.relay.Table.Name }, "Sales|Outbox"},
		{"columns default", nil, nil, func(c runConfig) any { return c.relay.Columns }, decoder.DefaultColumns()},
		{"columns env is parsed", nil, map[string]string{"OUTBOXD_COLUMNS": "id=Id,event_type=TypeName,payload=Content"},
			func(c runConfig) any { return c.relay.Columns }, decoder.Columns{ID: "Id", EventType: "TypeName", Payload: "Content"}},
		{"columns flag over env", []string{"--columns", "id=Id,payload=Payload"}, map[string]string{"OUTBOXD_COLUMNS": "id=x,payload=y"},
			func(c runConfig) any { return c.relay.Columns }, decoder.Columns{ID: "Id", Payload: "Payload"}},
		{"columns with JSON paths", []string{"--columns", `id=Id,payload="Content"->Value,headers=Content->Headers`}, nil,
			func(c runConfig) any { return c.relay.Columns.String() }, "id=Id,payload=Content->Value,headers=Content->Headers"},
		{"id-prefix default", nil, nil, func(c runConfig) any { return c.relay.IDPrefix }, ""},
		{"id-prefix env", nil, map[string]string{"OUTBOXD_ID_PREFIX": "db1:"}, func(c runConfig) any { return c.relay.IDPrefix }, "db1:"},
		{"null-payload default", nil, nil, func(c runConfig) any { return c.relay.NullPayload }, relay.NullPayloadStop},
		{"null-payload flag", []string{"--null-payload", "empty"}, nil, func(c runConfig) any { return c.relay.NullPayload }, relay.NullPayloadEmpty},
		{"checkpoint env is parsed", nil, map[string]string{"OUTBOXD_CHECKPOINT": "file:/tmp/x/../ckpt"},
			func(c runConfig) any { return c.relay.Checkpoint.Kind + "|" + c.relay.Checkpoint.Path }, "file|/tmp/ckpt"},
		{"nats-url list with spaces", []string{"--nats-url", "nats://a:4222, nats://b:4222"}, nil,
			func(c runConfig) any { return c.NATSURL }, "nats://a:4222, nats://b:4222"},
		{"env of another command is not read", nil, map[string]string{"OUTBOXD_EVENTS": "5"},
			func(c runConfig) any { return c.Stream }, "OUTBOX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseRun(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.want(cfg); !reflect.DeepEqual(got, tt.val) {
				t.Errorf("got %v, want %v", got, tt.val)
			}
		})
	}
}

var badRunInput = []struct {
	name    string
	args    []string
	env     map[string]string
	wantErr []string // substrings that must all appear
}{
	{name: "columns unknown field", args: []string{"--columns", "id=Id,kind=Topic,payload=P"},
		wantErr: []string{"--columns", `unknown field "kind"`, "event_type"}},
	{name: "columns env without id", env: map[string]string{"OUTBOXD_COLUMNS": "payload=P"},
		wantErr: []string{"--columns", "field id is not mapped"}},
	{name: "columns path on id", args: []string{"--columns", "id=Content->Id,payload=P"},
		wantErr: []string{"--columns", "field id=Content->Id", "supported for payload and headers only"}},
	{name: "columns ->>", args: []string{"--columns", "id=Id,payload=Content->>Value"},
		wantErr: []string{"--columns", "->> is not a JSON path step here: use ->"}},
	{name: "null-payload unknown", args: []string{"--null-payload", "drop"},
		wantErr: []string{`--null-payload "drop" is not a policy: use stop, skip or empty`}},
	{name: "id-prefix with a space", env: map[string]string{"OUTBOXD_ID_PREFIX": "db 1"},
		wantErr: []string{"OUTBOXD_ID_PREFIX", `--id-prefix "db 1"`, "without white space"}},
	{name: "env duration", env: map[string]string{"OUTBOXD_SHUTDOWN_TIMEOUT": "abc"},
		wantErr: []string{"OUTBOXD_SHUTDOWN_TIMEOUT", `"abc"`, "--shutdown-timeout"}},
	{name: "env bool", env: map[string]string{"OUTBOXD_CREATE_STREAM": "maybe"},
		wantErr: []string{"OUTBOXD_CREATE_STREAM", `"maybe"`, "--create-stream"}},
	{name: "env int", env: map[string]string{"OUTBOXD_MAX_IN_FLIGHT": "lots"},
		wantErr: []string{"OUTBOXD_MAX_IN_FLIGHT", `"lots"`, "--max-in-flight"}},
	{name: "env valid syntax, bad value", env: map[string]string{"OUTBOXD_MAX_IN_FLIGHT": "0"},
		wantErr: []string{"--max-in-flight", "0", "1 to 65536"}},
	{name: "checkpoint no kind", args: []string{"--checkpoint", "nowhere"},
		wantErr: []string{"--checkpoint", `"nowhere"`}},
	{name: "checkpoint unknown kind", args: []string{"--checkpoint", "s3:bucket"},
		wantErr: []string{"--checkpoint", `"s3:bucket"`}},
	{name: "checkpoint bad bucket", args: []string{"--checkpoint", "kv:a.b"},
		wantErr: []string{"--checkpoint", `"kv:a.b"`}},
	{name: "checkpoint empty path", args: []string{"--checkpoint", "file:"},
		wantErr: []string{"--checkpoint", `"file:"`}},
	{name: "subject unclosed", args: []string{"--subject", "outbox.{event_type"},
		wantErr: []string{"--subject", `"outbox.{event_type"`}},
	{name: "subject wildcard", args: []string{"--subject", "outbox.*.{event_type}"},
		wantErr: []string{"--subject", `"outbox.*.{event_type}"`}},
	{name: "table unterminated quote", args: []string{"--table", `"public.outbox`},
		wantErr: []string{"--table", `"\"public.outbox"`, "unterminated"}},
	{name: "table three parts", args: []string{"--table", "db.public.outbox"},
		wantErr: []string{"--table", `"db.public.outbox"`, "3"}},
	{name: "no table and no messages", args: []string{"--table", "", "--messages=false"},
		wantErr: []string{"--table is empty", "--messages=false", "publish nothing"}},
	{name: "messages not a bool", env: map[string]string{"OUTBOXD_MESSAGES": "sometimes"},
		wantErr: []string{"OUTBOXD_MESSAGES", `"sometimes"`, "--messages"}},
	{name: "max-in-flight 0", args: []string{"--max-in-flight", "0"},
		wantErr: []string{"--max-in-flight", "0", "1 to 65536"}},
	{name: "max-in-flight 70000", args: []string{"--max-in-flight", "70000"},
		wantErr: []string{"--max-in-flight", "70000", "1 to 65536"}},
	{name: "max-in-flight not a number", args: []string{"--max-in-flight", "x"},
		wantErr: []string{"--max-in-flight", `"x"`}},
	{name: "publish-mode unknown", args: []string{"--publish-mode", "turbo"},
		wantErr: []string{"--publish-mode", `"turbo"`, "auto, fast or async"}},
	{name: "stream-check-interval too short", args: []string{"--stream-check-interval", "500ms"},
		wantErr: []string{"--stream-check-interval 500ms", "0 (off) or 1s to 24h"}},
	{name: "atomic-transactions unknown", args: []string{"--atomic-transactions", "yes"},
		wantErr: []string{"--atomic-transactions", `"yes"`, "auto, on or off"}},
	{name: "atomic-transactions on with exclusive-stream", env: map[string]string{"OUTBOXD_ATOMIC_TRANSACTIONS": "on", "OUTBOXD_EXCLUSIVE_STREAM": "true"},
		wantErr: []string{"--atomic-transactions on", "--exclusive-stream", "auto or off"}},
	{name: "publish-mode fast with exclusive-stream", env: map[string]string{"OUTBOXD_PUBLISH_MODE": "fast", "OUTBOXD_EXCLUSIVE_STREAM": "true"},
		wantErr: []string{"--publish-mode fast", "--exclusive-stream", "auto or async"}},
	{name: "publish-linger 0", args: []string{"--publish-linger", "0s"},
		wantErr: []string{"--publish-linger", "0s", "100µs to 100ms"}},
	{name: "publish-linger 1s", args: []string{"--publish-linger", "1s"},
		wantErr: []string{"--publish-linger", "1s", "100µs to 100ms"}},
	{name: "publish-linger not a duration", env: map[string]string{"OUTBOXD_PUBLISH_LINGER": "fast"},
		wantErr: []string{"publish-linger", `"fast"`}},
	{name: "read-linger negative", args: []string{"--read-linger", "-1ms"},
		wantErr: []string{"--read-linger", "-1ms", "0 to 100ms"}},
	{name: "read-linger 1s", args: []string{"--read-linger", "1s"},
		wantErr: []string{"--read-linger", "1s", "0 to 100ms"}},
	{name: "read-linger not a duration", env: map[string]string{"OUTBOXD_READ_LINGER": "soon"},
		wantErr: []string{"read-linger", `"soon"`}},
	{name: "status-interval 1ms", args: []string{"--status-interval", "1ms"},
		wantErr: []string{"--status-interval", "1ms", "10ms to 1m"}},
	{name: "status-interval 2m", args: []string{"--status-interval", "2m"},
		wantErr: []string{"--status-interval", "2m0s", "10ms to 1m"}},
	{name: "checkpoint-interval 1ms", args: []string{"--checkpoint-interval", "1ms"},
		wantErr: []string{"--checkpoint-interval", "1ms", "10ms to 1m"}},
	{name: "shutdown-timeout 0", args: []string{"--shutdown-timeout", "0s"},
		wantErr: []string{"--shutdown-timeout", "0s"}},
	{name: "log-level loud", args: []string{"--log-level", "loud"},
		wantErr: []string{"--log-level", `"loud"`}},
	{name: "log-level empty", args: []string{"--log-level", ""},
		wantErr: []string{"--log-level", `""`}},
	{name: "sink unknown", args: []string{"--sink", "kafka"},
		wantErr: []string{"--sink", `"kafka"`, "jetstream"}},
	{name: "stream empty", args: []string{"--stream", ""},
		wantErr: []string{"--stream", "empty"}},
	{name: "nats-url bad", args: []string{"--nats-url", "nats://bad host:4222"},
		wantErr: []string{"--nats-url", `"nats://bad host:4222"`}},
	{name: "nats-url empty", args: []string{"--nats-url", ""},
		wantErr: []string{"--nats-url", `""`}},
	{name: "nats-url only commas", args: []string{"--nats-url", " , "},
		wantErr: []string{"--nats-url", `" , "`}},
	{name: "nats-url bad second of a list", args: []string{"--nats-url", "nats://a:4222,nats://b :4222"},
		wantErr: []string{"--nats-url", `"nats://a:4222,nats://b :4222"`}},
	{name: "metrics-addr without a port", args: []string{"--metrics-addr", "127.0.0.1"},
		wantErr: []string{"--metrics-addr", `"127.0.0.1"`, "host:port"}},
	{name: "metrics-addr port out of range", args: []string{"--metrics-addr", ":99999"},
		wantErr: []string{"--metrics-addr", `":99999"`, "host:port"}},
	{name: "metrics-addr port not a number", env: map[string]string{"OUTBOXD_METRICS_ADDR": "localhost:metrics"},
		wantErr: []string{"--metrics-addr", `"localhost:metrics"`}},
	{name: "positional argument", args: []string{"extra"},
		wantErr: []string{"extra"}},
}

// TestBadRunInput checks each bad setting is reported with its flag and
// value, through the real command: validation fails before anything
// connects, so no server is needed.
func TestBadRunInput(t *testing.T) {
	for _, tt := range badRunInput {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRun(t, tt.args, tt.env)
			checkErr(t, err, tt.wantErr)

			// The same through newRootCommand, which would connect if
			// validation let the input through.
			start := time.Now()
			_, _, err = execute(t, newRootCommand(), append([]string{"run"}, tt.args...), tt.env)
			checkErr(t, err, tt.wantErr)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s: the error did not come from validation", d)
			}
		})
	}
}

func checkErr(t testing.TB, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q: the command tried to connect", err)
	}
}

// TestRunHelpGroups: run --help shows examples, then its flags under the
// group titles in order, every flag of run in a group (none left to
// "Other" but --help).
func TestRunHelpGroups(t *testing.T) {
	help, _, err := execute(t, newRootCommand(), []string{"run", "--help"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := strings.Index(help, "Examples:\n")
	if last < 0 {
		t.Fatalf("run --help shows no examples:\n%s", help)
	}
	for _, title := range []string{"PostgreSQL flags:", "NATS flags:", "Stream, subjects and mapping flags:", "Delivery flags:", "Retention flags:", "Operations flags:", "Other flags:"} {
		i := strings.Index(help, "\n"+title+"\n")
		if i < last {
			t.Errorf("run --help: %q missing or out of order", title)
		}
		last = max(last, i)
	}
	other := help[strings.Index(help, "\nOther flags:\n"):]
	if lines := strings.Count(strings.TrimSpace(other[:strings.Index(other, "\n\n")]), "\n"); lines != 1 {
		t.Errorf("run --help lists more than --help under Other:\n%s", other)
	}
}

// TestSubcommandFlags: a command takes only the settings it uses; another
// command's flag is an unknown flag that names the commands taking it.
func TestSubcommandFlags(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"slot", "drop", "--retention", "1h", "--yes"}, []string{"unknown flag: --retention", "flag of outboxd", "outboxd run", "not of outboxd slot drop"}},
		{[]string{"slot", "info", "--nats-url", "nats://x:4222"}, []string{"unknown flag: --nats-url", "not of outboxd slot info"}},
		{[]string{"backfill", "--where", "true", "--metrics-addr", ":9"}, []string{"unknown flag: --metrics-addr", "not of outboxd backfill"}},
		{[]string{"run", "--max-inflight", "3"}, []string{"did you mean --max-in-flight?"}},
	}
	for _, tt := range tests {
		_, _, err := execute(t, newRootCommand(), tt.args, nil)
		if err == nil {
			t.Errorf("%q: no error", tt.args)
			continue
		}
		for _, want := range tt.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q lacks %q", tt.args, err, want)
			}
		}
	}
	// Their own settings still come from the environment.
	_, _, err := execute(t, newRootCommand(), []string{"slot", "info"}, map[string]string{"OUTBOXD_SLOT": "bad slot"})
	if err == nil || !strings.Contains(err.Error(), `"bad slot"`) {
		t.Errorf("slot info with OUTBOXD_SLOT=\"bad slot\": %v, want the slot named", err)
	}
}
