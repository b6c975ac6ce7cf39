package main

import (
	"strings"
	"testing"
)

// TestVerifyConfigBadInput: each bad --since or --until is refused with
// the value and the form wanted.
func TestVerifyConfigBadInput(t *testing.T) {
	for _, tt := range []struct {
		since, until, want string
	}{
		{"", "", "--since is required"},
		{"yesterday", "", `--since "yesterday" is not a time: use RFC 3339`},
		{"2026-12-06T14:00:00Z", "soon", `--until "soon" is not a time`},
		{"2026-12-06T14:00:00Z", "2026-12-06T13:00:00Z", "is not after --since"},
	} {
		if _, err := verifyConfig(defaultRunConfig(), tt.since, tt.until); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("verifyConfig(%q, %q) = %v, want an error saying %q", tt.since, tt.until, err, tt.want)
		}
	}
	cfg, err := verifyConfig(defaultRunConfig(), "2026-12-06T14:00:00Z", "")
	if err != nil || !cfg.Until.IsZero() || cfg.Since.Hour() != 14 {
		t.Errorf("verifyConfig with --since alone = %+v, %v; want Since set and Until left to its default", cfg, err)
	}
}
