package natsconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// UnreachableError is a request or publish that failed because the
// connection to NATS was down: the servers it connects to, and why the
// last attempt to reach them failed.
type UnreachableError struct {
	// Servers are the configured server URLs, without user information.
	Servers []string
	// Cause is why the last attempt to connect failed (the dial error,
	// or the server's refusal), nil when none failed yet.
	Cause error
	err   error
}

// Error names the servers, the cause, and what to check when it is the
// network's: the host name, or the server.
func (e *UnreachableError) Error() string {
	cause, hint := "not connected yet", "; is nats-server running with -js?"
	if e.Cause != nil {
		cause = e.Cause.Error()
	}
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(e.Cause, &dnsErr):
		hint = "; check the host name in --nats-url"
	case e.Cause != nil && !errors.As(e.Cause, &netErr):
		hint = "" // the server answered and refused: the cause says why
	}
	return fmt.Sprintf("NATS at %s cannot be reached: %s%s", strings.Join(e.Servers, ", "), cause, hint)
}

// Unwrap returns the error of the request or publish.
func (e *UnreachableError) Unwrap() error { return e.err }

// Explain returns err, an error of a request or publish on nc, as an
// *UnreachableError when it failed because nc was not connected, and err
// itself otherwise. Connect's connections buffer nothing while they
// reconnect, so nats.go reports only "outbound buffer limit exceeded"
// then, which says nothing of the server being down.
func Explain(nc *nats.Conn, err error) error {
	if !errors.Is(err, nats.ErrReconnectBufExceeded) && !errors.Is(err, nats.ErrConnectionReconnecting) {
		return err
	}
	var servers []string
	for _, s := range nc.Opts.Servers {
		servers = append(servers, redactURL(s))
	}
	if len(servers) == 0 {
		servers = []string{redactURL(nc.Opts.Url)}
	}
	cause := nc.LastError()
	if d, ok := nc.Opts.CustomDialer.(*dialer); ok {
		if dialErr := d.lastError(); dialErr != nil {
			cause = dialErr
		}
	}
	return &UnreachableError{Servers: servers, Cause: cause, err: err}
}

// dialer is nats.go's default dialer that remembers the error of its
// last dial. nats.go hands a failed reconnect's dial error only to the
// ReconnectErrHandler, never to LastError; Explain finds the dialer again
// in the connection's options.
type dialer struct {
	net.Dialer

	mu  sync.Mutex
	err error // of the last dial, nil after one that connected
}

func newDialer() *dialer {
	return &dialer{Dialer: net.Dialer{Timeout: nats.DefaultTimeout}}
}

// Dial is net.Dialer's, recording the outcome.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	conn, err := d.Dialer.Dial(network, address)
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
	return conn, err
}

func (d *dialer) lastError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
