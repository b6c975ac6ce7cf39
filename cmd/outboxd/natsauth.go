package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/outboxd/outboxd/relay/natsconn"
)

// resolveNATSAuth merges the --nats-context named in c (if any) under the
// explicit flags, checks the combination and that every file exists, and
// sets c.natsAuth (and c.NATSURL from the context unless --nats-url was
// given). Errors name flags and paths, never a password or token.
func (c *runConfig) resolveNATSAuth() error {
	a := natsconn.Auth{
		Creds: c.NATSCreds, Nkey: c.NATSNkey, User: c.NATSUser, Password: c.NATSPassword,
		Token: c.NATSToken, CA: c.NATSTLSCA, Cert: c.NATSTLSCert, Key: c.NATSTLSKey,
	}
	source := func(flag string) string { return "--" + flag }
	if c.NATSContext != "" {
		ctx, err := natsconn.LoadContext(c.NATSContext)
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
	if _, err := natsconn.Options(a); err != nil {
		return err
	}
	c.natsAuth = a
	return nil
}
