package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/cpuclock"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// BenchmarkPublisher publishes b.N events with 200-byte payloads through
// Run to an in-process JetStream server (file storage) with a window of
// 4096, as outboxd is configured by default, and reports events per second
// and the CPU time of the process (publisher and nats-server) per event,
// which depends less than wall time on what else the machine runs.
// The sync=always case is the durable server setting (fsync every write).
// The mode=fast cases publish in fast batches (Config.Fast).
func BenchmarkPublisher(b *testing.B) {
	async, fast, exclusive := Config{}, Config{Fast: true}, Config{Exclusive: true}
	b.Run("sync=default", func(b *testing.B) { benchmarkPublisher(b, async) })
	b.Run("sync=always", func(b *testing.B) { benchmarkPublisher(b, async, natstest.WithSyncAlways()) })
	b.Run("sync=default/exclusive", func(b *testing.B) { benchmarkPublisher(b, exclusive) })
	b.Run("sync=always/exclusive", func(b *testing.B) { benchmarkPublisher(b, exclusive, natstest.WithSyncAlways()) })
	b.Run("sync=default/mode=fast", func(b *testing.B) { benchmarkPublisher(b, fast) })
	b.Run("sync=always/mode=fast", func(b *testing.B) { benchmarkPublisher(b, fast, natstest.WithSyncAlways()) })
}

// BenchmarkPublisherWindow is BenchmarkPublisher (sync=default) for
// several --max-in-flight windows, async and fast, to choose the default.
func BenchmarkPublisherWindow(b *testing.B) {
	for _, window := range []int{256, 1024, 4096, 16384} {
		for _, fast := range []bool{false, true} {
			mode := "async"
			if fast {
				mode = "fast"
			}
			b.Run(fmt.Sprintf("window=%d/mode=%s", window, mode), func(b *testing.B) {
				benchmarkPublisher(b, Config{Fast: fast, MaxInFlight: window})
			})
		}
	}
}

func benchmarkPublisher(b *testing.B, mode Config, opts ...natstest.Option) {
	maxInFlight := 4096
	if mode.MaxInFlight != 0 {
		maxInFlight = mode.MaxInFlight
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := natstest.Start(b, opts...)
	// As cmd/outboxd: enough client-side pending acks for the window.
	nc, js := newJetStream(b, srv, jetstream.WithPublishAsyncTimeout(10*time.Second), jetstream.WithPublishAsyncMaxPending(65536))
	tmpl := testTemplate(b, defaultTemplate)
	setupStream(b, js, "OUTBOX", tmpl)
	items := newEventBuilder(b).items(b.N, 100, 200)
	p := newTestPublisher(b, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, MaxInFlight: maxInFlight, Exclusive: mode.Exclusive, Fast: mode.Fast})
	a := newAcker()

	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuclock.Process()
	if err := run(ctx, p, items, a, nil); err != nil {
		b.Fatal(err)
	}
	elapsed, cpu := time.Since(start), cpuclock.Process()-cpu
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
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/event")
}

// BenchmarkMessage builds the NATS message of one event with a 200-byte
// payload and two row headers: the publisher's own per-event cost.
func BenchmarkMessage(b *testing.B) {
	srv := natstest.Start(b)
	nc, js := newJetStream(b, srv)
	p := newTestPublisher(b, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: testTemplate(b, defaultTemplate)})
	ev := newEventBuilder(b).items(1, 1, 200)[0].Event
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.message(ev); err != nil {
			b.Fatal(err)
		}
	}
}
