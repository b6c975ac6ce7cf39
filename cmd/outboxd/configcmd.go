package main

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/internal/cliconfig"
)

// redacted stands for a secret in `outboxd config`, as in pgconn's and
// net/url's redacted forms.
const redacted = "xxxxx"

func newConfigCommand() *cobra.Command {
	return withRunSettings(&cobra.Command{
		Use:   "config",
		Short: "Print the configuration outboxd run would use: every key, its value and its source",
		Long: `Read the settings exactly as outboxd run does (flags, OUTBOXD_* environment
variables, the --config file, defaults), check them, and print every key with
its effective value and where it came from: flag, env, file or default.
Passwords, tokens and the passwords in URLs are replaced by xxxxx. Nothing
connects anywhere. A bad value is reported as outboxd run would report it.`,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, cfg runConfig) error {
		return printConfig(cmd.OutOrStdout(), cmd.Flags(), cfg)
	})
}

// printConfig writes one line per setting: key, value (redacted), source.
func printConfig(out io.Writer, fs *pflag.FlagSet, cfg runConfig) error {
	secrets := knownSecrets(cfg)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tVALUE\tSOURCE")
	fromContext := contextSettings(cfg)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		value, source := f.Value.String(), cliconfig.SourceOf(f)
		if effective, ok := fromContext[f.Name]; ok {
			// validate took this one from the --nats-context. It sets
			// the URL in place, so compare that with the default.
			taken := effective != value
			if f.Name == "nats-url" {
				taken = !cfg.natsURLSet && effective != f.DefValue
			}
			if taken {
				value, source = effective, "nats-context "+cfg.NATSContext
			}
		}
		value = redactSetting(f.Name, value, secrets)
		if value == "" {
			value = `""`
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.Name, value, source)
	})
	return w.Flush()
}

// contextSettings is the value in effect of each setting a --nats-context
// may supply, after validate merged the context under the flags.
func contextSettings(cfg runConfig) map[string]string {
	if cfg.NATSContext == "" {
		return nil
	}
	a := cfg.natsAuth
	return map[string]string{
		"nats-url": cfg.NATSURL, "nats-creds": a.Creds, "nats-nkey": a.Nkey, "nats-user": a.User,
		"nats-password": a.Password, "nats-token": a.Token, "nats-tls-ca": a.CA, "nats-tls-cert": a.Cert, "nats-tls-key": a.Key,
	}
}

// knownSecrets is every secret value the configuration holds, so that no
// value printed can quote one, whatever form it takes there: the NATS
// password and token (also from a --nats-context), and the PostgreSQL
// password however pgx found it (URL, key=value, PGPASSWORD, passfile).
func knownSecrets(cfg runConfig) []string {
	secrets := []string{cfg.natsAuth.Password, cfg.natsAuth.Token, cfg.NATSPassword, cfg.NATSToken}
	if pg, err := pgconn.ParseConfig(cfg.PGURL); err == nil {
		secrets = append(secrets, pg.Password)
	}
	return secrets
}

// redactSetting is value as `outboxd config` may print it.
func redactSetting(name, value string, secrets []string) string {
	switch name {
	case "nats-password", "nats-token", "role-password":
		if value != "" {
			return redacted
		}
	case "pg-url":
		value = redactConnString(value, false)
	case "nats-url":
		// NATS reads a URL's user without a password as a token.
		var urls []string
		for _, u := range strings.Split(value, ",") {
			urls = append(urls, redactConnString(u, true))
		}
		value = strings.Join(urls, ",")
	case "nats-monitor-url":
		value = redactConnString(value, false)
	}
	for _, s := range secrets {
		if len(s) > 0 {
			value = strings.ReplaceAll(value, s, redacted)
		}
	}
	return value
}

// secretKeywordRe finds password=... in a key=value connection string.
var secretKeywordRe = regexp.MustCompile(`(?i)(\w*(?:password|token)\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactConnString masks the password of a URL (and its user too when
// userIsSecret), query parameters named like passwords or tokens, and
// password=... in the key=value form.
func redactConnString(s string, userIsSecret bool) string {
	if !strings.Contains(s, "://") {
		return secretKeywordRe.ReplaceAllString(s, "${1}"+redacted)
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return redacted // unreadable, so it cannot be masked in part
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		} else if userIsSecret {
			u.User = url.User(redacted)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if lower := strings.ToLower(k); strings.Contains(lower, "password") || strings.Contains(lower, "token") {
				q.Set(k, redacted)
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
