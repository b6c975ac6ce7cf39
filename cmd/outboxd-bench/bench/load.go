package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// loadWorkers is how many connections the load generator inserts through:
// one insert and commit is a round trip, and one connection alone cannot
// offer 5,000 a second on a busy machine.
const loadWorkers = 4

// offered is what a load generator achieved.
type offered struct {
	Sent    int     `json:"sent"`
	Seconds float64 `json:"seconds"`
	// Behind counts events that were due while every worker was busy: the
	// generator fell behind the offered rate by that many.
	Behind int `json:"behind"`
}

// offerLoad commits rate one-row transactions a second into table for d,
// paced by the clock (not by the relay: an open-loop load), like an
// application writing events. Each payload carries, as insertedKey, the
// clock_timestamp() of its INSERT, taken inside the transaction: the
// latency a user sees starts there, before the commit and its fsync.
func (e *env) offerLoad(ctx context.Context, table string, rate int, d time.Duration) (offered, error) {
	insert := "INSERT INTO " + table + ` (id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'order', $1, 'OrderPlaced',
			$2::jsonb || jsonb_build_object('` + insertedKey + `', floor(extract(epoch FROM clock_timestamp()) * 1e6)::bigint))`
	conns := make([]*pgx.Conn, loadWorkers)
	for i := range conns {
		c, err := pgx.Connect(ctx, e.pgURL)
		if err != nil {
			return offered{}, fmt.Errorf("load generator: %w", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		conns[i] = c
	}
	due := make(chan int, rate) // up to a second of events waiting for a worker
	g, gctx := errgroup.WithContext(ctx)
	var sent atomic.Int64
	for _, c := range conns {
		g.Go(func() error {
			for seq := range due {
				if _, err := c.Exec(gctx, insert, strconv.Itoa(seq%1000), payload(seq, e.pad)); err != nil {
					return fmt.Errorf("load generator: insert: %w", err)
				}
				sent.Add(1)
			}
			return nil
		})
	}
	start := time.Now()
	behind := 0
	g.Go(func() error {
		defer close(due)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		next := 0
		for {
			select {
			case <-gctx.Done():
				return gctx.Err()
			case now := <-tick.C:
				elapsed := now.Sub(start)
				if elapsed >= d {
					return nil
				}
				for want := int(float64(rate) * elapsed.Seconds()); next < want; next++ {
					select {
					case due <- next:
					default:
						behind++
					}
				}
			}
		}
	})
	err := g.Wait()
	return offered{Sent: int(sent.Load()), Seconds: time.Since(start).Seconds(), Behind: behind}, err
}
