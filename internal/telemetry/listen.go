package telemetry

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// DefaultAddr is where outboxd serves metrics, health and the status page
// unless told otherwise: local only, on the port registered for it among
// Prometheus exporters. The container image listens on all interfaces
// (OUTBOXD_METRICS_ADDR=:9187).
const DefaultAddr = "127.0.0.1:9187"

// Listen listens on addr. When addr is in use and fallback is true (the
// address is the default, not one the operator chose), it listens on a free
// port of the same host instead, so that a second outboxd on one host (a
// hot standby, another slot) starts; the caller logs the address it got. An
// address the operator chose is never replaced: its error says how to
// choose another.
func Listen(addr string, fallback bool) (ln net.Listener, fellBack bool, err error) {
	ln, err = net.Listen("tcp", addr)
	if err == nil {
		return ln, false, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, false, fmt.Errorf("--metrics-addr %q: %w: choose another host:port, or \"\" to serve no metrics", addr, err)
	}
	host, _, splitErr := net.SplitHostPort(addr)
	if !fallback || splitErr != nil {
		return nil, false, fmt.Errorf("--metrics-addr %q: %w (another outboxd on this host?): choose a free port, %q for any free one, or \"\" to serve no metrics",
			addr, err, net.JoinHostPort(host, "0"))
	}
	ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, false, fmt.Errorf("--metrics-addr %q is in use and no other port of %q is free: %w", addr, host, err)
	}
	return ln, true, nil
}
