package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/relay/natsconn"
)

const (
	testPassword = "pa55-w0rd-never-printed"
	testToken    = "t0ken-never-printed"
)

// authFiles are real files for the auth flags, in a temporary folder.
type authFiles struct {
	dir, creds, nkey, ca, cert, key, garbage string
}

func newAuthFiles(t *testing.T) authFiles {
	t.Helper()
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	f := authFiles{dir: dir, creds: filepath.Join(dir, "user.creds"), nkey: filepath.Join(dir, "user.nk"), garbage: filepath.Join(dir, "garbage.pem")}
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(f.nkey, string(seed)+"\n")
	write(f.creds, "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.x\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n"+string(seed)+"\n------END USER NKEY SEED------\n")
	write(f.garbage, "not a pem "+testPassword)
	ca := natstest.NewCA(t)
	f.ca = ca.File
	f.cert, f.key = ca.Issue(t, "outboxd", true)
	return f
}

// applied applies opts to default options, as nats.Connect would.
func applied(t *testing.T, opts []nats.Option) nats.Options {
	t.Helper()
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func TestNATSAuthOptions(t *testing.T) {
	f := newAuthFiles(t)
	tests := []struct {
		name string
		auth natsconn.Auth
		want func(nats.Options) error
	}{
		{"none", natsconn.Auth{}, func(o nats.Options) error {
			if o.User != "" || o.Token != "" || o.Nkey != "" || o.UserJWT != nil || o.RootCAsCB != nil || o.TLSCertCB != nil {
				return errors.New("options set without flags")
			}
			return nil
		}},
		{"user and password", natsconn.Auth{User: "outboxd", Password: testPassword}, func(o nats.Options) error {
			if o.User != "outboxd" || o.Password != testPassword {
				return fmt.Errorf("user %q", o.User)
			}
			return nil
		}},
		{"token", natsconn.Auth{Token: testToken}, func(o nats.Options) error {
			if o.Token != testToken {
				return errors.New("token not set")
			}
			return nil
		}},
		{"nkey", natsconn.Auth{Nkey: f.nkey}, func(o nats.Options) error {
			if !strings.HasPrefix(o.Nkey, "U") || o.SignatureCB == nil {
				return fmt.Errorf("nkey %q, signature callback %v", o.Nkey, o.SignatureCB != nil)
			}
			return nil
		}},
		{"creds", natsconn.Auth{Creds: f.creds}, func(o nats.Options) error {
			if o.UserJWT == nil || o.SignatureCB == nil {
				return errors.New("JWT callbacks not set")
			}
			return nil
		}},
		{"tls ca, cert and key", natsconn.Auth{CA: f.ca, Cert: f.cert, Key: f.key}, func(o nats.Options) error {
			if !o.Secure || o.RootCAsCB == nil || o.TLSCertCB == nil {
				return fmt.Errorf("secure %v, roots %v, cert %v", o.Secure, o.RootCAsCB != nil, o.TLSCertCB != nil)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := natsconn.Options(tt.auth)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.want(applied(t, opts)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestBadNATSAuth(t *testing.T) {
	f := newAuthFiles(t)
	missing := filepath.Join(f.dir, "missing.pem")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string
	}{
		{"user without password", []string{"--nats-user", "u"}, nil, []string{"--nats-user", "without --nats-password"}},
		{"password without user", []string{"--nats-password", testPassword}, nil, []string{"--nats-password", "without --nats-user"}},
		{"password from env without user", nil, map[string]string{"OUTBOXD_NATS_PASSWORD": testPassword}, []string{"--nats-password", "without --nats-user"}},
		{"cert without key", []string{"--nats-tls-cert", f.cert}, nil, []string{"--nats-tls-cert", "without --nats-tls-key"}},
		{"key without cert", []string{"--nats-tls-key", f.key}, nil, []string{"--nats-tls-key", "without --nats-tls-cert"}},
		{"creds and token", []string{"--nats-creds", f.creds, "--nats-token", testToken}, nil, []string{"--nats-creds and --nats-token", "use one of"}},
		{"nkey and user", []string{"--nats-nkey", f.nkey, "--nats-user", "u", "--nats-password", testPassword}, nil, []string{"--nats-nkey and --nats-user"}},
		{"all four", []string{"--nats-creds", f.creds, "--nats-nkey", f.nkey, "--nats-user", "u", "--nats-password", testPassword, "--nats-token", testToken}, nil,
			[]string{"--nats-creds and --nats-nkey and --nats-user and --nats-token"}},
		{"creds missing", []string{"--nats-creds", missing}, nil, []string{"--nats-creds", missing, "does not exist"}},
		{"nkey missing", []string{"--nats-nkey", missing}, nil, []string{"--nats-nkey", missing, "does not exist"}},
		{"ca missing", []string{"--nats-tls-ca", missing}, nil, []string{"--nats-tls-ca", missing, "does not exist"}},
		{"cert missing", []string{"--nats-tls-cert", missing, "--nats-tls-key", f.key}, nil, []string{"--nats-tls-cert", missing, "does not exist"}},
		{"key missing", []string{"--nats-tls-cert", f.cert, "--nats-tls-key", missing}, nil, []string{"--nats-tls-key", missing, "does not exist"}},
		{"ca is a folder", []string{"--nats-tls-ca", f.dir}, nil, []string{"--nats-tls-ca", "is a folder"}},
		{"ca not PEM", []string{"--nats-tls-ca", f.garbage}, nil, []string{"--nats-tls-ca", f.garbage}},
		{"cert not PEM", []string{"--nats-tls-cert", f.garbage, "--nats-tls-key", f.key}, nil, []string{"--nats-tls-cert", f.garbage}},
		{"nkey not a seed", []string{"--nats-nkey", f.garbage}, nil, []string{"--nats-nkey", f.garbage, "not an nkey seed"}},
		{"creds not creds", []string{"--nats-creds", f.garbage}, nil, []string{"--nats-creds", f.garbage, "not a NATS credentials file"}},
		{"context bad name", []string{"--nats-context", "../x"}, nil, []string{"--nats-context", `"../x"`, "not a context name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", f.dir)
			_, err := parseRun(t, tt.args, tt.env)
			checkErr(t, err, tt.wantErr)
			if err != nil && (strings.Contains(err.Error(), testPassword) || strings.Contains(err.Error(), testToken)) {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
}

// writeContext writes context name under a new XDG_CONFIG_HOME.
func writeContext(t *testing.T, name, json string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	dir := filepath.Join(home, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNATSContext(t *testing.T) {
	f := newAuthFiles(t)
	ctxJSON := fmt.Sprintf(`{"description": "prod", "url": "tls://ctx.example:4222", "user": "ctxuser", "password": %q,
		"ca": %q, "cert": %q, "key": %q, "jetstream_domain": "", "nsc": ""}`, testPassword, f.ca, f.cert, f.key)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want natsconn.Auth
		url  string
	}{
		{"context alone", nil, nil,
			natsconn.Auth{User: "ctxuser", Password: testPassword, CA: f.ca, Cert: f.cert, Key: f.key}, "tls://ctx.example:4222"},
		{"--nats-url wins", []string{"--nats-url", "nats://flag:4222"}, nil,
			natsconn.Auth{User: "ctxuser", Password: testPassword, CA: f.ca, Cert: f.cert, Key: f.key}, "nats://flag:4222"},
		{"OUTBOXD_NATS_URL wins", nil, map[string]string{"OUTBOXD_NATS_URL": "nats://env:4222"},
			natsconn.Auth{User: "ctxuser", Password: testPassword, CA: f.ca, Cert: f.cert, Key: f.key}, "nats://env:4222"},
		{"explicit token replaces the context's identity", []string{"--nats-token", testToken}, nil,
			natsconn.Auth{Token: testToken, CA: f.ca, Cert: f.cert, Key: f.key}, "tls://ctx.example:4222"},
		{"explicit user and password win", []string{"--nats-user", "flaguser", "--nats-password", "other"}, nil,
			natsconn.Auth{User: "flaguser", Password: "other", CA: f.ca, Cert: f.cert, Key: f.key}, "tls://ctx.example:4222"},
		{"explicit ca wins", []string{"--nats-tls-ca", f.cert}, nil,
			natsconn.Auth{User: "ctxuser", Password: testPassword, CA: f.cert, Cert: f.cert, Key: f.key}, "tls://ctx.example:4222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeContext(t, "prod", ctxJSON)
			cfg, err := parseRun(t, append([]string{"--nats-context", "prod"}, tt.args...), tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.natsAuth != tt.want {
				t.Errorf("auth = %+v, want %+v", cfg.natsAuth, tt.want)
			}
			if cfg.NATSURL != tt.url {
				t.Errorf("url = %q, want %q", cfg.NATSURL, tt.url)
			}
		})
	}
}

func TestNATSContextHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	dir := filepath.Join(home, ".config", "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), []byte(`{"url": "nats://dev:4222", "token": "`+testToken+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseRun(t, []string{"--nats-context", "dev"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATSURL != "nats://dev:4222" || cfg.natsAuth.Token != testToken {
		t.Errorf("url %q, token set %v", cfg.NATSURL, cfg.natsAuth.Token == testToken)
	}
}

func TestBadNATSContext(t *testing.T) {
	f := newAuthFiles(t)
	missing := filepath.Join(f.dir, "gone.creds")
	tests := []struct {
		name    string
		json    string // "" for no file
		args    []string
		wantErr []string
	}{
		{"no file", "", nil, []string{"--nats-context", `"ctx"`, "does not exist", "nats context save"}},
		{"not JSON", `{"password": "` + testPassword + `"`, nil, []string{"--nats-context", "not valid JSON"}},
		{"wrong type", `{"url": 4222}`, nil, []string{"--nats-context", `"url"`, "string"}},
		{"creds missing", fmt.Sprintf(`{"creds": %q}`, missing), nil, []string{`"creds" in --nats-context "ctx"`, missing, "does not exist"}},
		{"two identities in the context", fmt.Sprintf(`{"nkey": %q, "token": %q}`, f.nkey, testToken), nil,
			[]string{`"nkey" in --nats-context "ctx" and "token" in --nats-context "ctx"`}},
		{"user without password", `{"user": "u"}`, nil, []string{`"user" in --nats-context "ctx"`, "without --nats-password"}},
		{"cert without key", fmt.Sprintf(`{"cert": %q}`, f.cert), nil, []string{`"cert" in --nats-context "ctx"`, "without --nats-tls-key"}},
		{"flag key with context cert is not mixed", fmt.Sprintf(`{"cert": %q, "key": %q}`, f.cert, f.key), []string{"--nats-tls-key", f.key},
			[]string{"--nats-tls-key", "without --nats-tls-cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.json == "" {
				t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			} else {
				writeContext(t, "ctx", tt.json)
			}
			_, err := parseRun(t, append([]string{"--nats-context", "ctx"}, tt.args...), nil)
			checkErr(t, err, tt.wantErr)
			if err != nil && (strings.Contains(err.Error(), testPassword) || strings.Contains(err.Error(), testToken)) {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
}
