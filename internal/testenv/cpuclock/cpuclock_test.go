package cpuclock

import (
	"testing"
	"time"
)

// TestProcessCounts burns CPU for a while and sees the clock move by at
// least a part of it.
func TestProcessCounts(t *testing.T) {
	before := Process()
	deadline := time.Now().Add(50 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		n++
	}
	if got := Process() - before; got < 10*time.Millisecond {
		t.Fatalf("CPU clock moved %s over 50ms of busy loop (%d rounds), want at least 10ms", got, n)
	}
}
