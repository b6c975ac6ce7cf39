package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// chaosConfig sizes the chaos test. CI runs the small default; scripts/chaos
// runs the full size (200,000 events, 10 kills) with these variables.
type chaosConfig struct {
	events, writers, kills, natsFaults, pgRestarts int
	seconds                                        int // how long the writes should take
	cluster                                        bool
}

func chaosFromEnv(t *testing.T) chaosConfig {
	t.Helper()
	cfg := chaosConfig{events: 20_000, writers: 8, kills: 3, natsFaults: 3, pgRestarts: 2, seconds: 40}
	for name, field := range map[string]*int{
		"OUTBOXD_CHAOS_EVENTS": &cfg.events, "OUTBOXD_CHAOS_KILLS": &cfg.kills,
		"OUTBOXD_CHAOS_WRITERS": &cfg.writers, "OUTBOXD_CHAOS_PG_RESTARTS": &cfg.pgRestarts,
		"OUTBOXD_CHAOS_SECONDS": &cfg.seconds,
	} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a whole number", name, v)
			}
			*field = n
		}
	}
	cfg.cluster = os.Getenv("OUTBOXD_CHAOS_CLUSTER") == "1"
	if cfg.cluster {
		cfg.natsFaults = 2 // stream leader kills
	}
	return cfg
}

// TestChaos: concurrent writers commit events (1-100 rows per transaction,
// some rolled back, random aggregates out of 1,000) while the harness kills
// outboxd with SIGKILL, restarts NATS (or kills the stream leader of a
// three-node cluster) and restarts PostgreSQL, spread over the run. The
// checker then reads the whole stream: lost, duplicates and per-aggregate
// order violations must all be zero.
func TestChaos(t *testing.T) {
	cfg := chaosFromEnv(t)
	pg := pgtest.Start(t)
	var e *env
	if cfg.cluster {
		e = newClusterEnv(t, pg, true)
		js := e.js()
		if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: streamName, Subjects: []string{"outbox.>"},
			Storage: jetstream.FileStorage, Replicas: 3, Duplicates: 2 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	} else {
		e = newEnv(t, pg, true)
	}
	// On the R3 stream, commit order across leader failover needs
	// --exclusive-stream; outboxd is the stream's only writer here.
	var extra []string
	if cfg.cluster {
		extra = append(extra, "--exclusive-stream")
	}
	check := checker.New()
	p := e.start(e.args(extra...)...)
	e.waitStreaming(p)

	// Writers share the target; each commits until the total is reached.
	var written sync.Mutex
	remaining := cfg.events
	take := func(n int) int {
		written.Lock()
		defer written.Unlock()
		n = min(n, remaining)
		remaining -= n
		return n
	}
	// Transactions average ~50 rows: pace each writer so the writes take
	// about cfg.seconds and the faults fall among them.
	pace := time.Duration(cfg.seconds) * time.Second * time.Duration(cfg.writers) * 50 / time.Duration(max(cfg.events, 1))
	taken := func() int {
		written.Lock()
		defer written.Unlock()
		return cfg.events - remaining
	}
	var writers []*load
	for i := 0; i < cfg.writers; i++ {
		w := e.newWriter(check, 1000)
		w.rng = rand.New(rand.NewPCG(uint64(i), 42))
		w.survive = true
		shape := rand.New(rand.NewPCG(uint64(i), 7))
		writers = append(writers, w.background(0, pace, func(int) (int, bool) {
			return take(1 + shape.IntN(100)), shape.IntN(10) != 0
		}))
	}

	faults := chaosSchedule(cfg)
	start := time.Now()
	for i, fault := range faults {
		// Fault i fires once (i+1)/(n+1) of the events are written, so
		// every fault lands mid-stream whatever the machine's speed.
		target := cfg.events * (i + 1) / (len(faults) + 1)
		for taken() < target {
			if time.Since(start) > 20*time.Minute {
				t.Fatalf("writers took only %d of %d events in 20 minutes", taken(), cfg.events)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("fault %d/%d after %d events written: %s", i+1, len(faults), taken(), fault)
		switch fault {
		case "kill outboxd":
			p.kill()
			p = e.start(e.args(extra...)...)
		case "restart nats":
			e.nats.Shutdown()
			time.Sleep(2 * time.Second)
			e.nats.Restart(t)
		case "kill stream leader":
			node := e.cluster.KillLeader(t, streamName)
			time.Sleep(3 * time.Second)
			e.cluster.Node(node).Restart(t)
		case "restart postgres (fast)", "restart postgres (immediate)":
			mode := "fast"
			if fault == "restart postgres (immediate)" {
				mode = "immediate"
			}
			pg.Stop(t, mode)
			time.Sleep(time.Second)
			pg.Restart(t)
		}
	}
	// Writers stop on their own once the target is taken.
	for _, w := range writers {
		if err := w.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	report := e.verify(e.js(), check, 5*time.Minute)
	t.Logf("chaos (%s): events committed %d, in stream %d, uncertain %d, rolled back %d; lost %d, duplicates %d, order violations %d, unexpected %d; took %s",
		cfg, report.Committed, report.InStream, report.Uncertain, report.RolledBack, report.Lost, report.Duplicates, report.OrderViolations, report.Unexpected,
		time.Since(start).Round(time.Second))
	p.stopCleanly()
}

func (c chaosConfig) String() string {
	broker := "single NATS server"
	if c.cluster {
		broker = "3-node JetStream cluster, R3"
	}
	return fmt.Sprintf("%d events, %d writers, %d kills, %d broker faults, %d PostgreSQL restarts, %s",
		c.events, c.writers, c.kills, c.natsFaults, c.pgRestarts, broker)
}

// chaosSchedule lists the faults in a fixed interleaved order.
func chaosSchedule(cfg chaosConfig) []string {
	broker := "restart nats"
	if cfg.cluster {
		broker = "kill stream leader"
	}
	var faults []string
	kills, brokers, pgs := cfg.kills, cfg.natsFaults, cfg.pgRestarts
	for kills+brokers+pgs > 0 {
		if kills > 0 {
			faults, kills = append(faults, "kill outboxd"), kills-1
		}
		if brokers > 0 {
			faults, brokers = append(faults, broker), brokers-1
		}
		if kills > 0 {
			faults, kills = append(faults, "kill outboxd"), kills-1
		}
		if pgs > 0 {
			mode := "restart postgres (fast)"
			if pgs%2 == 1 {
				mode = "restart postgres (immediate)"
			}
			faults, pgs = append(faults, mode), pgs-1
		}
	}
	return faults
}
