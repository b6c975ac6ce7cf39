package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
)

// sinceWhere is --where narrowed to rows created since --since, comparing
// a timestamp (without time zone) column in --created-at-zone.
func (cfg BackfillConfig) sinceWhere(ctx context.Context) (string, error) {
	column, _ := cfg.Columns.Mapped("created_at")
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	typ, err := columnType(ctx, conn, cfg.Table, column)
	if err != nil {
		return "", err
	}
	since := timeIn(cfg.Since, typ, cfg.Retention.CreatedAtZone)
	return fmt.Sprintf("(%s) AND %s >= %s", cfg.Where, pgx.Identifier{column}.Sanitize(), since), nil
}

// sinceSkew is how far before --since the stream is read: a row created at
// --since by the database's clock was published after that by the
// stream's, give or take the two clocks' difference.
const sinceSkew = time.Minute

// publishedSince returns the Nats-Msg-Id of every message the stream
// stored since t (headers only): the rows --since must leave out because
// they are published already. It reads up to the stream's last message
// when it starts.
func publishedSince(ctx context.Context, js jetstream.JetStream, name string, t time.Time) (map[string]struct{}, error) {
	ids := make(map[string]struct{})
	err := readStreamSince(ctx, js, name, t, func(id string, _ uint64) { ids[id] = struct{}{} })
	return ids, err
}

// readStreamSince calls visit with the Nats-Msg-Id ("" when it has none)
// and stream sequence of every message the stream stored since t, in
// stream order, reading headers only, up to the stream's last message when
// it starts.
func readStreamSince(ctx context.Context, js jetstream.JetStream, name string, t time.Time, visit func(id string, seq uint64)) error {
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
	}
	last := stream.CachedInfo().State.LastSeq
	if stream.CachedInfo().State.Msgs == 0 {
		return nil
	}
	consumer, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t, HeadersOnly: true,
	})
	if err != nil {
		return fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
	}
	for {
		batch, err := consumer.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				return err
			}
			visit(msg.Headers().Get(jetstream.MsgIDHeader), meta.Sequence.Stream)
			if meta.Sequence.Stream >= last {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
		}
		if n == 0 {
			return nil // nothing stored since t
		}
	}
}
