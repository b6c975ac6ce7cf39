package bench

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config is one benchmark run. DefaultConfig is the full run; Quick and
// Tiny are presets for a look in a minute and for the smoke test.
type Config struct {
	// Sizes are the backlog sizes in events. Default: 100,000 and 1,000,000.
	Sizes []int
	// Shapes are the rows per transaction of a backlog. Default: 1 and 100.
	Shapes []int
	// Runs is how many times each figure is measured; the table shows the
	// median. Default: 3.
	Runs int
	// Rates are the offered loads of the steady-state latency runs, in
	// events/s. Default: 250, 1,000 and 5,000.
	Rates []int
	// LatencyFor is how long each latency run offers load. Default: 60s.
	LatencyFor time.Duration
	// DurableSize is the backlog of the durable-mode drains, one per shape
	// (outboxd into a server with sync_interval: always, beside the default
	// server): an fsync per write is slow enough that the full sizes would
	// dominate the run. 0: no durable drains. Default: 20,000.
	DurableSize int
	// PollingMaxSize limits the polling relay's drains the same way.
	// Default: 100,000.
	PollingMaxSize int
	// PayloadBytes is the size of each event's JSON payload. Default: 200.
	PayloadBytes int
	// OutboxdArgs are added to every `outboxd run` the benchmark starts
	// (for example --publish-mode async), to compare settings.
	OutboxdArgs []string
	// PollInterval and PollBatch are the polling relay's settings: it
	// sleeps PollInterval when a poll found fewer than PollBatch rows.
	// Default: 100ms and 100.
	PollInterval time.Duration
	PollBatch    int

	// PGURL and NATSURL, DurableNATSURL point at existing servers (on this
	// machine, for the CPU split). Default: start a private PostgreSQL
	// cluster and two nats-server processes (one with sync_interval: always).
	PGURL, NATSURL, DurableNATSURL string

	// Programs. Outboxd and NATSServer are built by the driver when empty;
	// NATSCLI and PGRecvlogical are looked up on PATH (and GOPATH/bin,
	// /usr/lib/postgresql/*/bin).
	Outboxd, NATSServer, NATSCLI, PGRecvlogical string
	// Self is this program, run as the polling relay. Required.
	Self string

	// WorkDir holds the servers' data and logs. Required.
	WorkDir string
	// ProfileDir, if set, receives a pprof CPU profile of outboxd's first
	// drain into JetStream of each backlog.
	ProfileDir string
	// Progress receives a line per step. Default: io.Discard.
	Progress io.Writer
}

// DefaultConfig is the full benchmark the README reports.
func DefaultConfig() Config {
	return Config{
		Sizes:          []int{100_000, 1_000_000},
		Shapes:         []int{1, 100},
		Runs:           3,
		Rates:          []int{250, 1_000, 5_000},
		LatencyFor:     60 * time.Second,
		DurableSize:    20_000,
		PollingMaxSize: 100_000,
		PayloadBytes:   200,
		PollInterval:   100 * time.Millisecond,
		PollBatch:      100,
		Progress:       io.Discard,
	}
}

// QuickConfig measures everything once on small backlogs, in about two
// minutes: for a look after a change, not for the README.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Sizes = []int{20_000}
	c.Runs = 1
	c.LatencyFor = 10 * time.Second
	c.DurableSize = 5_000
	c.PollingMaxSize = 20_000
	return c
}

// Validate reports the first setting out of range, by its flag's name.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(len(c.Sizes) > 0, "--sizes is empty: give at least one backlog size, e.g. 100000")
	for _, n := range c.Sizes {
		check(n >= 100 && n <= 10_000_000, "--sizes %d is out of range: use 100 to 10000000", n)
	}
	check(len(c.Shapes) > 0, "--shapes is empty: give rows per transaction, e.g. 1,100")
	for _, n := range c.Shapes {
		check(n >= 1 && n <= 10_000, "--shapes %d is out of range: use 1 to 10000 rows per transaction", n)
	}
	check(c.Runs >= 1 && c.Runs <= 100, "--runs %d is out of range: use 1 to 100 (3 or more for a median)", c.Runs)
	for _, r := range c.Rates {
		check(r >= 1 && r <= 100_000, "--rates %d is out of range: use 1 to 100000 events/s", r)
	}
	check(len(c.Rates) == 0 || c.LatencyFor >= time.Second, "--latency-for %s is too short: use 1s or more", c.LatencyFor)
	check(c.DurableSize == 0 || c.DurableSize >= 100, "--durable-size %d is out of range: use 0 (none) or 100 or more", c.DurableSize)
	check(c.PayloadBytes >= 50 && c.PayloadBytes <= 1<<20, "--payload-bytes %d is out of range: use 50 to 1048576", c.PayloadBytes)
	check(c.PollInterval >= time.Millisecond, "--poll-interval %s is too short: use 1ms or more", c.PollInterval)
	check(c.PollBatch >= 1 && c.PollBatch <= 10_000, "--poll-batch %d is out of range: use 1 to 10000", c.PollBatch)
	check(c.Self != "", "Config.Self is empty: the driver runs itself as the polling relay")
	check(c.WorkDir != "", "Config.WorkDir is empty")
	return errors.Join(errs...)
}
