package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the demo as scripts/demo does, with five events: every one
// is printed from the stream and the relay stops cleanly.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	if err := run(ctx, []string{"--events", "5"}, &out, &log); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), log.String())
	}
	if got := strings.Count(out.String(), "seq="); got != 5 {
		t.Errorf("printed %d events, want 5:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "all 5 events acknowledged by JetStream") {
		t.Errorf("no closing line:\n%s", out.String())
	}
}

// TestDemoBadInput: bad flags are refused before anything starts, naming
// the flag and what it accepts.
func TestDemoBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--events", "0"}, "--events 0 is out of range: use 1 to 1000000"},
		{[]string{"--events", "many"}, `invalid argument "many" for "--events"`},
		{[]string{"--log-level", "loud"}, `--log-level "loud" is not a level`},
		{[]string{"--pg-url", "x"}, "unknown flag: --pg-url"},
		{[]string{"now"}, `unexpected argument "now"`},
	} {
		err := run(context.Background(), tt.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}
