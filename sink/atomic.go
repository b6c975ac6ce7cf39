package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"golang.org/x/sync/errgroup"
)

// This file holds atomic mode (Config.Atomic): each PostgreSQL transaction
// of two or more events goes out as one JetStream atomic batch (ADR-50,
// nats-server 2.12 and later, a stream with allow_atomic). The server
// stages the batch and stores all of it or none of it, at once, so a
// consumer never sees part of a transaction: an order without its lines.
//
// A transaction of one event needs no batch: it goes out the way fast or
// async mode sends it (runSingly, here the inner loop), as does what a
// batch cannot carry, each message marked with HeaderTxSplit and why: a
// transaction over the server's batch limit, one with a dead letter among
// its rows, one the stream already holds part of, one the stream refused
// to take atomically.
//
// Order: a batch goes out only once the inner loop has acknowledged all
// that was handed to it, and nothing more is handed on until the batch is
// acknowledged, so the stream keeps commit order. A batch is retried whole
// (a new batch id) until the server answers; one it stored already is
// then refused as holding a duplicate, and goes message by message, whose
// Nats-Msg-Ids the stream drops.

// atomicAPILevel is the JetStream API level of nats-server 2.12, the first
// to take atomic batches.
const atomicAPILevel = 2

// MaxAtomicBatch is the server's default limit on the messages of one
// atomic batch (max_batch_size): Config.AtomicLimit's default.
const MaxAtomicBatch = 1000

// HeaderTxSplit is set on the messages of a transaction atomic mode
// published message by message, to the reason (one of the Split*
// values): a consumer may then see part of that transaction before the
// rest.
const HeaderTxSplit = "Outbox-Tx-Split"

// Why atomic mode published a transaction message by message.
const (
	SplitTooLarge      = "over-batch-limit"        // more events than Config.AtomicLimit
	SplitDeadLetter    = "dead-letter"             // a row of it went to the dead-letter subject
	SplitInStream      = "partly-in-stream"        // the stream held a message of it already
	SplitRefused       = "atomic-refused"          // the stream stopped taking atomic batches
	SplitUnpublishable = "row-cannot-be-published" // a row of it cannot be published at all
)

// The server's error codes atomic mode acts on.
const (
	codeAtomicDisabled  = 10174 // the stream does not allow atomic batches
	codeAtomicTooLarge  = 10199 // over the server's max_batch_size
	codeAtomicDuplicate = 10201 // a message of the batch is in the stream already
)

// CheckAtomicBatch reports whether the server behind js and the stream
// take atomic batch publishes: nil if they do, a *BatchError naming what
// is missing if they do not, another error if it cannot tell. The server's
// JetStream API level must be at least 2 (nats-server 2.12), and the
// stream must allow atomic publishing (allow_atomic).
func CheckAtomicBatch(ctx context.Context, js jetstream.JetStream, stream string) error {
	return checkBatchSupport(ctx, js, stream, batchFeature{
		name: "atomic", level: atomicAPILevel, server: "nats-server 2.12",
		allowed: func(c jetstream.StreamConfig) bool { return c.AllowAtomicPublish },
		setting: "allow_atomic", fix: "--atomic-transactions off"})
}

// runAtomic is Run in atomic mode: transactions gathers the items into
// transactions and publishes those it can as batches; runSingly sends the
// rest, acknowledging through acks like the batches.
func (p *Publisher) runAtomic(ctx context.Context, in <-chan Item, acks acker) error {
	g, gctx := errgroup.WithContext(ctx)
	single := make(chan Item, cap(in))
	counted := &ackCounter{acker: acks, signal: make(chan struct{}, 1)}
	// What waits for the inner loop is in both channels: fast mode's
	// batches are for backlogs, which form in the outer one.
	g.Go(func() error { return p.runSingly(gctx, single, counted, func() int { return len(single) + len(in) }) })
	g.Go(func() error {
		defer close(single)
		// The gatherer builds messages in its own goroutine, so it gets a
		// copy of the publisher: building caches the last transaction's
		// header values (lastTx), which two goroutines must not share.
		own := *p
		t := &transactions{p: &own, single: single, acks: counted, limit: p.cfg.AtomicLimit}
		return t.run(gctx, in)
	})
	return g.Wait()
}

// ackCounter counts acknowledgements, so that a batch can wait until
// everything handed on before it is acknowledged.
type ackCounter struct {
	acker
	n      atomic.Uint64
	signal chan struct{} // capacity 1: an Ack happened since the last wait
}

func (c *ackCounter) Ack(seq uint64) error {
	err := c.acker.Ack(seq)
	c.n.Add(1)
	select {
	case c.signal <- struct{}{}:
	default:
	}
	return err
}

// waitFor returns once n items are acknowledged, or ctx is done.
func (c *ackCounter) waitFor(ctx context.Context, n uint64) error {
	for c.n.Load() < n {
		select {
		case <-c.signal:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// transactions gathers items into transactions and publishes each as an
// atomic batch, or hands its items to the inner loop (single).
type transactions struct {
	p      *Publisher
	single chan<- Item
	acks   *ackCounter
	sent   uint64 // items handed on or published in a batch
	open   []Item // the items of the transaction not yet complete
	split  string // why the open transaction goes message by message; "" while it may go as a batch
	limit  int    // the most items of a batch
	off    bool   // the stream refused atomic batches: everything goes message by message
}

func (t *transactions) run(ctx context.Context, in <-chan Item) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case item, ok := <-in:
			if !ok {
				if len(t.open) > 0 {
					// Its end never came: it is not confirmed, and the
					// next start publishes it whole.
					t.p.log.Debug().Int("events", len(t.open)).Msg("unfinished transaction not published")
				}
				return nil
			}
			if err := t.add(ctx, item); err != nil {
				return err
			}
		}
	}
}

// add takes the next item.
func (t *transactions) add(ctx context.Context, item Item) error {
	switch {
	case t.off:
		return t.hand(ctx, item)
	case t.split != "":
		item.split = t.split
		if item.TxEnd {
			t.split = ""
		}
		return t.hand(ctx, item)
	case item.Dead != nil:
		// A dead letter may go to another stream than the batch.
		if err := t.splitOpen(ctx, SplitDeadLetter); err != nil {
			return err
		}
		if item.TxEnd {
			t.split = ""
		}
		return t.hand(ctx, item)
	case item.TxEnd && len(t.open) == 0:
		return t.hand(ctx, item) // a transaction of one event is whole in any mode
	}
	t.open = append(t.open, item)
	switch {
	case item.TxEnd:
		return t.publish(ctx)
	case len(t.open) >= t.limit:
		return t.splitOpen(ctx, SplitTooLarge)
	}
	return nil
}

// hand passes item to the inner loop.
func (t *transactions) hand(ctx context.Context, item Item) error {
	select {
	case t.single <- item:
		t.sent++
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// splitOpen hands the open transaction's items on message by message, for
// reason, as the rest of it will go.
func (t *transactions) splitOpen(ctx context.Context, reason string) error {
	t.split = reason
	if len(t.open) > 0 {
		t.p.log.Warn().Uint32("xid", xidOf(t.open[0])).Str("reason", reason).
			Msg("transaction published message by message, not as one atomic batch")
	}
	for _, item := range t.open {
		item.split = reason
		if err := t.hand(ctx, item); err != nil {
			return err
		}
	}
	t.open = t.open[:0]
	return nil
}

// publish publishes the open transaction, now complete, as one batch.
func (t *transactions) publish(ctx context.Context) error {
	batch := make([]pending, 0, len(t.open))
	for _, item := range t.open {
		pm, err := t.p.prepare(item)
		switch {
		case err != nil:
			// The inner loop publishes the rows before it and stops.
			return t.splitClosed(ctx, SplitUnpublishable)
		case pm.dead:
			return t.splitClosed(ctx, SplitDeadLetter)
		}
		batch = append(batch, pm)
	}
	if err := t.acks.waitFor(ctx, t.sent); err != nil {
		return err
	}
	lastSeq, reason, err := t.commit(ctx, batch)
	if err != nil {
		return err
	}
	if reason != "" {
		return t.splitClosed(ctx, reason)
	}
	for i, pm := range batch {
		var seq uint64
		if i == len(batch)-1 {
			seq = lastSeq
		}
		if err := t.p.acked(pm, false, seq, t.acks); err != nil {
			return err
		}
	}
	t.sent += uint64(len(batch))
	t.open = t.open[:0]
	return nil
}

// splitClosed hands on the open transaction, complete, message by message.
func (t *transactions) splitClosed(ctx context.Context, reason string) error {
	if err := t.splitOpen(ctx, reason); err != nil {
		return err
	}
	t.split = ""
	return nil
}

// commit sends batch as one atomic batch until the server stores it, and
// returns the stream sequence of its last message; or until the server
// answers why it cannot (split's reason).
func (t *transactions) commit(ctx context.Context, batch []pending) (lastSeq uint64, split string, err error) {
	delay := t.p.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		lastSeq, err := t.send(ctx, batch)
		var apiErr *jetstream.APIError
		errors.As(err, &apiErr)
		switch {
		case err == nil:
			if attempt > 1 {
				t.p.log.Info().Int("attempts", attempt).Msg("publishing resumed")
			}
			return lastSeq, "", nil
		case ctx.Err() != nil:
			return 0, "", ctx.Err()
		case apiErr != nil && apiErr.ErrorCode == codeAtomicDuplicate:
			return 0, SplitInStream, nil
		case apiErr != nil && apiErr.ErrorCode == codeAtomicTooLarge:
			// The server's limit is below ours: learn it.
			t.limit = serverLimit(apiErr.Description, len(batch))
			t.p.log.Info().Int("limit", t.limit).Msg("the server takes smaller atomic batches; larger transactions go message by message")
			return 0, SplitTooLarge, nil
		case apiErr != nil && apiErr.ErrorCode == codeAtomicDisabled:
			t.p.log.Warn().Err(err).Msg("the stream refuses atomic batches; publishing message by message from now on")
			t.off = true
			return 0, SplitRefused, nil
		}
		t.p.cfg.Observer.PublishFailed(failureReason(err))
		t.p.log.Warn().Err(err).Int("events", len(batch)).Int("attempt", attempt).Msg("atomic batch failed; retrying")
		select {
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, t.p.cfg.RetryMax)
	}
}

// send publishes batch as one atomic batch and waits for the server's
// acknowledgement of its commit, which names the stream sequence of its
// last message. The first message is not acknowledged on its own (the
// library's AckFirst): a batch is at most the server's limit, and its
// commit reports any refusal.
func (t *transactions) send(ctx context.Context, batch []pending) (lastSeq uint64, err error) {
	bp, err := jetstreamext.NewBatchPublisher(t.p.js,
		jetstreamext.BatchFlowControl{AckFirst: false, AckTimeout: t.p.cfg.AckTimeout})
	if err != nil {
		return 0, fmt.Errorf("start an atomic batch: %w", err)
	}
	last := len(batch) - 1
	for _, pm := range batch[:last] {
		if err := bp.AddMsg(pm.msg); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, t.p.cfg.AckTimeout)
	defer cancel()
	ack, err := bp.CommitMsg(ctx, batch[last].msg)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// serverLimit reads the server's batch limit from its refusal of a batch
// of size messages ("atomic publish batch is too large: 500"); one less
// than size when it does not say.
func serverLimit(refusal string, size int) int {
	_, after, found := strings.Cut(refusal, ": ")
	if n, err := strconv.Atoi(after); found && err == nil && n >= 2 && n < size {
		return n
	}
	return max(size-1, 2)
}

// xidOf is the transaction id of an item, event or dead letter.
func xidOf(item Item) uint32 {
	if item.Event != nil {
		return item.Event.Tx.Xid
	}
	return item.Dead.Xid
}
