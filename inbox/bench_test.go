package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd/inbox"
)

// BenchmarkConsume measures how many events a second a consumer applies
// from a backlog of b.N events over 256 aggregates, with 1 worker and with
// 8 partitions and workers. Each event is one transaction: the inbox row
// and one business row, then the ack; a partition's next message comes
// only after its previous ack (MaxAckPending 1). The servers are the
// tests': an in-process nats-server and the package's PostgreSQL cluster.
//
//	go test -run '^$' -bench . -benchtime 20000x ./inbox
func BenchmarkConsume(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchConsume(b, workers) })
	}
}

func benchConsume(b *testing.B, workers int) {
	e := newEnv(b, envOptions{partitions: workers})
	c, err := inbox.New(context.Background(), e.js, e.pool, e.config(workers))
	if err != nil {
		b.Fatal(err)
	}
	const aggregates = 256
	evs := events(aggregates, (b.N+aggregates-1)/aggregates)[:b.N]
	publish(b, e.js, evs)

	b.ResetTimer()
	start(b, c)
	e.waitApplied(b, b.N, 10*time.Minute)
	b.StopTimer()

	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
