package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// TestHangup sends SIGHUP to a streaming outboxd: it reloads its log
// level (from flags and environment that cannot change, so the level
// stays) and keeps streaming, where SIGHUP's default would have killed it.
func TestHangup(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 10)
	p := e.start(e.args()...)
	e.waitStreaming(p)
	for range 2 {
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	testsync.Eventually(t, 10*time.Second, func() string {
		if n := strings.Count(p.output.String(), "SIGHUP: log level reloaded"); n != 2 {
			return fmt.Sprintf("outboxd logged the reload %d times, want 2", n)
		}
		return ""
	})
	select {
	case <-p.done:
		t.Fatalf("outboxd exited after SIGHUP: %v", p.err)
	default:
	}
	if err := w.background(500, 0, func(i int) (int, bool) { return 1 + i%5, true }).Wait(); err != nil {
		t.Fatal(err)
	}
	e.verify(e.js(), check, time.Minute)
	p.stopCleanly()
}

// TestShutdownTimeout stops outboxd with SIGTERM while NATS is down and
// messages are in flight: it gives up after --shutdown-timeout and exits
// 0, confirming nothing it could not publish; started again with NATS
// back, it publishes everything.
func TestShutdownTimeout(t *testing.T) {
	const timeout = 3 * time.Second
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 10)
	p := e.start(e.args("--shutdown-timeout", timeout.String())...)
	e.waitStreaming(p)
	if err := w.background(200, 0, func(i int) (int, bool) { return 1 + i%5, true }).Wait(); err != nil {
		t.Fatal(err)
	}
	e.readStream(e.js(), check.Count(), time.Minute)

	e.nats.Shutdown()
	if err := w.background(300, 0, func(i int) (int, bool) { return 1 + i%5, true }).Wait(); err != nil {
		t.Fatal(err)
	}
	base := p.metricsURL()
	testsync.Eventually(t, 30*time.Second, func() string {
		if v, _ := metric(scrape(t, base), "outboxd_in_flight_messages"); v == 0 {
			return "nothing in flight yet"
		}
		return ""
	})
	stopped := time.Now()
	if code := p.stop(time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	took := time.Since(stopped)
	t.Logf("SIGTERM with NATS down: exited after %s (--shutdown-timeout %s)", took.Round(time.Millisecond), timeout)
	if took < timeout || took > timeout+20*time.Second {
		t.Errorf("exited %s after SIGTERM, want just over the shutdown timeout %s", took, timeout)
	}
	if !strings.Contains(p.output.String(), "shutdown timeout: stopping with messages unacknowledged") {
		t.Errorf("no shutdown timeout log line:\n%s", tail(p.output.String(), 20))
	}

	e.nats.Restart(t)
	again := e.start(e.args()...)
	report := e.verify(e.js(), check, 2*time.Minute)
	t.Logf("after the restart: %s", report)
	again.stopCleanly()
}
