// Package testsync holds what tests share to wait for a condition and to
// read what a goroutine writes: one polling helper and one synchronised
// buffer, instead of a copy in every package.
package testsync

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// pollEvery is how often Eventually checks again.
const pollEvery = 20 * time.Millisecond

// Eventually calls check until it returns "" (the condition holds) and
// fails tb with check's last complaint once timeout has passed.
func Eventually(tb testing.TB, timeout time.Duration, check func() string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		complaint := check()
		if complaint == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %s: %s", timeout, complaint)
			return // Fatalf returns only when tb is not a real test's
		}
		time.Sleep(pollEvery)
	}
}

// Until adapts a condition to Eventually: what names what is awaited.
func Until(what string, cond func() bool) func() string {
	return func() string {
		if cond() {
			return ""
		}
		return "still waiting for " + what
	}
}

// Buffer is a bytes.Buffer that one goroutine may write (a logger, a
// process's output) while another reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
