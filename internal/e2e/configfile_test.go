package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// configFile writes an outboxd YAML config file for e, with slot and
// extra lines, and returns its path.
func (e *env) configFile(slot string, extra ...string) string {
	e.t.Helper()
	lines := append([]string{
		"pg-url: " + e.dsn,
		"nats-url: " + e.url(),
		"slot: " + slot,
		"stream: " + streamName,
		"create-stream: true",
		"metrics-addr: 127.0.0.1:0",
	}, extra...)
	path := filepath.Join(e.dir, "outboxd.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// TestRunFromConfigFile runs the real binary with every setting from a
// config file (one overridden by the environment), streams events through
// it, and reloads the log level from the file on SIGHUP.
func TestRunFromConfigFile(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	checkpointPath := filepath.Join(e.dir, "checkpoint.json")
	settings := []string{"checkpoint: file:" + checkpointPath, "max-in-flight: 64", "log-level: info"}
	path := e.configFile("not_this_slot", settings...)
	t.Setenv("OUTBOXD_SLOT", e.slot) // the environment wins over the file

	p := e.start("run", "--config", path)
	e.waitStreaming(p) // on e.slot: the environment won over the file

	check := checker.New()
	w := e.newWriter(check, 10)
	const total = 500
	for n := 0; n < total; n += 50 {
		if _, err := w.tx(context.Background(), 50, true); err != nil {
			t.Fatal(err)
		}
	}
	if report := e.verify(e.js(), check, time.Minute); !report.OK() {
		t.Fatalf("stream check failed: %s", report)
	}

	// SIGHUP re-reads log-level from the file.
	settings[len(settings)-1] = "log-level: debug"
	e.configFile("not_this_slot", settings...)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, p, func(l logLine) bool {
		return l["message"] == "SIGHUP: log level reloaded" && l["from"] == "info" && l["to"] == "debug"
	})
	p.stopCleanly()

	// The checkpoint went where the file said.
	if _, err := os.Stat(checkpointPath); err != nil {
		t.Errorf("checkpoint: file:%s from the config file was not written: %v", checkpointPath, err)
	}
}

// TestLogFields: a real run's JSON log carries the stable field names where
// they belong, and at info there is one line per state change, none per
// event.
func TestLogFields(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	const deadLetter = "outbox.dead-letter"
	p := e.start("run", "--config", e.configFile(e.slot, "log-level: info", "dead-letter: "+deadLetter))
	e.waitStreaming(p)

	check := checker.New()
	w := e.newWriter(check, 10)
	const txs, perTx = 100, 5
	var good []row
	for range txs {
		rows, err := w.tx(context.Background(), perTx, true)
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, rows...)
	}
	// A row whose subject NATS refuses ("order.v2" is two tokens): it is
	// dead-lettered, and that is logged with its id, xid and LSN.
	bad := uuid.New()
	conn := e.connect()
	var xid uint32
	err := conn.QueryRow(context.Background(), `WITH ins AS (INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
		VALUES ($1, 'order.v2', '1', 'Created', '{}') RETURNING 1) SELECT txid_current()::bigint::int4 FROM ins`, bad).Scan(&xid)
	if err != nil {
		t.Fatal(err)
	}
	e.readStream(e.js(), len(good)+1, time.Minute)
	p.stopCleanly()

	lines := parseLog(t, p.output.String())
	has := func(l logLine, fields ...string) bool {
		for _, f := range fields {
			if s, ok := l[f].(string); !ok || s == "" {
				if _, isNum := l[f].(float64); !isNum {
					return false
				}
			}
		}
		return true
	}
	find := func(what string, match func(logLine) bool) logLine {
		t.Helper()
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		t.Errorf("no log line with %s", what)
		return nil
	}

	streaming := find(`message "streaming"`, func(l logLine) bool { return l["message"] == "streaming" })
	if streaming != nil && (streaming["slot"] != e.slot || streaming["stream"] != streamName || !has(streaming, "lsn")) {
		t.Errorf(`"streaming" line lacks slot %q, stream %q or lsn: %v`, e.slot, streamName, streaming)
	}
	dead := find(`message "row dead-lettered"`, func(l logLine) bool { return l["message"] == "row dead-lettered" })
	if dead != nil {
		if dead["event_id"] != bad.String() || dead["xid"] != float64(xid) || dead["subject"] != deadLetter ||
			dead["stream"] != streamName || dead["component"] != "sink" || !has(dead, "lsn", "reason") {
			t.Errorf(`"row dead-lettered" line: want event_id %s, xid %d, subject %s, stream %s, component sink, lsn, reason; got %v`,
				bad, xid, deadLetter, streamName, dead)
		}
	}
	find(`component "telemetry"`, func(l logLine) bool { return l["component"] == "telemetry" })
	find(`message "drained and confirmed" with lsn`, func(l logLine) bool { return l["message"] == "drained and confirmed" && has(l, "lsn") })

	// One line per state change: no line names a good event, and there are
	// far fewer lines than transactions.
	ids := map[string]bool{}
	for _, r := range good {
		ids[r.ID.String()] = true
	}
	for _, l := range lines {
		raw, _ := json.Marshal(l)
		for id := range ids {
			if strings.Contains(string(raw), id) {
				t.Errorf("a log line names event %s at info: %s", id, raw)
				break
			}
		}
		if l["event_id"] != nil && l["event_id"] != bad.String() {
			t.Errorf("a per-event line at info: %s", raw)
		}
	}
	if len(lines) >= txs/2 {
		t.Errorf("%d log lines for %d transactions at info: want a line per state change, not per event or transaction:\n%s",
			len(lines), txs, p.output.String())
	}
	t.Logf("%d log lines at info for %d events in %d transactions", len(lines), len(good)+1, txs+1)
}

// logLine is one JSON log line.
type logLine map[string]any

// parseLog reads outboxd's output as JSON lines; a line that is not JSON
// fails the test (stderr is not a terminal, so every line must be JSON).
func parseLog(t *testing.T, out string) []logLine {
	t.Helper()
	var lines []logLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("log line is not JSON: %q", sc.Text())
			continue
		}
		for _, f := range []string{"level", "time", "message"} {
			if _, ok := l[f]; !ok {
				t.Errorf("log line lacks %q: %s", f, sc.Text())
			}
		}
		lines = append(lines, l)
	}
	return lines
}

// waitLog waits until a log line of p matches.
func waitLog(t *testing.T, p *proc, match func(logLine) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(p.output.String(), "\n") {
			var l logLine
			if json.Unmarshal([]byte(line), &l) == nil && match(l) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal(fmt.Errorf("no matching log line in 30s:\n%s", tail(p.output.String(), 30)))
}

// TestConfigFileBadSubjectColumn: a template naming no column of the table,
// from the config file, stops outboxd at start with the key, the file, the
// placeholder and the columns there are; as --subject would.
func TestConfigFileBadSubjectColumn(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	path := e.configFile(e.slot, "subject: outbox.{aggregate_typ}.{event_type}")
	p := e.start("run", "--config", path)
	if code := p.wait(time.Minute); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	out := p.output.String()
	for _, want := range []string{`--subject "outbox.{aggregate_typ}.{event_type}"`, "{aggregate_typ}", `"aggregate_type"`,
		`set by key "subject" in config file ` + path} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
