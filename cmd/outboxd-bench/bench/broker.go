package bench

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// limitStream is the stream `nats bench` publishes to.
const limitStream = "BENCHLIMIT"

// Broker publish modes of `nats bench js pub`.
const (
	modeAsync = "async" // PublishAsync with a window of 500, like outboxd's publisher
	modeFast  = "fast"  // fast batch publishing (server API level 4)
)

// limitHeaders make the benchmark's messages the size of outboxd's: the
// same headers with values of the same length (Nats-Msg-Id comes from
// --dedup, which also makes the server deduplicate, as it does for outboxd).
var limitHeaders = []string{
	"Outbox-Aggregate-Type:order",
	"Outbox-Aggregate-Id:123",
	"Outbox-Event-Type:OrderPlaced",
	"Outbox-Lsn:0/1A2B3C4D",
	"Outbox-Xid:123456",
	"Outbox-Commit-Time:2026-12-03T08:00:00.123456789Z",
}

// brokerRun is one `nats bench js pub` run.
type brokerRun struct {
	rate float64 // messages per second, as nats bench reports them
	// natsMicros is nats-server's CPU time per message over the run
	// (stream creation included), 0 for a server not on this machine.
	natsMicros float64
}

// brokerLimit runs `nats bench js pub MODE` with events messages of the
// payload's size against t and returns the messages per second it reports
// with nats-server's CPU per message.
func (e *env) brokerLimit(ctx context.Context, t *target, mode string, events int) (brokerRun, error) {
	csvFile := filepath.Join(e.cfg.WorkDir, "nats-bench.csv")
	os.Remove(csvFile)
	args := []string{"-s", t.url, "bench", "js", "pub", mode, "benchlimit.orders",
		"--stream", limitStream, "--create", "--purge", "--storage", "file", "--replicas", "1",
		"--size", strconv.Itoa(e.cfg.PayloadBytes), "--msgs", strconv.Itoa(events), "--dedup",
		"--batch", "500", "--no-progress", "--csv", csvFile}
	for _, h := range limitHeaders {
		args = append(args, "-H", h)
	}
	meter, started := newCPUMeter(0, t.pid, 0), time.Now()
	out, err := exec.CommandContext(ctx, e.cfg.NATSCLI, args...).CombinedOutput()
	secs := time.Since(started).Seconds()
	natsCPU := meter.end(secs).NATSServer * secs
	if err != nil {
		return brokerRun{}, fmt.Errorf("nats bench js pub %s: %w\n%s", mode, err, out)
	}
	rate, err := msgsPerSec(csvFile)
	if err != nil {
		return brokerRun{}, fmt.Errorf("nats bench js pub %s: %w\n%s", mode, err, out)
	}
	// Free the disk: a million messages are half a gigabyte.
	if err := t.js.DeleteStream(ctx, limitStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return brokerRun{}, err
	}
	return brokerRun{rate: rate, natsMicros: natsCPU / float64(events) * 1e6}, nil
}

// msgsPerSec reads the MsgsPerSec column of the publisher's row in the CSV
// file `nats bench --csv` writes.
func msgsPerSec(file string) (float64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	if len(rows) < 2 {
		return 0, fmt.Errorf("%s has %d rows, want a header and a result", file, len(rows))
	}
	col := -1
	for i, name := range rows[0] {
		if strings.TrimPrefix(name, "#") == "MsgsPerSec" {
			col = i
		}
	}
	if col < 0 || len(rows[1]) <= col {
		return 0, fmt.Errorf("%s: no MsgsPerSec column in %v", file, rows[0])
	}
	v, err := strconv.ParseFloat(rows[1][col], 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%s: MsgsPerSec %q is not a positive number", file, rows[1][col])
	}
	return v, nil
}
