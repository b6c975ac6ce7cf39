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
// outboxd_active, outboxd_standby and outboxd_ready metrics. Any goroutine
// may use it.
//
// Ready means able to do its part: streaming (the active relay) or standing
// by to take the slot over (a hot standby), with NATS connected either way.
// A standby is ready so that a Deployment of an active and a standby
// completes its rollout and a PodDisruptionBudget counts both; which one
// streams is the role (Active), not readiness.
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
		Help: "1 when /readyz reports ready: streaming or standing by, with NATS connected; 0 otherwise.",
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
	h.metrics.standby.Set(oneIf(state == Standby))
	h.metrics.active.Set(oneIf(state == Streaming))
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// State returns the current state, why, and since when.
func (h *Health) State() (State, string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, h.reason, h.since
}

// Ready reports whether the relay streams or stands by with NATS
// connected; the reason says which, or what is missing.
func (h *Health) Ready() (bool, string) {
	h.mu.Lock()
	state, reason, nats := h.state, h.reason, h.nats
	h.mu.Unlock()
	if state != Streaming && state != Standby {
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
	if state == Standby {
		return true, "standby: " + reason + "; NATS connected"
	}
	return true, "streaming; NATS connected"
}

// The roles the status page reports.
const (
	RoleActive  = "active"  // holds the slot and streams
	RoleStandby = "standby" // waits to take the slot over
	RoleNone    = "none"    // neither yet, or no longer: starting, retrying, stopping
)

// RoleOf is the role of a relay in state.
func RoleOf(state State) string {
	switch state {
	case Streaming:
		return RoleActive
	case Standby:
		return RoleStandby
	}
	return RoleNone
}

// Snapshot is the current state and metrics, for the status page.
func (h *Health) Snapshot() Snapshot {
	s := h.metrics.snapshot()
	s.Ready, _ = h.Ready()
	s.State, s.Reason, _ = h.State()
	s.Role = RoleOf(s.State)
	return s
}
