package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// expireBatch is how many rows one DELETE removes at most.
const expireBatch = 10000

// Horizon returns how long after a message was applied another copy of it
// can still reach this consumer through the stream's and the consumer's
// own settings; inbox rows must outlive it (Config.Retention), since a
// row deleted before its last copy arrives lets that copy apply again.
// It is the longest of:
//
//   - the stream's duplicate window (Duplicates): outboxd's replays of an
//     event arrive within it and are dropped by the stream; one that
//     arrives later is stored again, and only the inbox row stops it;
//   - the stream's MaxAge, if set: a consumer made again from the start
//     (a deleted durable, a new layout) is delivered everything the
//     stream still holds;
//   - the redelivery span: (MaxAttempts+1) times AckWait plus the Backoff
//     waits between them, the longest a message can stay unacknowledged
//     with this consumer; an applied message whose ack was lost comes
//     again within it.
//
// It cannot cover a consumer that is down, or an operator replaying old
// events on purpose (outboxd replay --since): keep rows for days, not
// minutes.
func (c Config) Horizon(stream jetstream.StreamConfig) time.Duration {
	c = c.withDefaults()
	span := time.Duration(c.MaxAttempts+1) * c.AckWait
	for n := range c.MaxAttempts {
		span += c.delay(uint64(n + 1))
	}
	return max(stream.Duplicates, stream.MaxAge, span)
}

// checkRetention refuses a Retention that is not longer than the horizon.
func (c Config) checkRetention(stream jetstream.StreamConfig) error {
	if c.Retention == 0 {
		return nil
	}
	h := c.Horizon(stream)
	if c.Retention > h {
		return nil
	}
	return &ConfigError{"Retention", c.Retention.String(),
		fmt.Sprintf("is not longer than the redelivery horizon %s (stream %s: duplicate window %s, max age %s; redelivery span of MaxAttempts %d, AckWait %s and Backoff %v)",
			h, stream.Name, stream.Duplicates, stream.MaxAge, c.MaxAttempts, c.AckWait, c.Backoff),
		"set it longer than that (days are usual), or 0 to keep the rows: a row deleted before the last copy of its message arrives lets that copy apply twice"}
}

// DeleteExpired deletes this consumer's inbox rows older than
// Config.Retention, in batches, and returns how many it deleted. Run
// calls it every RetentionInterval; an application may call it instead
// from its own scheduler. With Retention 0 it deletes nothing.
func (c *Consumer) DeleteExpired(ctx context.Context) (int64, error) {
	if c.cfg.Retention == 0 {
		return 0, nil
	}
	var total int64
	for {
		tag, err := c.db.Exec(ctx, c.sql.expire, c.cfg.Name, c.cfg.Retention.Microseconds(), expireBatch)
		if err != nil {
			return total, fmt.Errorf("inbox: delete rows of %s older than %s from %s: %w", c.cfg.Name, c.cfg.Retention, c.cfg.Table, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < expireBatch {
			return total, nil
		}
	}
}
