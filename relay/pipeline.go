package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// channelSize bounds the events handed from the decoder to the publisher,
// and batchChannelSize the batches of replication messages (each up to
// 256) from the stream to the decoder; with the publisher's window they
// bound memory (invariant 6).
const (
	channelSize      = 1024
	batchChannelSize = 8
)

// pipeline is one session's running stages.
type pipeline struct {
	stream       *replication.Stream
	decoder      *decoder.Decoder
	tracker      *checkpoint.Tracker
	publish      func(context.Context, <-chan sink.Item) error // the sink's Run, acking to tracker
	checkpointer *checkpoint.Checkpointer
	skipBefore   pglogrepl.LSN
	committedBy  time.Time // see resume.CommittedBy
	restored     string    // see resume.Restored
	skipping     bool      // the current transaction is before skipBefore
	// held is the newest item, not handed on yet (holding): whether it
	// ends its transaction is known only at the next change (see send).
	held    sink.Item
	holding bool
	// from is where streaming started (the slot's position); until every
	// transaction between it and skipBefore has been seen and checked
	// (checked), nothing past it is confirmed to PostgreSQL.
	from            pglogrepl.LSN
	checked         atomic.Bool
	deadLetters     bool // rows that cannot be published go to a dead-letter subject
	skipNull        bool // --null-payload skip: rows with a NULL payload are not published
	metrics         *telemetry.Metrics
	heartbeat       *heartbeat
	retention       *retention
	streamCheck     *streamCheck
	shutdownTimeout time.Duration
	log             zerolog.Logger
}

// run starts the stages and waits for them. When ctx is done it stops
// receiving, lets the publisher drain what is in flight, saves the
// checkpoint, and sends the final status update; all of that within
// shutdownTimeout, after which everything is cancelled.
func (p *pipeline) run(ctx context.Context) error {
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	g, gctx := errgroup.WithContext(hard)
	receiving, stopReceiving := context.WithCancel(gctx)
	defer stopReceiving()
	stopOnSignal := context.AfterFunc(ctx, stopReceiving)
	defer stopOnSignal()
	checkpointing, stopCheckpointing := context.WithCancel(gctx)
	defer stopCheckpointing()

	raw := make(chan []replication.Message, batchChannelSize)
	items := make(chan sink.Item, channelSize)
	g.Go(func() error { return p.stream.Run(receiving, raw) })
	// A row that cannot be published (and no dead-letter subject) stops
	// the session, but only once every event before it is published and
	// confirmed: receiving stops, the publisher drains, and run returns
	// the row's error then.
	var badRow error
	g.Go(func() error {
		err := p.decode(gctx, raw, items)
		var rowErr *event.RowError
		if errors.As(err, &rowErr) {
			badRow = err
			stopReceiving()
			return nil
		}
		return err
	})
	g.Go(func() error {
		if err := p.publish(gctx, items); err != nil {
			return err
		}
		// Drained: everything received is acknowledged. Save it before
		// the final status update confirms it (invariant 5).
		defer stopCheckpointing()
		return p.checkpointer.Flush(gctx)
	})
	g.Go(func() error { return p.checkpointer.Run(checkpointing) })
	if p.heartbeat != nil {
		g.Go(func() error { return p.heartbeat.Run(receiving) })
	}
	if p.retention != nil {
		g.Go(func() error { return p.retention.Run(receiving) })
	}
	if p.streamCheck != nil {
		g.Go(func() error { return p.streamCheck.Run(receiving) })
	}

	done := make(chan struct{})
	var watchdog sync.WaitGroup
	watchdog.Add(1)
	go func() {
		defer watchdog.Done()
		p.cancelAfterShutdownTimeout(ctx, done, cancelHard)
	}()
	err := g.Wait()
	close(done)
	watchdog.Wait()

	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	closeErr := p.stream.Close(closeCtx)
	if err != nil {
		return err
	}
	if closeErr != nil {
		return fmt.Errorf("final status update: %w", closeErr)
	}
	if badRow != nil {
		return badRow
	}
	p.log.Info().Str("lsn", p.checkpointer.Durable().String()).Msg("drained and confirmed")
	return nil
}

// cancelAfterShutdownTimeout cancels the pipeline when a stop takes longer
// than the shutdown timeout (NATS unreachable, say): what was not
// acknowledged stays unconfirmed and is replayed on the next start.
func (p *pipeline) cancelAfterShutdownTimeout(ctx context.Context, done <-chan struct{}, cancel context.CancelFunc) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	timer := time.NewTimer(p.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		p.log.Warn().Dur("shutdown_timeout", p.shutdownTimeout).Int("in_flight", p.tracker.InFlight()).
			Msg("shutdown timeout: stopping with messages unacknowledged; they are replayed on the next start")
		cancel()
	}
}

// decode turns replication messages into publisher items, registering each
// event and transaction end with the tracker before handing it on, so the
// tracker always knows what is in flight.
func (p *pipeline) decode(ctx context.Context, raw <-chan []replication.Message, items chan<- sink.Item) error {
	defer close(items)
	for batch := range raw {
		for _, msg := range batch {
			if err := p.decodeOne(ctx, msg, items); err != nil {
				// The events before a row that stops the pipeline are
				// still published (but not as a whole transaction).
				if rerr := p.release(ctx, items); rerr != nil {
					return errors.Join(err, rerr)
				}
				return err
			}
		}
	}
	return p.release(ctx, items)
}

// send hands items on one step late: the item held until now, known not
// to end its transaction since another change of it came, goes on, and
// item is held. The sink's atomic mode needs to know a transaction's last
// event when it gets it (sink.Item.TxEnd); the Commit that tells comes
// right after it in the stream, so holding adds no wait.
func (p *pipeline) send(ctx context.Context, items chan<- sink.Item, item sink.Item) error {
	prev, had := p.held, p.holding
	p.held, p.holding = item, true
	if !had {
		return nil
	}
	return deliver(ctx, items, prev)
}

// endTransaction hands on the held item as the last of its transaction.
func (p *pipeline) endTransaction(ctx context.Context, items chan<- sink.Item) error {
	p.held.TxEnd = true
	return p.release(ctx, items)
}

// release hands on the held item, if any, as it stands.
func (p *pipeline) release(ctx context.Context, items chan<- sink.Item) error {
	if !p.holding {
		return nil
	}
	p.holding = false
	return deliver(ctx, items, p.held)
}

func deliver(ctx context.Context, items chan<- sink.Item, item sink.Item) error {
	select {
	case items <- item:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decodeOne decodes one replication message and hands on what it holds.
func (p *pipeline) decodeOne(ctx context.Context, msg replication.Message, items chan<- sink.Item) error {
	if msg.Data == nil {
		if !p.decoder.InTransaction() {
			// The walsender has decoded up to here: every transaction
			// that commits before it was sent.
			p.passed(msg.ServerWALEnd)
			p.tracker.Idle(msg.ServerWALEnd)
		}
		return nil
	}
	change, err := p.decoder.Decode(msg.WALStart, msg.Data)
	if err != nil {
		return p.deadLetter(ctx, err, items)
	}
	if change.Kind == decoder.StreamCommit {
		return p.replay(ctx, change, items)
	}
	return p.handle(ctx, change, items)
}

// replay hands on a streamed transaction that just committed, read back
// from the spool, or drops it whole when it is before the resume point.
func (p *pipeline) replay(ctx context.Context, commit decoder.Change, items chan<- sink.Item) error {
	if skip, err := p.skip(commit.Tx); skip || err != nil {
		if err != nil {
			return err
		}
		return p.decoder.Discard(commit.Tx.Xid)
	}
	for change, err := range p.decoder.Replay(commit.Tx.Xid) {
		if err != nil {
			if err := p.deadLetter(ctx, err, items); err != nil {
				return err
			}
			continue
		}
		if err := p.handle(ctx, change, items); err != nil {
			return err
		}
	}
	return nil
}

// deadLetter sends a row the decoder could not turn into an event to the
// dead-letter subject when one is set; any other error, or a row error
// without a dead-letter subject, is returned and stops the pipeline.
func (p *pipeline) deadLetter(ctx context.Context, err error, items chan<- sink.Item) error {
	var rowErr *event.RowError
	if !p.deadLetters || !errors.As(err, &rowErr) {
		return err
	}
	// A non-transactional message comes outside any transaction: no
	// Commit follows to close it.
	alone := rowErr.Message && !p.decoder.InTransaction()
	if p.skipping || (alone && rowErr.LSN < p.skipBefore) {
		return nil // before the resume point: it was dead-lettered already
	}
	item := sink.Item{Seq: p.tracker.Add(), Dead: rowErr}
	if !alone {
		return p.send(ctx, items, item)
	}
	item.TxEnd = true // a transaction of its own
	if err := p.release(ctx, items); err != nil {
		return err
	}
	if err := deliver(ctx, items, item); err != nil {
		return err
	}
	// Confirmable once its dead letter is acked; confirming its own LSN
	// (not past it) means a restart may send it again, which the dead
	// letter's Nats-Msg-Id absorbs.
	p.tracker.Commit(rowErr.LSN)
	return nil
}

// confirmable is the position PostgreSQL may be told is flushed: the
// saved checkpoint, once the transactions before it that the slot sends
// again have all been checked (see skip); until then the slot's own
// position, so that a history that changed under the checkpoint can still
// be recovered from the slot.
func (p *pipeline) confirmable() pglogrepl.LSN {
	if !p.checked.Load() {
		return p.from
	}
	return p.checkpointer.Durable()
}

// passed records that the stream has reached lsn: at the resume point,
// every transaction before it was checked.
func (p *pipeline) passed(lsn pglogrepl.LSN) {
	if lsn >= p.skipBefore && !p.checked.Load() {
		p.checked.Store(true)
	}
}

// skip reports whether tx commits before the resume point, so it was
// published before the checkpoint was saved. One that committed after the
// checkpoint was saved cannot have been: the database's history changed
// under the checkpoint (restored from an older copy, and written to past
// the checkpoint's position since), and dropping it would lose it.
func (p *pipeline) skip(tx event.TxInfo) (bool, error) {
	if tx.CommitLSN >= p.skipBefore {
		p.passed(tx.CommitLSN)
		return false, nil
	}
	if !p.committedBy.IsZero() && tx.CommitTime.After(p.committedBy) {
		return true, &fatalError{fmt.Errorf("transaction xid %d committed at %s, before the checkpoint's position %s but after the checkpoint was saved (%s, allowing %s of clock skew): "+
			"the database was restored from a copy of itself taken before outboxd last ran, and has written past that position since; "+
			"outboxd stops instead of dropping its events; %s",
			tx.Xid, tx.CommitTime.Format(time.RFC3339), p.skipBefore, p.committedBy.Add(-clockSkew).Format(time.RFC3339), clockSkew, p.restored)}
	}
	return true, nil
}

// handle applies one decoded change.
func (p *pipeline) handle(ctx context.Context, change decoder.Change, items chan<- sink.Item) error {
	switch change.Kind {
	case decoder.Begin:
		// Published before the checkpoint was saved: drop it whole
		// (a transaction ends after its commit record starts).
		skip, err := p.skip(change.Tx)
		if err != nil {
			return err
		}
		p.skipping = skip
	case decoder.Insert:
		if p.skipping {
			return nil
		}
		if change.Event.NullPayload && p.skipNull {
			p.skipNullPayload(change.Event)
			return nil
		}
		return p.send(ctx, items, sink.Item{Seq: p.tracker.Add(), Event: change.Event})
	case decoder.Commit:
		if !p.skipping {
			if p.holding {
				if err := p.endTransaction(ctx, items); err != nil {
					return err
				}
			}
			p.tracker.Commit(change.EndLSN)
		}
		p.skipping = false
	case decoder.Message:
		// A heartbeat outside any transaction: everything before it was
		// received, so it may be confirmed once nothing is in flight.
		if m := change.Message; !m.Transactional && m.Prefix == heartbeatPrefix && !p.decoder.InTransaction() {
			p.passed(m.LSN)
			p.tracker.Idle(m.LSN)
		}
	}
	return nil
}

// skipNullPayload counts and logs a row --null-payload skip leaves out.
// It is never added to the tracker, so it holds nothing back: its
// transaction's end is confirmed once the transaction's other events are
// acknowledged, like any transaction's (invariant 1); and it is not
// skipped silently (invariant 4): the policy is the user's, and each row
// is logged and counted.
func (p *pipeline) skipNullPayload(ev *event.Event) {
	if p.metrics != nil {
		p.metrics.NullPayloadSkipped()
	}
	p.log.Warn().Str("event_id", ev.ID).Uint32("xid", ev.Tx.Xid).Str("lsn", ev.LSN.String()).
		Msg("row with a NULL payload not published (--null-payload skip)")
}
