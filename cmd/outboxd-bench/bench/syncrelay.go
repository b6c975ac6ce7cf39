package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/decoder"
)

// SyncRelay is the naive logical-replication relay outboxd is compared
// with at everyday rates (wal-listener works so): it reads the slot,
// decodes each INSERT, and publishes it synchronously, waiting for its
// PubAck before it reads on. No window, no batches, no linger: the least
// work per event and the shortest path for one event alone.
type SyncRelay struct {
	PGURL, Slot, Publication, NATSURL string
}

// syncSubjectPrefix is where the synchronous relay publishes
// (syncStream captures it).
const syncSubjectPrefix = "sync."

// Run relays until ctx is done.
func (r SyncRelay) Run(ctx context.Context) error {
	nc, err := nats.Connect(r.NATSURL)
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	conn, err := startReplication(ctx, r.PGURL, r.Slot, r.Publication)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	schema, table, _ := strings.Cut(outboxTable, ".")
	dec, err := decoder.New(decoder.Config{Schema: schema, Table: table})
	if err != nil {
		return err
	}
	err = receiveWAL(ctx, conn, func(walStart pglogrepl.LSN, wal []byte, _ time.Time) (pglogrepl.LSN, error) {
		change, err := dec.Decode(walStart, wal)
		if err != nil {
			return 0, err
		}
		switch change.Kind {
		case decoder.Insert:
			ev := change.Event
			msg := nats.NewMsg(syncSubjectPrefix + ev.AggregateType + "." + ev.EventType)
			msg.Data = ev.Payload
			msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
			msg.Header.Set(commitTimeHeader, change.Tx.CommitTime.UTC().Format(time.RFC3339Nano))
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				return 0, fmt.Errorf("publish %s: %w", ev.ID, err)
			}
		case decoder.Commit:
			return change.EndLSN, nil
		}
		return 0, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
