package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// lastLine is the last line of out, which must be a JSON log line.
func lastLine(t *testing.T, out string) logLine {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var l logLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &l); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, tail(out, 5))
	}
	return l
}

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

// TestPostgresUnreachableRetries: with nothing listening at --pg-url's
// address, every retry is a warning with the cause, the attempt and the
// wait with its unit, the waits growing with jitter within the backoff's
// bounds; SIGTERM still stops outboxd cleanly.
func TestPostgresUnreachableRetries(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := e.start(e.args("--pg-url", "postgres://outboxd@"+addr+"/outboxd?sslmode=disable")...)
	// Attempts 1 to 4 wait at most 0.2 + 0.4 + 0.8 + 1.6 s.
	waitOutput(t, p, regexp.MustCompile(`"attempt":5\b`), 30*time.Second)
	if code := p.stop(time.Minute); code != 0 {
		t.Errorf("outboxd exited %d after SIGTERM, want 0", code)
	}

	ceilings := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond}
	attempt := 0
	for _, l := range parseLog(t, p.output.String()) {
		if l["message"] != "session interrupted; retrying" {
			continue
		}
		attempt++
		cause, _ := l["error"].(string)
		if l["level"] != "warn" || l["attempt"] != float64(attempt) || !strings.Contains(cause, "dial tcp "+addr+": connect: connection refused") {
			t.Errorf("retry %d: want a warning with attempt %d and the dial error: %v", attempt, attempt, l)
		}
		retryIn, _ := l["retry_in"].(string)
		wait, err := time.ParseDuration(retryIn)
		if err != nil {
			t.Errorf("retry %d: retry_in %v is not a duration with a unit", attempt, l["retry_in"])
			continue
		}
		if attempt <= len(ceilings) && (wait < ceilings[attempt-1]/2 || wait > ceilings[attempt-1]) {
			t.Errorf("retry %d: retry_in %s, want from %s to %s", attempt, wait, ceilings[attempt-1]/2, ceilings[attempt-1])
		}
	}
	if attempt < 5 {
		t.Errorf("%d retries logged, want one per attempt (at least 5):\n%s", attempt, tail(p.output.String(), 20))
	}
}

// TestFatalErrorLogged: an error that stops outboxd after it made its
// logger is its last line, JSON at error level, and the exit status is 1;
// an error before (a flag that does not parse) is plain text only.
func TestFatalErrorLogged(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	out := e.expectExit([]string{"run", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot, "--metrics-addr", ""})
	last := lastLine(t, out)
	cause, _ := last["error"].(string)
	if last["level"] != "error" || last["message"] != "exiting with status 1" ||
		!strings.Contains(cause, `stream "OUTBOX" does not exist`) || !strings.Contains(cause, "--create-stream") {
		t.Errorf("last line: want the error at level error: %v", last)
	}

	out = e.expectExit([]string{"run", "--no-such-flag"})
	if got := strings.TrimSpace(out); !strings.HasPrefix(got, "outboxd: error: unknown flag: --no-such-flag") || strings.Contains(got, "\n") {
		t.Errorf("flag error: got %q, want one line of plain text", got)
	}
}

// TestRowErrorNamesDeadLetter: the error that stops outboxd on a row that
// cannot be published names --dead-letter SUBJECT, and for a value that
// does not fit the subject, the --subject template in use.
func TestRowErrorNamesDeadLetter(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		insert string
		want   []string
	}{
		{
			name:   "subject",
			args:   []string{"--subject", "outbox.{aggregate_type}.{event_type}"},
			insert: `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order.v2', '1', 'Created', '{}')`,
			want: []string{`"order.v2" is not a valid subject token`, `the subject template in use is --subject "outbox.{aggregate_type}.{event_type}"`,
				"set --dead-letter SUBJECT"},
		},
		{
			name:   "headers",
			insert: `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, 'order', '1', 'Created', '{}', '{"retry": {"count": 3}}')`,
			want:   []string{`column "headers"`, `"retry"`, "set --dead-letter SUBJECT"},
		},
	}
	pg := pgtest.Shared(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pg, true)
			p := e.start(e.args(tt.args...)...)
			e.waitStreaming(p)
			id := uuid.New()
			if _, err := e.connect().Exec(context.Background(), tt.insert, id); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(time.Minute); code != 1 {
				t.Fatalf("outboxd exited %d on a bad row, want 1", code)
			}
			cause, _ := lastLine(t, p.output.String())["error"].(string)
			for _, w := range append(tt.want, `outbox row id "`+id.String()+`"`) {
				if !strings.Contains(cause, w) {
					t.Errorf("error lacks %q:\n%s", w, cause)
				}
			}
		})
	}
}
