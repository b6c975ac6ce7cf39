// Package browser drives a real headless Chromium (Debian's chromium
// package) from tests, through its command line only: --dump-dom for the
// DOM after scripts ran, --screenshot for a PNG. No extra dependency.
//
// A test that needs it fails when Chromium is missing, so CI cannot pass by
// skipping it; with OUTBOXD_TEST_NO_BROWSER=1 set explicitly it skips.
// scripts/ensure-chromium installs it.
package browser

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Find returns the path of Chromium: $OUTBOXD_TEST_CHROMIUM, or chromium,
// chromium-browser or google-chrome on PATH.
func Find(tb testing.TB) string {
	tb.Helper()
	if path := os.Getenv("OUTBOXD_TEST_CHROMIUM"); path != "" {
		return path
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("OUTBOXD_TEST_NO_BROWSER") != "" {
		tb.Skip("no Chromium on PATH and OUTBOXD_TEST_NO_BROWSER is set: the browser test does not run")
	}
	tb.Fatal("no Chromium on PATH: run scripts/ensure-chromium (as root it installs Debian's chromium package), " +
		"point OUTBOXD_TEST_CHROMIUM at one, or set OUTBOXD_TEST_NO_BROWSER=1 to skip the browser tests")
	return ""
}

// flags keep Chromium off the network it does not have and away from
// the user's profile: without the background-networking ones it stalls on
// a closed network.
var flags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-extensions", "--disable-default-apps", "--hide-scrollbars", "--mute-audio"}

// DumpDOM loads url, lets its scripts run for budget of virtual time, and
// returns the DOM as HTML.
func DumpDOM(tb testing.TB, url string, budget time.Duration) string {
	tb.Helper()
	return run(tb, "--dump-dom", "--virtual-time-budget="+strconv.FormatInt(budget.Milliseconds(), 10), url)
}

// Screenshot loads url in a window of width x height, lets its scripts run
// for budget of virtual time, and saves a PNG at path.
func Screenshot(tb testing.TB, url, path string, width, height int, budget time.Duration) {
	tb.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	run(tb, "--screenshot="+abs, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height),
		"--virtual-time-budget="+strconv.FormatInt(budget.Milliseconds(), 10), url)
	if info, err := os.Stat(abs); err != nil || info.Size() == 0 {
		tb.Fatalf("Chromium wrote no screenshot at %s: %v", abs, err)
	}
}

// ArtifactDir is where a test keeps what it shows a person (screenshots):
// $OUTBOXD_TEST_ARTIFACTS/TestName when that is set, else a folder of the
// test's own that is removed after it.
func ArtifactDir(tb testing.TB) string {
	tb.Helper()
	root := os.Getenv("OUTBOXD_TEST_ARTIFACTS")
	if root == "" {
		return tb.TempDir()
	}
	dir := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// run runs Chromium with a fresh profile and returns its standard output.
// It kills Chromium's whole process group after a minute.
func run(tb testing.TB, args ...string) string {
	tb.Helper()
	profile := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Find(tb), append(append(flags, "--user-data-dir="+profile), args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HOME="+profile) // nothing from the user's home
	err := cmd.Run()
	// Chromium's helpers (zygote, renderer) are in its process group: make
	// sure none outlives it.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // usually gone already
	if err != nil {
		tb.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	return stdout.String()
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimSpace(s), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
