package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// configLines runs `outboxd config` and returns its lines by key.
func configLines(t testing.TB, args []string, env map[string]string) (map[string][]string, string) {
	t.Helper()
	out, _, err := execute(t, newRootCommand(), append([]string{"config"}, args...), env)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string][]string{}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		if i == 0 {
			if strings.Join(fields, " ") != "KEY VALUE SOURCE" {
				t.Fatalf("header %q", line)
			}
			continue
		}
		if len(fields) < 3 {
			t.Fatalf("line %q has fewer than 3 columns", line)
		}
		lines[fields[0]] = fields[1:]
	}
	return lines, out
}

// TestConfigCommandSources: every key of run is printed once, with the
// value in effect and the level it came from.
func TestConfigCommandSources(t *testing.T) {
	path := writeConfig(t, "slot: file_slot\npublication: file_pub\ntable: file.outbox\nmax-in-flight: 512\n")
	lines, out := configLines(t,
		[]string{"--config", path, "--table", "flag.outbox"},
		map[string]string{"OUTBOXD_PUBLICATION": "env_pub", "OUTBOXD_TABLE": "env.outbox"})
	want := map[string][2]string{
		"config":        {path, "flag"},
		"stream":        {"OUTBOX", "default"},
		"slot":          {"file_slot", "file"},
		"max-in-flight": {"512", "file"},
		"publication":   {"env_pub", "env"},
		"table":         {"flag.outbox", "flag"},
		"dead-letter":   {`""`, "default"},
	}
	for key, w := range want {
		got := lines[key]
		if len(got) != 2 || got[0] != w[0] || got[1] != w[1] {
			t.Errorf("%s: got %q, want %q\n%s", key, got, w, out)
		}
	}
	cmd, _, err := newRootCommand().Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		n++
		if _, ok := lines[f.Name]; !ok {
			t.Errorf("run's --%s is not printed", f.Name)
		}
	})
	if len(lines) != n {
		t.Errorf("config prints %d keys, run has %d", len(lines), n)
	}
}

// TestConfigCommandRedactsSecrets sets a secret through each source and
// form and greps the whole output of `outboxd config` for it.
func TestConfigCommandRedactsSecrets(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "user.nk")
	const seedValue = "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4"
	if err := os.WriteFile(seed, []byte(seedValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		yaml    string
		args    []string
		env     map[string]string
		secrets []string
	}{
		{name: "URL passwords in the file, NATS password in the environment",
			yaml:    "pg-url: postgres://app:pgUrlSecret1@db:5432/app\nnats-url: nats://ops:natsUrlSecret2@n1:4222, nats://ops:natsUrlSecret2@n2:4222\nnats-user: ops\n",
			env:     map[string]string{"OUTBOXD_NATS_PASSWORD": "natsPassSecret3"},
			secrets: []string{"pgUrlSecret1", "natsUrlSecret2", "natsPassSecret3"}},
		{name: "token flag, pg password as a query parameter",
			args:    []string{"--nats-token", "natsTokenSecret4", "--pg-url", "postgres://app@db/app?sslmode=disable&password=pgQuerySecret5"},
			secrets: []string{"natsTokenSecret4", "pgQuerySecret5"}},
		{name: "token as the URL's user, key=value pg password",
			yaml:    "nats-url: nats://natsUrlToken6@n1:4222\npg-url: host=db dbname=app password='pgKeyword Secret7'\n",
			secrets: []string{"natsUrlToken6", "pgKeyword", "Secret7"}},
		{name: "PGPASSWORD, monitor URL, nkey seed file",
			yaml:    "nats-nkey: " + seed + "\nnats-monitor-url: http://mon:monSecret8@mon:8222\n",
			env:     map[string]string{"PGPASSWORD": "pgEnvSecret9"},
			secrets: []string{"monSecret8", "pgEnvSecret9", seedValue, "SUA"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.yaml != "" {
				args = append(args, "--config", writeConfig(t, tt.yaml))
			}
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			if _, ok := env["PGPASSWORD"]; !ok {
				env["PGPASSWORD"] = ""
			}
			lines, out := configLines(t, args, env)
			for _, s := range tt.secrets {
				if strings.Contains(out, s) {
					t.Errorf("output holds the secret %q:\n%s", s, out)
				}
			}
			if !strings.Contains(out, redacted) {
				t.Errorf("output shows no %s where a secret was:\n%s", redacted, out)
			}
			if len(lines["pg-url"]) == 0 || !strings.Contains(out, "db") {
				t.Errorf("the non-secret parts are gone:\n%s", out)
			}
		})
	}
}

// TestConfigCommandBadInput: config reports a bad setting as run does.
func TestConfigCommandBadInput(t *testing.T) {
	path := writeConfig(t, "max-in-flight: 0\n")
	_, _, err := execute(t, newRootCommand(), []string{"config", "--config", path}, nil)
	checkErr(t, err, []string{"--max-in-flight 0 is out of range", `key "max-in-flight"`, path})
	_, _, err = execute(t, newRootCommand(), []string{"config", "--config", writeConfig(t, "slott: x\n")}, nil)
	checkErr(t, err, []string{`unknown key "slott"`, `did you mean "slot"`})
}

func TestRedactConnString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://app:pw@db:5432/app", "postgres://app:xxxxx@db:5432/app"},
		{"postgres://app@db/app", "postgres://app@db/app"},
		{"postgres://db/app?password=pw&sslmode=require", "postgres://db/app?password=xxxxx&sslmode=require"},
		{"host=db password=pw dbname=app", "host=db password=xxxxx dbname=app"},
		{"host=db password='p w' dbname=app", "host=db password=xxxxx dbname=app"},
		{"nats://host:4222", "nats://host:4222"},
	}
	for _, tt := range tests {
		if got := redactConnString(tt.in, false); got != tt.want {
			t.Errorf("redactConnString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := redactConnString("nats://tok@n1:4222", true); got != "nats://xxxxx@n1:4222" {
		t.Errorf("token user: %q", got)
	}
}

// TestConfigCommandNATSContext: settings a --nats-context supplies are
// shown with that source, its password masked; explicit flags still win.
func TestConfigCommandNATSContext(t *testing.T) {
	const secret = "ctxPasswordSecret10"
	writeContext(t, "prod", `{"url": "nats://ctx-host:4222", "user": "ctxuser", "password": "`+secret+`"}`)
	lines, out := configLines(t, []string{"--nats-context", "prod"}, nil)
	for key, want := range map[string][2]string{
		"nats-url":      {"nats://ctx-host:4222", "nats-context"},
		"nats-user":     {"ctxuser", "nats-context"},
		"nats-password": {redacted, "nats-context"},
		"nats-context":  {"prod", "flag"},
	} {
		if got := lines[key]; len(got) < 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s: got %q, want %q\n%s", key, got, want, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("output holds the context's password:\n%s", out)
	}
	lines, _ = configLines(t, []string{"--nats-context", "prod", "--nats-url", "nats://flag-host:4222"}, nil)
	if got := lines["nats-url"]; len(got) < 2 || got[0] != "nats://flag-host:4222" || got[1] != "flag" {
		t.Errorf("nats-url with the flag given: %q", got)
	}
}
