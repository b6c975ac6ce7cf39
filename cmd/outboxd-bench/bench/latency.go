package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// steady is one steady-state run: a relay under an offered load.
type steady struct {
	Offered offered `json:"offered"`
	// Delivered is how many of the Offered.Sent events reached the
	// consumer by catchUp after the load ended.
	Delivered int         `json:"delivered"`
	Latency   percentiles `json:"latency"`
	// InsertLatency is from the clock_timestamp() of the INSERT, inside
	// the writing transaction, to the consumer: Latency plus the commit
	// and its fsync. Not for the pgoutput reader, which has no consumer.
	InsertLatency percentiles `json:"insert_latency"`
	LagBytes      int64       `json:"slot_lag_bytes_at_end"` // relays that read a slot
	Unsent        int64       `json:"unsent_rows_at_end"`    // polling relay only
	CPU           cpuSplit    `json:"cpu_cores"`
	PGLoad        pgLoad      `json:"pg_load"`
	PeakRSS       int64       `json:"peak_rss_bytes"`
	// HistogramP99 is outboxd's own commit→PubAck histogram's p99, as the
	// upper bound of its bucket (buckets double from 1 ms): a cross-check
	// of the consumer's figure. outboxd only.
	HistogramP99 float64 `json:"histogram_p99_upper_bound_ms,omitempty"`
}

// The relays of the steady-state runs (SteadyCase.Relay).
const (
	relayReader  = "pgoutput reader"
	relayOutboxd = "outboxd"
	relayPolling = "polling"
	relaySync    = "synchronous relay"
)

// syncStream is the synchronous relay's stream.
const syncStream = "BENCHSYNC"

// catchUp is how long after the load ends the consumer waits for the last
// messages of a relay that fell behind.
const catchUp = 2 * time.Minute

// steadyOutboxd offers rate events/s to outboxd (default settings but for
// the slot, stream and checkpoint bucket) and measures at a consumer.
func (e *env) steadyOutboxd(ctx context.Context, slot string, rate int) (steady, error) {
	if err := createSlot(ctx, e.conn, slot); err != nil {
		return steady{}, err
	}
	defer dropSlots(context.WithoutCancel(ctx), e.conn, slot)
	if err := e.main.resetStream(ctx, benchStream, "outbox.>"); err != nil {
		return steady{}, err
	}
	port, err := freePort()
	if err != nil {
		return steady{}, err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := startProc(e.cfg.WorkDir+"/outboxd-"+slot+".log", e.cfg.Outboxd,
		e.outboxdArgs(slot, e.main, "--metrics-addr", metrics)...)
	if err != nil {
		return steady{}, err
	}
	run := func() (steady, error) {
		if err := e.waitActive(ctx, p, slot); err != nil {
			return steady{}, err
		}
		s, err := e.underLoad(ctx, p, outboxTable, benchStream, rate, e.lagAtEnd(ctx, slot))
		if err != nil {
			return s, err
		}
		buckets, err := scrapeHistogram(ctx, "http://"+metrics+"/metrics", ackHistogram)
		s.HistogramP99 = upperBoundMS(buckets, 0.99)
		return s, err
	}
	s, err := run()
	err = errors.Join(err, p.stop(time.Minute), e.main.deleteBucket(ctx, checkpointBucket(slot)))
	return s, err
}

// lagAtEnd is underLoad's atEnd for a relay reading slot: the slot's lag
// when the load stops.
func (e *env) lagAtEnd(ctx context.Context, slot string) func(*steady) error {
	return func(s *steady) error {
		var err error
		s.LagBytes, err = slotLag(ctx, e.conn, slot)
		return err
	}
}

// steadySync offers rate events/s to the synchronous relay (SyncRelay,
// in a process of its own).
func (e *env) steadySync(ctx context.Context, slot string, rate int) (steady, error) {
	if err := createSlot(ctx, e.conn, slot); err != nil {
		return steady{}, err
	}
	defer dropSlots(context.WithoutCancel(ctx), e.conn, slot)
	if err := e.main.resetStream(ctx, syncStream, syncSubjectPrefix+">"); err != nil {
		return steady{}, err
	}
	p, err := startProc(filepath.Join(e.cfg.WorkDir, "sync-relay-"+slot+".log"), e.cfg.Self, "sync-relay",
		"--pg-url", e.relayURL, "--slot", slot, "--publication", publication, "--nats-url", e.main.url)
	if err != nil {
		return steady{}, err
	}
	run := func() (steady, error) {
		if err := e.waitActive(ctx, p, slot); err != nil {
			return steady{}, err
		}
		return e.underLoad(ctx, p, outboxTable, syncStream, rate, e.lagAtEnd(ctx, slot))
	}
	s, err := run()
	return s, errors.Join(err, p.stop(30*time.Second))
}

// steadyPolling offers rate events/s to the polling relay.
func (e *env) steadyPolling(ctx context.Context, name string, rate int) (steady, error) {
	if _, err := e.conn.Exec(ctx, "TRUNCATE "+pollingTable); err != nil {
		return steady{}, err
	}
	p, err := e.startPollingRelay(ctx, name)
	if err != nil {
		return steady{}, err
	}
	s, err := e.underLoad(ctx, p, pollingTable, pollingStream, rate, func(s *steady) error {
		return e.conn.QueryRow(ctx, "SELECT count(*) FROM "+pollingTable+" WHERE sent_at IS NULL").Scan(&s.Unsent)
	})
	return s, errors.Join(err, p.stop(30*time.Second))
}

// underLoad offers the load to table while relay p publishes to stream,
// and measures: latency at a consumer, CPU split and PostgreSQL's work
// over the load, and (atEnd) the backlog left when the load stops.
func (e *env) underLoad(ctx context.Context, p *proc, table, stream string, rate int, atEnd func(*steady) error) (steady, error) {
	lat, err := measureLatency(ctx, e.main, stream)
	if err != nil {
		return steady{}, err
	}
	before, err := e.readPGCounters(ctx, table)
	tBefore := time.Now()
	if err != nil {
		lat.stop()
		return steady{}, err
	}
	meter := newCPUMeter(e.postmaster, e.main.pid, p.pid())
	var s steady
	if s.Offered, err = e.offerLoad(ctx, table, rate, e.cfg.LatencyFor); err != nil {
		lat.stop()
		return steady{}, err
	}
	s.CPU = meter.end(s.Offered.Seconds)
	if err := atEnd(&s); err != nil {
		lat.stop()
		return steady{}, err
	}
	if s.Delivered, err = lat.waitFor(ctx, s.Offered.Sent, catchUp); err != nil {
		return steady{}, err
	}
	after, err := e.readPGCounters(ctx, table)
	if err != nil {
		return steady{}, err
	}
	s.PGLoad = after.rateSince(before, time.Since(tBefore).Seconds())
	s.Latency = lat.percentiles()
	s.InsertLatency = lat.insertPercentiles()
	s.PeakRSS, err = peakRSSBytes(p.pid())
	return s, err
}

// waitActive waits until p streams from slot.
func (e *env) waitActive(ctx context.Context, p *proc, slot string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if p.exited() {
			return p.failure()
		}
		st, err := readSlot(ctx, e.conn, slot)
		if err != nil {
			return err
		}
		if st.active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("outboxd did not stream from slot %s within a minute; tail of %s:\n%s", slot, p.log, p.tail(15))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// steadyReader offers rate events/s while only the bare pgoutput reader
// (WALReader, in a process of its own) reads a slot: the latency limit
// beside which outboxd's figures are read.
func (e *env) steadyReader(ctx context.Context, slot string, rate int) (steady, error) {
	if err := createSlot(ctx, e.conn, slot); err != nil {
		return steady{}, err
	}
	defer dropSlots(context.WithoutCancel(ctx), e.conn, slot)
	out := filepath.Join(e.cfg.WorkDir, "wal-reader-"+slot+".json")
	p, err := startProc(filepath.Join(e.cfg.WorkDir, "wal-reader-"+slot+".log"), e.cfg.Self, "wal-reader",
		"--pg-url", e.relayURL, "--slot", slot, "--publication", publication, "--out", out,
		"--samples", filepath.Join(e.cfg.WorkDir, "wal-reader-"+slot+".samples"))
	if err != nil {
		return steady{}, err
	}
	s, err := e.readUnderLoad(ctx, p, slot, rate)
	if err = errors.Join(err, p.stop(30*time.Second)); err != nil {
		return s, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return s, fmt.Errorf("the WAL reader's result: %w", err)
	}
	var res readerResult
	if err := json.Unmarshal(b, &res); err != nil {
		return s, fmt.Errorf("the WAL reader's result %s: %w", out, err)
	}
	s.Delivered, s.Latency = res.Transactions, res.Latency
	return s, nil
}

// readUnderLoad offers the load while reader p reads slot, and waits until
// p has confirmed everything the load wrote. It measures what underLoad
// does but the consumer's latencies: the CPU split, the slot lag when the
// load ends, and PostgreSQL's work.
func (e *env) readUnderLoad(ctx context.Context, p *proc, slot string, rate int) (steady, error) {
	if err := e.waitActive(ctx, p, slot); err != nil {
		return steady{}, err
	}
	before, err := e.readPGCounters(ctx, outboxTable)
	if err != nil {
		return steady{}, err
	}
	tBefore := time.Now()
	meter := newCPUMeter(e.postmaster, 0, p.pid())
	var s steady
	if s.Offered, err = e.offerLoad(ctx, outboxTable, rate, e.cfg.LatencyFor); err != nil {
		return s, err
	}
	s.CPU = meter.end(s.Offered.Seconds)
	if s.LagBytes, err = slotLag(ctx, e.conn, slot); err != nil {
		return s, err
	}
	end, err := currentLSN(ctx, e.conn)
	if err != nil {
		return s, err
	}
	for deadline := time.Now().Add(catchUp); ; {
		st, err := readSlot(ctx, e.conn, slot)
		if err != nil {
			return s, err
		}
		if st.confirmed >= end {
			after, err := e.readPGCounters(ctx, outboxTable)
			if err != nil {
				return s, err
			}
			s.PGLoad = after.rateSince(before, time.Since(tBefore).Seconds())
			s.PeakRSS, err = peakRSSBytes(p.pid())
			return s, err
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("the WAL reader confirmed only %s of %s within %s of the load's end", st.confirmed, end, catchUp)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return s, err
		}
	}
}
