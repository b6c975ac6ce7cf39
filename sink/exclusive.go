package sink

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file holds the exclusive mode (Config.Exclusive): outboxd is the
// only writer to the stream, so it can predict stream sequences and have
// the stream leader refuse a message whose predecessor was lost in a
// leader failover, instead of storing it ahead of the republished one.

// sequencer predicts stream sequences in exclusive mode. Only a
// non-duplicate PubAck for the last message in flight tells the stream's
// last sequence; until one does, messages go one at a time without an
// expectation, which keeps order by itself.
type sequencer struct {
	known bool
	last  uint64 // the sequence the newest message sent will get, when known
}

// admits reports whether pm may be sent while inFlight messages are
// unacknowledged: pipelining needs a known sequence, and a dead-letter
// message goes alone.
func (s *sequencer) admits(inFlight int, pm pending) bool {
	return inFlight == 0 || (s.known && !pm.dead)
}

// acked updates the prediction with the ack of pm; idle reports that
// nothing else is in flight.
func (s *sequencer) acked(pm pending, ack *jetstream.PubAck, stream string, idle bool) {
	switch {
	case ack.Duplicate || ack.Stream != stream || (pm.expect != 0 && ack.Sequence != pm.expect+1):
		// A duplicate's sequence is the original's, not the stream's last.
		s.known = false
	case idle:
		s.known, s.last = true, ack.Sequence
	}
}

// sendExclusive publishes pm in exclusive mode: with the expectation that
// the stream's last sequence is the one the previous message got, when that
// is known, else alone and without one.
func (p *Publisher) sendExclusive(order *sequencer, pm pending) pending {
	if order.known && !pm.dead {
		pm.expect = order.last
		order.last++
		pm.msg.Header[jetstream.ExpectedLastSeqHeader] = []string{strconv.FormatUint(pm.expect, 10)}
	} else {
		pm.expect = 0
		delete(pm.msg.Header, jetstream.ExpectedLastSeqHeader)
		order.known = false
	}
	pm.future = p.publish(pm.msg)
	return pm
}

// isDeadLetter reports whether msg was built by deadLetter.
func isDeadLetter(msg *nats.Msg) bool {
	_, ok := msg.Header[HeaderDeadLetterReason]
	return ok
}

// recoverExclusive is recover for exclusive mode: after every later
// publish has settled, it republishes the head alone, without an
// expectation, with backoff, until it is acknowledged or ctx is done. The
// head's future is replaced by one that reports that ack again.
func (p *Publisher) recoverExclusive(ctx context.Context, window []pending, cause error) error {
	p.log.Warn().Err(cause).Int("in_flight", len(window)).Msg("publish failed; retrying from the first unacknowledged message")
	settle(ctx, window[1:])
	head := &window[0]
	head.expect = 0
	delete(head.msg.Header, jetstream.ExpectedLastSeqHeader)
	delay := p.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, p.cfg.RetryMax)
		future := p.publish(head.msg)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ack := <-future.Ok():
			head.future = ackedFuture{msg: head.msg, ack: ack}
			p.log.Info().Int("attempts", attempt).Msg("publishing resumed")
			return nil
		case err := <-future.Err():
			p.cfg.Observer.PublishFailed(failureReason(err))
			p.log.Debug().Err(err).Int("attempt", attempt).Msg("republish failed")
		}
	}
}
