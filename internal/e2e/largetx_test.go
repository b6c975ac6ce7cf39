package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// plainBinary is outboxd built without the race detector, whose shadow
// memory would swamp a memory measurement.
var plainBinary struct {
	once sync.Once
	path string
	err  error
}

func buildPlain(t *testing.T) string {
	t.Helper()
	plainBinary.once.Do(func() {
		plainBinary.path = filepath.Join(filepath.Dir(binary), "outboxd-plain")
		out, err := exec.Command("go", "build", "-o", plainBinary.path, "github.com/outboxd/outboxd/cmd/outboxd").CombinedOutput()
		if err != nil {
			plainBinary.err = err
			t.Logf("%s", out)
		}
	})
	if plainBinary.err != nil {
		t.Fatal(plainBinary.err)
	}
	return plainBinary.path
}

// peakRSS reads the process's peak resident set size (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// streamedTransactions reads how many transactions the server streamed
// to the slot in progress (protocol 2).
func (e *env) streamedTransactions() int64 {
	e.t.Helper()
	var n int64
	if err := e.connect().QueryRow(context.Background(),
		"SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = $1", e.slot).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestLargeTransaction commits one transaction of 500,000 outbox rows. The
// server streams it in progress (logical_decoding_work_mem is 64MB here),
// outboxd spools it to disk and publishes it after the commit; every row
// arrives once and in order. The peak RSS of the (race-free) binary is
// reported; the bound is 128 MiB.
func TestLargeTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("500,000 rows: skipped with -short")
	}
	const rows = 500_000
	e := newEnv(t, pgtest.Start(t, pgtest.WithConf("logical_decoding_work_mem", "64MB")), true)
	p := e.startBinary(buildPlain(t), e.args("--log-level", "info")...)
	e.waitStreaming(p)
	started := time.Now()
	e.pg.Exec(t, e.dsn, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'order', 'big-' || (n % 100), 'Created',
		       jsonb_build_object('n', n, 'note', repeat('x', 150))
		FROM generate_series(1, $1) AS n`, rows)
	msgs := e.readStream(e.js(), rows, 10*time.Minute)
	took := time.Since(started)
	rss := peakRSS(t, p.cmd.Process.Pid)
	if len(msgs) != rows {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), rows)
	}
	seen := make(map[string]bool, rows)
	for i, m := range msgs {
		id := m.Header.Get("Nats-Msg-Id")
		if seen[id] {
			t.Fatalf("message %d: id %s twice", i, id)
		}
		seen[id] = true
	}
	streamed := e.streamedTransactions()
	t.Logf("one transaction of %d rows: published in %s (%.0f events/s); streamed transactions %d; outboxd peak RSS %.1f MiB",
		rows, took.Round(time.Millisecond), rows/took.Seconds(), streamed, float64(rss)/(1<<20))
	if streamed == 0 {
		t.Errorf("the server did not stream the transaction in progress: the spool path was not exercised")
	}
	if rss > 128<<20 {
		t.Errorf("peak RSS %.1f MiB, want under 128 MiB", float64(rss)/(1<<20))
	}
	p.stopCleanly()
}

// TestStreamedAbort: a transaction large enough to be streamed in
// progress, then rolled back (whole, and a subtransaction of a committed
// one), publishes nothing of what was rolled back.
func TestStreamedAbort(t *testing.T) {
	e := newEnv(t, pgtest.Start(t, pgtest.WithConf("logical_decoding_work_mem", "64kB")), true)
	p := e.start(e.args()...)
	e.waitStreaming(p)
	conn := e.connect()
	ctx := context.Background()
	insert := `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'order', $1, 'Created', jsonb_build_object('n', n, 'note', repeat('x', 100))
		FROM generate_series(1, 5000) AS n`
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, insert, "aborted"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the server stream some of it
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A committed transaction whose savepoint rolled back a streamed part.
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{insert, []any{"kept-1"}}, {"SAVEPOINT s", nil}, {insert, []any{"sub-aborted"}},
		{"ROLLBACK TO SAVEPOINT s", nil}, {insert, []any{"kept-2"}},
	} {
		if _, err := tx.Exec(ctx, step.sql, step.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := e.readStream(e.js(), 10_000, 2*time.Minute)
	counts := map[string]int{}
	for _, m := range msgs {
		counts[m.Header.Get("Outbox-Aggregate-Id")]++
	}
	if counts["kept-1"] != 5000 || counts["kept-2"] != 5000 || counts["aborted"] != 0 || counts["sub-aborted"] != 0 || len(msgs) != 10_000 {
		t.Errorf("stream holds %v (%d messages), want 5000 kept-1, 5000 kept-2 and nothing rolled back", counts, len(msgs))
	}
	if n := e.streamedTransactions(); n < 2 {
		t.Errorf("the server streamed %d transactions in progress, want both: the test did not exercise streaming", n)
	}
	p.stopCleanly()
}
