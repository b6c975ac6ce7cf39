package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunTiny runs every part of the benchmark once on tiny backlogs
// against real servers and checks that each figure is there and positive.
// It asserts no speed: performance is measured, not tested.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two nats-servers and builds three programs; not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := QuickConfig()
	// 5,000 events: nats-server's CPU in the broker limit is read in clock
	// ticks (10 ms), and 1,000 messages (some 7 ms) could round to none.
	cfg.Sizes, cfg.Shapes, cfg.DurableSize, cfg.PollingMaxSize = []int{5000}, []int{1, 100}, 200, 5000
	// 1,000 events/s, not fewer: PostgreSQL's CPU is read in clock ticks
	// (10 ms), and 2 s of a lighter load can round to none.
	cfg.Rates, cfg.LatencyFor = []int{1000}, 2*time.Second
	cfg.WorkDir, cfg.ProfileDir = dir, filepath.Join(dir, "profiles")
	var progress bytes.Buffer
	cfg.Progress = &progress
	module, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	cfg.Self = filepath.Join(bin, "outboxd-bench")
	build := exec.CommandContext(ctx, "go", "build", "-o", cfg.Self, "./cmd/outboxd-bench")
	build.Dir = module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build outboxd-bench: %v\n%s", err, out)
	}
	if err := BuildPrograms(ctx, &cfg, module, bin); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
		t.Fatal(err)
	}

	r, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	checkPositive(t, r)

	var table strings.Builder
	r.WriteTable(&table)
	for _, want := range []string{"decode limit", "Durable mode", "Polling relay drain", "| outboxd | 1,000 |", "| polling | 1,000 |", "| synchronous relay | 1,000 |", "insert→consumer", "cores it needs", "Targets"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	chart := filepath.Join(dir, "chart.png")
	if err := WriteChart(r, chart); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(chart); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("chart: %v, %d bytes, want a PNG", err, len(b))
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("results do not marshal: %v", err)
	}
	for _, shape := range cfg.Shapes {
		profile := filepath.Join(cfg.ProfileDir, fmt.Sprintf("outboxd-5000-%d.pprof", shape))
		if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
			t.Errorf("CPU profile %s: %v", profile, err)
		}
	}
}

func checkPositive(t *testing.T, r *Results) {
	t.Helper()
	positive := func(name string, v float64) {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if len(r.Backlogs) != 2 || len(r.Brokers) != 1 || len(r.Durable) != 2 || len(r.Polling) != 1 || len(r.Steady) != 4 {
		t.Fatalf("got %d backlogs, %d brokers, %d durable, %d polling, %d steady; want 2, 1, 2, 1, 4",
			len(r.Backlogs), len(r.Brokers), len(r.Durable), len(r.Polling), len(r.Steady))
	}
	for _, c := range r.Backlogs {
		positive("decode limit", c.DecodeRate)
		positive("outboxd drain", c.OutboxdRate)
		positive("null-sink drain", c.NullRate)
		positive("peak RSS", float64(c.PeakRSS))
		// Both are counted in clock ticks: over a drain of a few tens of
		// milliseconds each may be a tick off.
		shortest := c.Outboxd[0].Seconds
		for _, d := range c.Outboxd {
			shortest = min(shortest, d.Seconds)
		}
		if slack := 2.0 / clockTicks / shortest; c.CPU.Machine+slack < c.CPU.Relay {
			t.Errorf("drain: whole machine %.2f cores, less than outboxd's %.2f (by more than two clock ticks)", c.CPU.Machine, c.CPU.Relay)
		}
	}
	positive("broker async", r.Brokers[0].AsyncRate)
	positive("broker fast", r.Brokers[0].FastRate)
	positive("nats-server CPU per message, async", r.Brokers[0].AsyncNATSMicros)
	positive("nats-server CPU per message, fast", r.Brokers[0].FastNATSMicros)
	for _, c := range r.Durable {
		positive("durable default", c.DefaultRate)
		positive("durable", c.DurableRate)
		positive("durable broker", c.BrokerAsyncRate)
	}
	positive("polling drain", r.Polling[0].Rate)
	for _, s := range r.Steady {
		positive(s.Relay+" achieved", s.Achieved)
		if s.Undelivered != 0 {
			t.Errorf("%s: %d events never reached the consumer", s.Relay, s.Undelivered)
		}
		positive(s.Relay+" p50", s.Latency.P50)
		positive(s.Relay+" p99", s.Latency.P99)
		positive(s.Relay+" p99.9", s.Latency.P999)
		positive(s.Relay+" max", s.Latency.Max)
		positive(s.Relay+" postgres CPU", s.CPU.Postgres)
		if s.CPU.Machine < s.CPU.Postgres {
			t.Errorf("%s: whole machine %.2f cores, less than PostgreSQL's %.2f", s.Relay, s.CPU.Machine, s.CPU.Postgres)
		}
		if s.Relay == relayOutboxd {
			positive("outboxd histogram p99", s.HistogramP99)
		}
		if s.Relay != relayReader { // it has no consumer
			positive(s.Relay+" insert→consumer p50", s.InsertLatency.P50)
			positive(s.Relay+" insert→consumer p99", s.InsertLatency.P99)
			// The polling relay's commit time is created_at, the
			// transaction's start, before the INSERT.
			if s.Relay != relayPolling && s.InsertLatency.P50 < s.Latency.P50 {
				t.Errorf("%s: insert→consumer p50 %.2f ms below commit→consumer p50 %.2f ms: the insert comes first", s.Relay, s.InsertLatency.P50, s.Latency.P50)
			}
		}
	}
	// Three targets per backlog, then issue 21's: CPU per event of the
	// 100-row drain, p99 at the highest rate, at 1,000/s p99, CPU, p50
	// against the synchronous relay and nats-server against the polling
	// relay, and CPU per event as the rate falls (one rate here: unmet).
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name)
	}
	for _, want := range []string{"outboxd CPU per event, 5,000 events in 100-row transactions", "p99 insert→consumer at the highest rate",
		"p99 insert→consumer at 1,000 events/s", "outboxd CPU at 1,000 events/s", "p50 insert→consumer at 1,000 events/s",
		"nats-server CPU for outboxd at 1,000 events/s", "outboxd CPU per event as the rate falls"} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no target %q among %q", want, names)
		}
	}
	if len(r.Targets) != 3*len(r.Backlogs)+7 {
		t.Errorf("%d targets, want %d", len(r.Targets), 3*len(r.Backlogs)+7)
	}
	positive("CPUs", float64(r.Machine.CPUs))
	if r.Machine.PostgreSQL == "" || r.Machine.NATSServer == "" || r.Machine.NATSCLI == "" {
		t.Errorf("machine description incomplete: %+v", r.Machine)
	}
}

func TestMsgsPerSec(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    float64
		wantErr string
	}{
		{name: "nats bench v0.5.0", want: 33958,
			csv: "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs\nAY,P0,100000,10000000,33958,6791637.1,1.47\n"},
		{name: "header only", csv: "#RunID,MsgsPerSec\n", wantErr: "want a header and a result"},
		{name: "no column", csv: "#RunID,Other\nAY,1\n", wantErr: "no MsgsPerSec column"},
		{name: "not a number", csv: "#MsgsPerSec\nfast\n", wantErr: `MsgsPerSec "fast" is not a positive number`},
		{name: "zero", csv: "#MsgsPerSec\n0\n", wantErr: "not a positive number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "b.csv")
			if err := os.WriteFile(file, []byte(tt.csv), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := msgsPerSec(file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("msgsPerSec = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestReadStat(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid = %d, want %d", st.ppid, os.Getppid())
	}
	rss, err := peakRSSBytes(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("peakRSSBytes = %d, %v; want > 0", rss, err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Self, good.WorkDir = "/bin/true", "/tmp"
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{name: "default", edit: func(*Config) {}},
		{name: "no sizes", edit: func(c *Config) { c.Sizes = nil }, wantErr: "--sizes is empty"},
		{name: "size too small", edit: func(c *Config) { c.Sizes = []int{5} }, wantErr: "--sizes 5 is out of range"},
		{name: "shape zero", edit: func(c *Config) { c.Shapes = []int{0} }, wantErr: "--shapes 0 is out of range"},
		{name: "no runs", edit: func(c *Config) { c.Runs = 0 }, wantErr: "--runs 0 is out of range"},
		{name: "rate zero", edit: func(c *Config) { c.Rates = []int{0} }, wantErr: "--rates 0 is out of range"},
		{name: "short latency run", edit: func(c *Config) { c.LatencyFor = time.Millisecond }, wantErr: "--latency-for 1ms is too short"},
		{name: "durable size", edit: func(c *Config) { c.DurableSize = 5 }, wantErr: "--durable-size 5 is out of range"},
		{name: "payload", edit: func(c *Config) { c.PayloadBytes = 10 }, wantErr: "--payload-bytes 10 is out of range"},
		{name: "poll batch", edit: func(c *Config) { c.PollBatch = 0 }, wantErr: "--poll-batch 0 is out of range"},
		{name: "no work dir", edit: func(c *Config) { c.WorkDir = "" }, wantErr: "WorkDir is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPayloadSize(t *testing.T) {
	for _, size := range []int{100, 200, 1000} {
		got := len(payload(123456, payloadPad(size)))
		if got < size-5 || got > size+5 {
			t.Errorf("payload for %d bytes is %d bytes", size, got)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseBuckets(t *testing.T) {
	metrics := `# HELP outboxd_commit_to_ack_seconds x
outboxd_commit_to_ack_seconds_bucket{le="0.001"} 50
outboxd_commit_to_ack_seconds_bucket{le="0.002"} 98
outboxd_commit_to_ack_seconds_bucket{le="0.004"} 100
outboxd_commit_to_ack_seconds_bucket{le="+Inf"} 100
outboxd_commit_to_ack_seconds_sum 0.1
`
	bs, err := parseBuckets(bufio.NewScanner(strings.NewReader(metrics)), ackHistogram)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ q, want float64 }{{0.5, 1}, {0.9, 2}, {0.99, 4}} {
		if got := upperBoundMS(bs, tt.q); got != tt.want {
			t.Errorf("upperBoundMS(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	_, err = parseBuckets(bufio.NewScanner(strings.NewReader("other_metric 1\n")), ackHistogram)
	if err == nil || !strings.Contains(err.Error(), "no outboxd_commit_to_ack_seconds_bucket lines") {
		t.Errorf("err = %v, want one naming the missing histogram", err)
	}
	_, err = parseBuckets(bufio.NewScanner(strings.NewReader(`outboxd_commit_to_ack_seconds_bucket{le="x"} 1`+"\n")), ackHistogram)
	if err == nil || !strings.Contains(err.Error(), `bucket bound "x"`) {
		t.Errorf("err = %v, want one naming the bad bound", err)
	}
}

func TestPercentilesOf(t *testing.T) {
	var samples []time.Duration
	for i := 1000; i >= 1; i-- { // descending: percentilesOf must sort
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	got := percentilesOf(samples)
	want := percentiles{P50: 501, P99: 991, P999: 1000, Max: 1000}
	if got != want {
		t.Errorf("percentilesOf(1..1000 ms) = %+v, want %+v", got, want)
	}
	if samples[0] != 1000*time.Millisecond {
		t.Errorf("percentilesOf sorted its argument: first sample now %s", samples[0])
	}
	if (percentilesOf(nil) != percentiles{}) {
		t.Errorf("percentilesOf(nil) = %+v, want zeros", percentilesOf(nil))
	}
}

func TestInsertedAt(t *testing.T) {
	tests := []struct {
		payload string
		want    int64 // Unix µs; -1: none
	}{
		{`{"pad": "x", "seq": 1, "customer": "c-1", "inserted_us": 1765000000123456}`, 1765000000123456},
		{`{"inserted_us": 7}`, 7},
		{`{"pad": "x", "seq": 1}`, -1},
		{`{"inserted_us": "soon"}`, -1},
		{`{"inserted_us": `, -1},
		{`{"inserted_us": 99999999999999999999}`, -1},
	}
	for _, tt := range tests {
		got, ok := insertedAt([]byte(tt.payload))
		if tt.want < 0 {
			if ok {
				t.Errorf("insertedAt(%s) = %v, want none", tt.payload, got)
			}
			continue
		}
		if !ok || got.UnixMicro() != tt.want {
			t.Errorf("insertedAt(%s) = %v, %v; want %d µs", tt.payload, got, ok, tt.want)
		}
	}
}
