package sink

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pending is a message published but not yet acknowledged.
type pending struct {
	seq    uint64
	msg    *nats.Msg
	future jetstream.PubAckFuture
	// committed is the event's commit time (zero for a dead letter), for
	// the commit-to-ack latency.
	committed time.Time
	// dead marks a dead-letter message, which may land in another stream.
	dead bool
	// Exclusive mode only: expect is the Nats-Expected-Last-Sequence the
	// message was sent with (0 for none).
	expect uint64
	// conn counts the client's reconnects when the message was sent: which
	// connection carried it.
	conn uint64
}

// queue is the in-flight window, oldest first. Popping from the front and
// appending at the back reuse one backing array.
type queue struct {
	buf   []pending
	start int
}

func (q *queue) len() int { return len(q.buf) - q.start }

func (q *queue) head() *pending {
	if q.len() == 0 {
		return nil
	}
	return &q.buf[q.start]
}

func (q *queue) push(pm pending) {
	if q.start > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.start:])
		clear(q.buf[n:])
		q.buf, q.start = q.buf[:n], 0
	}
	q.buf = append(q.buf, pm)
}

func (q *queue) pop() pending {
	pm := q.buf[q.start]
	q.buf[q.start] = pending{}
	q.start++
	if q.start == len(q.buf) {
		q.buf, q.start = q.buf[:0], 0
	}
	return pm
}

// truncate keeps the n oldest messages.
func (q *queue) truncate(n int) {
	clear(q.buf[q.start+n:])
	q.buf = q.buf[:q.start+n]
}

// items is the window as a slice, to update futures in place.
func (q *queue) items() []pending { return q.buf[q.start:] }
