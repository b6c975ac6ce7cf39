package relay

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// BenchmarkRetentionRound measures one retention batch of 1000 rows on a
// real PostgreSQL: the snapshot, the horizon, the DELETE and its commit,
// with everything already confirmed. Each iteration deletes 1000 of the
// rows written before the timer starts.
//
//	go test -run '^$' -bench BenchmarkRetentionRound -benchtime 50x ./relay/
func BenchmarkRetentionRound(b *testing.B) {
	const batch = 1000
	ctx := context.Background()
	dsn, conn := pgtest.Shared(b).MigratedDatabase(b)
	if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'order', i::text, 'Created', '{"n": 1}' FROM generate_series(1, $1) i`, b.N*batch); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PGURL, cfg.Retention.On = dsn, true
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	confirmed := func() pglogrepl.LSN { return math.MaxUint64 }
	r := newRetention(cfg, keptRows{}, confirmed, telemetry.NewMetrics(cfg.Stream), zerolog.Nop())
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := r.round(ctx, conn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "rows/s")
	b.StopTimer()
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&left); err != nil || left != 0 {
		b.Fatalf("%d rows left (%v), want 0", left, err)
	}
}
