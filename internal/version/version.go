// Package version says which build of outboxd is running: the version,
// commit and build date stamped in by the release build (scripts/build),
// or what the Go toolchain recorded when it built from a clone, and the Go
// version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped in by scripts/build with
//
//	-ldflags "-X github.com/outboxd/outboxd/internal/version.version=v1.2.3 ..."
//
// They stay empty in a plain go build, go install or go run.
var version, commit, date string

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`   // v1.2.3, a pseudo-version, or "dev"
	Commit    string `json:"commit"`    // the commit built, "-dirty" when the tree had changes; "unknown" if not recorded
	Date      string `json:"date"`      // the build date (release builds) or the commit's date, RFC 3339; "unknown" if not recorded
	GoVersion string `json:"goVersion"` // the Go toolchain that built it
}

// Get returns the running binary's Info: the stamped values where set,
// else the module version and VCS settings of its build info.
func Get() Info {
	info := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if build, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(info, build)
	}
	for _, s := range []*string{&info.Commit, &info.Date} {
		if *s == "" {
			*s = "unknown"
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	return info
}

// fromBuildInfo fills what info lacks from the Go toolchain's record.
func fromBuildInfo(info Info, build *debug.BuildInfo) Info {
	if v := build.Main.Version; info.Version == "" && v != "" && v != "(devel)" {
		info.Version = v
	}
	settings := map[string]string{}
	for _, s := range build.Settings {
		settings[s.Key] = s.Value
	}
	if info.Commit == "" && settings["vcs.revision"] != "" {
		info.Commit = settings["vcs.revision"]
		if len(info.Commit) > 12 {
			info.Commit = info.Commit[:12]
		}
		if settings["vcs.modified"] == "true" {
			info.Commit += "-dirty"
		}
	}
	if info.Date == "" {
		info.Date = settings["vcs.time"]
	}
	return info
}

// String is the line outboxd version prints.
func (i Info) String() string {
	return fmt.Sprintf("outboxd %s (commit %s, built %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion)
}
