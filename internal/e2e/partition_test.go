package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// partitionedOutbox is the default outbox table partitioned by month of
// created_at, as high-volume outboxes are, so that old rows go by
// dropping a partition instead of by DELETE.
const partitionedOutbox = `
CREATE TABLE public.outbox (
    id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
    payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE TABLE public.outbox_2025 PARTITION OF public.outbox FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE public.outbox_2026 PARTITION OF public.outbox FOR VALUES FROM ('2026-01-01') TO ('2100-01-01');
CREATE PUBLICATION outboxd FOR TABLE public.outbox WITH (publish = 'insert')`

// TestPartitionedOutbox: a partitioned outbox table streams once its
// publication sends the partitions' rows as the table's
// (publish_via_partition_root; outboxd refuses to start without, naming
// the fix); dropping an old partition, the retention of such tables, is
// harmless; and turning publish_via_partition_root off while outboxd
// streams stops it at the first row sent as a partition's, which it would
// otherwise have skipped.
func TestPartitionedOutbox(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false)
	ctx := context.Background()
	e.pg.Exec(t, e.dsn, partitionedOutbox)
	e.expectExit(e.args(), "partitioned table \"public\".\"outbox\"", "publish_via_partition_root = true")
	e.pg.Exec(t, e.dsn, "ALTER PUBLICATION outboxd SET (publish_via_partition_root = true)")

	check := checker.New()
	w := e.newWriter(check, 5)
	oldRow := func(i int) {
		t.Helper()
		id := uuid.New()
		e.pg.Exec(t, e.dsn, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ($1, 'order', 'old', 'Created', $2, '2025-06-01')`, id, fmt.Sprintf(`{"n": %d}`, i))
		check.Committed([]checker.Event{{ID: id.String(), Aggregate: "order/old"}})
	}
	p := e.start(e.args()...)
	e.waitStreaming(p)
	for i := range 5 {
		oldRow(i)
		if _, err := w.tx(ctx, 2, true); err != nil {
			t.Fatal(err)
		}
	}
	e.verify(e.js(), check, time.Minute)

	e.pg.Exec(t, e.dsn, "DROP TABLE outbox_2025") // retention: the old partition goes
	for range 5 {
		if _, err := w.tx(ctx, 2, true); err != nil {
			t.Fatal(err)
		}
	}
	report := e.verify(e.js(), check, time.Minute)
	t.Logf("partitioned outbox, an old partition dropped while streaming: %s", report)

	e.pg.Exec(t, e.dsn, "ALTER PUBLICATION outboxd SET (publish_via_partition_root = false)")
	if _, err := w.tx(ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(time.Minute); code == 0 {
		t.Fatal("outboxd exited 0 when the publication began to send partitions")
	}
	for _, want := range []string{"partition public.outbox_2026", "publish_via_partition_root = true"} {
		if out := p.output.String(); !contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out, 10))
		}
	}
}
