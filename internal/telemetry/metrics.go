package telemetry

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/outboxd/outboxd/internal/version"
	"github.com/outboxd/outboxd/sink"
)

// Progress is a running session's position, read when metrics are scraped
// and when the status page samples. Its methods must be safe to call from
// any goroutine.
type Progress interface {
	// Received is the write position reported to PostgreSQL: the newest
	// WAL received, never behind Confirmed.
	Received() pglogrepl.LSN
	// Confirmed is the flush position last sent to PostgreSQL.
	Confirmed() pglogrepl.LSN
	// InFlight is the number of messages published but not yet acknowledged.
	InFlight() int
}

// Reconnect targets, the label of outboxd_reconnects_total.
const (
	TargetReplication = "replication" // a replication session restarted after a transient error
	TargetNATS        = "nats"        // the NATS client reconnected
)

// Metrics holds outboxd's collectors in a registry of its own. It
// implements sink.Observer; those methods are cheap enough for the
// publisher's hot path (atomic adds, no allocation).
type Metrics struct {
	registry *prometheus.Registry
	stream   string

	published     prometheus.Counter
	duplicates    prometheus.Counter
	deadLettered  prometheus.Counter
	publishErrors *prometheus.CounterVec
	latency       prometheus.Histogram
	reconnects    *prometheus.CounterVec
	lag           prometheus.Gauge
	retained      prometheus.Gauge
	standby       prometheus.Gauge
	active        prometheus.Gauge
	retentionRows prometheus.Counter
	nullSkipped   prometheus.Counter
	streamChecks  *prometheus.CounterVec

	progress atomic.Pointer[Progress]
	// The last values of a detached session, shown until the next attaches.
	lastReceived, lastConfirmed atomic.Uint64
	// slotKnown is set once the slot probe has read lag and retained WAL.
	slotKnown atomic.Bool
}

// NewMetrics makes the collectors for outboxd publishing to stream and
// registers them, with the Go runtime and process collectors, in a new
// registry.
func NewMetrics(stream string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{registry: reg, stream: stream}
	f := factory{reg}
	m.published = f.counterVec("outboxd_events_published_total",
		"Events JetStream acknowledged (duplicates included), by stream.", "stream").WithLabelValues(stream)
	m.duplicates = f.counter("outboxd_duplicates_total",
		"Acknowledgements JetStream reported as duplicates: a replayed event it already held (Nats-Msg-Id).")
	m.deadLettered = f.counter("outboxd_dead_lettered_total",
		"Rows that could not be published and went to the --dead-letter subject (acknowledged).")
	m.publishErrors = f.counterVec("outboxd_publish_errors_total",
		"Failed publishes and republishes, by reason.", "reason")
	for _, reason := range sink.Reasons {
		m.publishErrors.WithLabelValues(reason)
	}
	m.latency = f.histogram("outboxd_commit_to_ack_seconds",
		"Time from a transaction's commit in PostgreSQL to JetStream's acknowledgement of each of its events.",
		prometheus.ExponentialBuckets(0.001, 2, 17)) // 1ms to 65s
	m.reconnects = f.counterVec("outboxd_reconnects_total",
		"Reconnections: replication sessions restarted after a transient error, and NATS client reconnects.", "target")
	for _, target := range []string{TargetReplication, TargetNATS} {
		m.reconnects.WithLabelValues(target)
	}
	m.lag = f.gauge("outboxd_replication_lag_bytes",
		"pg_current_wal_lsn() minus the slot's confirmed_flush_lsn: WAL committed but not yet confirmed by outboxd.")
	m.retained = f.gauge("outboxd_slot_retained_wal_bytes",
		"pg_current_wal_lsn() minus the slot's restart_lsn: WAL the server keeps for this slot.")
	m.standby = f.gauge("outboxd_standby",
		"1 while this outboxd stands by because another process holds the slot, 0 otherwise.")
	m.active = f.gauge("outboxd_active",
		"1 while this outboxd holds the slot and streams (the active relay), 0 otherwise; alert when no instance has it.")
	m.retentionRows = f.counter("outboxd_retention_deleted_rows_total",
		"Confirmed rows --retention deleted from the outbox table.")
	m.nullSkipped = f.counter("outboxd_null_payloads_skipped_total",
		"Rows with a NULL payload that --null-payload skip left unpublished.")
	m.streamChecks = f.counterVec("outboxd_stream_checks_total",
		"Sampled checks that the stream still holds an acknowledged message at its sequence (--stream-check-interval), by result: "+
			"ok, missing (deleted or lost), replaced (another message at its sequence: acknowledged messages were lost), "+
			"expired (removed by the stream's limits), error (could not tell).", "result")
	for _, result := range StreamCheckResults {
		m.streamChecks.WithLabelValues(result)
	}
	f.gaugeFunc("outboxd_in_flight_messages", "Messages published but not yet acknowledged.", func() float64 {
		if p := m.progress.Load(); p != nil {
			return float64((*p).InFlight())
		}
		return 0
	})
	f.gaugeFunc("outboxd_received_lsn_bytes", "WAL position received from PostgreSQL (the write position reported to it), in bytes.",
		func() float64 { return float64(m.received()) })
	f.gaugeFunc("outboxd_confirmed_lsn_bytes", "WAL position last confirmed to PostgreSQL as flushed, in bytes.",
		func() float64 { return float64(m.confirmed()) })
	build := version.Get()
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "outboxd_build_info", Help: "Always 1; the labels say which build of outboxd runs.",
		ConstLabels: prometheus.Labels{"version": build.Version, "commit": build.Commit, "goversion": build.GoVersion},
	}, func() float64 { return 1 }))
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry holding every outboxd metric.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Attach makes p the session whose position the metrics show; the returned
// detach keeps its last position on show until another session attaches.
func (m *Metrics) Attach(p Progress) (detach func()) {
	m.progress.Store(&p)
	return func() {
		m.lastReceived.Store(uint64(p.Received()))
		m.lastConfirmed.Store(uint64(p.Confirmed()))
		m.progress.CompareAndSwap(&p, nil)
	}
}

func (m *Metrics) received() pglogrepl.LSN {
	if p := m.progress.Load(); p != nil {
		return (*p).Received()
	}
	return pglogrepl.LSN(m.lastReceived.Load())
}

func (m *Metrics) confirmed() pglogrepl.LSN {
	if p := m.progress.Load(); p != nil {
		return (*p).Confirmed()
	}
	return pglogrepl.LSN(m.lastConfirmed.Load())
}

// Published counts an acknowledged event and observes its commit-to-ack
// latency (sink.Observer).
func (m *Metrics) Published(committed time.Time, duplicate bool) {
	m.published.Inc()
	if duplicate {
		m.duplicates.Inc()
	}
	if !committed.IsZero() {
		// Clocks of two machines: a commit "in the future" counts as 0.
		m.latency.Observe(max(time.Since(committed).Seconds(), 0))
	}
}

// DeadLettered counts an acknowledged dead-letter message (sink.Observer).
func (m *Metrics) DeadLettered() { m.deadLettered.Inc() }

// PublishFailed counts a failed publish by reason (sink.Observer).
func (m *Metrics) PublishFailed(reason string) { m.publishErrors.WithLabelValues(reason).Inc() }

// Reconnected counts a reconnection to target (TargetReplication or TargetNATS).
func (m *Metrics) Reconnected(target string) { m.reconnects.WithLabelValues(target).Inc() }

// RetentionDeleted counts rows --retention deleted.
func (m *Metrics) RetentionDeleted(rows int64) { m.retentionRows.Add(float64(rows)) }

// The results of a stream check (outboxd_stream_checks_total).
const (
	CheckOK       = "ok"
	CheckMissing  = "missing"
	CheckReplaced = "replaced"
	CheckExpired  = "expired"
	CheckError    = "error"
)

// StreamCheckResults lists every result of a stream check.
var StreamCheckResults = []string{CheckOK, CheckMissing, CheckReplaced, CheckExpired, CheckError}

// StreamChecked counts a stream check's result.
func (m *Metrics) StreamChecked(result string) { m.streamChecks.WithLabelValues(result).Inc() }

// NullPayloadSkipped counts a row --null-payload skip left unpublished.
func (m *Metrics) NullPayloadSkipped() { m.nullSkipped.Inc() }

// SetSlotWAL records the slot's lag and retained WAL, in bytes.
func (m *Metrics) SetSlotWAL(lag, retained int64) {
	m.lag.Set(float64(lag))
	m.retained.Set(float64(retained))
	m.slotKnown.Store(true)
}

// Snapshot is the current state as the status page shows it.
type Snapshot struct {
	Time          time.Time `json:"time"`
	State         State     `json:"state"`
	Role          string    `json:"role"`
	Reason        string    `json:"reason,omitempty"`
	Ready         bool      `json:"ready"`
	Stream        string    `json:"stream"`
	Published     float64   `json:"published_total"`
	Duplicates    float64   `json:"duplicates_total"`
	DeadLettered  float64   `json:"dead_lettered_total"`
	PublishErrors float64   `json:"publish_errors_total"`
	Reconnects    float64   `json:"reconnects_total"`
	InFlight      int       `json:"in_flight"`
	ReceivedLSN   string    `json:"received_lsn"`
	ConfirmedLSN  string    `json:"confirmed_lsn"`
	// LagBytes and RetainedBytes are nil until the slot probe has read them.
	LagBytes      *float64 `json:"lag_bytes"`
	RetainedBytes *float64 `json:"retained_bytes"`
}

// snapshot fills the metrics' part of a Snapshot.
func (m *Metrics) snapshot() Snapshot {
	s := Snapshot{
		Time:          time.Now(),
		Stream:        m.stream,
		Published:     value(m.published),
		Duplicates:    value(m.duplicates),
		DeadLettered:  value(m.deadLettered),
		PublishErrors: sum(m.publishErrors),
		Reconnects:    sum(m.reconnects),
		ReceivedLSN:   m.received().String(),
		ConfirmedLSN:  m.confirmed().String(),
	}
	if p := m.progress.Load(); p != nil {
		s.InFlight = (*p).InFlight()
	}
	if m.slotKnown.Load() {
		lag, retained := value(m.lag), value(m.retained)
		s.LagBytes, s.RetainedBytes = &lag, &retained
	}
	return s
}

// value reads a counter's or gauge's current value.
func value(c prometheus.Metric) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return math.NaN()
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// sum adds up every child of a counter vector.
func sum(v *prometheus.CounterVec) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { v.Collect(ch); close(ch) }()
	total := 0.0
	for c := range ch {
		total += value(c)
	}
	return total
}

// factory registers what it makes in one registry.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeFunc(name, help string, fn func() float64) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}
