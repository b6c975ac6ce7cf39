package natsconn

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// TestPermissionLog: a violation is logged once per subject, again after a
// reconnect or a minute, and a subscribe violation names the operation.
func TestPermissionLog(t *testing.T) {
	var buf bytes.Buffer
	p := newPermissionLog(zerolog.New(&buf))
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	violation := func(subject string) error {
		return fmt.Errorf("%w: Permissions Violation for Publish to %q", nats.ErrPermissionViolation, subject)
	}
	count := func() int {
		return strings.Count(buf.String(), "permissions violation for publish to outbox.invoice.Created")
	}

	p.handle(nil, nil, violation("outbox.invoice.Created"))
	p.handle(nil, nil, violation("outbox.invoice.Created"))
	if got := count(); got != 1 {
		t.Fatalf("logged %d times, want once:\n%s", got, buf.String())
	}
	for _, want := range []string{`"permission":"publish"`, `"subject":"outbox.invoice.Created"`, `"level":"error"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %s lacks %s", buf.String(), want)
		}
	}
	p.handle(nil, nil, violation("outbox.invoice.Updated"))
	if !strings.Contains(buf.String(), "publish to outbox.invoice.Updated") {
		t.Error("a second subject was not logged")
	}
	p.reset() // reconnected
	p.handle(nil, nil, violation("outbox.invoice.Created"))
	if got := count(); got != 2 {
		t.Errorf("after a reconnect logged %d times in all, want 2", got)
	}
	now = now.Add(2 * time.Minute)
	p.handle(nil, nil, violation("outbox.invoice.Created"))
	if got := count(); got != 3 {
		t.Errorf("a minute later logged %d times in all, want 3", got)
	}
	p.handle(nil, nil, fmt.Errorf("%w: Permissions Violation for Subscription to \"_INBOX.x\"", nats.ErrPermissionViolation))
	if !strings.Contains(buf.String(), "permissions violation for subscribe to _INBOX.x") {
		t.Errorf("subscribe violation not logged:\n%s", buf.String())
	}
}
