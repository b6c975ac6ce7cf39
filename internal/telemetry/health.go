package telemetry

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is what the relay is doing.
type State string

// The relay's states.
const (
	Starting  State = "starting"  // connecting and checking, before the first session streams
	Streaming State = "streaming" // a session holds the slot and streams
	Standby   State = "standby"   // another process holds the slot; retrying to take it over
	Retrying  State = "retrying"  // the last session failed with a transient error; retrying
	Stopping  State = "stopping"  // a signal asked outboxd to stop
)

// Health is the relay's state for /readyz, the status page and the
// outboxd_standby and outboxd_ready metrics. Any goroutine may use it.
type Health struct {
	metrics *Metrics

	mu     sync.Mutex
	state  State
	reason string
	since  time.Time
	nats   func() (connected bool, status string)
}

// NewHealth returns the health of a relay that is starting, and registers
// outboxd_ready in m's registry.
func NewHealth(m *Metrics) *Health {
	h := &Health{metrics: m, state: Starting, since: time.Now()}
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "outboxd_ready",
		Help: "1 when replication streams and NATS is connected (what /readyz reports), 0 otherwise.",
	}, func() float64 {
		if ready, _ := h.Ready(); ready {
			return 1
		}
		return 0
	}))
	return h
}

// SetNATS gives the check of the NATS connection that readiness needs.
func (h *Health) SetNATS(check func() (connected bool, status string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nats = check
}

// Set records a new state and why (the reason is shown by /readyz and the
// status page; it may be empty while streaming).
func (h *Health) Set(state State, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if state != h.state {
		h.since = time.Now()
	}
	h.state, h.reason = state, reason
	standby := 0.0
	if state == Standby {
		standby = 1
	}
	h.metrics.standby.Set(standby)
}

// State returns the current state, why, and since when.
func (h *Health) State() (State, string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, h.reason, h.since
}

// Ready reports whether replication streams and NATS is connected; when
// not, the reason says what is missing.
func (h *Health) Ready() (bool, string) {
	h.mu.Lock()
	state, reason, nats := h.state, h.reason, h.nats
	h.mu.Unlock()
	if state != Streaming {
		if reason == "" {
			return false, string(state)
		}
		return false, fmt.Sprintf("%s: %s", state, reason)
	}
	if nats == nil {
		return false, "NATS: not connected yet"
	}
	if connected, status := nats(); !connected {
		return false, "NATS: not connected (" + status + ")"
	}
	return true, "streaming; NATS connected"
}

// Snapshot is the current state and metrics, for the status page.
func (h *Health) Snapshot() Snapshot {
	s := h.metrics.snapshot()
	s.Ready, _ = h.Ready()
	s.State, s.Reason, _ = h.State()
	return s
}
