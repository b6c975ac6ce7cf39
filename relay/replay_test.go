package relay

import (
	"strings"
	"testing"
	"time"
)

// TestReplaySelection: rows are chosen one way; --ids becomes a predicate
// on the id column, with the id prefix taken off and quotes escaped.
func TestReplaySelection(t *testing.T) {
	base := func() ReplayConfig {
		cfg := ReplayConfig{BackfillConfig: BackfillConfig{Config: DefaultConfig()}}
		cfg.IDPrefix = "db1:"
		return cfg
	}
	bad := []struct {
		name string
		set  func(*ReplayConfig)
		want string
	}{
		{"nothing chosen", func(*ReplayConfig) {}, "choose the rows to publish again"},
		{"ids and where", func(c *ReplayConfig) { c.IDs, c.Where = []string{"a"}, "true" }, "--ids chooses the rows by itself"},
		{"ids and since", func(c *ReplayConfig) { c.IDs, c.Since = []string{"a"}, time.Now() }, "--ids chooses the rows by itself"},
	}
	for _, tt := range bad {
		cfg := base()
		tt.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate = %v, want %q", tt.name, err, tt.want)
		}
	}
	cfg := base()
	cfg.IDs = []string{"db1:42", "o'brien"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.selection().Where, `"id"::text IN ('42', 'o''brien')`; got != want {
		t.Errorf("selection().Where = %s, want %s", got, want)
	}
	if cfg.Where != "" {
		t.Errorf("Validate or selection changed the config's Where to %q", cfg.Where)
	}
	cfg = base()
	cfg.Since = time.Now()
	if got := cfg.selection().Where; got != "true" {
		t.Errorf("--since alone selects %q, want every row (true)", got)
	}
}
