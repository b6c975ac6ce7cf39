package sink

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/natstest"
)

// BenchmarkPublisher publishes b.N events with 200-byte payloads through
// Run to an in-process JetStream server (file storage) with a window of
// 4096, as outboxd is configured by default, and reports events per second.
// The sync=always case is the durable server setting (fsync every write).
func BenchmarkPublisher(b *testing.B) {
	b.Run("sync=default", func(b *testing.B) { benchmarkPublisher(b, false) })
	b.Run("sync=always", func(b *testing.B) { benchmarkPublisher(b, false, natstest.WithSyncAlways()) })
	b.Run("sync=default/exclusive", func(b *testing.B) { benchmarkPublisher(b, true) })
	b.Run("sync=always/exclusive", func(b *testing.B) { benchmarkPublisher(b, true, natstest.WithSyncAlways()) })
}

func benchmarkPublisher(b *testing.B, exclusive bool, opts ...natstest.Option) {
	const maxInFlight = 4096
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := natstest.Start(b, opts...)
	// As cmd/outboxd: enough client-side pending acks for the window.
	nc, js := newJetStream(b, srv, jetstream.WithPublishAsyncTimeout(10*time.Second), jetstream.WithPublishAsyncMaxPending(65536))
	tmpl := testTemplate(b, defaultTemplate)
	setupStream(b, js, "OUTBOX", tmpl)
	items := newEventBuilder(b).items(b.N, 100, 200)
	p := newTestPublisher(b, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight, Exclusive: exclusive})
	a := newAcker()

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := run(ctx, p, items, a, nil); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	if got := a.count.Load(); got != uint64(b.N) {
		b.Fatalf("%d acks, want %d", got, b.N)
	}
	stream, err := js.Stream(ctx, "OUTBOX")
	if err != nil {
		b.Fatal(err)
	}
	if got := stream.CachedInfo().State.Msgs; got != uint64(b.N) {
		b.Fatalf("stream holds %d messages, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
