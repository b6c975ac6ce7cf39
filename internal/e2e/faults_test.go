package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// firstStoredAfter polls the stream until a message stored after t0 shows
// up and returns when it was stored.
func (e *env) firstStoredAfter(t0 time.Time, timeout time.Duration) time.Time {
	e.t.Helper()
	js := e.js()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		stream, err := js.Stream(context.Background(), streamName)
		if err == nil {
			if last := stream.CachedInfo().State.LastTime; last.After(t0) {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("no message stored within %s after %s", timeout, t0.Format(time.RFC3339Nano))
	return time.Time{}
}

// activePID is the PID of the walsender holding the slot, 0 when none does.
func (e *env) activePID(conn *pgx.Conn) int32 {
	e.t.Helper()
	var pid *int32
	if err := conn.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&pid); err != nil {
		e.t.Fatal(err)
	}
	if pid == nil {
		return 0
	}
	return *pid
}

// TestHotStandby runs two outboxd on one slot: the second stands by (and
// says so once), takes over when the first is killed with SIGKILL, and the
// stream ends complete. The takeover time is from the kill to the first
// message the new one stored.
func TestHotStandby(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 50)
	active := e.start(e.args()...)
	e.waitStreaming(active)
	standby := e.start(e.args("--standby-retry", "500ms")...)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(standby.output.String(), "standing by") {
		if time.Now().After(deadline) {
			t.Fatalf("the second outboxd never said it stands by:\n%s", tail(standby.output.String(), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	writes := w.background(0, 3*time.Millisecond, func(i int) (int, bool) { return 1 + i%5, true })
	time.Sleep(3 * time.Second) // several standby retries while the active one streams
	conn := e.connect()
	oldPID := e.activePID(conn)
	killed := time.Now()
	active.kill()
	// Messages the killed one had in flight may still land: count from the
	// moment the standby holds the slot.
	var newPID int32
	for newPID == 0 || newPID == oldPID {
		if time.Since(killed) > 30*time.Second {
			t.Fatal("the standby did not take the slot within 30s")
		}
		time.Sleep(10 * time.Millisecond)
		newPID = e.activePID(conn)
	}
	holding := time.Now()
	took := e.firstStoredAfter(holding, 30*time.Second).Sub(killed)
	t.Logf("takeover: %s from kill -9 of the active outboxd to the first message the standby stored (slot taken after %s, --standby-retry 500ms)",
		took.Round(time.Millisecond), holding.Sub(killed).Round(time.Millisecond))
	time.Sleep(time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, time.Minute)
	t.Logf("hot standby: %s", report)
	if n := strings.Count(standby.output.String(), "standing by"); n != 1 {
		t.Errorf("the standby logged %q %d times, want once", "standing by", n)
	}
	standby.stopCleanly()
}

// TestPostgresRestart restarts PostgreSQL mid-stream, once with a fast and
// once with an immediate (crash) shutdown: outboxd reconnects and resumes,
// nothing is lost and nothing is duplicated in the stream.
func TestPostgresRestart(t *testing.T) {
	e := newEnv(t, pgtest.Start(t), true)
	check := checker.New()
	w := e.newWriter(check, 50)
	w.survive = true
	p := e.start(e.args("--exclusive-stream")...)
	e.waitStreaming(p)
	writes := w.background(0, 3*time.Millisecond, func(i int) (int, bool) { return 1 + i%30, i%17 != 0 })
	for _, mode := range []string{"fast", "immediate"} {
		time.Sleep(2 * time.Second)
		e.pg.Stop(t, mode)
		time.Sleep(time.Second)
		e.pg.Restart(t)
		t.Logf("PostgreSQL restarted (%s) after %d committed events", mode, check.Count())
	}
	time.Sleep(2 * time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, 2*time.Minute)
	t.Logf("2 PostgreSQL restarts: %s", report)
	p.stopCleanly()
}

// TestJetStreamClusterFailover streams to an R3 stream on a three-node
// cluster and kills the stream leader twice mid-stream: publishing pauses
// for the election and resumes, nothing is lost, the republished messages
// are absorbed by Nats-Msg-Id, and with --exclusive-stream a message lost
// with the old leader is not overtaken by later ones (commit order).
func TestJetStreamClusterFailover(t *testing.T) {
	testJetStreamClusterFailover(t, false, "--exclusive-stream")
}

// TestJetStreamClusterFailoverFast is TestJetStreamClusterFailover with
// fast batches instead of --exclusive-stream: a batch lives on the stream
// leader and its followers track its sequence, so a message lost with the
// old leader ends the batch (gap mode fail) instead of being overtaken,
// and outboxd republishes from it in order.
func TestJetStreamClusterFailoverFast(t *testing.T) {
	testJetStreamClusterFailover(t, true, "--publish-mode", "fast")
}

func testJetStreamClusterFailover(t *testing.T, batched bool, flags ...string) {
	e := newClusterEnv(t, pgtest.Shared(t), true)
	if _, err := e.js().CreateStream(context.Background(), jetstream.StreamConfig{Name: streamName, Subjects: []string{"outbox.>"},
		Storage: jetstream.FileStorage, Replicas: 3, Duplicates: 2 * time.Minute, AllowBatchPublish: batched}); err != nil {
		t.Fatal(err)
	}
	check := checker.New()
	w := e.newWriter(check, 50)
	p := e.start(e.args(flags...)...)
	e.waitStreaming(p)
	writes := w.background(0, 3*time.Millisecond, func(i int) (int, bool) { return 1 + i%20, true })
	for i := 0; i < 2; i++ {
		time.Sleep(2 * time.Second)
		before := check.Count()
		node := e.cluster.KillLeader(t, streamName)
		t.Logf("killed stream leader n%d after %d committed events", node+1, before)
		time.Sleep(2 * time.Second)
		e.cluster.Node(node).Restart(t)
		e.cluster.WaitStreamCurrent(t, streamName)
	}
	time.Sleep(2 * time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}
	msgs := e.readStream(e.js(), check.Count(), 2*time.Minute)
	report := check.Verify(received(t, msgs))
	if report.Lost != 0 || report.Duplicates != 0 || report.Unexpected != 0 || report.OrderViolations != 0 {
		t.Errorf("stream check failed: %s", report)
	}
	t.Logf("2 stream leader kills: %s", report)
	p.stopCleanly()
}
