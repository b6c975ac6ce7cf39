package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"
)

// DefaultInterval is how often a Checkpointer saves when
// CheckpointerConfig.Interval is zero.
const DefaultInterval = 200 * time.Millisecond

// CheckpointerConfig configures a [Checkpointer]. Store, Tracker and the
// three identity fields are required.
type CheckpointerConfig struct {
	// Store is where checkpoints are saved.
	Store Store
	// Tracker supplies the safe LSN.
	Tracker *Tracker
	// Identity gives SystemID, Timeline, Slot and BeforeSlot, written into
	// every checkpoint; its LSN and SavedAt are ignored.
	Identity Checkpoint
	// Start is an LSN already durable when outboxd starts (the loaded
	// checkpoint, or the slot's confirmed_flush_lsn when there is none).
	// Durable starts here, and nothing at or before it is saved again.
	Start pglogrepl.LSN
	// Interval is how often Run saves. Default DefaultInterval (200ms).
	Interval time.Duration
	// Logger receives save failures and recoveries. Default zerolog.Nop().
	Logger zerolog.Logger
}

// Validate reports the first missing or out-of-range field.
func (c CheckpointerConfig) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("checkpointer config: store is required")
	case c.Tracker == nil:
		return errors.New("checkpointer config: tracker is required")
	case c.Identity.SystemID == "":
		return errors.New("checkpointer config: identity system_id is required")
	case c.Identity.Timeline <= 0:
		return fmt.Errorf("checkpointer config: identity timeline %d: must be >= 1", c.Identity.Timeline)
	case c.Identity.Slot == "":
		return errors.New("checkpointer config: identity slot is required")
	case c.Interval < 0:
		return fmt.Errorf("checkpoint interval %s: must be > 0 (0 means the default %s)", c.Interval, DefaultInterval)
	}
	return nil
}

// Checkpointer saves the tracker's safe LSN and publishes the newest saved
// one as Durable, the only LSN the replication goroutine may confirm to
// PostgreSQL as flushed (docs/design.md, invariant 5).
type Checkpointer struct {
	store    Store
	tracker  *Tracker
	identity Checkpoint
	interval time.Duration
	log      zerolog.Logger

	mu    sync.Mutex    // serialises saves between Run and Flush
	saved pglogrepl.LSN // newest LSN the store acknowledged; guarded by mu

	durable atomic.Uint64 // pglogrepl.LSN; only ever set to a saved LSN
}

// NewCheckpointer returns a Checkpointer for cfg. It panics if cfg is
// invalid: call cfg.Validate first where the values come from a user.
func NewCheckpointer(cfg CheckpointerConfig) *Checkpointer {
	if err := cfg.Validate(); err != nil {
		panic("BUG: checkpoint: " + err.Error())
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	c := &Checkpointer{
		store:    cfg.Store,
		tracker:  cfg.Tracker,
		identity: Checkpoint{SystemID: cfg.Identity.SystemID, Timeline: cfg.Identity.Timeline, Slot: cfg.Identity.Slot, BeforeSlot: cfg.Identity.BeforeSlot},
		interval: cfg.Interval,
		log:      cfg.Logger.With().Str("component", "checkpoint").Str("store", cfg.Store.String()).Logger(),
		saved:    cfg.Start,
	}
	c.durable.Store(uint64(cfg.Start))
	return c
}

// Run saves the tracker's safe LSN every interval when it is newer than the
// last saved one. A failed save is logged when saving starts failing and
// when it recovers, not on every tick, and is retried on the next tick. Run
// returns nil when ctx is done; it does not save on the way out, since ctx
// is already cancelled then: call Flush after the sink has drained.
func (c *Checkpointer) Run(ctx context.Context) error {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	var failures int
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		err := c.save(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil // the save was cut short by shutdown, not a failure
		case err != nil:
			if failures == 0 {
				c.log.Error().Err(err).Stringer("durable", c.Durable()).
					Msg("checkpoint save failed; retrying every interval, flush LSN held back until it succeeds")
			}
			failures++
		case failures > 0:
			c.log.Info().Int("failed_attempts", failures).Stringer("durable", c.Durable()).
				Msg("checkpoint save recovered")
			failures = 0
		}
	}
}

// Flush saves the tracker's safe LSN now if it is newer than the last saved
// one, and returns the save's error. Use it at shutdown, after the sink has
// drained, with a context that is not yet cancelled.
func (c *Checkpointer) Flush(ctx context.Context) error {
	return c.save(ctx)
}

// Durable returns the newest LSN the store is known to hold. It starts at
// CheckpointerConfig.Start, never decreases, and is never ahead of the
// store: it moves only after Save returned nil.
func (c *Checkpointer) Durable() pglogrepl.LSN {
	return pglogrepl.LSN(c.durable.Load())
}

func (c *Checkpointer) save(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	lsn := c.tracker.Safe()
	if lsn <= c.saved {
		return nil
	}
	cp := c.identity
	cp.LSN = lsn
	cp.SavedAt = time.Now().UTC()
	if err := c.store.Save(ctx, cp); err != nil {
		return fmt.Errorf("checkpoint lsn %s: %w", lsn, err)
	}
	c.saved = lsn
	c.durable.Store(uint64(lsn))
	c.log.Debug().Stringer("lsn", lsn).Msg("checkpoint saved")
	return nil
}
