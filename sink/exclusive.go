package sink

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// This file holds the exclusive mode (Config.Exclusive): outboxd is the
// only writer to the stream, so it can predict stream sequences and have
// the stream leader refuse a message whose predecessor was lost in a
// leader failover, instead of storing it ahead of the republished one.

// exclusiveSender is runAsync's sender in exclusive mode.
type exclusiveSender struct {
	p     *Publisher
	order sequencer
	// redo holds built messages to send before anything more from in (the
	// tail of a recovered window, or a dead-letter message waiting for the
	// window to drain).
	redo []pending
}

// ready lets a new item in only when nothing is held back, and then only
// alone unless the stream's last sequence is known.
func (s *exclusiveSender) ready(window *queue) bool {
	return len(s.redo) == 0 && (s.order.known || window.len() == 0)
}

func (s *exclusiveSender) send(window *queue, pm pending) {
	if s.order.admits(window.len(), pm) {
		window.push(s.p.sendExclusive(&s.order, pm))
	} else {
		s.redo = append(s.redo, pm)
	}
}

func (s *exclusiveSender) holding() bool { return len(s.redo) > 0 }

func (s *exclusiveSender) sendHeld(window *queue) bool {
	if len(s.redo) == 0 || window.len() >= s.p.cfg.MaxInFlight || !s.order.admits(window.len(), s.redo[0]) {
		return false
	}
	window.push(s.p.sendExclusive(&s.order, s.redo[0]))
	s.redo[0] = pending{}
	s.redo = s.redo[1:]
	return true
}

func (s *exclusiveSender) acked(head pending, ack *jetstream.PubAck, idle bool) {
	s.order.acked(head, ack, s.p.cfg.Stream, idle)
}

// retry republishes only the head, in recoverExclusive; the rest go back to
// redo, to be sent again by runAsync's rules (one at a time until a fresh
// sequence is known): any of them may already be stored, and an old
// expectation would be wrong for it.
func (s *exclusiveSender) retry(ctx context.Context, window *queue, cause error) error {
	items := window.items()
	if err := s.p.recoverExclusive(ctx, items, cause); err != nil {
		return err
	}
	rest := make([]pending, 0, len(items)-1+len(s.redo))
	for _, pm := range items[1:] {
		pm.future, pm.expect = nil, 0
		rest = append(rest, pm)
	}
	s.redo = append(rest, s.redo...)
	window.truncate(1)
	s.order.known = false
	return nil
}

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
