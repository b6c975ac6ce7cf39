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

	"github.com/outboxd/outboxd/internal/checker"
	"github.com/outboxd/outboxd/internal/pgtest"
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
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		fields["system_id"] = "7000000000000000001"
		raw, _ = json.Marshal(fields)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
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
