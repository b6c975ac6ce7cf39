package relay

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgressLines: without a terminal, a line at the start and one at
// the end with the count, the share, the rate and the ETA.
func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false, 3)
	for seq := range uint64(3) {
		if err := p.Ack(seq + 1); err != nil {
			t.Fatal(err)
		}
	}
	if done := p.finish(); done != 3 {
		t.Fatalf("finish = %d, want 3", done)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want the start and the end line (acks within %s write none):\n%s", len(lines), progressEvery, out.String())
	}
	if !strings.HasPrefix(lines[0], "backfill: 0/3 rows (0.0%), 0 rows/s, ETA unknown") {
		t.Errorf("start line %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "backfill: 3/3 rows (100.0%), ") || !strings.HasSuffix(lines[1], "rows/s, ETA 0s") {
		t.Errorf("end line %q", lines[1])
	}
}

// TestProgressBar: on a terminal, the bar shows rows done of the total
// and the rate, and ends its line.
func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true, 4)
	for seq := range uint64(4) {
		if err := p.Ack(seq + 1); err != nil {
			t.Fatal(err)
		}
	}
	p.finish()
	got := out.String()
	for _, want := range []string{"backfill", "4/4", "rows/s", "100%"} {
		if !strings.Contains(got, want) {
			t.Errorf("bar output lacks %q: %q", want, got)
		}
	}
	if !strings.HasSuffix(got, "\n") {
		t.Errorf("bar output does not end its line: %q", got)
	}
}

// TestProgressEmpty: nothing to backfill is one line at 100%, not a
// division by zero.
func TestProgressEmpty(t *testing.T) {
	var out bytes.Buffer
	newProgress(&out, false, 0).finish()
	if strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), "backfill: 0/0 rows (100.0%)") {
		t.Errorf("output %q", out.String())
	}
}
