package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// natsAuth is how outboxd authenticates to NATS and secures the connection:
// the --nats-* flags merged with a nats CLI context, checked by
// resolveNATSAuth. At most one of Creds, Nkey, User and Token is set.
type natsAuth struct {
	Creds    string // JWT user credentials file
	Nkey     string // nkey seed file
	User     string
	Password string
	Token    string
	CA       string // PEM file of the CAs that sign the server's certificate
	Cert     string // PEM client certificate, with Key
	Key      string
}

// natsContext is the part of a `nats` CLI context file outboxd reads
// (~/.config/nats/context/NAME.json); other fields are ignored.
type natsContext struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Creds    string `json:"creds"`
	Nkey     string `json:"nkey"`
	Token    string `json:"token"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
}

// contextNameRe is what a context name may be: the nats CLI keeps each one
// as a file in one folder, so no path separators.
var contextNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// natsContextPath is where the nats CLI keeps context name.
func natsContextPath(name string) (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("--nats-context %q: find the home folder: %w", name, err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "nats", "context", name+".json"), nil
}

// loadNATSContext reads context name. Its errors never quote the file's
// content, which holds secrets.
func loadNATSContext(name string) (natsContext, error) {
	var ctx natsContext
	if !contextNameRe.MatchString(name) || name == "." || name == ".." {
		return ctx, fmt.Errorf("--nats-context %q is not a context name: use letters, digits, '.', '_' or '-' (as `nats context ls` lists them)", name)
	}
	path, err := natsContextPath(name)
	if err != nil {
		return ctx, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ctx, fmt.Errorf("--nats-context %q: %s does not exist: create it with `nats context save %s` or fix the name", name, path, name)
	}
	if err != nil {
		return ctx, fmt.Errorf("--nats-context %q: %w", name, err)
	}
	if err := json.Unmarshal(data, &ctx); err != nil {
		var syntax *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return ctx, fmt.Errorf("--nats-context %q: %s is not valid JSON (at byte %d)", name, path, syntax.Offset)
		case errors.As(err, &typeErr):
			return ctx, fmt.Errorf("--nats-context %q: %s: field %q must be a %s", name, path, typeErr.Field, typeErr.Type)
		default:
			return ctx, fmt.Errorf("--nats-context %q: %s is not a nats context file", name, path)
		}
	}
	for _, p := range []*string{&ctx.Creds, &ctx.Nkey, &ctx.Cert, &ctx.Key, &ctx.CA} {
		*p = expandHome(*p)
	}
	return ctx, nil
}

// expandHome replaces a leading ~/ by the home folder, as the nats CLI does
// for the paths in a context.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// resolveNATSAuth merges the --nats-context named in c (if any) under the
// explicit flags, checks the combination and that every file exists, and
// sets c.natsAuth (and c.NATSURL from the context unless --nats-url was
// given). Errors name flags and paths, never a password or token.
func (c *runConfig) resolveNATSAuth() error {
	a := natsAuth{
		Creds: c.NATSCreds, Nkey: c.NATSNkey, User: c.NATSUser, Password: c.NATSPassword,
		Token: c.NATSToken, CA: c.NATSTLSCA, Cert: c.NATSTLSCert, Key: c.NATSTLSKey,
	}
	source := func(flag string) string { return "--" + flag }
	if c.NATSContext != "" {
		ctx, err := loadNATSContext(c.NATSContext)
		if err != nil {
			return err
		}
		fromContext := map[string]bool{}
		// The explicit flags win. The identity is taken whole, from the
		// flags or from the context, never mixed: a --nats-user with the
		// context's creds would be two identities.
		if a.Creds == "" && a.Nkey == "" && a.User == "" && a.Password == "" && a.Token == "" {
			a.Creds, a.Nkey, a.User, a.Password, a.Token = ctx.Creds, ctx.Nkey, ctx.User, ctx.Password, ctx.Token
			for flag, v := range map[string]string{"nats-creds": a.Creds, "nats-nkey": a.Nkey, "nats-user": a.User, "nats-password": a.Password, "nats-token": a.Token} {
				fromContext[flag] = v != ""
			}
		}
		if a.Cert == "" && a.Key == "" {
			a.Cert, a.Key = ctx.Cert, ctx.Key
			fromContext["nats-tls-cert"], fromContext["nats-tls-key"] = a.Cert != "", a.Key != ""
		}
		if a.CA == "" {
			a.CA = ctx.CA
			fromContext["nats-tls-ca"] = a.CA != ""
		}
		if !c.natsURLSet && ctx.URL != "" {
			c.NATSURL = ctx.URL
		}
		field := map[string]string{"nats-creds": "creds", "nats-nkey": "nkey", "nats-user": "user", "nats-password": "password",
			"nats-token": "token", "nats-tls-cert": "cert", "nats-tls-key": "key", "nats-tls-ca": "ca"}
		source = func(flag string) string {
			if fromContext[flag] {
				return fmt.Sprintf("%q in --nats-context %q", field[flag], c.NATSContext)
			}
			return "--" + flag
		}
	}

	var methods []string
	for _, m := range []struct{ flag, value string }{
		{"nats-creds", a.Creds}, {"nats-nkey", a.Nkey}, {"nats-user", a.User}, {"nats-token", a.Token},
	} {
		if m.value != "" {
			methods = append(methods, source(m.flag))
		}
	}
	if len(methods) > 1 {
		return fmt.Errorf("%s are given together: use one of --nats-creds, --nats-nkey, --nats-user with --nats-password, or --nats-token", strings.Join(methods, " and "))
	}
	if a.User != "" && a.Password == "" {
		return fmt.Errorf("%s is given without --nats-password: give both, or neither", source("nats-user"))
	}
	if a.Password != "" && a.User == "" {
		return fmt.Errorf("%s is given without --nats-user: give both, or neither", source("nats-password"))
	}
	if a.Cert != "" && a.Key == "" {
		return fmt.Errorf("%s is given without --nats-tls-key: a client certificate needs its private key", source("nats-tls-cert"))
	}
	if a.Key != "" && a.Cert == "" {
		return fmt.Errorf("%s is given without --nats-tls-cert: a private key needs its client certificate", source("nats-tls-key"))
	}
	for _, f := range []struct{ flag, path string }{
		{"nats-creds", a.Creds}, {"nats-nkey", a.Nkey}, {"nats-tls-ca", a.CA}, {"nats-tls-cert", a.Cert}, {"nats-tls-key", a.Key},
	} {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("%s %q does not exist: give the path of a readable file", source(f.flag), f.path)
		case err != nil:
			return fmt.Errorf("%s %q: %w", source(f.flag), f.path, err)
		case st.IsDir():
			return fmt.Errorf("%s %q is a folder: give the path of a file", source(f.flag), f.path)
		}
	}
	if _, err := natsAuthOptions(a); err != nil {
		return err
	}
	c.natsAuth = a
	return nil
}

// natsAuthOptions turns a checked natsAuth into connection options. Files
// are read here, so a bad file is reported at start: the error names the
// flag and the path, never the file's content.
func natsAuthOptions(a natsAuth) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case a.Creds != "":
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.Nkey != "":
		opt, err := nats.NkeyOptionFromSeed(a.Nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %q is not an nkey seed file (a line starting with SU): %s", a.Nkey, redactErr(err, a))
		}
		opts = append(opts, opt)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	}
	// RootCAs and ClientCert read their files when applied: apply each to
	// scratch options so a bad PEM fails now, naming its flag.
	scratch := nats.GetDefaultOptions()
	for _, f := range []struct {
		flag, path string
		opt        func() nats.Option
	}{
		{"--nats-tls-ca", a.CA, func() nats.Option { return nats.RootCAs(a.CA) }},
		{"--nats-tls-cert", a.Cert, func() nats.Option { return nats.ClientCert(a.Cert, a.Key) }},
	} {
		if f.path == "" {
			continue
		}
		opt := f.opt()
		if err := opt(&scratch); err != nil {
			return nil, fmt.Errorf("%s %q: %s", f.flag, f.path, redactErr(err, a))
		}
		opts = append(opts, opt)
	}
	if a.Creds != "" {
		// UserCredentials reads the file on every connect: check it once now.
		if err := checkCreds(a.Creds); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// checkCreds reports a creds file without the JWT and seed blocks nats
// looks for. It only looks for the markers: the content is a secret.
func checkCreds(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--nats-creds %q: %w", path, err)
	}
	s := string(data)
	if !strings.Contains(s, "BEGIN NATS USER JWT") || !strings.Contains(s, "BEGIN USER NKEY SEED") {
		return fmt.Errorf("--nats-creds %q is not a NATS credentials file: it needs a user JWT and an nkey seed block (nsc generate creds)", path)
	}
	return nil
}

// redactErr is err's text with the password and token cut out, in case a
// library quotes them.
func redactErr(err error, a natsAuth) string {
	s := err.Error()
	for _, secret := range []string{a.Password, a.Token} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// permissionsRe finds the operation and subject in the server's
// permissions violation: `Permissions Violation for Publish to "x.y"`.
var permissionsRe = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]+)"`)

// permissionLog logs each NATS permissions violation once per state
// change: the first refusal of an operation on a subject, and again after
// a reconnect (the operator may have fixed the permissions) or a minute
// later if it is still refused. The sink keeps retrying a refused publish;
// this is what tells the operator why nothing is confirmed past it.
type permissionLog struct {
	log zerolog.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // "publish outbox.x" → last logged
}

func newPermissionLog(log zerolog.Logger) *permissionLog {
	return &permissionLog{log: log, now: time.Now, seen: map[string]time.Time{}}
}

// handle is a nats.ErrorHandler.
func (p *permissionLog) handle(_ *nats.Conn, sub *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		ev := p.log.Warn().Err(err)
		if sub != nil {
			ev = ev.Str("subscription", sub.Subject)
		}
		ev.Msg("NATS reported an error")
		return
	}
	op, subject := "", ""
	if m := permissionsRe.FindStringSubmatch(err.Error()); m != nil {
		op, subject = strings.ToLower(m[1]), m[2]
	}
	if op == "subscription" {
		op = "subscribe"
	}
	key := op + " " + subject
	p.mu.Lock()
	last, ok := p.seen[key]
	now := p.now()
	if ok && now.Sub(last) < time.Minute {
		p.mu.Unlock()
		return
	}
	p.seen[key] = now
	p.mu.Unlock()
	if subject == "" {
		p.log.Error().Err(err).Msg("permissions violation: the NATS user lacks a permission outboxd needs; nothing is confirmed past the refused message")
		return
	}
	ev := p.log.Error().Str("permission", op).Str("subject", subject)
	if op == "publish" {
		ev.Msgf("permissions violation for publish to %s: the NATS user may not publish to this subject; outboxd retries, and confirms nothing past an event it cannot publish, until the permission is granted", subject)
		return
	}
	ev.Msgf("permissions violation for %s to %s: the NATS user lacks this permission", op, subject)
}

// reset forgets what was logged, so a violation after a reconnect is
// logged again.
func (p *permissionLog) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.seen)
}
