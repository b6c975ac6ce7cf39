package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"
)

// worker settles one partition's messages.
type worker struct {
	*Consumer
	log *slog.Logger
}

// outcome is what a message's transaction did.
type outcome int

const (
	applied   outcome = iota // the handler ran and the transaction committed
	duplicate                // the inbox had the id: an earlier delivery applied it
	exhausted                // not applied, and out of attempts: dead-letter it
)

// settle applies one message and then tells the server: ack after the
// commit (or for a duplicate), nak with a delay after a failed handler,
// term after a dead letter. Failures of the database itself are retried
// here, holding the message, so that an outage costs no attempts.
func (w worker) settle(ctx context.Context, msg jetstream.Msg) {
	m, err := newMessage(msg)
	if err != nil {
		w.log.Error("message ignored", "error", err) // no metadata: not a consumer's delivery
		return
	}
	log := w.log.With("id", m.ID, "subject", m.Subject, "sequence", m.Sequence, "delivery", m.Delivery)
	if m.ID == "" {
		w.deadLetter(ctx, msg, m, log, "no Nats-Msg-Id header: a redelivery could not be told from a new event; publish with Nats-Msg-Id set to the event id (outboxd does)")
		return
	}
	for retry := uint64(1); ; retry++ {
		result, err := w.apply(ctx, m)
		var f *failure
		switch {
		case err == nil:
			w.finish(ctx, msg, m, log, result)
			return
		case ctx.Err() != nil:
			nak(log, msg, 0) // shutting down: another instance may take it at once
			return
		case errors.As(err, &f) && f.transient():
			// InProgress restarts AckWait: the message stays with this
			// worker, and its partition waits for the database instead of
			// counting deliveries against the message.
			wait := min(w.cfg.delay(retry), w.cfg.AckWait/2)
			log.Warn("database failure; retrying the message", "error", err, "retry_in", wait)
			if err := msg.InProgress(); err != nil {
				log.Warn("in-progress signal failed; the message may be delivered again meanwhile", "error", err)
			}
			if !sleep(ctx, wait) {
				nak(log, msg, 0)
				return
			}
		case m.Delivery >= uint64(w.cfg.MaxAttempts):
			w.deadLetter(ctx, msg, m, log, fmt.Sprintf("handler failed on delivery %d of %d: %v", m.Delivery, w.cfg.MaxAttempts, err))
			return
		default:
			delay := w.cfg.delay(m.Delivery)
			log.Warn("message not applied; it will be delivered again", "error", err, "retry_in", delay)
			nak(log, msg, delay)
			return
		}
	}
}

// finish acks what the inbox now holds, or dead-letters a message that
// ran out of attempts without its handler failing (crashes, AckWait).
func (w worker) finish(ctx context.Context, msg jetstream.Msg, m Message, log *slog.Logger, result outcome) {
	switch result {
	case exhausted:
		w.deadLetter(ctx, msg, m, log, fmt.Sprintf("delivered %d times and never applied (MaxAttempts %d): the deliveries ended without a handler error "+
			"(the consumer died, stopped or ran past AckWait %s) or the dead letter could not be stored", m.Delivery, w.cfg.MaxAttempts, w.cfg.AckWait))
		return
	case duplicate:
		log.Debug("message already applied")
	default:
		log.Debug("message applied")
	}
	// A lost ack is harmless: the redelivery finds the row.
	if err := msg.Ack(); err != nil {
		log.Warn("ack failed; the message will be delivered again and skipped", "error", err)
	}
}

// apply runs m's transaction: the inbox row, then, only if the row is new,
// the handler; then the commit. It does not ack.
func (w worker) apply(ctx context.Context, m Message) (outcome, error) {
	tx, err := w.db.Begin(ctx)
	if err != nil {
		return 0, &failure{step: "begin transaction", err: err, broken: true}
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit it does nothing; after a failure the error is the failure's
	tag, err := tx.Exec(ctx, w.sql.record, w.cfg.Name, m.ID, m.Subject)
	if err != nil {
		return 0, newFailure("record it in the inbox", err, tx)
	}
	if tag.RowsAffected() == 0 {
		return duplicate, nil
	}
	// A message that many deliveries failed to apply without a handler
	// error killed or stalled its consumer each time: running it again
	// may do the same, for ever.
	if m.Delivery > uint64(w.cfg.MaxAttempts) {
		return exhausted, nil
	}
	if err := w.cfg.Handler(ctx, tx, m); err != nil {
		return 0, newFailure("handler", err, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, newFailure("commit", err, tx)
	}
	if w.afterCommit != nil {
		w.afterCommit(m)
	}
	return applied, nil
}

// failure is a transaction that did not commit: the step, the error, and
// whether the connection died with it.
type failure struct {
	step   string
	err    error
	broken bool
}

func newFailure(step string, err error, tx pgx.Tx) *failure {
	return &failure{step: step, err: err, broken: tx.Conn().IsClosed()}
}

func (f *failure) Error() string { return f.step + ": " + f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// transient reports whether the database, not the message, failed: a
// lost connection, a deadlock or serialization failure, a server short of
// resources or shutting down, or the inbox's own statements failing.
// Those are retried without limit; anything else the handler or the
// commit (a deferred constraint) returns counts against the message.
func (f *failure) transient() bool {
	if f.broken {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(f.err, &pgErr) && transientCode(pgErr.Code) {
		return true
	}
	return f.step != "handler" && f.step != "commit"
}

// transientCode reports whether a SQLSTATE names a condition that passes
// by itself. A statement timeout (57014) is not one: the same message
// would time out again.
func transientCode(code string) bool {
	switch code {
	case "40001", "40P01", "57P01", "57P02", "57P03":
		return true
	}
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", "53", "58":
		return true
	}
	return false
}

func nak(log *slog.Logger, msg jetstream.Msg, delay time.Duration) {
	var err error
	if delay > 0 {
		err = msg.NakWithDelay(delay)
	} else {
		err = msg.Nak()
	}
	if err != nil {
		log.Warn("nak failed; the message will be delivered again after AckWait", "error", err)
	}
}

// sleep waits d, or less if ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
