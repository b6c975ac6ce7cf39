package cliconfig

import "testing"

func TestNearestKey(t *testing.T) {
	known := []string{"pg-url", "nats-url", "max-in-flight", "slot", "stream"}
	for key, want := range map[string]string{
		"max_in_flight": "max-in-flight", "pgurl": "pg-url", "nats.url": "nats-url", "solt": "slot",
		"streams": "stream", "completely-different": "",
	} {
		if got := nearest(key, known); got != want {
			t.Errorf("nearest(%q) = %q, want %q", key, got, want)
		}
	}
}
