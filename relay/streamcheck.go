package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/sink"
)

// streamCheck is run's continuous, sampled check that the stream keeps
// what it acknowledged (--stream-check-interval). Once per interval it
// takes the next message acknowledged with its stream sequence as a
// sample, and an interval later reads that sequence back: the stream
// must still hold the message there. A message gone from inside the
// stream, or another one in its place, is what a stream that lost
// acknowledged writes looks like (the failure the Jepsen analysis of NATS
// found after crashes): outboxd confirmed those events to PostgreSQL and
// will not send them again. The result goes to outboxd_stream_checks_total
// and, when bad, to the log with the verify command that finds all of
// them.
type streamCheck struct {
	js       jetstream.JetStream
	stream   string
	interval time.Duration
	metrics  *telemetry.Metrics
	log      zerolog.Logger

	due     atomic.Bool // the next acknowledged message is a sample
	mu      sync.Mutex
	samples []storedSample // taken, not yet checked, oldest first
}

// storedSample is a message the stream acknowledged at seq.
type storedSample struct {
	id        string
	seq       uint64
	committed string // its Outbox-Commit-Time, for the verify command
	taken     time.Time
}

func newStreamCheck(js jetstream.JetStream, cfg Config, metrics *telemetry.Metrics, log zerolog.Logger) *streamCheck {
	return &streamCheck{js: js, stream: cfg.Stream, interval: cfg.StreamCheck, metrics: metrics,
		log: log.With().Str("component", "stream-check").Logger()}
}

// Stored takes msg as a sample when one is due (sink.Sampler).
func (c *streamCheck) Stored(msg *nats.Msg, seq uint64) {
	if !c.due.CompareAndSwap(true, false) {
		return
	}
	s := storedSample{id: msg.Header.Get(jetstream.MsgIDHeader), seq: seq,
		committed: msg.Header.Get(sink.HeaderCommitTime), taken: time.Now()}
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.mu.Unlock()
}

// Run checks every interval until ctx is done; a failed check never stops
// the relay.
func (c *streamCheck) Run(ctx context.Context) error {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	c.due.Store(true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-ticker.C:
			c.checkDue(ctx, now)
			c.due.Store(true)
		}
	}
}

// checkDue checks the samples taken an interval or more before now.
func (c *streamCheck) checkDue(ctx context.Context, now time.Time) {
	c.mu.Lock()
	var due []storedSample
	for len(c.samples) > 0 && now.Sub(c.samples[0].taken) >= c.interval {
		due, c.samples = append(due, c.samples[0]), c.samples[1:]
	}
	c.mu.Unlock()
	for _, s := range due {
		c.metrics.StreamChecked(c.check(ctx, s))
	}
}

// check reads the sample's sequence back, logs what is wrong, and returns
// the result.
func (c *streamCheck) check(ctx context.Context, s storedSample) string {
	result, found, err := c.read(ctx, s)
	bad := func() *zerolog.Event {
		return c.log.Error().Str("event_id", s.id).Uint64("stream_seq", s.seq).Str("committed", s.committed).
			Str("verify", "outboxd verify --since "+verifySince(s.committed))
	}
	switch result {
	case telemetry.CheckReplaced:
		bad().Str("found", found).Msg("stream check: another message is at the sequence where JetStream acknowledged this event: " +
			"the stream lost acknowledged messages; run the verify command to find every missing event, and replay them")
	case telemetry.CheckMissing:
		bad().Msg("stream check: the stream no longer holds an event it acknowledged (deleted, or lost); " +
			"run the verify command to find every missing event, and replay them")
	case telemetry.CheckError:
		c.log.Warn().Err(err).Uint64("stream_seq", s.seq).
			Str("fix", "let the NATS user publish to $JS.API.STREAM.MSG.GET."+c.stream+" ($JS.API.DIRECT.GET."+c.stream+
				" if the stream allows direct gets), or turn the check off with --stream-check-interval 0").
			Msg("stream check: cannot read the sampled message")
	}
	return result
}

// verifySince is the --since that covers an event committed at committed:
// a minute earlier, since its row was created before the commit.
func verifySince(committed string) string {
	t, err := time.Parse(time.RFC3339Nano, committed)
	if err != nil {
		return committed
	}
	return t.Add(-sinceLSNMargin).UTC().Format(time.RFC3339)
}

// read reads the sample's sequence: the result, and the id of the message
// found there.
func (c *streamCheck) read(ctx context.Context, s storedSample) (result, found string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := c.js.Stream(ctx, c.stream)
	if err != nil {
		return telemetry.CheckError, "", err
	}
	msg, err := stream.GetMsg(ctx, s.seq)
	switch {
	case err == nil && msg.Header.Get(jetstream.MsgIDHeader) == s.id:
		return telemetry.CheckOK, s.id, nil
	case err == nil:
		return telemetry.CheckReplaced, msg.Header.Get(jetstream.MsgIDHeader), nil
	case errors.Is(err, jetstream.ErrMsgNotFound) && s.seq < stream.CachedInfo().State.FirstSeq:
		return telemetry.CheckExpired, "", nil // the stream's limits or a purge removed it: its policy, not a loss
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return telemetry.CheckMissing, "", nil
	}
	return telemetry.CheckError, "", err
}
