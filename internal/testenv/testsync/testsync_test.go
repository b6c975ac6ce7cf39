package testsync

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestEventually(t *testing.T) {
	calls := 0
	Eventually(t, time.Second, func() string {
		calls++
		if calls < 3 {
			return "not yet"
		}
		return ""
	})
	if calls != 3 {
		t.Errorf("checked %d times, want 3", calls)
	}
	r := &recorder{TB: t}
	Eventually(r, 50*time.Millisecond, Until("the moon", func() bool { return false }))
	if !strings.Contains(r.failed, "after 50ms: still waiting for the moon") {
		t.Errorf("failure %q does not say what was awaited", r.failed)
	}
}

func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(&b, "line %d\n", i)
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 10 {
		t.Errorf("%d lines, want 10", n)
	}
}
