package statuspage

import (
	"context"
	"sync"
	"time"

	"github.com/outboxd/outboxd/internal/telemetry"
)

// Defaults of a Recorder: one sample a second for 15 minutes.
const (
	DefaultInterval = time.Second
	DefaultWindow   = 15 * time.Minute
)

// Sample is one point of the charts.
type Sample struct {
	// Time is when it was taken, in Unix milliseconds (what JavaScript's
	// Date takes).
	Time int64 `json:"t"`
	// Rate is events published per second since the previous sample.
	Rate float64 `json:"rate"`
	// Lag is the replication lag in bytes; nil until the slot probe has
	// read it.
	Lag *float64 `json:"lag"`
	// InFlight is the number of unacknowledged messages.
	InFlight int `json:"in_flight"`
}

// Recorder keeps the samples of the last window in a ring.
type Recorder struct {
	snapshot func() telemetry.Snapshot
	interval time.Duration

	mu      sync.Mutex
	ring    []Sample
	next    int // where the next sample goes
	full    bool
	last    telemetry.Snapshot
	hasLast bool
}

// NewRecorder samples snapshot every interval and keeps window of history
// (zero values mean DefaultInterval and DefaultWindow).
func NewRecorder(snapshot func() telemetry.Snapshot, interval, window time.Duration) *Recorder {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Recorder{snapshot: snapshot, interval: interval, ring: make([]Sample, max(int(window/interval), 1))}
}

// Run samples every interval until ctx is done.
func (r *Recorder) Run(ctx context.Context) error {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	r.record(r.snapshot())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			r.record(r.snapshot())
		}
	}
}

// record adds the sample for s: the rate comes from the published count's
// change since the previous snapshot.
func (r *Recorder) record(s telemetry.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sample := Sample{Time: s.Time.UnixMilli(), Lag: s.LagBytes, InFlight: s.InFlight}
	if r.hasLast {
		if dt := s.Time.Sub(r.last.Time).Seconds(); dt > 0 && s.Published >= r.last.Published {
			sample.Rate = (s.Published - r.last.Published) / dt
		}
	}
	r.last, r.hasLast = s, true
	r.ring[r.next] = sample
	r.next++
	if r.next == len(r.ring) {
		r.next, r.full = 0, true
	}
}

// Samples returns the history, oldest first.
func (r *Recorder) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]Sample(nil), r.ring[:r.next]...)
	}
	return append(append(make([]Sample, 0, len(r.ring)), r.ring[r.next:]...), r.ring[:r.next]...)
}
