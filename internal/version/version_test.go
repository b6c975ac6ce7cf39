package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestFromBuildInfo: stamped values win; otherwise the module version and
// VCS settings the toolchain recorded; "(devel)" is no version.
func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-12-05T18:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name    string
		stamped Info
		build   debug.BuildInfo
		want    Info
	}{
		{"release build", Info{Version: "v1.2.3", Commit: "abc", Date: "2026-12-05T19:00:00Z"},
			debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			Info{Version: "v1.2.3", Commit: "abc", Date: "2026-12-05T19:00:00Z"}},
		{"go build in a clone with changes", Info{},
			debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			Info{Commit: "0123456789ab-dirty", Date: "2026-12-05T18:00:00Z"}},
		{"go install of a tagged module", Info{},
			debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			Info{Version: "v0.4.0"}},
		{"clean clone at a pseudo-version", Info{},
			debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261205180000-0123456789ab"}, Settings: vcs[:2]},
			Info{Version: "v0.0.0-20261205180000-0123456789ab", Commit: "0123456789ab", Date: "2026-12-05T18:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.stamped, &tt.build); got != tt.want {
				t.Errorf("fromBuildInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestGet: a test binary has no stamped values and no VCS record: dev,
// unknown, and the Go version.
func TestGet(t *testing.T) {
	got := Get()
	if got.Version == "" || got.Commit == "" || got.Date == "" || !strings.HasPrefix(got.GoVersion, "go") {
		t.Errorf("Get() = %+v: no field may be empty", got)
	}
	if s := got.String(); !strings.HasPrefix(s, "outboxd "+got.Version+" (commit ") || !strings.Contains(s, got.GoVersion) {
		t.Errorf("String() = %q", s)
	}
}
