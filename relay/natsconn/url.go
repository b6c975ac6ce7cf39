package natsconn

import (
	"fmt"
	"net/url"
	"strings"
)

// Schemes nats.go connects with: plain TCP, TLS, WebSocket and WebSocket
// over TLS. It dials any other scheme as plain TCP, so an http:// address
// (a monitoring port) would fail later with a protocol error instead of
// now.
var schemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// ValidateURL checks a --nats-url value as nats.Connect reads it: URLs
// separated by commas, spaces around each allowed, empty entries skipped;
// each one nats://, tls://, ws:// or wss:// with a host (a bare host:port
// means nats://), and WebSocket URLs not mixed with the others. The error
// names the flag and what to use; it never quotes a user or password.
func ValidateURL(list string) error {
	urls, websocket := 0, 0
	for _, raw := range strings.Split(list, ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		// The flag and value, and in a list the entry at fault.
		what := fmt.Sprintf("--nats-url %q", redactURL(list))
		if strings.TrimSpace(list) != raw {
			what += fmt.Sprintf(": %q", redactURL(raw))
		}
		u, err := parseServerURL(raw)
		if err != nil {
			return fmt.Errorf("%s is not a URL: use nats://host:4222", what)
		}
		if !schemes[u.Scheme] {
			hint := ""
			if u.Scheme == "http" || u.Scheme == "https" {
				hint = " (an HTTP address is the server's monitoring port: that one goes in --nats-monitor-url)"
			}
			return fmt.Errorf("%s is not a NATS URL: the scheme is %s, want nats://host:4222, tls:// for TLS, or ws:// or wss:// for WebSocket%s",
				what, u.Scheme, hint)
		}
		if u.Hostname() == "" {
			return fmt.Errorf("%s names no host: use nats://host:4222", what)
		}
		urls++
		if u.Scheme == "ws" || u.Scheme == "wss" {
			websocket++
		}
	}
	if urls == 0 {
		return fmt.Errorf("--nats-url %q is not a URL: use nats://host:4222", redactURL(list))
	}
	if websocket > 0 && websocket < urls {
		return fmt.Errorf("--nats-url %q mixes WebSocket (ws://, wss://) and other URLs: nats.go connects to servers of one kind; list only one", redactURL(list))
	}
	return nil
}

// parseServerURL parses one server URL as nats.go does: without "://" it
// is a nats:// address.
func parseServerURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		raw = "nats://" + raw
	}
	return url.Parse(raw)
}

// redactURL is a URL list with the user information (a user and password,
// or a token) of each entry replaced by [redacted]: everything up to the
// entry's last '@', after its scheme. A password may hold an '@' that is
// not escaped, so the text is cut, not parsed.
func redactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, raw := range parts {
		at := strings.LastIndex(raw, "@")
		if at < 0 {
			continue
		}
		start := 0
		if s := strings.Index(raw, "://"); s >= 0 && s < at {
			start = s + len("://")
		}
		parts[i] = raw[:start] + "[redacted]" + raw[at:]
	}
	return strings.Join(parts, ",")
}
