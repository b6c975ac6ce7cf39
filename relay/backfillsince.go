package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	since := "'" + cfg.Since.UTC().Format(time.RFC3339Nano) + "'::timestamptz"
	if typ == "timestamp without time zone" {
		since = "(" + since + " AT TIME ZONE '" + strings.ReplaceAll(cfg.Retention.CreatedAtZone, "'", "''") + "')"
	}
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
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
	}
	ids := make(map[string]struct{})
	last := stream.CachedInfo().State.LastSeq
	if stream.CachedInfo().State.Msgs == 0 {
		return ids, nil
	}
	consumer, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t, HeadersOnly: true,
	})
	if err != nil {
		return nil, fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
	}
	for {
		batch, err := consumer.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
				ids[id] = struct{}{}
			}
			meta, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			if meta.Sequence.Stream >= last {
				return ids, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("read stream %s since %s: %w", name, t.Format(time.RFC3339), err)
		}
		if n == 0 {
			return ids, nil // nothing stored since t
		}
	}
}
