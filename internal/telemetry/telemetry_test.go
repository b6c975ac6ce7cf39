package telemetry

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/outboxd/outboxd/internal/version"
	"github.com/outboxd/outboxd/sink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ sink.Observer = (*Metrics)(nil)

// fakeProgress is a session position set by the test.
type fakeProgress struct{ received, confirmed, inFlight atomic.Int64 }

func (p *fakeProgress) Received() pglogrepl.LSN  { return pglogrepl.LSN(p.received.Load()) }
func (p *fakeProgress) Confirmed() pglogrepl.LSN { return pglogrepl.LSN(p.confirmed.Load()) }
func (p *fakeProgress) InFlight() int            { return int(p.inFlight.Load()) }

// TestMetricsNamesFollowConventions runs Prometheus' own linter over
// every metric outboxd registers.
func TestMetricsNamesFollowConventions(t *testing.T) {
	m := NewMetrics("OUTBOX")
	NewHealth(m)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsValues(t *testing.T) {
	m := NewMetrics("OUTBOX")
	committed := time.Now().Add(-50 * time.Millisecond)
	for range 3 {
		m.Published(committed, false)
	}
	m.Published(committed, true)
	m.Published(time.Now().Add(time.Hour), false) // a skewed clock: latency 0
	m.DeadLettered()
	m.PublishFailed(sink.ReasonTimeout)
	m.PublishFailed(sink.ReasonTimeout)
	m.Reconnected(TargetNATS)
	m.SetSlotWAL(1234, 5678)
	p := &fakeProgress{}
	p.received.Store(0x3000)
	p.confirmed.Store(0x2000)
	p.inFlight.Store(7)
	detach := m.Attach(p)

	want := `
# HELP outboxd_events_published_total Events JetStream acknowledged (duplicates included), by stream.
# TYPE outboxd_events_published_total counter
outboxd_events_published_total{stream="OUTBOX"} 5
# HELP outboxd_duplicates_total Acknowledgements JetStream reported as duplicates: a replayed event it already held (Nats-Msg-Id).
# TYPE outboxd_duplicates_total counter
outboxd_duplicates_total 1
# HELP outboxd_dead_lettered_total Rows that could not be published and went to the --dead-letter subject (acknowledged).
# TYPE outboxd_dead_lettered_total counter
outboxd_dead_lettered_total 1
# HELP outboxd_in_flight_messages Messages published but not yet acknowledged.
# TYPE outboxd_in_flight_messages gauge
outboxd_in_flight_messages 7
# HELP outboxd_received_lsn_bytes WAL position received from PostgreSQL (the write position reported to it), in bytes.
# TYPE outboxd_received_lsn_bytes gauge
outboxd_received_lsn_bytes 12288
# HELP outboxd_confirmed_lsn_bytes WAL position last confirmed to PostgreSQL as flushed, in bytes.
# TYPE outboxd_confirmed_lsn_bytes gauge
outboxd_confirmed_lsn_bytes 8192
# HELP outboxd_replication_lag_bytes pg_current_wal_lsn() minus the slot's confirmed_flush_lsn: WAL committed but not yet confirmed by outboxd.
# TYPE outboxd_replication_lag_bytes gauge
outboxd_replication_lag_bytes 1234
# HELP outboxd_slot_retained_wal_bytes pg_current_wal_lsn() minus the slot's restart_lsn: WAL the server keeps for this slot.
# TYPE outboxd_slot_retained_wal_bytes gauge
outboxd_slot_retained_wal_bytes 5678
`
	names := []string{"outboxd_events_published_total", "outboxd_duplicates_total", "outboxd_dead_lettered_total",
		"outboxd_in_flight_messages", "outboxd_received_lsn_bytes", "outboxd_confirmed_lsn_bytes",
		"outboxd_replication_lag_bytes", "outboxd_slot_retained_wal_bytes"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.publishErrors.WithLabelValues(sink.ReasonTimeout)); got != 2 {
		t.Errorf("publish errors (timeout) = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.publishErrors.WithLabelValues(sink.ReasonNoResponders)); got != 0 {
		t.Errorf("publish errors (no_responders) = %v, want 0", got)
	}
	if got := testutil.CollectAndCount(m.publishErrors); got != len(sink.Reasons) {
		t.Errorf("publish error series: %d, want one per reason (%d) from the start", got, len(sink.Reasons))
	}
	if got := testutil.ToFloat64(m.reconnects.WithLabelValues(TargetNATS)); got != 1 {
		t.Errorf("NATS reconnects = %v, want 1", got)
	}

	// The histogram: 5 observations, 4 of them at 50ms, one at 0.
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "outboxd_commit_to_ack_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 5 || h.GetSampleSum() < 0.2 || h.GetSampleSum() > 5 {
			t.Errorf("commit-to-ack histogram: count %d, sum %v; want 5 and about 0.2", h.GetSampleCount(), h.GetSampleSum())
		}
	}

	// Detached, the last position stays on show; in flight drops to 0.
	p.received.Store(0x4000)
	detach()
	p.received.Store(0x9000)
	if got := gathered(t, m, "outboxd_received_lsn_bytes"); got != 0x4000 {
		t.Errorf("received after detach = %v, want %v", got, 0x4000)
	}
	s := m.snapshot()
	if s.InFlight != 0 || s.ReceivedLSN != "0/4000" || s.ConfirmedLSN != "0/2000" || s.Published != 5 || s.PublishErrors != 2 ||
		s.Reconnects != 1 || s.LagBytes == nil || *s.LagBytes != 1234 {
		t.Errorf("snapshot after detach: %+v", s)
	}
}

// gathered is the value of the gauge name as the registry gathers it.
func gathered(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestReadiness checks /healthz, /readyz, the role and outboxd_active,
// outboxd_standby and outboxd_ready through a real HTTP server, in each
// state: a standby is ready (it can take over), only a streaming relay is
// active.
func TestReadiness(t *testing.T) {
	m := NewMetrics("OUTBOX")
	h := NewHealth(m)
	var natsUp atomic.Bool
	natsUp.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(h, nil)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String()

	steps := []struct {
		name    string
		set     func()
		code    int
		body    string
		role    string
		active  float64
		standby float64
		ready   float64
	}{
		{"starting", func() {}, 503, "not ready: starting", RoleNone, 0, 0, 0},
		{"streaming before NATS is known", func() { h.Set(Streaming, "") }, 503, "not ready: NATS: not connected yet", RoleActive, 1, 0, 0},
		{"streaming", func() {
			h.SetNATS(func() (bool, string) {
				return natsUp.Load(), map[bool]string{true: "CONNECTED", false: "RECONNECTING"}[natsUp.Load()]
			})
		}, 200, "ready: streaming; NATS connected", RoleActive, 1, 0, 1},
		{"NATS down", func() { natsUp.Store(false) }, 503, "not ready: NATS: not connected (RECONNECTING)", RoleActive, 1, 0, 0},
		{"standby with NATS down", func() {
			h.Set(Standby, `replication slot "outboxd" is active in another process`)
		}, 503, "not ready: NATS: not connected (RECONNECTING)", RoleStandby, 0, 1, 0},
		{"standby", func() { natsUp.Store(true) }, 200,
			`ready: standby: replication slot "outboxd" is active in another process; NATS connected`, RoleStandby, 0, 1, 1},
		{"retrying", func() { h.Set(Retrying, "receive replication message: EOF") }, 503, "not ready: retrying: receive replication message: EOF", RoleNone, 0, 0, 0},
		{"streaming again", func() { h.Set(Streaming, "") }, 200, "ready: ", RoleActive, 1, 0, 1},
		{"stopping", func() { h.Set(Stopping, "asked to stop") }, 503, "not ready: stopping: asked to stop", RoleNone, 0, 0, 0},
	}
	for _, st := range steps {
		st.set()
		code, body := get(t, base+"/readyz")
		if code != st.code || !strings.HasPrefix(body, st.body) {
			t.Errorf("%s: /readyz = %d %q, want %d %q", st.name, code, body, st.code, st.body)
		}
		if got := testutil.ToFloat64(m.standby); got != st.standby {
			t.Errorf("%s: outboxd_standby = %v, want %v", st.name, got, st.standby)
		}
		if got := testutil.ToFloat64(m.active); got != st.active {
			t.Errorf("%s: outboxd_active = %v, want %v", st.name, got, st.active)
		}
		if got := h.Snapshot().Role; got != st.role {
			t.Errorf("%s: role %q, want %q", st.name, got, st.role)
		}
		if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("%s: /healthz = %d %q, want 200 ok", st.name, code, body)
		}
		code, body = get(t, base+"/metrics")
		want := "outboxd_ready " + map[float64]string{0: "0", 1: "1"}[st.ready]
		if code != 200 || !strings.Contains(body, want+"\n") {
			t.Errorf("%s: /metrics = %d without %q", st.name, code, want)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
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

// TestObserverAllocatesNothing: the methods the publisher calls for every
// event must not allocate (they run on its hot path).
func TestObserverAllocatesNothing(t *testing.T) {
	m := NewMetrics("OUTBOX")
	committed := time.Now()
	for name, f := range map[string]func(){
		"Published":           func() { m.Published(committed, false) },
		"Published duplicate": func() { m.Published(committed, true) },
		"DeadLettered":        m.DeadLettered,
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %v times per call, want 0", name, n)
		}
	}
}

// BenchmarkPublished is the instrumentation's cost per published event.
func BenchmarkPublished(b *testing.B) {
	m := NewMetrics("OUTBOX")
	committed := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		m.Published(committed, false)
	}
}

// TestBuildInfo: outboxd_build_info is 1 with the running build's version,
// commit and Go version as labels.
func TestBuildInfo(t *testing.T) {
	m := NewMetrics("OUTBOX")
	b := version.Get()
	want := fmt.Sprintf("# HELP outboxd_build_info Always 1; the labels say which build of outboxd runs.\n"+
		"# TYPE outboxd_build_info gauge\noutboxd_build_info{commit=%q,goversion=%q,version=%q} 1\n", b.Commit, b.GoVersion, b.Version)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "outboxd_build_info"); err != nil {
		t.Error(err)
	}
}

// TestListen: a free address is used as given; the default address in use
// falls back to a free port of the same host; an address the operator
// chose is never replaced, and its error names it and the ways out.
func TestListen(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	tests := []struct {
		name     string
		addr     string
		fallback bool
		fellBack bool
		wantErr  []string
	}{
		{name: "free", addr: "127.0.0.1:0"},
		{name: "default in use", addr: busy, fallback: true, fellBack: true},
		{name: "chosen in use", addr: busy, wantErr: []string{"--metrics-addr", busy, "address already in use", `"127.0.0.1:0"`, `""`}},
		{name: "not an address", addr: "256.0.0.1:80", fallback: true, wantErr: []string{"--metrics-addr", "256.0.0.1:80", `""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, fellBack, err := Listen(tt.addr, tt.fallback)
			if tt.wantErr != nil {
				if err == nil {
					ln.Close()
					t.Fatalf("Listen(%q) listens on %s, want an error", tt.addr, ln.Addr())
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if fellBack != tt.fellBack {
				t.Errorf("fell back %v, want %v", fellBack, tt.fellBack)
			}
			got := ln.Addr().(*net.TCPAddr)
			if got.IP.String() != "127.0.0.1" || (tt.fellBack && got.String() == busy) {
				t.Errorf("listens on %s", got)
			}
		})
	}
}
