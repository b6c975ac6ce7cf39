package replication

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestRowsBeforeSlot: the rows committed before a slot's consistent point
// are exactly those BeforeSlotCondition selects with the snapshot
// RowsBeforeSlot reads from the slot's exported one; an empty table has
// none; a current snapshot instead keeps the rows written up to then.
func TestRowsBeforeSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	table := Table{Schema: "public", Name: "outbox"}
	countBefore := func(snapshot string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM public.outbox WHERE "+BeforeSlotCondition("$1"), snapshot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	newSlot := func() string {
		t.Helper()
		stream, err := Connect(ctx, Config{ConnString: dsn, Slot: uniqueSlot()})
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close(context.Background()) //nolint:errcheck
		snap, err := stream.CreateSlotExportingSnapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", stream.cfg.Slot) }) //nolint:errcheck
		before, err := RowsBeforeSlot(ctx, dsn, snap.Name, table)
		if err != nil {
			t.Fatal(err)
		}
		return before
	}

	if before := newSlot(); before != "" {
		t.Fatalf("empty table: RowsBeforeSlot = %q, want \"\"", before)
	}
	for range 3 {
		insertEvents(t, conn, 2)
	}
	before := newSlot()
	if before == "" {
		t.Fatal("RowsBeforeSlot = \"\" for a table with 6 rows")
	}
	for range 2 {
		insertEvents(t, conn, 2)
	}
	if got := countBefore(before); got != 6 {
		t.Errorf("%d rows before the slot, want the 6 written before it (10 in all)", got)
	}

	current, err := RowsBeforeSlot(ctx, dsn, "", table)
	if err != nil {
		t.Fatal(err)
	}
	insertEvents(t, conn, 1)
	if got := countBefore(current); got != 10 {
		t.Errorf("%d rows before a current snapshot, want the 10 written before it (11 in all)", got)
	}
	if _, err := RowsBeforeSlot(ctx, dsn, "00000003-0000001B-1", table); err == nil {
		t.Error("RowsBeforeSlot with a snapshot that was never exported: no error")
	}
}
