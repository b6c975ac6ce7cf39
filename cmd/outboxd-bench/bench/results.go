package bench

import (
	"slices"
)

// Results is everything one benchmark measured, as written to JSON. Every
// figure keeps its runs; the summary fields hold their medians.
type Results struct {
	Date     string   `json:"date"`
	Command  string   `json:"command"`
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`

	Backlogs []BacklogCase `json:"backlogs"`
	Brokers  []BrokerCase  `json:"brokers"`
	Durable  []DurableCase `json:"durable"`
	Polling  []PollingCase `json:"polling_drains"`
	Steady   []SteadyCase  `json:"steady_state"`
	Targets  []Target      `json:"targets"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs         int    `json:"cpus"`
	LoadAtStart  string `json:"load_at_start"` // /proc/loadavg: other work sharing the machine
	LoadAtEnd    string `json:"load_at_end"`
	PostgreSQL   string `json:"postgresql"`
	NATSServer   string `json:"nats_server"`
	NATSCLI      string `json:"nats_cli"`
	OutboxdFlags string `json:"outboxd_drain_flags"`
}

// Settings are the Config values that shape the figures.
type Settings struct {
	Sizes          []int   `json:"sizes"`
	Shapes         []int   `json:"shapes"`
	Runs           int     `json:"runs"`
	Rates          []int   `json:"rates"`
	LatencySeconds float64 `json:"latency_seconds"`
	DurableSize    int     `json:"durable_size"`
	PollingMaxSize int     `json:"polling_max_size"`
	PayloadBytes   int     `json:"payload_bytes"`
	PollIntervalMS float64 `json:"poll_interval_ms"`
	PollBatch      int     `json:"poll_batch"`
}

// BacklogCase is one backlog (size, rows per transaction) drained by
// pg_recvlogical, outboxd into JetStream, outboxd into the null sink and,
// for small sizes, outboxd into a server with sync_interval: always.
type BacklogCase struct {
	Size    int     `json:"size"`
	Shape   int     `json:"rows_per_tx"`
	Decode  []drain `json:"decode_limit_runs"`
	Outboxd []drain `json:"outboxd_runs"`
	Null    []drain `json:"outboxd_null_sink_runs"`

	// Medians, events/s.
	DecodeRate  float64 `json:"decode_limit"`
	OutboxdRate float64 `json:"outboxd"`
	NullRate    float64 `json:"outboxd_null_sink"`
	// PeakRSS is the largest of outboxd's peak RSS over the JetStream runs.
	PeakRSS int64 `json:"outboxd_peak_rss_bytes"`
	// CPU is the median split of the outboxd → JetStream drains.
	CPU cpuSplit `json:"outboxd_cpu_cores"`
}

// BrokerCase is `nats bench js pub` with Size messages.
type BrokerCase struct {
	Size  int       `json:"size"`
	Async []float64 `json:"async_runs"`
	Fast  []float64 `json:"fast_runs"`

	// nats-server's CPU per message, µs, by run.
	AsyncNATS []float64 `json:"async_nats_server_cpu_us_per_msg_runs"`
	FastNATS  []float64 `json:"fast_nats_server_cpu_us_per_msg_runs"`

	AsyncRate       float64 `json:"async"`
	FastRate        float64 `json:"fast"`
	AsyncNATSMicros float64 `json:"async_nats_server_cpu_us_per_msg"`
	FastNATSMicros  float64 `json:"fast_nats_server_cpu_us_per_msg"`
}

// Limit is the broker's limit: the faster publish mode.
func (b BrokerCase) Limit() float64 { return max(b.AsyncRate, b.FastRate) }

// DurableCase is one backlog drained by outboxd into the default server
// and into one with sync_interval: always (an fsync per write), with the
// broker limit of the latter.
type DurableCase struct {
	Size        int       `json:"size"`
	Shape       int       `json:"rows_per_tx"`
	Default     []drain   `json:"default_runs"`
	Durable     []drain   `json:"durable_runs"`
	BrokerAsync []float64 `json:"durable_broker_async_runs"`

	DefaultRate     float64 `json:"default"`
	DurableRate     float64 `json:"durable"`
	BrokerAsyncRate float64 `json:"durable_broker_async"`
}

func (c *DurableCase) summarize() {
	c.DefaultRate, c.DurableRate, c.BrokerAsyncRate = rates(c.Default), rates(c.Durable), median(c.BrokerAsync)
}

// PollingCase is the polling relay draining a backlog.
type PollingCase struct {
	Size int      `json:"size"`
	Runs []drain  `json:"runs"`
	Rate float64  `json:"events_per_sec"`
	CPU  cpuSplit `json:"cpu_cores"`
}

// SteadyCase is one relay under one offered load.
type SteadyCase struct {
	Relay string   `json:"relay"` // relayReader, relayOutboxd or relayPolling
	Rate  int      `json:"offered_per_sec"`
	Runs  []steady `json:"runs"`
	// Medians over the runs.
	Achieved float64 `json:"achieved_per_sec"`
	// Undelivered is the most events any run had not delivered when the
	// consumer stopped waiting (2 minutes after the load).
	Undelivered   int         `json:"undelivered"`
	Latency       percentiles `json:"latency"`
	InsertLatency percentiles `json:"insert_latency"`
	// HistogramP99 is the median of outboxd's own p99 bucket bounds.
	HistogramP99 float64  `json:"histogram_p99_upper_bound_ms,omitempty"`
	LagBytes     float64  `json:"slot_lag_bytes_at_end"`
	Unsent       float64  `json:"unsent_rows_at_end"`
	CPU          cpuSplit `json:"cpu_cores"`
	PGLoad       pgLoad   `json:"pg_load"`
}

// microsPerEvent turns cores kept busy over the run into CPU microseconds
// per event achieved.
func (s SteadyCase) microsPerEvent(cores float64) float64 {
	if s.Achieved <= 0 {
		return 0
	}
	return cores / s.Achieved * 1e6
}

// Target is one of the targets and whether this run met it.
type Target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianOf returns the median of f over xs.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	return median(v)
}

func rates(ds []drain) float64 { return medianOf(ds, func(d drain) float64 { return d.EventsPerSec }) }

func medianSplit(ds []drain) cpuSplit { return medianCPU(ds, func(d drain) cpuSplit { return d.CPU }) }

// medianCPU is the median of each figure of the runs' CPU splits.
func medianCPU[T any](runs []T, cpu func(T) cpuSplit) cpuSplit {
	f := func(g func(cpuSplit) float64) float64 { return medianOf(runs, func(r T) float64 { return g(cpu(r)) }) }
	return cpuSplit{
		Postgres:   f(func(c cpuSplit) float64 { return c.Postgres }),
		NATSServer: f(func(c cpuSplit) float64 { return c.NATSServer }),
		Relay:      f(func(c cpuSplit) float64 { return c.Relay }),
		Machine:    f(func(c cpuSplit) float64 { return c.Machine }),
		Stolen:     f(func(c cpuSplit) float64 { return c.Stolen }),
		Waiting: waitSplit{
			Postgres:   f(func(c cpuSplit) float64 { return c.Waiting.Postgres }),
			NATSServer: f(func(c cpuSplit) float64 { return c.Waiting.NATSServer }),
			Relay:      f(func(c cpuSplit) float64 { return c.Waiting.Relay }),
		},
	}
}

// medianPercentiles is the median of each percentile over the runs.
func medianPercentiles(runs []steady, p func(steady) percentiles) percentiles {
	f := func(g func(percentiles) float64) float64 {
		return medianOf(runs, func(r steady) float64 { return g(p(r)) })
	}
	return percentiles{
		P50:  f(func(p percentiles) float64 { return p.P50 }),
		P99:  f(func(p percentiles) float64 { return p.P99 }),
		P999: f(func(p percentiles) float64 { return p.P999 }),
		Max:  f(func(p percentiles) float64 { return p.Max }),
	}
}

func (c *BacklogCase) summarize() {
	c.DecodeRate, c.OutboxdRate, c.NullRate = rates(c.Decode), rates(c.Outboxd), rates(c.Null)
	for _, d := range c.Outboxd {
		c.PeakRSS = max(c.PeakRSS, d.PeakRSSBytes)
	}
	c.CPU = medianSplit(c.Outboxd)
}

func (b *BrokerCase) summarize() {
	b.AsyncRate, b.FastRate = median(b.Async), median(b.Fast)
	b.AsyncNATSMicros, b.FastNATSMicros = median(b.AsyncNATS), median(b.FastNATS)
}

func (p *PollingCase) summarize() {
	p.Rate, p.CPU = rates(p.Runs), medianSplit(p.Runs)
}

func (s *SteadyCase) summarize() {
	f := func(g func(steady) float64) float64 { return medianOf(s.Runs, g) }
	s.Achieved = f(func(r steady) float64 { return float64(r.Offered.Sent) / r.Offered.Seconds })
	s.Latency = medianPercentiles(s.Runs, func(r steady) percentiles { return r.Latency })
	s.InsertLatency = medianPercentiles(s.Runs, func(r steady) percentiles { return r.InsertLatency })
	for _, r := range s.Runs {
		s.Undelivered = max(s.Undelivered, r.Offered.Sent-r.Delivered)
	}
	s.HistogramP99 = f(func(r steady) float64 { return r.HistogramP99 })
	s.LagBytes = f(func(r steady) float64 { return float64(r.LagBytes) })
	s.Unsent = f(func(r steady) float64 { return float64(r.Unsent) })
	s.CPU = medianCPU(s.Runs, func(r steady) cpuSplit { return r.CPU })
	s.PGLoad = pgLoad{
		StatementsPerSec:  f(func(r steady) float64 { return r.PGLoad.StatementsPerSec }),
		BlocksPerSec:      f(func(r steady) float64 { return r.PGLoad.BlocksPerSec }),
		RowsScannedPerSec: f(func(r steady) float64 { return r.PGLoad.RowsScannedPerSec }),
		RowsUpdatedPerSec: f(func(r steady) float64 { return r.PGLoad.RowsUpdatedPerSec }),
	}
}
