package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const unitPath = "../../scripts/outboxd.service"

// unitFile is a systemd unit: section → key → values, in order.
type unitFile map[string]map[string][]string

func readUnit(t testing.TB, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit, section := unitFile{}, ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			unit[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is not key=value in a section", path, n, line)
			}
			unit[section][key] = append(unit[section][key], value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return unit
}

// last is the value systemd uses for key: the last one given.
func (u unitFile) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnit checks scripts/outboxd.service: the settings the README
// promises, a stop timeout beyond --shutdown-timeout, an ExecStart that
// outboxd run accepts, and systemd's own verdict.
func TestSystemdUnit(t *testing.T) {
	unit := readUnit(t, unitPath)
	for _, want := range []struct{ section, key, value string }{
		{"Service", "Type", "simple"},
		{"Service", "Restart", "on-failure"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Service", "ProtectSystem", "strict"},
		{"Service", "ProtectHome", "yes"},
		{"Service", "PrivateTmp", "yes"},
		{"Service", "KillSignal", "SIGTERM"},
		{"Service", "CapabilityBoundingSet", ""},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		if _, ok := unit[want.section][want.key]; !ok {
			t.Errorf("[%s] has no %s=", want.section, want.key)
		} else if got := unit.last(want.section, want.key); got != want.value {
			t.Errorf("[%s] %s=%s, want %s", want.section, want.key, got, want.value)
		}
	}
	if unit.last("Service", "User") == "" || unit.last("Service", "User") == "root" {
		t.Errorf("[Service] User=%q: run as an unprivileged user", unit.last("Service", "User"))
	}

	exec := strings.Fields(unit.last("Service", "ExecStart"))
	if len(exec) < 2 || exec[1] != "run" {
		t.Fatalf("ExecStart=%v does not start outboxd run", exec)
	}
	args := exec[2:]
	configured := unit.last("Service", "EnvironmentFile") != ""
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			configured = true
			// The unit's flags as outboxd run reads them, with a real file.
			args[i+1] = writeConfig(t, "slot: from_unit\n")
		}
	}
	if !configured {
		t.Error("the unit gives neither EnvironmentFile= nor --config")
	}
	cfg, err := parseRun(t, args, nil)
	if err != nil {
		t.Fatalf("outboxd run refuses the unit's arguments %v: %v", exec[2:], err)
	}

	stop, err := time.ParseDuration(strings.ReplaceAll(unit.last("Service", "TimeoutStopSec"), "min", "m"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%s: %v", unit.last("Service", "TimeoutStopSec"), err)
	}
	if stop <= cfg.ShutdownTimeout {
		t.Errorf("TimeoutStopSec=%s is not beyond the shutdown timeout %s: systemd would SIGKILL a draining outboxd", stop, cfg.ShutdownTimeout)
	}

	t.Run("systemd-analyze verify", func(t *testing.T) { verifyUnit(t) })
}

// verifyUnit runs systemd-analyze verify on the unit, with ExecStart
// pointing at an executable that exists here. verify exits 0 on keys it
// ignores, so any output is a failure; a unit with a bad key shows that
// it does report.
func verifyUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("OUTBOXD_TEST_NO_SYSTEMD") != "" {
			t.Skip("OUTBOXD_TEST_NO_SYSTEMD is set and systemd-analyze is not installed")
		}
		t.Fatal("systemd-analyze not found: run scripts/ensure-systemd-analyze (or set OUTBOXD_TEST_NO_SYSTEMD=1)")
	}
	data, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "/usr/local/bin/outboxd", self)
	verify := func(name, text string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", path).CombinedOutput()
		if err != nil && len(out) == 0 {
			t.Fatalf("systemd-analyze verify %s: %v", path, err)
		}
		return strings.TrimSpace(string(out))
	}
	if out := verify("outboxd.service", text); out != "" {
		t.Errorf("systemd-analyze verify scripts/outboxd.service:\n%s", out)
	}
	bad := strings.Replace(text, "TimeoutStopSec=45s", "TimeoutStopSec=45s\nTimeoutStopSecs=45s", 1)
	if out := verify("bad.service", bad); !strings.Contains(out, "TimeoutStopSecs") {
		t.Errorf("systemd-analyze verify does not report an unknown key; it said %q", out)
	}
}
