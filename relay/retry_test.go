package relay

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestRetryWait(t *testing.T) {
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{2, 200 * time.Millisecond, 400 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{4, 800 * time.Millisecond, 1600 * time.Millisecond},
		{5, 1600 * time.Millisecond, 3200 * time.Millisecond},
		{6, 3200 * time.Millisecond, 6400 * time.Millisecond},
		{7, 5 * time.Second, 10 * time.Second}, // capped
		{8, 5 * time.Second, 10 * time.Second},
		{1000, 5 * time.Second, 10 * time.Second}, // no overflow
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		var lowest, highest time.Duration
		for i := range 2000 {
			got := retryWait(tt.attempt, rnd)
			if got < tt.min || got > tt.max {
				t.Fatalf("retryWait(%d) = %s, want within [%s, %s]", tt.attempt, got, tt.min, tt.max)
			}
			if got%time.Millisecond != 0 {
				t.Fatalf("retryWait(%d) = %s, want whole milliseconds", tt.attempt, got)
			}
			if i == 0 || got < lowest {
				lowest = got
			}
			highest = max(highest, got)
		}
		// Jittered: 2000 draws spread over most of the range.
		if spread := tt.max - tt.min; highest-lowest < spread*9/10 {
			t.Errorf("retryWait(%d) drew only from %s to %s, want most of [%s, %s]", tt.attempt, lowest, highest, tt.min, tt.max)
		}
	}
}

// TestRetriesLogged: every retry is logged until the backoff reaches its
// cap; then a retry with the same error once a minute, one with another
// error at once; a session that ran for a minute starts a new outage.
func TestRetriesLogged(t *testing.T) {
	refused := errors.New("connect to PostgreSQL: dial tcp 127.0.0.1:1: connect: connection refused")
	noSuchHost := errors.New("connect to PostgreSQL: lookup nowhere: no such host")
	start := time.Unix(1000, 0)
	type step struct {
		at          time.Duration // since start
		ran         time.Duration // how long the session ran
		err         error
		wantAttempt int
		wantLog     bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "every retry until the cap, then once a minute",
			steps: []step{
				{0, 0, refused, 1, true},
				{200 * time.Millisecond, 0, refused, 2, true},
				{600 * time.Millisecond, 0, refused, 3, true},
				{1400 * time.Millisecond, 0, refused, 4, true},
				{3 * time.Second, 0, refused, 5, true},
				{6 * time.Second, 0, refused, 6, true},
				{13 * time.Second, 0, refused, 7, true}, // the first wait at the cap
				{23 * time.Second, 0, refused, 8, false},
				{60 * time.Second, 0, refused, 9, false},
				{72 * time.Second, 0, refused, 10, false},
				{73 * time.Second, 0, refused, 11, true}, // a minute after attempt 7
				{83 * time.Second, 0, refused, 12, false},
			},
		},
		{
			name: "another error is logged at once",
			steps: []step{
				{0, 0, refused, 1, true},
				{time.Second, 0, refused, 2, true},
				{2 * time.Second, 0, refused, 3, true},
				{3 * time.Second, 0, refused, 4, true},
				{4 * time.Second, 0, refused, 5, true},
				{5 * time.Second, 0, refused, 6, true},
				{6 * time.Second, 0, refused, 7, true},
				{16 * time.Second, 0, refused, 8, false},
				{26 * time.Second, 0, noSuchHost, 9, true},
				{36 * time.Second, 0, noSuchHost, 10, false},
				{46 * time.Second, 0, refused, 11, true},
			},
		},
		{
			name: "a session that ran a minute starts a new outage",
			steps: []step{
				{0, 0, refused, 1, true},
				{time.Second, 5 * time.Second, refused, 2, true},
				{10 * time.Minute, 59 * time.Second, refused, 3, true},
				{20 * time.Minute, time.Minute, refused, 1, true},
				{21 * time.Minute, 0, refused, 2, true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r retries
			for i, s := range tt.steps {
				attempt, log := r.failed(s.err, s.ran, start.Add(s.at))
				if attempt != s.wantAttempt || log != s.wantLog {
					t.Errorf("step %d (at %s): failed() = attempt %d, log %v; want attempt %d, log %v", i, s.at, attempt, log, s.wantAttempt, s.wantLog)
				}
			}
		})
	}
}
