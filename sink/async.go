package sink

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file holds async mode: one PublishAsync and one PubAck per message,
// and the retry every mode falls back on: after a failure the window is
// republished in order, from its first unacknowledged message.

// runAsync is Run with PublishAsync: one PubAck per message. It sends
// first, built already, before anything from in (fast mode hands over a
// message when the stream refuses batches, or a trickle's). When a message
// may go out, and how, is up to its sender: asyncSender, or in exclusive
// mode exclusiveSender (exclusive.go).
//
// leave, if not nil, is asked before each new item is taken, with the
// number of messages in flight: once it says yes, runAsync takes nothing
// more and returns errBacklog when the window is acknowledged (fast mode's
// way back from a trickle to batches).
func (p *Publisher) runAsync(ctx context.Context, in <-chan Item, acks acker, leave func(inFlight int) bool, first ...pending) error {
	var window queue
	s := p.newSender()
	var stop error // an item that cannot be published; Run returns it after the window
	left := false
	for _, pm := range first {
		s.send(&window, pm)
	}
	for in != nil || window.len() > 0 || s.holding() {
		// A failed head goes before any new publish: a message sent after
		// a reconnect must not overtake the ones lost with the old connection.
		if head := window.head(); head != nil {
			select {
			case err := <-head.future.Err():
				if rerr := p.retry(ctx, s, &window, err); rerr != nil {
					return rerr
				}
				continue
			default:
			}
		}
		if s.sendHeld(&window) {
			continue
		}
		if in != nil && leave != nil && leave(window.len()) {
			in, left = nil, true
			continue
		}
		var recv <-chan Item
		if in != nil && window.len() < p.cfg.MaxInFlight && s.ready(&window) {
			recv = in
		}
		var okC <-chan *jetstream.PubAck
		var errC <-chan error
		if head := window.head(); head != nil {
			okC, errC = head.future.Ok(), head.future.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case item, open := <-recv:
			if !open {
				in = nil
				continue
			}
			pm, err := p.prepare(item)
			if err != nil {
				// The messages before the bad one are still published:
				// take nothing more and return once they are acknowledged.
				stop, in = err, nil
				continue
			}
			s.send(&window, pm)
		case ack := <-okC:
			head := window.pop()
			s.acked(head, ack, window.len() == 0)
			if err := p.acked(head, ack.Duplicate, ack.Sequence, acks); err != nil {
				return err
			}
		case err := <-errC:
			if rerr := p.retry(ctx, s, &window, err); rerr != nil {
				return rerr
			}
		}
	}
	if stop == nil && left {
		return errBacklog
	}
	return stop
}

// errBacklog is runAsync's return when its leave said yes: the window is
// acknowledged and in still open.
var errBacklog = errors.New("a backlog is waiting")

// sender holds what differs between async and exclusive mode in runAsync:
// when a new item may be taken, how a message goes out, and how the window
// recovers from a failed head. A sender lives for one run of runAsync.
type sender interface {
	// ready reports whether runAsync may take a new item from in, with
	// window in flight (and below MaxInFlight).
	ready(window *queue) bool
	// send publishes pm and pushes it onto window, or holds it back.
	send(window *queue, pm pending)
	// holding reports whether messages are held back.
	holding() bool
	// sendHeld sends the oldest message held back if it may go now, and
	// reports whether it did.
	sendHeld(window *queue) bool
	// acked is told the acknowledgement of head, just popped off the
	// window; idle reports that nothing else is in flight.
	acked(head pending, ack *jetstream.PubAck, idle bool)
	// retry handles the failed head of window. It returns ctx's error when
	// ctx is done first, else nil.
	retry(ctx context.Context, window *queue, cause error) error
}

// newSender returns the sender for one run of runAsync.
func (p *Publisher) newSender() sender {
	if p.cfg.Exclusive {
		return &exclusiveSender{p: p}
	}
	return &asyncSender{p: p}
}

// retry reports a failed head of the window and has s handle it.
func (p *Publisher) retry(ctx context.Context, s sender, window *queue, cause error) error {
	p.cfg.Observer.PublishFailed(failureReason(cause))
	return s.retry(ctx, window, cause)
}

// asyncSender is async mode's sender: every message goes out as soon as it
// is taken, and none is held back.
type asyncSender struct {
	p *Publisher
	// stalled is set once a publish was refused before it was sent: nothing
	// newer is sent until the window has recovered in order.
	stalled bool
}

// ready takes nothing new while the window holds a message that was never
// sent or may have died with an older connection: those are republished
// first.
func (s *asyncSender) ready(window *queue) bool {
	return !s.stalled && !s.p.connChanged(window)
}

func (s *asyncSender) send(window *queue, pm pending) {
	pm.conn = s.p.connection()
	pm.future = s.p.publish(pm.msg)
	s.stalled = s.stalled || isUnsent(pm)
	window.push(pm)
}

func (s *asyncSender) holding() bool                          { return false }
func (s *asyncSender) sendHeld(*queue) bool                   { return false }
func (s *asyncSender) acked(pending, *jetstream.PubAck, bool) {}

// retry republishes the whole window in recover.
func (s *asyncSender) retry(ctx context.Context, window *queue, cause error) error {
	if err := s.p.recover(ctx, window.items(), cause); err != nil {
		return err
	}
	s.stalled = hasUnsent(window.items())
	return nil
}

// connection counts the client's reconnects, naming the connection a
// publish made now goes out on.
func (p *Publisher) connection() uint64 { return p.js.Conn().Stats().Reconnects }

// connChanged reports that the client has reconnected since the oldest
// message in the window was sent. That message may have died with the old
// connection without a word yet (its ack times out later), so a newer one
// sent on the new connection could be stored ahead of it: Run sends nothing
// until the window's older messages are acknowledged or have failed.
func (p *Publisher) connChanged(window *queue) bool {
	head := window.head()
	return head != nil && head.conn != p.connection()
}

// hasUnsent reports whether the window holds a message that was never sent
// (recover stopped before it).
func hasUnsent(window []pending) bool {
	for _, pm := range window {
		if isUnsent(pm) {
			return true
		}
	}
	return false
}

// publish sends msg asynchronously; a refusal before sending becomes a
// future that has already failed, so it takes the same retry path.
func (p *Publisher) publish(msg *nats.Msg) jetstream.PubAckFuture {
	future, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		return failedFuture{msg: msg, err: err}
	}
	return future
}

// recover handles a failed publish at the head of the window: it waits for
// every later publish to settle, then republishes the whole window in order
// (acknowledged repeats are duplicates JetStream drops), with backoff, until
// the head is acknowledged or ctx is done. It logs once when publishing
// stops and once when it resumes. It replaces the futures in place.
func (p *Publisher) recover(ctx context.Context, window []pending, cause error) error {
	p.log.Warn().Err(cause).Int("in_flight", len(window)).Msg("publish failed; retrying from the first unacknowledged message")
	delay := p.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		settle(ctx, window[1:])
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, p.cfg.RetryMax)
		p.republish(window)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-window[0].future.Ok():
			// Futures deliver once: leave one that reports the ack again.
			window[0].future = ackedFuture{msg: window[0].msg}
			p.log.Info().Int("attempts", attempt).Msg("publishing resumed")
			return nil
		case err := <-window[0].future.Err():
			p.cfg.Observer.PublishFailed(failureReason(err))
			p.log.Debug().Err(err).Int("attempt", attempt).Msg("republish failed")
		}
	}
}

// errNotSent fails the messages republish did not send.
var errNotSent = errors.New("not sent: an earlier message of the window could not be")

// republish sends the window again in order on one connection. It stops at
// the first message the client refuses, or when the client reconnects
// under it, and leaves the rest unsent (failed futures): a message sent on
// a new connection must not overtake one that failed or went out on the
// old one. Run republishes those later, from the first of them.
func (p *Publisher) republish(window []pending) {
	conn := p.connection()
	for i := range window {
		if i > 0 && (p.connection() != conn || isUnsent(window[i-1])) {
			for j := i; j < len(window); j++ {
				window[j].future = failedFuture{msg: window[j].msg, err: errNotSent}
			}
			return
		}
		window[i].conn = conn
		window[i].future = p.publish(window[i].msg)
	}
}

func isUnsent(pm pending) bool {
	_, unsent := pm.future.(failedFuture)
	return unsent
}

// settle waits until every future has an outcome, so a republish cannot
// race a late acknowledgement of the same message.
func settle(ctx context.Context, window []pending) {
	for _, pm := range window {
		select {
		case <-pm.future.Ok():
		case <-pm.future.Err():
		case <-ctx.Done():
			return
		}
	}
}

// failedFuture stands for a publish the client refused before sending.
type failedFuture struct {
	msg *nats.Msg
	err error
}

func (f failedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f failedFuture) Err() <-chan error {
	c := make(chan error, 1)
	c <- f.err
	return c
}
func (f failedFuture) Msg() *nats.Msg { return f.msg }

// ackedFuture stands for a publish already acknowledged, with ack when it
// is kept (exclusive mode reads its sequence).
type ackedFuture struct {
	msg *nats.Msg
	ack *jetstream.PubAck
}

func (f ackedFuture) Ok() <-chan *jetstream.PubAck {
	c := make(chan *jetstream.PubAck, 1)
	if f.ack == nil {
		c <- &jetstream.PubAck{}
	} else {
		c <- f.ack
	}
	return c
}
func (f ackedFuture) Err() <-chan error { return nil }
func (f ackedFuture) Msg() *nats.Msg    { return f.msg }
