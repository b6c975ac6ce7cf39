package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// Run measures everything cfg asks for and returns the results. It starts
// (or connects to) the servers and stops what it started before returning.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Results{Date: time.Now().UTC().Format(time.RFC3339), Settings: settingsOf(cfg)}
	r.Machine.CPUs = runtime.NumCPU()
	r.Machine.LoadAtStart = loadAverage()
	e, err := setUp(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := e.describe(ctx, &r.Machine); err != nil {
		return nil, err
	}
	for _, size := range cfg.Sizes {
		b, err := e.brokerCase(ctx, size)
		if err != nil {
			return nil, err
		}
		r.Brokers = append(r.Brokers, b)
		for _, shape := range cfg.Shapes {
			c, err := e.backlogCase(ctx, size, shape)
			if err != nil {
				return nil, fmt.Errorf("backlog of %d in %d-row transactions: %w", size, shape, err)
			}
			r.Backlogs = append(r.Backlogs, c)
		}
		if size <= cfg.PollingMaxSize {
			p, err := e.pollingCase(ctx, size)
			if err != nil {
				return nil, err
			}
			r.Polling = append(r.Polling, p)
		}
	}
	if cfg.DurableSize > 0 {
		for _, shape := range cfg.Shapes {
			c, err := e.durableCase(ctx, cfg.DurableSize, shape)
			if err != nil {
				return nil, fmt.Errorf("durable mode, %d in %d-row transactions: %w", cfg.DurableSize, shape, err)
			}
			r.Durable = append(r.Durable, c)
		}
	}
	for _, rate := range cfg.Rates {
		cases, err := e.steadyCases(ctx, rate)
		if err != nil {
			return nil, err
		}
		r.Steady = append(r.Steady, cases...)
	}
	r.Targets = targets(r)
	r.Machine.LoadAtEnd = loadAverage()
	return r, e.close()
}

func settingsOf(cfg Config) Settings {
	return Settings{Sizes: cfg.Sizes, Shapes: cfg.Shapes, Runs: cfg.Runs, Rates: cfg.Rates,
		LatencySeconds: cfg.LatencyFor.Seconds(), DurableSize: cfg.DurableSize,
		PollingMaxSize: cfg.PollingMaxSize, PayloadBytes: cfg.PayloadBytes,
		PollIntervalMS: float64(cfg.PollInterval) / float64(time.Millisecond), PollBatch: cfg.PollBatch}
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

func (e *env) describe(ctx context.Context, m *Machine) error {
	if err := e.conn.QueryRow(ctx, "SHOW server_version").Scan(&m.PostgreSQL); err != nil {
		return err
	}
	m.NATSServer = e.main.nc.ConnectedServerVersion()
	out, err := exec.CommandContext(ctx, e.cfg.NATSCLI, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w", e.cfg.NATSCLI, err)
	}
	m.NATSCLI = strings.TrimSpace(string(out))
	m.OutboxdFlags = "--status-interval 10ms --checkpoint-interval 10ms (drains); defaults (steady state)"
	if len(e.cfg.OutboxdArgs) > 0 {
		m.OutboxdFlags += "; all runs: " + strings.Join(e.cfg.OutboxdArgs, " ")
	}
	return nil
}

func (e *env) brokerCase(ctx context.Context, size int) (BrokerCase, error) {
	b := BrokerCase{Size: size}
	for run := range e.cfg.Runs {
		e.progressf("broker limit: %d messages, run %d/%d", size, run+1, e.cfg.Runs)
		for _, m := range []struct {
			mode       string
			rate, nats *[]float64
		}{{modeAsync, &b.Async, &b.AsyncNATS}, {modeFast, &b.Fast, &b.FastNATS}} {
			run, err := e.brokerLimit(ctx, e.main, m.mode, size)
			if err != nil {
				return b, err
			}
			*m.rate = append(*m.rate, run.rate)
			*m.nats = append(*m.nats, run.natsMicros)
		}
	}
	b.summarize()
	return b, nil
}

// backlogCase writes one backlog, after making a slot for each reader of
// each run, so that every run drains the very same WAL, and drains it with
// pg_recvlogical, outboxd into JetStream and outboxd into the null sink,
// once per run.
func (e *env) backlogCase(ctx context.Context, size, shape int) (BacklogCase, error) {
	c := BacklogCase{Size: size, Shape: shape}
	slots, end, err := e.backlog(ctx, size, shape, "decode", "outboxd", "null")
	if err != nil {
		return c, err
	}
	defer dropSlots(context.WithoutCancel(ctx), e.conn, slots...)
	for run := range e.cfg.Runs {
		decode, outboxd, null := slots[3*run], slots[3*run+1], slots[3*run+2]
		step := fmt.Sprintf("  run %d/%d: ", run+1, e.cfg.Runs)
		d, err := e.drainRecvlogical(ctx, decode, size, end)
		if err != nil {
			return c, fmt.Errorf("decode limit: %w", err)
		}
		e.progressf("%spg_recvlogical %.0f events/s", step, d.EventsPerSec)
		c.Decode = append(c.Decode, d)

		profile := ""
		if run == 0 && e.cfg.ProfileDir != "" {
			profile = filepath.Join(e.cfg.ProfileDir, fmt.Sprintf("outboxd-%d-%d.pprof", size, shape))
		}
		d, err = e.drainOutboxd(ctx, outboxdRun{slot: outboxd, target: e.main, sink: "jetstream", profile: profile}, size, end)
		if err != nil {
			return c, fmt.Errorf("outboxd drain: %w", err)
		}
		e.progressf("%soutboxd → JetStream %.0f events/s, peak RSS %.1f MiB", step, d.EventsPerSec, float64(d.PeakRSSBytes)/mib)
		c.Outboxd = append(c.Outboxd, d)

		d, err = e.drainOutboxd(ctx, outboxdRun{slot: null, target: e.main, sink: "null"}, size, end)
		if err != nil {
			return c, fmt.Errorf("outboxd null-sink drain: %w", err)
		}
		e.progressf("%soutboxd → null sink %.0f events/s", step, d.EventsPerSec)
		c.Null = append(c.Null, d)
	}
	c.summarize()
	return c, nil
}

// durableCase drains one backlog with outboxd into the default server and
// into the one with sync_interval: always, alternating, once per run.
func (e *env) durableCase(ctx context.Context, size, shape int) (DurableCase, error) {
	c := DurableCase{Size: size, Shape: shape}
	slots, end, err := e.backlog(ctx, size, shape, "default", "durable")
	if err != nil {
		return c, err
	}
	defer dropSlots(context.WithoutCancel(ctx), e.conn, slots...)
	for run := range e.cfg.Runs {
		for i, t := range []*target{e.main, e.durable} {
			d, err := e.drainOutboxd(ctx, outboxdRun{slot: slots[2*run+i], target: t, sink: "jetstream"}, size, end)
			if err != nil {
				return c, fmt.Errorf("outboxd drain (sync always: %t): %w", t == e.durable, err)
			}
			e.progressf("  run %d/%d: outboxd → JetStream (sync always: %t) %.0f events/s", run+1, e.cfg.Runs, t == e.durable, d.EventsPerSec)
			if t == e.durable {
				c.Durable = append(c.Durable, d)
			} else {
				c.Default = append(c.Default, d)
			}
		}
		run, err := e.brokerLimit(ctx, e.durable, modeAsync, size)
		if err != nil {
			return c, err
		}
		c.BrokerAsync = append(c.BrokerAsync, run.rate)
	}
	c.summarize()
	return c, nil
}

// backlog empties the tables, makes a slot per reader per run
// (run-major: the readers of run 0 first) and then writes size events in
// transactions of shape rows. It returns the slots and the end LSN.
func (e *env) backlog(ctx context.Context, size, shape int, readers ...string) ([]string, pglogrepl.LSN, error) {
	if err := resetTables(ctx, e.conn); err != nil {
		return nil, 0, err
	}
	var slots []string
	for run := range e.cfg.Runs {
		for _, r := range readers {
			slots = append(slots, fmt.Sprintf("bench_%d_%d_%s_%d", size, shape, r, run))
		}
	}
	for _, s := range slots {
		if err := createSlot(ctx, e.conn, s); err != nil {
			return nil, 0, errors.Join(err, dropSlots(context.WithoutCancel(ctx), e.conn, slots...))
		}
	}
	e.progressf("backlog of %d events in %d-row transactions: writing", size, shape)
	start := time.Now()
	end, err := writeBacklog(ctx, e.conn, false, size, shape, e.pad)
	if err != nil {
		return nil, 0, errors.Join(err, dropSlots(context.WithoutCancel(ctx), e.conn, slots...))
	}
	e.progressf("  written in %.1fs, end LSN %s", time.Since(start).Seconds(), end)
	return slots, end, nil
}

func (e *env) pollingCase(ctx context.Context, size int) (PollingCase, error) {
	p := PollingCase{Size: size}
	for run := range e.cfg.Runs {
		if err := resetTables(ctx, e.conn); err != nil {
			return p, err
		}
		if _, err := writeBacklog(ctx, e.conn, true, size, 100, e.pad); err != nil {
			return p, err
		}
		d, err := e.drainPolling(ctx, fmt.Sprintf("drain-%d-%d", size, run), size)
		if err != nil {
			return p, fmt.Errorf("polling relay drain of %d, run %d: %w", size, run+1, err)
		}
		e.progressf("polling relay drain of %d, run %d/%d: %.0f events/s", size, run+1, e.cfg.Runs, d.EventsPerSec)
		p.Runs = append(p.Runs, d)
	}
	p.summarize()
	return p, nil
}

// steadyCases runs the bare WAL reader, the synchronous relay, outboxd and
// the polling relay in turn at rate, so that whatever else loads the machine loads all alike.
func (e *env) steadyCases(ctx context.Context, rate int) ([]SteadyCase, error) {
	relays := []struct {
		name string
		run  func(ctx context.Context, name string, rate int) (steady, error)
	}{
		{relayReader, e.steadyReader},
		{relaySync, e.steadySync},
		{relayOutboxd, e.steadyOutboxd},
		{relayPolling, func(ctx context.Context, name string, rate int) (steady, error) {
			return e.steadyPolling(ctx, "steady-"+name, rate)
		}},
	}
	cases := make([]SteadyCase, len(relays))
	for run := range e.cfg.Runs {
		for i, r := range relays {
			s, err := r.run(ctx, fmt.Sprintf("bench_steady_%d_%d", rate, run), rate)
			if err != nil {
				return nil, fmt.Errorf("%s at %d events/s, run %d: %w", r.name, rate, run+1, err)
			}
			e.progressf("%s at %d/s, run %d/%d: p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
				r.name, rate, run+1, e.cfg.Runs, s.Latency.P50, s.Latency.P99, s.Latency.P999, s.Latency.Max)
			cases[i].Relay, cases[i].Rate = r.name, rate
			cases[i].Runs = append(cases[i].Runs, s)
		}
	}
	for i := range cases {
		cases[i].summarize()
	}
	return cases, nil
}
