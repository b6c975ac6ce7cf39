package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/sink"
)

// sinceLSNMargin is how long before the commit of the first event at or
// after --since LSN verify starts: a transaction's rows are created (their
// created_at) before it commits.
const sinceLSNMargin = time.Minute

// sinceFromLSN turns --since LSN into a time: the commit time (less
// sinceLSNMargin) of the first message the stream holds whose transaction
// committed at or after lsn (Outbox-Lsn, which rises with commit order).
// It searches the stream's sequences by halves, each probe the next
// message at or after a sequence, so deleted sequences do not matter. An
// event published again later (outboxd replay, a copy after the duplicate
// window) sits out of commit order and can mislead it.
func sinceFromLSN(ctx context.Context, js jetstream.JetStream, streamName string, lsn pglogrepl.LSN) (time.Time, error) {
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		return time.Time{}, fmt.Errorf("read stream %s: %w", streamName, err)
	}
	// f(s), the commit LSN of the first message at or after sequence s,
	// rises with s (the stream holds the events in commit order): find the
	// smallest s with f(s) >= lsn.
	state := stream.CachedInfo().State
	lo, hi := state.FirstSeq, state.LastSeq+1 // f(hi) is past every LSN
	for lo < hi {
		mid := lo + (hi-lo)/2
		msg, at, err := commitAtOrAfter(ctx, stream, mid)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			hi = mid
		case err != nil:
			return time.Time{}, err
		case at >= lsn:
			hi = mid
		default:
			lo = msg.Sequence + 1 // f is the same from mid to there
		}
	}
	found, at, err := commitAtOrAfter(ctx, stream, lo)
	if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && at < lsn {
		return time.Time{}, fmt.Errorf("--since %s: stream %s holds no event committed at or after that LSN: give --since a time (RFC 3339)",
			lsn, streamName)
	}
	if err != nil {
		return time.Time{}, err
	}
	committed, err := time.Parse(time.RFC3339Nano, found.Header.Get(sink.HeaderCommitTime))
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %s: message %d has no valid %s header: give --since a time (RFC 3339)", lsn, found.Sequence, sink.HeaderCommitTime)
	}
	return committed.Add(-sinceLSNMargin), nil
}

// commitAtOrAfter reads the first message at or after seq that carries a
// commit LSN, and that LSN. Messages of other writers (no Outbox-Lsn) are
// stepped over.
func commitAtOrAfter(ctx context.Context, stream jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, pglogrepl.LSN, error) {
	for {
		msg, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if err != nil {
			return nil, 0, err
		}
		if at, err := pglogrepl.ParseLSN(msg.Header.Get(sink.HeaderLSN)); err == nil {
			return msg, at, nil
		}
		seq = msg.Sequence + 1
	}
}
