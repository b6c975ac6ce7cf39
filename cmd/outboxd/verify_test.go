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
		{"yesterday", "", `--since "yesterday" is not a time or an LSN: use RFC 3339`},
		{"0/xyz", "", `--since "0/xyz" is not an LSN: write it as PostgreSQL does, e.g. 0/1A2B3C8`},
		{"0/0", "", `--since "0/0" is not an LSN`},
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
	cfg, err = verifyConfig(defaultRunConfig(), "0/1A2B3C8", "")
	if err != nil || cfg.SinceLSN != 0x1A2B3C8 || !cfg.Since.IsZero() {
		t.Errorf("verifyConfig with --since LSN = %+v, %v; want SinceLSN 0/1A2B3C8 and Since left to the stream", cfg, err)
	}
}
