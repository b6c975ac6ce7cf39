package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// OldServerEnv names a nats-server binary older than the module's (one
// without fast batch publishing, JetStream API level below 4), for the
// tests that check outboxd falls back on such a server. Without it,
// OldServer looks for Debian's package (nats-server 2.9).
const OldServerEnv = "OUTBOXD_TEST_OLD_NATS_SERVER"

// OldServer starts an older nats-server binary with JetStream on a free
// loopback port, its store under t.TempDir(), and returns its client URL;
// t.Cleanup stops it. It skips the test, saying what to install, when no
// such binary is found (scripts/ensure-old-nats-server installs it).
func OldServer(t testing.TB) string {
	t.Helper()
	path := os.Getenv(OldServerEnv)
	if path == "" {
		path = "/usr/sbin/nats-server"
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no older nats-server binary at %s (%v): run scripts/ensure-old-nats-server (Debian's nats-server package) or set %s", path, err, OldServerEnv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(path, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", t.TempDir())
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have died already; Wait reports nothing useful then
		cmd.Wait()         //nolint:errcheck
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %v", path, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "nats://" + addr
}
