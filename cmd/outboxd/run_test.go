package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartProfiles: --cpu-profile and --trace each write their file, and
// a path that cannot be created is named with its flag.
func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "run.trace")
	stop, err := startProfiles(cpu, tr)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, f := range []string{cpu, tr} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want a non-empty file", f, err)
		}
	}
	_, err = startProfiles("", filepath.Join(dir, "missing", "run.trace"))
	if err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Errorf("startProfiles with an impossible trace path = %v, want an error naming --trace", err)
	}
}
