package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PollingRelay is the relay outboxd replaces, built the way teams build
// it: every Interval it locks the oldest unsent rows (SELECT ... ORDER BY
// created_at LIMIT Batch FOR UPDATE SKIP LOCKED), publishes them to
// JetStream, waits for the PubAcks and marks the rows sent in the same
// transaction. A full batch polls again at once.
type PollingRelay struct {
	PGURL, NATSURL string
	Interval       time.Duration
	Batch          int
}

const (
	pollingStream  = "BENCHPOLL"
	pollingSubject = "polling.>"
)

// Run relays until ctx is done (it then returns nil) or an error.
func (r PollingRelay) Run(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.PGURL)
	if err != nil {
		return fmt.Errorf("polling relay: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	nc, err := nats.Connect(r.NATSURL, nats.Name("polling-relay"))
	if err != nil {
		return fmt.Errorf("polling relay: connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(r.Batch))
	if err != nil {
		return err
	}
	for {
		n, err := r.poll(ctx, conn, js)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("polling relay: %w", err)
		}
		if n < r.Batch {
			if sleep(ctx, r.Interval) != nil {
				return nil
			}
		}
	}
}

// poll relays one batch and returns its size.
func (r PollingRelay) poll(ctx context.Context, conn *pgx.Conn, js jetstream.JetStream) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	rows, err := tx.Query(ctx, `SELECT id::text, aggregate_type, event_type, payload::text, created_at
		FROM public.outbox_polling WHERE sent_at IS NULL
		ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`, r.Batch)
	if err != nil {
		return 0, err
	}
	var ids []string
	var acks []jetstream.PubAckFuture
	for rows.Next() {
		var id, aggregate, event, body string
		var created time.Time
		if err := rows.Scan(&id, &aggregate, &event, &body, &created); err != nil {
			return 0, err
		}
		msg := nats.NewMsg("polling." + aggregate + "." + event)
		msg.Data = []byte(body)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		msg.Header.Set(commitTimeHeader, created.UTC().Format(time.RFC3339Nano))
		ack, err := js.PublishMsgAsync(msg)
		if err != nil {
			return 0, fmt.Errorf("publish %s: %w", id, err)
		}
		ids, acks = append(ids, id), append(acks, ack)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for i, ack := range acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return 0, fmt.Errorf("publish %s: %w", ids[i], err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if len(ids) == 0 {
		return 0, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, "UPDATE public.outbox_polling SET sent_at = now() WHERE id = ANY($1::uuid[])", ids); err != nil {
		return 0, err
	}
	return len(ids), tx.Commit(ctx)
}

// startPollingRelay runs this program as the polling relay, in a process
// of its own like outboxd, and waits until its connection is open.
func (e *env) startPollingRelay(ctx context.Context, name string) (*proc, error) {
	if err := e.main.resetStream(ctx, pollingStream, pollingSubject); err != nil {
		return nil, err
	}
	p, err := startProc(e.cfg.WorkDir+"/polling-"+name+".log", e.cfg.Self, "polling-relay",
		"--pg-url", e.relayURL, "--nats-url", e.main.url,
		"--poll-interval", e.cfg.PollInterval.String(), "--poll-batch", fmt.Sprint(e.cfg.PollBatch))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := e.conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND backend_type = 'client backend'", relayRole).Scan(&n)
		if err != nil || n > 0 || p.exited() || time.Now().After(deadline) {
			if p.exited() {
				return nil, p.failure()
			}
			if err == nil && n == 0 {
				err = errors.New("the polling relay did not connect to PostgreSQL within 30s")
			}
			if err != nil {
				return nil, errors.Join(err, p.stop(10*time.Second))
			}
			return p, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// drainPolling times the polling relay relaying a backlog of events rows
// already in its table, until the stream holds them all.
func (e *env) drainPolling(ctx context.Context, name string, events int) (drain, error) {
	p, err := e.startPollingRelay(ctx, name)
	if err != nil {
		return drain{}, err
	}
	t0 := time.Now() // connected, as the slot's turning active is for outboxd
	meter := newCPUMeter(e.postmaster, e.main.pid, p.pid())
	stream, err := e.main.js.Stream(ctx, pollingStream)
	if err != nil {
		return drain{}, err
	}
	deadline := time.Now().Add(drainTimeout)
	for {
		if p.exited() {
			return drain{}, p.failure()
		}
		info, err := stream.Info(ctx)
		if err != nil {
			return drain{}, err
		}
		if info.State.Msgs >= uint64(events) {
			break
		}
		if time.Now().After(deadline) {
			return drain{}, fmt.Errorf("the polling relay relayed %d of %d events in %s", info.State.Msgs, events, drainTimeout)
		}
		meter.tick()
		if err := sleep(ctx, pollEvery); err != nil {
			return drain{}, err
		}
	}
	secs := time.Since(t0).Seconds()
	d := drain{Seconds: secs, EventsPerSec: float64(events) / secs, CPU: meter.end(secs)}
	d.PeakRSSBytes, err = peakRSSBytes(p.pid())
	return d, errors.Join(err, p.stop(30*time.Second))
}
