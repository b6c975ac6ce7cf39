package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestPublicationDropped: the publication dropped while outboxd streams
// stops it with the way out, and re-creating the publication is not
// enough (the slot decodes with the catalog of its position, where the
// publication is missing). Following the error's steps (re-create the
// publication, drop the slot and the checkpoint, backfill --since the time
// it names, run) publishes every row written before, during and after,
// each once, even with a duplicate window too short to absorb repeats.
func TestPublicationDropped(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	ctx := context.Background()
	path := filepath.Join(e.dir, "checkpoint.json")
	args := e.args("--checkpoint", "file:"+path)
	check := checker.New()
	w := e.newWriter(check, 5)
	write := func(n int) {
		t.Helper()
		for range n {
			if _, err := w.tx(ctx, 2, true); err != nil {
				t.Fatal(err)
			}
		}
	}

	p := e.start(args...)
	e.waitStreaming(p)
	write(5)
	e.readStream(e.js(), check.Count(), time.Minute)
	e.pg.Exec(t, e.dsn, "DROP PUBLICATION outboxd")
	write(5)
	const createPublication = `CREATE PUBLICATION "outboxd" FOR TABLE "public"."outbox" WITH (publish = 'insert')`
	want := []string{`publication "outboxd" was dropped`, createPublication, "outboxd slot drop --slot " + e.slot + " --yes", "rm " + path, "outboxd backfill --since "}
	if code := p.wait(time.Minute); code == 0 {
		t.Fatal("outboxd exited 0 after its publication was dropped")
	}
	for _, s := range want {
		if !contains(p.output.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, tail(p.output.String(), 10))
		}
	}

	e.pg.Exec(t, e.dsn, createPublication)
	write(5)
	out := e.expectExit(args, want...) // re-created, the slot is still stuck
	since := backfillSince(t, out)
	// The duplicate window no longer holds the rows published before the
	// drop: only leaving them out keeps them from being published twice.
	e.shortenDuplicateWindow()

	bf := e.recoverFromTable(path, since, true)
	if !contains(bf.output.String(), "left out 10 rows created since") {
		t.Errorf("backfill did not leave out the 10 rows published before the drop:\n%s", tail(bf.output.String(), 10))
	}
	p = e.start(args...)
	e.waitStreaming(p)
	write(5)
	e.verify(e.js(), check, time.Minute)
	p.stopCleanly()
}

// backfillSince is the TIME of the backfill --since that outboxd's
// recovery steps in out name.
func backfillSince(t *testing.T, out string) string {
	t.Helper()
	since := regexp.MustCompile(`outboxd backfill --since (\S+)`).FindStringSubmatch(out)
	if since == nil {
		t.Fatalf("no backfill --since in:\n%s", tail(out, 10))
	}
	return since[1]
}

// shortenDuplicateWindow sets the stream's duplicate window to one second
// and waits it out: a recovery must then leave out what the stream holds
// by itself, not through the window.
func (e *env) shortenDuplicateWindow() {
	e.t.Helper()
	ctx := context.Background()
	stream, err := e.js().Stream(ctx, streamName)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.Duplicates = time.Second
	if _, err := e.js().UpdateStream(ctx, cfg); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
}

// recoverFromTable follows the steps outboxd prints when its slot can no
// longer be read: drop the slot (unless it is gone already), delete the
// checkpoint file at path, and backfill --since. It returns the backfill,
// which must have exited 0.
func (e *env) recoverFromTable(path, since string, dropSlot bool) *proc {
	e.t.Helper()
	if dropSlot {
		if p := e.start("slot", "drop", "--pg-url", e.dsn, "--slot", e.slot, "--yes"); p.wait(time.Minute) != 0 {
			e.t.Fatalf("slot drop failed:\n%s", tail(p.output.String(), 10))
		}
	}
	if err := os.Remove(path); err != nil {
		e.t.Fatal(err)
	}
	bf := e.start(e.backfillArgs("--checkpoint", "file:"+path, "--since", since)...)
	if code := bf.wait(2 * time.Minute); code != 0 {
		e.t.Fatalf("backfill exited %d:\n%s", code, tail(bf.output.String(), 20))
	}
	return bf
}
