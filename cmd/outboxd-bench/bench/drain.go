package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// benchStream is the stream outboxd publishes to; its subjects are
	// outboxd's default template's.
	benchStream = "BENCH"
	// pollEvery is how often a drain looks at the slot. Drains are timed
	// from the moment the slot turns active (the walsender streams) to the
	// moment confirmed_flush_lsn reaches the end, so a process's start-up
	// is not counted, for pg_recvlogical and outboxd alike.
	pollEvery = 5 * time.Millisecond
	// drainTimeout bounds one drain: a relay that stops making progress
	// fails the benchmark instead of hanging it.
	drainTimeout = 30 * time.Minute
)

// drain is one timed drain of a backlog.
type drain struct {
	Seconds      float64  `json:"seconds"`
	EventsPerSec float64  `json:"events_per_sec"`
	PeakRSSBytes int64    `json:"peak_rss_bytes,omitempty"`
	CPU          cpuSplit `json:"cpu_cores"`
	// FromStart marks a drain too short to see the slot turn active: it is
	// timed from the process's start, and its CPU split is not measured.
	FromStart bool `json:"timed_from_process_start,omitempty"`
}

// drainRecvlogical times pg_recvlogical reading slot up to end into
// /dev/null: the rate at which the walsender decodes this backlog
// (pgoutput, the same publication), with nothing downstream.
func (e *env) drainRecvlogical(ctx context.Context, slot string, events int, end pglogrepl.LSN) (drain, error) {
	started := time.Now()
	p, err := startProc(filepath.Join(e.cfg.WorkDir, "pg_recvlogical-"+slot+".log"), e.cfg.PGRecvlogical,
		"-d", e.relayURL, "--slot", slot, "--start", "--no-loop", "--endpos", end.String(),
		"-o", "proto_version=1", "-o", "publication_names="+publication, "-f", "/dev/null")
	if err != nil {
		return drain{}, err
	}
	defer p.stop(10 * time.Second)
	var meter *cpuMeter
	var t0 time.Time
	deadline := time.Now().Add(drainTimeout)
	for !p.exited() {
		if meter == nil {
			st, err := readSlot(ctx, e.conn, slot)
			if err != nil {
				return drain{}, err
			}
			if st.active {
				t0, meter = time.Now(), newCPUMeter(e.postmaster, 0, p.pid())
			}
		} else {
			meter.tick()
		}
		if time.Now().After(deadline) {
			return drain{}, fmt.Errorf("pg_recvlogical still reading slot %s after %s", slot, drainTimeout)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return drain{}, err
		}
	}
	if err := p.exitError(); err != nil {
		return drain{}, err
	}
	if meter == nil {
		// Done between two looks at the slot (a tiny backlog): time it
		// from the process's start instead, and say so.
		secs := time.Since(started).Seconds()
		return drain{Seconds: secs, EventsPerSec: float64(events) / secs, FromStart: true}, nil
	}
	secs := time.Since(t0).Seconds()
	// The last tick's values are kept for the walsender and pg_recvlogical,
	// which have exited by now.
	return drain{Seconds: secs, EventsPerSec: float64(events) / secs, CPU: meter.end(secs)}, nil
}

// outboxdRun says how to run outboxd for one drain.
type outboxdRun struct {
	slot    string
	target  *target // where it publishes and keeps its checkpoint
	sink    string  // "jetstream" or "null"
	profile string  // CPU profile file, "" for none
}

// drainOutboxd times the real outboxd binary draining run.slot up to end:
// until the slot's confirmed_flush_lsn reaches end, which outboxd only
// sends after the last PubAck and checkpoint. Status and checkpoint
// intervals are 10ms so that the confirmation follows the last ack closely.
func (e *env) drainOutboxd(ctx context.Context, run outboxdRun, events int, end pglogrepl.LSN) (drain, error) {
	if run.sink == "jetstream" {
		if err := run.target.resetStream(ctx, benchStream, "outbox.>"); err != nil {
			return drain{}, err
		}
	}
	args := e.outboxdArgs(run.slot, run.target, "--sink", run.sink,
		"--status-interval", "10ms", "--checkpoint-interval", "10ms", "--metrics-addr", "")
	if run.profile != "" {
		args = append(args, "--cpu-profile", run.profile)
	}
	p, err := startProc(filepath.Join(e.cfg.WorkDir, "outboxd-"+run.slot+".log"), e.cfg.Outboxd, args...)
	if err != nil {
		return drain{}, err
	}
	d, err := e.timeToConfirm(ctx, p, run.slot, run.target.pid, end)
	d.EventsPerSec = float64(events) / d.Seconds
	if stopErr := p.stop(time.Minute); err == nil {
		err = stopErr
	}
	if err != nil {
		return drain{}, err
	}
	if run.sink == "jetstream" {
		if err := run.target.expectMessages(ctx, benchStream, events); err != nil {
			return drain{}, err
		}
	}
	return d, run.target.deleteBucket(ctx, checkpointBucket(run.slot))
}

// outboxdArgs are the `outboxd run` arguments every outboxd run shares.
func (e *env) outboxdArgs(slot string, t *target, extra ...string) []string {
	return append([]string{"run", "--pg-url", e.relayURL, "--nats-url", t.url, "--stream", benchStream,
		"--slot", slot, "--publication", publication, "--table", outboxTable,
		"--checkpoint", "kv:" + checkpointBucket(slot), "--log-level", "warn"}, slices.Concat(e.cfg.OutboxdArgs, extra)...)
}

func checkpointBucket(slot string) string { return "bench_cp_" + slot }

// timeToConfirm waits until slot is active (t0) and then until its
// confirmed_flush_lsn reaches end, and returns the interval with the CPU
// split and p's peak RSS.
func (e *env) timeToConfirm(ctx context.Context, p *proc, slot string, natsPID int, end pglogrepl.LSN) (drain, error) {
	var meter *cpuMeter
	var t0 time.Time
	deadline := time.Now().Add(drainTimeout)
	for {
		if p.exited() {
			return drain{}, p.failure()
		}
		st, err := readSlot(ctx, e.conn, slot)
		if err != nil {
			return drain{}, err
		}
		if meter == nil && st.active {
			t0, meter = time.Now(), newCPUMeter(e.postmaster, natsPID, p.pid())
		}
		if meter != nil {
			if st.confirmed >= end {
				secs := time.Since(t0).Seconds()
				d := drain{Seconds: secs, CPU: meter.end(secs)}
				d.PeakRSSBytes, err = peakRSSBytes(p.pid())
				return d, err
			}
			meter.tick()
		}
		if time.Now().After(deadline) {
			return drain{}, fmt.Errorf("slot %s confirmed %s after %s, want %s", slot, st.confirmed, drainTimeout, end)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return drain{}, err
		}
	}
}

// expectMessages checks that stream holds exactly want messages: a drain
// that lost or repeated events does not count.
func (t *target) expectMessages(ctx context.Context, stream string, want int) error {
	s, err := t.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s on %s: %w", stream, t.url, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.State.Msgs != uint64(want) {
		return fmt.Errorf("stream %s holds %d messages after the drain, want %d", stream, info.State.Msgs, want)
	}
	return nil
}

// resetStream deletes stream if it exists and creates it anew (file
// storage, one replica, a two-minute duplicate window), so every run
// starts empty.
func (t *target) resetStream(ctx context.Context, stream, subject string) error {
	if err := t.js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete stream %s: %w", stream, err)
	}
	// AllowBatchPublish and AllowAtomicPublish as on a stream outboxd
	// creates: without them outboxd's default --publish-mode auto
	// publishes asynchronously, not in fast batches, and
	// --atomic-transactions auto (when asked for) message by message.
	_, err := t.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject},
		Storage: jetstream.FileStorage, Replicas: 1, Duplicates: 2 * time.Minute, AllowBatchPublish: true, AllowAtomicPublish: true})
	if err != nil {
		return fmt.Errorf("create stream %s: %w", stream, err)
	}
	return nil
}

func (t *target) deleteBucket(ctx context.Context, bucket string) error {
	if err := t.js.DeleteKeyValue(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("delete checkpoint bucket %s: %w", bucket, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
