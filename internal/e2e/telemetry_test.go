package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// metricsURL waits for outboxd to say where it serves metrics (the tests
// give it --metrics-addr 127.0.0.1:0) and returns the base URL.
func (p *proc) metricsURL() string {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(p.output.String()))
		for sc.Scan() {
			var line struct {
				Message string `json:"message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Message, "serving metrics") && line.Addr != "" {
				return "http://" + line.Addr
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("outboxd never said where it serves metrics:\n%s", tail(p.output.String(), 20))
	return ""
}

// httpGet returns the status code and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// scrape reads base/metrics into metric families by name.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return families
}

// metric is the value of the series of name whose labels include the
// given name=value pairs; ok is false when there is none.
func metric(families map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsAndHealth streams real events through the real binary, then
// checks what /metrics, /healthz and /readyz say: every event counted once
// and timed, the confirmed position advanced, the lag back to about zero; a
// second outboxd on the same slot reports the standby role and is ready
// (it can take over), only the first is active; NATS down
// makes the active one not ready, and its return ready again.
func TestMetricsAndHealth(t *testing.T) {
	const events = 3000
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 40)
	p := e.start(e.args("--stream-check-interval", "1s")...)
	base := p.metricsURL()
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q, want 200", code, body)
	}
	e.waitStreaming(p)
	testsync.Eventually(t, 30*time.Second, func() string {
		if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK {
			return fmt.Sprintf("/readyz = %d %q while streaming, want 200", code, body)
		}
		return ""
	})
	before := scrape(t, base)
	confirmedBefore, _ := metric(before, "outboxd_confirmed_lsn_bytes")

	if err := w.background(events, time.Millisecond, func(i int) (int, bool) { return 1 + i%9, i%10 != 3 }).Wait(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, 2*time.Minute)
	t.Logf("streamed: %s", report)
	committed := check.Count()

	var after map[string]*dto.MetricFamily
	testsync.Eventually(t, 30*time.Second, func() string {
		after = scrape(t, base)
		published, _ := metric(after, "outboxd_events_published_total", "stream", streamName)
		timed, _ := metric(after, "outboxd_commit_to_ack_seconds")
		inFlight, _ := metric(after, "outboxd_in_flight_messages")
		lag, lagOK := metric(after, "outboxd_replication_lag_bytes")
		if int(published) != committed || int(timed) != committed || inFlight != 0 || !lagOK || lag > 64<<10 {
			return fmt.Sprintf("published %v, timed %v, in flight %v, lag %v bytes (known %v); want %d, %d, 0 and under 64 KiB",
				published, timed, inFlight, lag, lagOK, committed, committed)
		}
		return ""
	})
	confirmed, _ := metric(after, "outboxd_confirmed_lsn_bytes")
	received, _ := metric(after, "outboxd_received_lsn_bytes")
	lag, _ := metric(after, "outboxd_replication_lag_bytes")
	retained, retainedOK := metric(after, "outboxd_slot_retained_wal_bytes")
	t.Logf("confirmed LSN %.0f -> %.0f, received %.0f, lag %.0f bytes, retained WAL %.0f bytes", confirmedBefore, confirmed, received, lag, retained)
	if confirmed <= confirmedBefore || received < confirmed {
		t.Errorf("confirmed LSN %v -> %v, received %v: want confirmed to advance and received at or past it", confirmedBefore, confirmed, received)
	}
	if !retainedOK {
		t.Error("no outboxd_slot_retained_wal_bytes")
	}
	// The stream check sampled acknowledged messages and found them there.
	testsync.Eventually(t, 30*time.Second, func() string {
		checks := scrape(t, base)
		ok, _ := metric(checks, "outboxd_stream_checks_total", "result", "ok")
		missing, _ := metric(checks, "outboxd_stream_checks_total", "result", "missing")
		replaced, _ := metric(checks, "outboxd_stream_checks_total", "result", "replaced")
		if ok < 1 || missing != 0 || replaced != 0 {
			return fmt.Sprintf("stream checks ok %v, missing %v, replaced %v; want some ok and no other", ok, missing, replaced)
		}
		return ""
	})
	for _, zero := range []string{"outboxd_duplicates_total", "outboxd_dead_lettered_total", "outboxd_standby"} {
		if v, ok := metric(after, zero); !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", zero, v, ok)
		}
	}
	if errs, ok := metric(after, "outboxd_publish_errors_total", "reason", "timeout"); !ok || errs != 0 {
		t.Errorf("outboxd_publish_errors_total{reason=timeout} = %v (present %v), want 0", errs, ok)
	}

	// A second outboxd on the same slot stands by, ready to take over,
	// and says so.
	standby := e.start(e.args("--standby-retry", "200ms")...)
	standbyBase := standby.metricsURL()
	testsync.Eventually(t, 30*time.Second, func() string {
		metrics := scrape(t, standbyBase)
		v, _ := metric(metrics, "outboxd_standby")
		active, _ := metric(metrics, "outboxd_active")
		code, body := httpGet(t, standbyBase+"/readyz")
		if v != 1 || active != 0 || code != http.StatusOK || !strings.Contains(body, "standby") || !strings.Contains(body, "active in another process") {
			return fmt.Sprintf("standby: outboxd_standby %v, outboxd_active %v, /readyz %d %q; want 1, 0 and 200 naming the standby", v, active, code, body)
		}
		return ""
	})
	if v, _ := metric(scrape(t, base), "outboxd_standby"); v != 0 {
		t.Errorf("the active outboxd reports outboxd_standby %v, want 0", v)
	}
	if v, _ := metric(scrape(t, base), "outboxd_active"); v != 1 {
		t.Errorf("the active outboxd reports outboxd_active %v, want 1", v)
	}
	// The status page's data says the same.
	_, body := httpGet(t, standbyBase+"/status.json")
	var page struct {
		Now struct {
			State  string `json:"state"`
			Role   string `json:"role"`
			Reason string `json:"reason"`
			Ready  bool   `json:"ready"`
		} `json:"now"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || page.Now.State != "standby" || page.Now.Role != "standby" || !page.Now.Ready ||
		!strings.Contains(page.Now.Reason, "active in another process") {
		t.Errorf("standby's status.json: %+v (%v), want state and role standby, ready, with the reason", page.Now, err)
	}
	standby.stopCleanly()

	// NATS down: not ready, saying why; back: ready again, one reconnect.
	e.nats.Shutdown()
	testsync.Eventually(t, 30*time.Second, func() string {
		code, body := httpGet(t, base+"/readyz")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "NATS") {
			return fmt.Sprintf("NATS down: /readyz %d %q, want 503 naming NATS", code, body)
		}
		return ""
	})
	e.nats.Restart(t)
	testsync.Eventually(t, 60*time.Second, func() string {
		code, body := httpGet(t, base+"/readyz")
		reconnects, _ := metric(scrape(t, base), "outboxd_reconnects_total", "target", "nats")
		if code != http.StatusOK || reconnects < 1 {
			return fmt.Sprintf("NATS back: /readyz %d %q, NATS reconnects %v; want 200 and at least 1", code, body, reconnects)
		}
		return ""
	})
	p.stopCleanly()
}
