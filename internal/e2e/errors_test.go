package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestNATSDownAtStart: with no NATS server at --nats-url, outboxd says
// NATS cannot be reached, naming the URL and the dial error (not nats.go's
// "outbound buffer limit exceeded"), and streams once the server is up.
func TestNATSDownAtStart(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	e.nats.Shutdown() // the port stays free for Restart
	p := e.start(e.args()...)
	addr := strings.TrimPrefix(e.url(), "nats://")
	want := fmt.Sprintf("NATS at %s cannot be reached: dial tcp %s: connect: connection refused; is nats-server running with -js?", e.url(), addr)
	waitOutput(t, p, regexp.MustCompile(regexp.QuoteMeta(want)), 30*time.Second)
	if strings.Contains(p.output.String(), "outbound buffer") {
		t.Errorf("output quotes nats.go's buffer error:\n%s", tail(p.output.String(), 20))
	}
	e.nats.Restart(t)
	e.waitStreaming(p)
	p.stopCleanly()
}
