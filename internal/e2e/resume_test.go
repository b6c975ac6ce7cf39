package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// streamThenStop runs outboxd until n new events are in the stream, then
// stops it with SIGTERM and checks it exited 0.
func (e *env) streamThenStop(w *writer, n int, args ...string) {
	e.t.Helper()
	p := e.start(e.args(args...)...)
	e.waitStreaming(p)
	for i := 0; i < n; i++ {
		if _, err := w.tx(context.Background(), 1, true); err != nil {
			e.t.Fatal(err)
		}
	}
	e.readStream(e.js(), w.check.Count(), time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		e.t.Fatalf("outboxd exited %d after SIGTERM, want 0", code)
	}
}

// TestCleanStopConfirmsCheckpoint: after SIGTERM the slot's confirmed
// position is exactly the saved checkpoint (final status update sent after
// the save), and no later than the last event's transaction.
func TestCleanStopConfirmsCheckpoint(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	path := filepath.Join(e.dir, "checkpoint.json")
	w := e.newWriter(checker.New(), 5)
	e.streamThenStop(w, 20, "--checkpoint", "file:"+path)

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		LSN string `json:"lsn"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatalf("checkpoint file %s: %v", raw, err)
	}
	lsn, err := pglogrepl.ParseLSN(saved.LSN)
	if err != nil {
		t.Fatal(err)
	}
	if confirmed := e.confirmedFlush(e.connect()); confirmed != lsn {
		t.Errorf("confirmed_flush_lsn %s after a clean stop, want the checkpoint %s", confirmed, lsn)
	}
}

// TestResumeRefusesGaps: a slot moved ahead of the checkpoint or dropped
// and recreated behind outboxd's back means events were never published;
// outboxd refuses to start unless --allow-gap.
func TestResumeRefusesGaps(t *testing.T) {
	t.Run("slot advanced past the checkpoint", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		w := e.newWriter(checker.New(), 5)
		e.streamThenStop(w, 5)
		if _, err := w.tx(context.Background(), 3, true); err != nil {
			t.Fatal(err)
		}
		e.pg.Exec(t, e.dsn, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", e.slot)
		e.expectExit(e.args(), "ahead of checkpoint", "--allow-gap")

		p := e.start(e.args("--allow-gap")...)
		e.waitStreaming(p)
		if code := p.stop(time.Minute); code != 0 {
			t.Errorf("with --allow-gap outboxd exited %d, want 0", code)
		}
	})
	t.Run("slot dropped", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		w := e.newWriter(checker.New(), 5)
		e.streamThenStop(w, 5)
		e.pg.Exec(t, e.dsn, "SELECT pg_drop_replication_slot($1)", e.slot)
		e.expectExit(e.args(), "does not exist but checkpoint", "--allow-gap")
	})
	t.Run("checkpoint from another database cluster", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		path := filepath.Join(e.dir, "checkpoint.json")
		w := e.newWriter(checker.New(), 5)
		e.streamThenStop(w, 5, "--checkpoint", "file:"+path)
		editCheckpoint(t, path, func(fields map[string]any) { fields["system_id"] = "7000000000000000001" })
		e.expectExit(e.args("--checkpoint", "file:"+path), "checkpoint system_id", "7000000000000000001", "different database cluster")
	})
}

// TestPostgresConnectionLoss terminates outboxd's walsender three times
// while events stream: it reconnects each time and nothing is lost.
func TestPostgresConnectionLoss(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 50)
	p := e.start(e.args()...)
	e.waitStreaming(p)

	writes := w.background(0, 2*time.Millisecond, func(i int) (int, bool) { return 1 + i%10, true })
	ctx := context.Background()
	conn := e.connect()
	for i := 0; i < 3; i++ {
		time.Sleep(time.Second)
		e.waitStreaming(p)
		var terminated bool
		if err := conn.QueryRow(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&terminated); err != nil || !terminated {
			t.Fatalf("terminate walsender: %v %v", terminated, err)
		}
	}
	time.Sleep(time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, 2*time.Minute)
	t.Logf("3 connection losses: %s", report)
	if retries := strings.Count(p.output.String(), "session interrupted; retrying"); retries < 1 || retries > 3 {
		t.Errorf("logged %d retries for 3 connection losses, want 1 to 3 (once per state change)", retries)
	}
	p.stopCleanly()
}

// TestCorruptCheckpointStops: a checkpoint that does not decode (an empty
// file, garbage, a KV value that is no checkpoint) stops outboxd at once,
// exit 1, with where it is, what is wrong and both fixes; it is not
// retried for ever.
func TestCorruptCheckpointStops(t *testing.T) {
	for _, tt := range []struct {
		name    string
		content string
		want    string
	}{
		{name: "empty file", content: "", want: "it is empty"},
		{name: "garbage file", content: "\x00garbage\n", want: "invalid character"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.Shared(t), true)
			path := filepath.Join(e.dir, "checkpoint.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			e.expectExit(e.args("--checkpoint", "file:"+path), "checkpoint file "+path+" is not a valid checkpoint", tt.want,
				"retrying cannot fix it", "restore it from a backup", "rm "+path, "resumes from the replication slot")
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("outboxd took %s to give up on a corrupt checkpoint", took)
			}
		})
	}
	t.Run("kv value", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		ctx := context.Background()
		kv, err := e.js().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "outboxd"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, e.slot, []byte(`{"lsn": "not an lsn"}`)); err != nil {
			t.Fatal(err)
		}
		e.expectExit(e.args(), "checkpoint kv:outboxd/"+e.slot+" revision 1 is not a valid checkpoint", `invalid lsn "not an lsn"`,
			"nats kv del outboxd "+e.slot)
	})
}

// restoredDatabase streams rows, copies the stopped database, streams more
// rows (the checkpoint moves past the copy's WAL), stops outboxd and puts
// the copy back: the database is restored from a copy of itself, same
// system identifier and timeline. Every row written so far is in the
// stream and recorded in check; the checkpoint is in the file at path.
func restoredDatabase(t *testing.T) (e *env, check *checker.Checker, path string) {
	e = newEnv(t, pgtest.Start(t), true)
	path = filepath.Join(e.dir, "checkpoint.json")
	check = checker.New()
	e.streamThenStop(e.newWriter(check, 5), 10, "--checkpoint", "file:"+path)
	restore := e.pg.CopyData(t)
	e.streamThenStop(e.newWriter(check, 5), 10, "--checkpoint", "file:"+path)
	restore()
	return e, check, path
}

// writeAfterRestore commits n rows of their own aggregates (their commit
// LSNs are below those of the lost history's rows) and returns the slot's
// position, which outboxd must leave where the restore put it.
func (e *env) writeAfterRestore(check *checker.Checker, n int) pglogrepl.LSN {
	e.t.Helper()
	w := e.newWriter(check, 5)
	w.history = "restored-"
	for i := 0; i < n; i++ {
		if _, err := w.tx(context.Background(), 1, true); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.confirmedFlush(e.connect())
}

// TestRestoredDatabase: a database restored from a copy of itself taken
// before outboxd's last checkpoint, then written to. Whether its WAL is
// still short of the checkpoint or has passed it, outboxd stops with the
// cause and the fix instead of skipping the new rows, and confirms nothing
// to the slot; resuming from the slot as the error says publishes them.
func TestRestoredDatabase(t *testing.T) {
	t.Run("checkpoint past the server's WAL", func(t *testing.T) {
		e, check, path := restoredDatabase(t)
		slot := e.writeAfterRestore(check, 5)
		args := e.args("--checkpoint", "file:"+path)
		e.expectExit(args, "past the end of the server's WAL", "restored from a copy of itself", "rm "+path, "--allow-gap")
		if got := e.confirmedFlush(e.connect()); got != slot {
			t.Fatalf("slot moved from %s to %s although outboxd refused to start", slot, got)
		}

		p := e.start(append(args, "--allow-gap")...)
		e.verify(e.js(), check, time.Minute)
		p.stopCleanly()
		// The checkpoint was replaced: no --allow-gap needed any more.
		p = e.start(args...)
		e.waitStreaming(p)
		p.stopCleanly()
	})
	t.Run("WAL written past the checkpoint since", func(t *testing.T) {
		e, check, path := restoredDatabase(t)
		// The restore came a while after outboxd last saved.
		var checkpointLSN pglogrepl.LSN
		editCheckpoint(t, path, func(fields map[string]any) {
			fields["saved_at"] = time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
			var err error
			if checkpointLSN, err = pglogrepl.ParseLSN(fields["lsn"].(string)); err != nil {
				t.Fatal(err)
			}
		})
		slot := e.writeAfterRestore(check, 5)
		conn := e.connect()
		ctx := context.Background()
		for end := pglogrepl.LSN(0); end <= checkpointLSN; {
			if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, "SELECT pg_switch_wal(), pg_current_wal_lsn()").Scan(new(pglogrepl.LSN), &end); err != nil {
				t.Fatal(err)
			}
		}
		args := e.args("--checkpoint", "file:"+path)
		e.expectExit(args, "before the checkpoint's position", "after the checkpoint was saved", "restored from a copy of itself", "rm "+path)
		if got := e.confirmedFlush(e.connect()); got != slot {
			t.Fatalf("slot moved from %s to %s although outboxd stopped", slot, got)
		}

		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		p := e.start(args...)
		e.verify(e.js(), check, time.Minute)
		p.stopCleanly()
	})
	t.Run("checkpoint edited past the WAL", func(t *testing.T) {
		e := newEnv(t, pgtest.Shared(t), true)
		path := filepath.Join(e.dir, "checkpoint.json")
		check := checker.New()
		w := e.newWriter(check, 5)
		e.streamThenStop(w, 3, "--checkpoint", "file:"+path)
		editCheckpoint(t, path, func(fields map[string]any) { fields["lsn"] = "FF/0" })
		slot := e.confirmedFlush(e.connect())
		e.expectExit(e.args("--checkpoint", "file:"+path), "is at FF/0", "past the end of the server's WAL")
		if got := e.confirmedFlush(e.connect()); got != slot {
			t.Fatalf("slot moved from %s to %s although outboxd refused to start", slot, got)
		}
	})
}

// editCheckpoint changes the fields of the checkpoint file at path.
func editCheckpoint(t *testing.T, path string, edit func(fields map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("checkpoint file %s: %v", raw, err)
	}
	edit(fields)
	if raw, err = json.Marshal(fields); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
