package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
)

// verifyFetch is how many messages one pull request asks for.
const verifyFetch = 1000

// copyStreamSince adds the Nats-Msg-Id ("" when it has none) and stream
// sequence of every message the stream stored since t to spill, in stream
// order, and returns how many it read. It reads headers only, through one
// ephemeral consumer that it deletes after, up to the messages the stream
// held when the consumer was made.
//
// Not an ordered consumer: its every Fetch makes a new consumer on the
// server. Not a batched direct get: that needs allow_direct, which the
// streams outboxd creates lack, and it sends the payloads.
func copyStreamSince(ctx context.Context, js jetstream.JetStream, name string, t time.Time, spill *idSpill, progress *verifyProgress) (uint64, error) {
	wrap := func(err error) error {
		return fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return 0, wrap(err)
	}
	consumer, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t, AckPolicy: jetstream.AckNonePolicy,
		HeadersOnly: true, MemoryStorage: true,
		// The server removes it if verify dies before deleting it.
		InactiveThreshold: 5 * time.Minute,
	})
	if err != nil {
		return 0, wrap(err)
	}
	defer func() {
		// Best effort: InactiveThreshold removes it otherwise.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(dctx, consumer.CachedInfo().Name)
	}()
	// Cancelling ends a pull request left open by a return mid-batch.
	fetchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := consumer.CachedInfo().NumPending
	progress.start(total)
	var read uint64
	for read < total {
		batch, err := consumer.Fetch(int(min(total-read, verifyFetch)), jetstream.FetchContext(fetchCtx))
		if err != nil {
			return read, wrap(err)
		}
		n, last := 0, false
		for msg := range batch.Messages() {
			meta, err := msg.Metadata()
			if err != nil {
				return read, wrap(err)
			}
			if err := spill.add(ctx, msg.Headers().Get(jetstream.MsgIDHeader), meta.Sequence.Stream); err != nil {
				return read, err
			}
			read++
			n++
			// Messages deleted since the consumer was made leave the
			// request short: do not wait for its expiry.
			if last = meta.NumPending == 0; last {
				break
			}
		}
		progress.set(read)
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return read, wrap(err)
		}
		if n == 0 || last {
			break
		}
	}
	if err := spill.flush(ctx); err != nil {
		return read, err
	}
	progress.finish(read)
	return read, nil
}

// verifyProgress draws a progress bar of the messages read on a terminal,
// and nothing elsewhere: verify's report goes to stdout, and a log or a
// pipe has no use for the bar's redrawing.
type verifyProgress struct {
	out      io.Writer
	terminal bool
	total    int64
	bar      *progressbar.ProgressBar // nil when not drawing
}

// start draws the bar for total messages.
func (p *verifyProgress) start(total uint64) {
	if !p.terminal || p.out == nil || total == 0 {
		return
	}
	p.total = int64(total)
	p.bar = progressbar.NewOptions64(p.total,
		progressbar.OptionSetWriter(p.out),
		progressbar.OptionSetDescription("verify: reading the stream"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msgs"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.out) }),
	)
}

// set shows read messages.
func (p *verifyProgress) set(read uint64) {
	if p.bar != nil {
		p.bar.Set64(min(int64(read), p.total)) //nolint:errcheck // drawing the bar is best effort
	}
}

// finish completes the bar; read falls short of the total when messages
// were deleted while verify read.
func (p *verifyProgress) finish(read uint64) {
	if p.bar == nil {
		return
	}
	if int64(read) >= p.total {
		p.bar.Finish() //nolint:errcheck
		return
	}
	p.bar.Exit() //nolint:errcheck
	fmt.Fprintln(p.out)
}

// comparing says what verify does while PostgreSQL compares, which takes
// a while for millions of rows.
func (p *verifyProgress) comparing(read uint64) {
	if p.bar != nil {
		fmt.Fprintf(p.out, "verify: comparing %d messages with the table's rows in PostgreSQL\n", read)
	}
}
