package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// This file holds fast mode (Config.Fast): JetStream fast-ingest batch
// publishing (nats-server 2.14 and later). Items that arrive back to back
// go out as one batch; the server acknowledges it cumulatively every few
// hundred messages ("every message up to batch sequence N is stored"; gap
// mode fail, so a lost message ends the batch instead of leaving a hole),
// and those acknowledgements map onto tracker sequences in order. That
// spares the per-message reply, its JSON PubAck and the client's future.
// Nats-Msg-Id still deduplicates inside a batch: the server skips a
// duplicate and goes on. What fast mode cannot do, it leaves to the async
// path: a dead letter (which may belong to another stream) goes alone
// between batches, a batch whose first message is a duplicate (the server
// then answers with a plain PubAck and ends the batch) is republished
// alone, and after any failure the unacknowledged messages are
// republished with PublishAsync, in order, as in async mode.

// fastBatchAPILevel is the JetStream API level of nats-server 2.14, the
// first to take fast-ingest batches.
const fastBatchAPILevel = 4

// maxFastFlow is the most messages the server lets one batch go between
// acknowledgements.
const maxFastFlow = 500

// BatchError says why a server or stream cannot take fast or atomic batch
// publishes, and the fix.
type BatchError struct {
	Stream  string
	Feature string // "fast" or "atomic"
	Problem string
	Fix     string
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%s batch publishing to stream %q: %s; fix: %s", e.Feature, e.Stream, e.Problem, e.Fix)
}

// CheckFastBatch reports whether the server behind js and the stream take
// fast batch publishes: nil if they do, a *BatchError naming what is
// missing if they do not, another error if it cannot tell. The server's
// JetStream API level ($JS.API.INFO, api.level) must be at least 4, and the
// stream must allow batch publishing (allow_batched).
func CheckFastBatch(ctx context.Context, js jetstream.JetStream, stream string) error {
	return checkBatchSupport(ctx, js, stream, batchFeature{
		name: "fast", level: fastBatchAPILevel, server: "nats-server 2.14",
		allowed: func(c jetstream.StreamConfig) bool { return c.AllowBatchPublish },
		setting: "allow_batched", fix: "--publish-mode async"})
}

// batchFeature is what a kind of batch publishing needs.
type batchFeature struct {
	name    string // as BatchError.Feature
	level   int    // the JetStream API level of the first server that has it
	server  string // that server
	allowed func(jetstream.StreamConfig) bool
	setting string // the stream setting allowed reads
	fix     string // the flag that does without it
}

func checkBatchSupport(ctx context.Context, js jetstream.JetStream, stream string, f batchFeature) error {
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return fmt.Errorf("read JetStream account info for the API level: %w", err)
	}
	if info.API.Level < f.level {
		return &BatchError{Stream: stream, Feature: f.name,
			Problem: fmt.Sprintf("the server reports JetStream API level %d, and %s batches need level %d (%s or later)", info.API.Level, f.name, f.level, f.server),
			Fix:     "upgrade nats-server, or use " + f.fix}
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("read stream %q: %w", stream, err)
	}
	if !f.allowed(s.CachedInfo().Config) {
		return &BatchError{Stream: stream, Feature: f.name,
			Problem: fmt.Sprintf("the stream does not allow %s batch publishing (%s is false)", f.name, f.setting),
			Fix:     fmt.Sprintf("set %s: true in the stream's configuration (outboxd sets it on a stream it creates), or use %s", f.setting, f.fix)}
	}
	return nil
}

// backlogItems is how many items waiting in the input, or messages in
// flight, end a spell of async publishing in fast mode: a backlog, not two
// commits that came together. (A drain can keep the input short while
// async publishing keeps up at a higher cost per message; its messages in
// flight then pile up instead.)
const backlogItems = 16

// backlogged is runAsync's leave in fast mode; waiting is runFast's.
func (p *Publisher) backlogged(waiting func() int) func(inFlight int) bool {
	return func(inFlight int) bool { return waiting() >= backlogItems || inFlight >= backlogItems }
}

// DefaultLinger is Config.Linger's default: how long a batch waits for the
// next item before it commits. Committing whenever the input is
// momentarily empty makes batches of one or two messages, and each costs a
// round trip more than a message published alone (the first message of a
// longer batch waits for the server's flow-control reply) and a reply
// subscription.
const DefaultLinger = time.Millisecond

// batch is the open fast batch.
type batch struct {
	fp    jetstreamext.FastPublisher
	acked uint64 // the server stored every message up to this batch sequence

	mu       sync.Mutex
	reported error // the last error the server reported on the side
}

// report keeps an error the server reported asynchronously (a gap, a
// refused message); the batch then ends and the next call fails.
func (b *batch) report(err error) {
	b.mu.Lock()
	b.reported = err
	b.mu.Unlock()
}

// cause joins err with what the server reported, if anything.
func (b *batch) cause(err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reported == nil {
		return err
	}
	return errors.Join(err, b.reported)
}

// fastFlow keeps at most maxInFlight messages unacknowledged: the server
// acknowledges every flow messages (it may lower that, never raise it) and
// the client stalls with outstanding acknowledgements pending.
func fastFlow(maxInFlight int) (flow, outstanding uint16) {
	f := min(max(maxInFlight/2, 1), maxFastFlow)
	return uint16(f), uint16(max(maxInFlight/f, 1))
}

func (p *Publisher) newBatch() (*batch, error) {
	flow, outstanding := fastFlow(p.cfg.MaxInFlight)
	b := &batch{}
	fp, err := jetstreamext.NewFastPublisher(p.js,
		jetstreamext.FastPublishFlowControl{Flow: flow, MaxOutstandingAcks: outstanding, AckTimeout: p.cfg.AckTimeout},
		jetstreamext.WithFastPublisherErrorHandler(b.report))
	if err != nil {
		return nil, fmt.Errorf("start a fast batch: %w", err)
	}
	b.fp = fp
	return b, nil
}

// runFast is Run with fast batches. window holds the open batch's messages
// the server has not acknowledged yet, oldest first; the first has batch
// sequence b.acked+1. A message of a trickle (none waiting behind it, no
// batch open, and a linger or more since the one before) starts a spell of
// async mode (runAsync), which hands back once backlogItems wait and its
// window is acknowledged. Otherwise the newest message is held back
// (holding) until the next item comes, or none comes within
// Config.Linger: then it goes out as the batch's commit, which the server
// stores. (Closing a batch without a message of its own would send an
// empty end-of-batch message, which core NATS subscribers of the subject
// would see.) A batch of one message is then one publish and its PubAck.
// Between batches the window is empty.
//
// waiting counts the items waiting to be published: those in in, and in
// atomic mode those still before it.
func (p *Publisher) runFast(ctx context.Context, in <-chan Item, acks acker, waiting func() int) error {
	var window queue
	var b *batch
	holding := false
	var lastItem time.Time // when the previous item came
	linger := time.NewTimer(p.cfg.Linger)
	defer linger.Stop()
	for {
		var item Item
		var open bool
		if !holding {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case item, open = <-in:
			}
		} else {
			linger.Reset(p.cfg.Linger)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case item, open = <-in:
			case <-linger.C:
				disabled, err := p.commit(ctx, b, &window, acks)
				if err != nil {
					return err
				}
				if disabled {
					return p.runAsync(ctx, in, acks, nil)
				}
				b, holding = nil, false
				continue
			}
		}
		if !open {
			if !holding {
				return nil
			}
			_, err := p.commit(ctx, b, &window, acks)
			return err
		}
		pm, err := p.prepare(item)
		if err != nil {
			// The messages before the bad one are still published.
			if holding {
				if _, cerr := p.commit(ctx, b, &window, acks); cerr != nil {
					return errors.Join(err, cerr)
				}
			}
			return err
		}
		if holding && pm.dead {
			// It may belong to another stream than the batch: it goes
			// alone, after the batch.
			disabled, err := p.commit(ctx, b, &window, acks)
			if err != nil {
				return err
			}
			b, holding = nil, false
			if disabled {
				return p.runAsync(ctx, in, acks, nil, pm)
			}
		}
		// A dead letter goes alone. A message of a trickle (none waits
		// behind it, and it came a linger or more after the one before)
		// starts a spell of async publishing that lasts until a backlog
		// forms: a batch would hold each message back until the next one
		// came (its commit needs a message), and a batch of one costs a
		// reply subscription and a JSON acknowledgement besides. Messages
		// that arrive closer together, a backlog's, go out in batches.
		now := time.Now() // one clock read per item: this is the drain's hot path
		trickle := !holding && waiting() == 0 && now.Sub(lastItem) >= p.cfg.Linger
		lastItem = now
		if pm.dead {
			pm.future = p.publish(pm.msg)
			window.push(pm)
			if err := p.drain(ctx, &window, acks); err != nil {
				return err
			}
			continue
		}
		if trickle {
			err := p.runAsync(ctx, in, acks, p.backlogged(waiting), pm)
			if !errors.Is(err, errBacklog) {
				return err // nil once in is closed and all is acknowledged
			}
			lastItem = time.Now()
			continue
		}
		if holding {
			var disabled bool
			if b, disabled, err = p.add(ctx, b, &window, acks); err != nil {
				return err
			}
			if disabled {
				return p.runAsync(ctx, in, acks, nil, pm)
			}
		}
		window.push(pm)
		holding = true
	}
}

// add sends the newest message of the window in batch b (started if nil)
// and acknowledges what the server has stored. After a failure the window
// is republished and drained, and the batch is gone (nil).
func (p *Publisher) add(ctx context.Context, b *batch, window *queue, acks acker) (*batch, bool, error) {
	if b == nil {
		var err error
		if b, err = p.newBatch(); err != nil {
			return nil, false, err
		}
	}
	ack, err := b.fp.AddMsg(window.items()[window.len()-1].msg)
	if err != nil {
		disabled, err := p.fastFailed(ctx, b, window, acks, err)
		return nil, disabled, err
	}
	return b, false, p.ackBatch(b, window, ack.AckSequence, 0, acks)
}

// ackBatch acknowledges the window up to batch sequence upTo, whose
// stream sequence is lastSeq (0 when not known).
func (p *Publisher) ackBatch(b *batch, window *queue, upTo, lastSeq uint64, acks acker) error {
	if upTo > b.acked+uint64(window.len()) {
		return fmt.Errorf("BUG: fast batch acknowledged up to %d, but only %d messages were sent", upTo, b.acked+uint64(window.len()))
	}
	for ; b.acked < upTo; b.acked++ {
		var seq uint64
		if b.acked+1 == upTo {
			seq = lastSeq
		}
		if err := p.acked(window.pop(), false, seq, acks); err != nil {
			return err
		}
	}
	return nil
}

// commit sends the newest message of the window as the commit of batch b
// (a batch of one if b is nil) and acknowledges the window once the
// server has stored all of it. disabled is fastFailed's.
func (p *Publisher) commit(ctx context.Context, b *batch, window *queue, acks acker) (disabled bool, err error) {
	if b == nil {
		if b, err = p.newBatch(); err != nil {
			return false, err
		}
	}
	sent := b.acked + uint64(window.len())
	ack, err := b.fp.CommitMsg(ctx, window.items()[window.len()-1].msg)
	if err == nil && ack.BatchSize != sent {
		err = fmt.Errorf("fast batch %s committed %d messages of %d", ack.BatchID, ack.BatchSize, sent)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return p.fastFailed(ctx, b, window, acks, err)
	}
	return false, p.ackBatch(b, window, sent, ack.Sequence, acks)
}

// fastFailed handles a batch that ended before the server acknowledged all
// of it: it republishes the window with PublishAsync, in order, and waits
// until all of it is acknowledged. disabled reports that the stream does
// not take batches (any more): Run goes on in async mode then.
func (p *Publisher) fastFailed(ctx context.Context, b *batch, window *queue, acks acker, failure error) (disabled bool, err error) {
	cause := b.cause(failure)
	startRefused := b.acked == 0 && window.len() == 1
	switch {
	case startRefused && errors.Is(cause, jetstreamext.ErrInvalidBatchAck):
		// A batch whose first message is a duplicate is answered with a
		// plain PubAck: publish it alone, which reports the duplicate.
		window.head().future = p.publish(window.head().msg)
		return false, p.drain(ctx, window, acks)
	case startRefused && errors.Is(cause, jetstreamext.ErrFastBatchNotEnabled):
		p.log.Warn().Err(cause).Msg("the stream refuses fast batches; publishing asynchronously from now on")
		disabled = true
	}
	p.cfg.Observer.PublishFailed(failureReason(cause))
	for i := range window.items() {
		window.items()[i].future = failedFuture{msg: window.items()[i].msg, err: cause}
	}
	if err := p.recover(ctx, window.items(), cause); err != nil {
		return disabled, err
	}
	return disabled, p.drain(ctx, window, acks)
}

// drain waits for every message in window, published asynchronously,
// acknowledging them in order; a failed head is republished with the rest
// as in async mode.
func (p *Publisher) drain(ctx context.Context, window *queue, acks acker) error {
	for window.len() > 0 {
		head := window.head()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ack := <-head.future.Ok():
			if err := p.acked(window.pop(), ack.Duplicate, ack.Sequence, acks); err != nil {
				return err
			}
		case err := <-head.future.Err():
			p.cfg.Observer.PublishFailed(failureReason(err))
			if err := p.recover(ctx, window.items(), err); err != nil {
				return err
			}
		}
	}
	return nil
}
