package replication

import (
	"fmt"
	"regexp"
	"time"

	"github.com/rs/zerolog"
)

// Config configures one replication session.
type Config struct {
	// ConnString is the PostgreSQL URL or DSN. replication=database is added.
	ConnString string
	// Slot is the logical replication slot name. Default "outboxd".
	Slot string
	// Publication is the publication to stream. Default "outboxd".
	Publication string
	// StatusInterval is how often a standby status update is sent, also while
	// back-pressured. It must stay well under the server's wal_sender_timeout.
	// Default 1s.
	StatusInterval time.Duration
	// Streaming asks for protocol version 2 with streaming 'on': the server
	// sends large in-progress transactions in chunks (PostgreSQL 14+)
	// instead of spilling them on its side until they commit. The decoder
	// then needs a spool.
	Streaming bool
	// Messages asks pgoutput for logical decoding messages
	// (pg_logical_emit_message), such as outboxd's heartbeat.
	Messages bool
	// ReadLinger bounds how long a read waits for a batch: once streaming,
	// a read that finds no WAL waiting waits until 8 KiB have arrived or
	// ReadLinger has passed, so that messages the walsender sends one at a
	// time are read a batch at a time instead of one wake-up each. A
	// trickle waits up to ReadLinger (that much added latency); a fast
	// stream hardly waits. TCP connections only (a Unix socket reads as
	// soon as data arrives). 0 reads as soon as data arrives.
	ReadLinger time.Duration
	// Failover creates the slot as a failover slot on PostgreSQL 17+
	// (CreateSlot, CreateSlotExportingSnapshot): the server synchronises
	// it to standbys with sync_replication_slots on, so it survives a
	// promotion. Older servers have no failover slots; it is ignored there.
	Failover bool
	// Logger receives state changes. Default zerolog.Nop().
	Logger zerolog.Logger
}

// DefaultReadLinger is the read linger outboxd run uses unless told
// otherwise (Config.ReadLinger): none. Measured side by side (docs/
// benchmarks.md, 2026-12-06), 1 ms cost latency at every rate (p50 1.3
// against 0.3 ms at 250 and at 1,000 events/s, p99 4.5 against 2.3 ms at
// 5,000) and saved no CPU; a longer one trades latency for CPU (5 ms: half
// the CPU per event at 1,000/s, p99 6.4 ms). MaxReadLinger is the longest
// accepted.
const (
	DefaultReadLinger = 0
	MaxReadLinger     = 100 * time.Millisecond
)

// slotName is what PostgreSQL accepts for a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func (c *Config) setDefaults() {
	if c.Slot == "" {
		c.Slot = "outboxd"
	}
	if c.Publication == "" {
		c.Publication = "outboxd"
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = time.Second
	}
}

// Validate reports the first invalid setting, naming it and what is accepted.
func (c *Config) Validate() error {
	c.setDefaults()
	if c.ConnString == "" {
		return fmt.Errorf("replication: connection string is empty: set --pg-url (OUTBOXD_PG_URL)")
	}
	if !slotName.MatchString(c.Slot) {
		return fmt.Errorf("replication: slot name %q is invalid: use 1-63 lower-case letters, digits or underscores", c.Slot)
	}
	if c.StatusInterval < 10*time.Millisecond || c.StatusInterval > time.Minute {
		return fmt.Errorf("replication: status interval %s is out of range: use 10ms to 1m", c.StatusInterval)
	}
	if c.ReadLinger < 0 || c.ReadLinger > MaxReadLinger {
		return fmt.Errorf("replication: read linger %s is out of range: use 0 to %s", c.ReadLinger, MaxReadLinger)
	}
	return nil
}
