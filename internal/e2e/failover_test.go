package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
	"github.com/outboxd/outboxd/replication"
)

// TestFailoverSlot: on PostgreSQL 17+ outboxd's slot is a failover slot,
// synchronised to a streaming standby (sync_replication_slots,
// hot_standby_feedback, and the primary's synchronized_standby_slots).
// Writers commit continuously (synchronous replication: a commit the
// writer saw is on the standby); the primary's postmaster is killed
// (kill -9) and the standby is promoted. outboxd, given both hosts with
// target_session_attrs=read-write, reconnects to the new primary and goes
// on from the synchronised slot on the new timeline: every committed event
// once, in order. It also checks the start-up warning of a set-up without
// synchronized_standby_slots.
func TestFailoverSlot(t *testing.T) {
	primary := pgtest.Start(t)
	if major := serverMajor(t, primary); major < 17 {
		t.Skipf("PostgreSQL %d has no failover slots; scripts/test-versions 17 runs this (OUTBOXD_TEST_PG_VERSION=17)", major)
	}
	e, standby := withStandby(t, primary, map[string]string{"sync_replication_slots": "on", "hot_standby_feedback": "on"})
	args := e.args("--checkpoint-interval", "50ms")

	// Without synchronized_standby_slots outboxd warns, with the fix, of
	// the primary's set-up and of the standby's (the second host of
	// --pg-url), which the primary does not wait for.
	p := e.start(args...)
	e.waitStreaming(p)
	testsync.Eventually(t, 30*time.Second, testsync.Until("the set-up warnings", func() bool {
		out := p.output.String()
		return strings.Contains(out, "synchronized_standby_slots is empty") &&
			strings.Contains(out, fmt.Sprintf("standby 127.0.0.1:%d streams from physical slot", standby.Port()))
	}))
	status := e.start("status", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot)
	status.wait(time.Minute)
	if out := status.output.String(); !strings.Contains(out, "[failover_setup] synchronized_standby_slots is empty") ||
		!strings.Contains(out, fmt.Sprintf("[failover_setup] standby 127.0.0.1:%d streams from physical slot", standby.Port())) {
		t.Errorf("outboxd status does not report the failover set-up:\n%s", tail(out, 30))
	}
	p.stopCleanly()
	primary.Exec(t, primary.DSN("postgres"), "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
	primary.Exec(t, primary.DSN("postgres"), "SELECT pg_reload_conf()")

	check := checker.New()
	w := e.newWriter(check, 20)
	w.survive = true
	p = e.start(args...)
	e.waitStreaming(p)
	writes := w.background(0, 2*time.Millisecond, func(i int) (int, bool) { return 1 + i%5, i%17 != 0 })
	waitSynced(t, standby, e.slot)
	time.Sleep(2 * time.Second)
	if out := p.output.String(); strings.Contains(out, "failover set-up:") {
		t.Errorf("a sound failover set-up was warned about:\n%s", tail(out, 20))
	}

	before := check.Count()
	crashed := time.Now()
	primary.Stop(t, "kill")
	standby.Promote(t)
	promoted := time.Now()
	testsync.Eventually(t, time.Minute, testsync.Until("outboxd streaming on the new timeline", func() bool {
		return strings.Contains(p.output.String(), "changed timeline (a failover or promotion) after the checkpoint")
	}))
	resumed := time.Now()
	time.Sleep(3 * time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, 2*time.Minute)
	t.Logf("failover: %d events committed before the crash, %d in all; promotion took %s, outboxd streamed on the new primary %s after it; %s",
		before, check.Count(), promoted.Sub(crashed).Round(time.Millisecond), resumed.Sub(promoted).Round(time.Millisecond), report)
	select {
	case <-p.done:
		t.Fatalf("outboxd exited during the failover: %v", p.err)
	default:
	}
	p.stopCleanly()
}

// withStandby makes the test's database on primary, with a streaming
// standby (physical slot standby1, standbyConf) under synchronous
// replication: a commit the writer saw is on the standby, so it must reach
// the stream after a failover. The env's DSN names both servers with
// target_session_attrs=read-write, as an operator's --pg-url would.
func withStandby(t *testing.T, primary *pgtest.Server, standbyConf map[string]string) (*env, *pgtest.Server) {
	t.Helper()
	e := newEnv(t, primary, true)
	database := dbName(t, e.dsn)
	standby := primary.StartStandby(t, "standby1", database, standbyConf)
	primary.Exec(t, primary.DSN("postgres"), "ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
	primary.Exec(t, primary.DSN("postgres"), "SELECT pg_reload_conf()")
	e.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port(), database)
	return e, standby
}

// waitSynced waits until the standby holds a synchronised copy of slot
// that would survive a promotion (synced, not temporary).
func waitSynced(t *testing.T, standby *pgtest.Server, slot string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), standby.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	testsync.Eventually(t, time.Minute, testsync.Until("the standby's synchronised slot", func() bool {
		setup, err := replication.InspectStandby(context.Background(), conn, slot)
		return err == nil && setup.Synced
	}))
}

// serverMajor is the server's PostgreSQL major version.
func serverMajor(t *testing.T, pg *pgtest.Server) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var num int
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		t.Fatal(err)
	}
	return num / 10000
}

// dbName is the database a DSN connects to.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// TestFailoverRecoveryFromTable: where the slot does not survive a
// failover (PostgreSQL before 17; on 17+ here with --slot-failover=false),
// outboxd stops on the promoted server with the recovery steps, whose
// backfill --since publishes from the outbox table the rows the lost slot
// had not delivered. Writers commit throughout (synchronous replication);
// after the steps every committed event is in the stream once, in order,
// with a duplicate window too short to hide a repeat.
func TestFailoverRecoveryFromTable(t *testing.T) {
	primary := pgtest.Start(t)
	e, standby := withStandby(t, primary, map[string]string{"hot_standby_feedback": "on"})
	path := filepath.Join(e.dir, "checkpoint.json")
	args := e.args("--checkpoint", "file:"+path, "--slot-failover=false")

	check := checker.New()
	w := e.newWriter(check, 20)
	w.survive = true
	p := e.start(args...)
	e.waitStreaming(p)
	writes := w.background(0, 2*time.Millisecond, func(i int) (int, bool) { return 1 + i%5, i%17 != 0 })
	time.Sleep(2 * time.Second)
	primary.Stop(t, "kill")
	standby.Promote(t)
	if code := p.wait(2 * time.Minute); code == 0 {
		t.Fatal("outboxd exited 0 on a promoted server without its slot")
	}
	out := p.output.String()
	for _, want := range []string{"does not exist on this server, which was promoted", "(1) delete the checkpoint: rm " + path, "outboxd backfill --since "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out, 10))
		}
	}
	since := backfillSince(t, out)
	e.shortenDuplicateWindow()
	bf := e.recoverFromTable(path, since, false) // the promoted server has no slot
	// The writers went on after the promotion: backfill must have found
	// their rows, or this test would not test the recovery.
	backfilled := regexp.MustCompile(`backfilled (\d+) rows`).FindStringSubmatch(bf.output.String())
	if backfilled == nil || backfilled[1] == "0" {
		t.Errorf("backfill published no rows:\n%s", tail(bf.output.String(), 10))
	}
	p = e.start(args...)
	e.waitStreaming(p)
	time.Sleep(2 * time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, 2*time.Minute)
	t.Logf("failover without a failover slot, recovered from the table: %s; backfill: %q", report,
		regexp.MustCompile(`(backfilled|left out) \d+ rows[^\n]*`).FindAllString(bf.output.String(), -1))
	p.stopCleanly()
}
