package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// commitTimeHeader carries each message's commit time: outboxd sets it
// from the transaction's Begin message; the polling relay from created_at
// (the row's insert time, which for a one-row transaction is its commit
// time less the commit itself).
const commitTimeHeader = "Outbox-Commit-Time"

// insertedKey is the payload key of the load's insert time, in Unix
// microseconds (offerLoad).
const insertedKey = "inserted_us"

// latencies collects, at a JetStream consumer, how long after its commit
// each message arrived. Delivery follows the stream's store, which the
// PubAck also follows, so this is commit→PubAck plus the delivery hop.
// It also collects how long after the INSERT that wrote it (the time in
// its payload) each arrived: what a user of the outbox sees.
type latencies struct {
	mu       sync.Mutex
	samples  []time.Duration
	inserted []time.Duration
	bad      int // messages without a parsable commit time
	stop     func()
}

// insertedAt reads the insert time offerLoad put in a payload.
func insertedAt(payload []byte) (time.Time, bool) {
	key := []byte(`"` + insertedKey + `": `)
	i := bytes.Index(payload, key)
	if i < 0 {
		return time.Time{}, false
	}
	digits := payload[i+len(key):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	us, err := strconv.ParseInt(string(digits[:n]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMicro(us), true
}

// measureLatency starts an ordered consumer of the new messages of stream.
func measureLatency(ctx context.Context, t *target, stream string) (*latencies, error) {
	cons, err := t.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return nil, fmt.Errorf("consumer on %s: %w", stream, err)
	}
	l := &latencies{}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		now := time.Now()
		committed, err := time.Parse(time.RFC3339Nano, msg.Headers().Get(commitTimeHeader))
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.bad++
			return
		}
		l.samples = append(l.samples, now.Sub(committed))
		if inserted, ok := insertedAt(msg.Data()); ok {
			l.inserted = append(l.inserted, now.Sub(inserted))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", stream, err)
	}
	l.stop = cc.Stop
	return l, nil
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.samples) + l.bad
}

// waitFor waits until n messages arrived or timeout passed, then stops the
// consumer and returns how many arrived. A relay that fell behind the
// offered load and has not caught up by then is a result, not an error:
// the latencies then cover what arrived, and the table says how much that
// was.
func (l *latencies) waitFor(ctx context.Context, n int, timeout time.Duration) (int, error) {
	defer l.stop()
	deadline := time.Now().Add(timeout)
	for l.count() < n && time.Now().Before(deadline) {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return l.count(), err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bad > 0 {
		return len(l.samples), fmt.Errorf("%d messages had no parsable %s header", l.bad, commitTimeHeader)
	}
	return len(l.samples), nil
}

// percentiles are latencies in milliseconds.
type percentiles struct {
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p99_9_ms"`
	Max  float64 `json:"max_ms"`
}

func (l *latencies) percentiles() percentiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	return percentilesOf(l.samples)
}

// insertPercentiles are the insert→consumer latencies'.
func (l *latencies) insertPercentiles() percentiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	return percentilesOf(l.inserted)
}

// percentilesOf are the nearest-rank percentiles of samples (left as they
// are: it sorts a copy).
func percentilesOf(samples []time.Duration) percentiles {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return percentiles{}
	}
	at := func(q float64) float64 {
		i := min(int(q*float64(len(s))), len(s)-1) // nearest rank
		return ms(s[i])
	}
	return percentiles{P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
