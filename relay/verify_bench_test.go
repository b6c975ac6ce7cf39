package relay

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// BenchmarkVerify measures Verify over n rows, each stored once in the
// stream, on a real PostgreSQL and an in-process NATS server, whose own
// work and allocations (delivering the messages) count too: time and
// bytes allocated per message, and the peak of the live heap (as of each
// garbage collection) over what it was before.
//
//	go test -run '^$' -bench BenchmarkVerify -benchtime 3x ./relay/
func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint("msgs=", n), func(b *testing.B) { benchmarkVerify(b, n) })
	}
}

func benchmarkVerify(b *testing.B, n int) {
	v := newVerifyServers(b)
	ctx := context.Background()
	since := time.Now().Add(-time.Hour).UTC()
	rows, err := v.pg.Query(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, created_at)
		SELECT gen_random_uuid(), 'order', (i % 1000)::text, 'Created', '{}', $2::timestamptz + i * interval '1 ms'
		FROM generate_series(1, $1) i RETURNING id::text`, n, since)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	v.publishAll(b, ids)
	cfg := v.cfg
	cfg.Since, cfg.Until = since, time.Now()

	peak := sampleLiveHeap()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		r, err := Verify(ctx, cfg, v.env)
		if err != nil || r.Rows != n || r.Messages != n {
			b.Fatalf("Verify() = %d rows, %d messages, %v; want %d, %d, nil", r.Rows, r.Messages, err, n, n)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	msgs := float64(b.N * n)
	b.ReportMetric(float64(elapsed.Nanoseconds())/msgs, "ns/msg")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/msgs, "B/msg")
	b.ReportMetric(float64(peak())/1e6, "peak-live-MB")
}

// sampleLiveHeap collects garbage, then samples the live heap every
// millisecond until the returned function is called, which returns its
// peak over the heap at the start.
func sampleLiveHeap() (stop func() uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base, peak := read(), uint64(0)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak = max(peak, read())
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		peak = max(peak, read())
		if peak < base {
			return 0
		}
		return peak - base
	}
}
