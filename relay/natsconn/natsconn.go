// Package natsconn connects outboxd to NATS: the authentication and TLS
// options (checked at start, errors naming the flag and file but never a
// secret), the connection a relay keeps (reconnecting for ever, publishes
// failing at once while disconnected), the one-shot connection of a
// command, nats CLI contexts, and the log of permission violations.
package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Auth is how outboxd authenticates to NATS and secures the connection:
// the --nats-* flags merged with a nats CLI context, checked by
// resolveNATSAuth. At most one of Creds, Nkey, User and Token is set.
type Auth struct {
	Creds    string // JWT user credentials file
	Nkey     string // nkey seed file
	User     string
	Password string
	Token    string
	CA       string // PEM file of the CAs that sign the server's certificate
	Cert     string // PEM client certificate, with Key
	Key      string
}

// Options turns a checked Auth into connection options. Files
// are read here, so a bad file is reported at start: the error names the
// flag and the path, never the file's content.
func Options(a Auth) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case a.Creds != "":
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.Nkey != "":
		opt, err := nats.NkeyOptionFromSeed(a.Nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %q is not an nkey seed file (a line starting with SU): %s", a.Nkey, Redact(err, a))
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
			return nil, fmt.Errorf("%s %q: %s", f.flag, f.path, Redact(err, a))
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

// Redact is err's text with the password and token cut out, in case a
// library quotes them.
func Redact(err error, a Auth) string {
	s := err.Error()
	for _, secret := range []string{a.Password, a.Token} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// Connect connects to the NATS servers at url for a long-running relay: it
// reconnects for ever, and retries a first connection in the background
// (the server may not be up yet) unless it was refused for credentials or
// TLS, which retrying cannot fix. onReconnect runs after each reconnect.
// While it is down, requests and publishes fail at once; Explain turns
// their error into one that names the server and why it cannot be reached.
func Connect(url string, a Auth, log zerolog.Logger, onReconnect func()) (*nats.Conn, error) {
	log = log.With().Str("component", "nats").Logger()
	auth, err := Options(a)
	if err != nil {
		return nil, err
	}
	perms := newPermissionLog(log)
	opts := []nats.Option{
		nats.Name("outboxd"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		// Remembers why the server cannot be reached, for Explain.
		nats.SetCustomDialer(newDialer()),
		// Publishes fail at once while reconnecting instead of waiting in a
		// buffer that would be flushed ahead of the republished window.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // our own Close at shutdown
			}
			log.Warn().Err(err).Msg("disconnected from NATS; nothing is confirmed past the last acknowledgement")
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			perms.reset()
			onReconnect()
			log.Info().Str("url", c.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		// A publish the user may not make is not answered by JetStream: the
		// server reports it here, asynchronously, and the publish times out.
		// This log line names the subject and the permission.
		nats.ErrorHandler(perms.handle),
	}
	opts = append(opts, auth...)
	nc, err := nats.Connect(url, append(opts, nats.RetryOnFailedConnect(false))...)
	if err != nil && !retryConnect(err) {
		// Authentication and TLS errors do not heal by retrying.
		return nil, fmt.Errorf("connect to NATS at --nats-url: %s", Redact(err, a))
	}
	if err != nil {
		if nc, err = nats.Connect(url, opts...); err != nil {
			return nil, fmt.Errorf("connect to NATS at --nats-url: %s", Redact(err, a))
		}
	}
	return nc, nil
}

// retryConnect reports whether a first connection error is worth retrying
// in the background (the server is not up yet) rather than stopping:
// refused credentials and certificates stay refused.
func retryConnect(err error) bool {
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired), errors.Is(err, nats.ErrSecureConnRequired),
		errors.Is(err, nats.ErrSecureConnWanted), errors.Is(err, nats.ErrClientCertOrRootCAsRequired),
		errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostErr):
		return false
	}
	return !strings.Contains(err.Error(), "tls:") && !strings.Contains(err.Error(), "x509:")
}

// ConnectOnce connects for a one-shot command: no reconnecting, and an
// error (redacted) when the server does not answer.
func ConnectOnce(url string, a Auth, name string) (*nats.Conn, error) {
	auth, err := Options(a)
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name(name), nats.NoReconnect(), nats.Timeout(5 * time.Second)}, auth...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at --nats-url: %s", Redact(err, a))
	}
	return nc, nil
}
