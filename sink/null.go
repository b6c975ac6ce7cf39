package sink

import (
	"context"
	"fmt"
)

// Null is a sink for benchmarks only: it acknowledges every item as soon
// as it arrives, without building or sending a message, so a run through
// it measures replication and decoding alone. Acknowledgements still go to
// the tracker in order, so the checkpoint and the slot's
// confirmed_flush_lsn advance exactly as with a real broker. Nothing
// reaches NATS: never use it outside a benchmark.
type Null struct{}

// Run acknowledges every item received on in, in order, until in is
// closed (it returns nil) or ctx is done (it returns ctx's error).
func (Null) Run(ctx context.Context, in <-chan Item, acks acker) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case item, open := <-in:
			if !open {
				return nil
			}
			if err := acks.Ack(item.Seq); err != nil {
				return fmt.Errorf("BUG: acknowledge message %d: %w", item.Seq, err)
			}
		}
	}
}
