package relay

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// heartbeatPrefix marks outboxd's own logical decoding messages; they are
// never published.
const heartbeatPrefix = "outboxd-heartbeat"

// heartbeat writes a non-transactional logical decoding message every
// interval. On a database whose WAL is busy with tables outside the
// publication, the message comes back through the slot and lets an idle
// outboxd confirm past that WAL, so the slot does not retain it.
type heartbeat struct{ pgPeriodic }

// Run emits heartbeats until ctx is done; a failed one never stops the relay.
func (h *heartbeat) Run(ctx context.Context) error {
	return h.run(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(false, $1, now()::text)", heartbeatPrefix)
		return err
	})
}
