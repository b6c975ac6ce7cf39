package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

const mib = 1 << 20

// Target thresholds from the issue.
const (
	drainTarget   = 0.8  // × min(decode limit, broker limit)
	nullTarget    = 0.95 // × decode limit
	p99TargetMS   = 20.0 // at 5,000 events/s
	p99TargetRate = 5000
	rssTargetMiB  = 64

	// Everyday rates (issue 21): insert→consumer, CPU.
	everydayRate       = 1000
	everydayP99MS      = 5.0  // at everydayRate
	highestP99MS       = 10.0 // at the highest rate offered
	everydayCores      = 0.05 // outboxd at everydayRate
	natsVsPolling      = 2.0  // × the polling relay's nats-server CPU at everydayRate
	drainMicrosPer100  = 2.0  // outboxd's CPU µs per event, 100-row drain
	perEventRiseMargin = 1.2  // a lower rate may cost this much more per event (noise)
)

func (r *Results) broker(size int) BrokerCase {
	for _, b := range r.Brokers {
		if b.Size == size {
			return b
		}
	}
	return BrokerCase{}
}

// targets checks the targets against the medians.
func targets(r *Results) []Target {
	var ts []Target
	for _, c := range r.Backlogs {
		limit := min(c.DecodeRate, r.broker(c.Size).Limit())
		ts = append(ts, Target{
			Name:     fmt.Sprintf("backlog drain, %s events in %d-row transactions", count(c.Size), c.Shape),
			Want:     fmt.Sprintf("≥ %.2f × min(decode, broker) = %s/s", drainTarget, count(int(drainTarget*limit))),
			Measured: fmt.Sprintf("%s/s (%.2f×)", count(int(c.OutboxdRate)), c.OutboxdRate/limit),
			Met:      c.OutboxdRate >= drainTarget*limit,
		}, Target{
			Name:     fmt.Sprintf("null-sink drain, %s events in %d-row transactions", count(c.Size), c.Shape),
			Want:     fmt.Sprintf("≥ %.2f × decode = %s/s", nullTarget, count(int(nullTarget*c.DecodeRate))),
			Measured: fmt.Sprintf("%s/s (%.2f×)", count(int(c.NullRate)), c.NullRate/c.DecodeRate),
			Met:      c.NullRate >= nullTarget*c.DecodeRate,
		}, Target{
			Name:     fmt.Sprintf("peak RSS, %s events in %d-row transactions", count(c.Size), c.Shape),
			Want:     fmt.Sprintf("< %d MiB", rssTargetMiB),
			Measured: fmt.Sprintf("%.1f MiB", float64(c.PeakRSS)/mib),
			Met:      c.PeakRSS < rssTargetMiB*mib,
		})
	}
	for _, s := range r.Steady {
		if s.Relay != relayOutboxd || s.Rate != p99TargetRate {
			continue
		}
		measured := fmt.Sprintf("%.1f ms", s.Latency.P99)
		if limit := r.steady(relayReader, s.Rate); limit != nil {
			measured += fmt.Sprintf(" (the pgoutput reader alone: %.1f ms)", limit.Latency.P99)
		}
		ts = append(ts, Target{
			Name:     fmt.Sprintf("p99 commit→PubAck at %s events/s", count(s.Rate)),
			Want:     fmt.Sprintf("< %.0f ms", p99TargetMS),
			Measured: measured,
			Met:      s.Latency.P99 < p99TargetMS,
		})
	}
	return append(ts, everydayTargets(r)...)
}

// everydayTargets are issue 21's: latency a user sees and CPU at everyday
// rates, and outboxd's CPU per event on the 100-row drain.
func everydayTargets(r *Results) []Target {
	var ts []Target
	for _, c := range r.Backlogs {
		if c.Shape != 100 || c.OutboxdRate <= 0 {
			continue
		}
		us := c.CPU.Relay / c.OutboxdRate * 1e6
		ts = append(ts, Target{
			Name:     fmt.Sprintf("outboxd CPU per event, %s events in 100-row transactions", count(c.Size)),
			Want:     fmt.Sprintf("≤ %.0f µs", drainMicrosPer100),
			Measured: fmt.Sprintf("%.1f µs", us),
			Met:      us <= drainMicrosPer100,
		})
	}
	var ours []SteadyCase
	for _, s := range r.Steady {
		if s.Relay == relayOutboxd {
			ours = append(ours, s)
		}
	}
	if len(ours) == 0 {
		return ts
	}
	highest := ours[0]
	for _, s := range ours {
		if s.Rate > highest.Rate {
			highest = s
		}
	}
	ts = append(ts, Target{
		Name:     fmt.Sprintf("p99 insert→consumer at the highest rate offered (%s/s, %s/s achieved)", count(highest.Rate), count(int(highest.Achieved))),
		Want:     fmt.Sprintf("≤ %.0f ms", highestP99MS),
		Measured: fmt.Sprintf("%.1f ms", highest.InsertLatency.P99),
		Met:      highest.InsertLatency.P99 <= highestP99MS,
	})
	if s := r.steady(relayOutboxd, everydayRate); s != nil {
		ts = append(ts, Target{
			Name:     fmt.Sprintf("p99 insert→consumer at %s events/s", count(everydayRate)),
			Want:     fmt.Sprintf("≤ %.0f ms", everydayP99MS),
			Measured: fmt.Sprintf("%.1f ms (p50 %.1f)", s.InsertLatency.P99, s.InsertLatency.P50),
			Met:      s.InsertLatency.P99 <= everydayP99MS,
		}, Target{
			Name:     fmt.Sprintf("outboxd CPU at %s events/s", count(everydayRate)),
			Want:     fmt.Sprintf("≤ %.2f cores", everydayCores),
			Measured: fmt.Sprintf("%.3f cores (%.0f µs per event)", s.CPU.Relay, s.microsPerEvent(s.CPU.Relay)),
			Met:      s.CPU.Relay <= everydayCores,
		})
		if peer := r.steady(relaySync, everydayRate); peer != nil {
			ts = append(ts, Target{
				Name:     fmt.Sprintf("p50 insert→consumer at %s events/s", count(everydayRate)),
				Want:     fmt.Sprintf("< the synchronous relay's (%.2f ms)", peer.InsertLatency.P50),
				Measured: fmt.Sprintf("%.2f ms", s.InsertLatency.P50),
				Met:      s.InsertLatency.P50 < peer.InsertLatency.P50,
			})
		}
		if p := r.steady(relayPolling, everydayRate); p != nil {
			ts = append(ts, Target{
				Name:     fmt.Sprintf("nats-server CPU for outboxd at %s events/s", count(everydayRate)),
				Want:     fmt.Sprintf("≤ %.0f × the polling relay's (%.3f cores)", natsVsPolling, p.CPU.NATSServer),
				Measured: fmt.Sprintf("%.3f cores", s.CPU.NATSServer),
				Met:      s.CPU.NATSServer <= natsVsPolling*p.CPU.NATSServer,
			})
		}
	}
	// CPU per event must not rise as the rate falls.
	slices.SortFunc(ours, func(a, b SteadyCase) int { return a.Rate - b.Rate })
	var measured []string
	met := true
	for i, s := range ours {
		measured = append(measured, fmt.Sprintf("%.0f µs at %s/s", s.microsPerEvent(s.CPU.Relay), count(s.Rate)))
		if i+1 < len(ours) && s.microsPerEvent(s.CPU.Relay) > perEventRiseMargin*ours[i+1].microsPerEvent(ours[i+1].CPU.Relay) {
			met = false
		}
	}
	return append(ts, Target{
		Name:     "outboxd CPU per event as the rate falls",
		Want:     fmt.Sprintf("no rise (each rate within %.1f× of the next higher one's)", perEventRiseMargin),
		Measured: strings.Join(measured, ", "),
		Met:      met && len(ours) > 1,
	})
}

// WriteTable writes the results as Markdown tables, the form the README
// shows.
func (r *Results) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "Backlog drains, events/s (median of %d runs); ratios are outboxd / limit:\n\n", r.Settings.Runs)
	fmt.Fprintln(w, "| backlog | rows/tx | decode limit (pg_recvlogical) | broker limit async / fast | outboxd → JetStream | ÷ min(limits) | outboxd → null sink | ÷ decode | outboxd peak RSS | CPU cores pg / nats / outboxd / whole machine |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.Backlogs {
		b := r.broker(c.Size)
		fmt.Fprintf(w, "| %s | %d | %s | %s / %s | %s | %.2f | %s | %.2f | %.1f MiB | %.2f / %.2f / %.2f / %.2f |\n",
			count(c.Size), c.Shape, count(int(c.DecodeRate)), count(int(b.AsyncRate)), count(int(b.FastRate)),
			count(int(c.OutboxdRate)), c.OutboxdRate/min(c.DecodeRate, b.Limit()),
			count(int(c.NullRate)), c.NullRate/c.DecodeRate,
			float64(c.PeakRSS)/mib, c.CPU.Postgres, c.CPU.NATSServer, c.CPU.Relay, c.CPU.Machine)
	}
	r.writeCPUBudget(w)
	if len(r.Durable) > 0 {
		fmt.Fprint(w, "\nDurable mode: outboxd into nats-server with sync_interval: always (an fsync per write) beside the default server, same backlog, events/s:\n\n")
		fmt.Fprintln(w, "| backlog | rows/tx | default server | sync always | cost | broker limit (async) with sync always |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
		for _, c := range r.Durable {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %.1f× slower | %s |\n", count(c.Size), c.Shape,
				count(int(c.DefaultRate)), count(int(c.DurableRate)), c.DefaultRate/c.DurableRate, count(int(c.BrokerAsyncRate)))
		}
	}
	for _, p := range r.Polling {
		fmt.Fprintf(w, "\nPolling relay drain of %s events (LIMIT %d, every %.0f ms when short of a batch): %s events/s, "+
			"CPU cores pg / nats / relay / whole machine %.2f / %.2f / %.2f / %.2f.\n",
			count(p.Size), r.Settings.PollBatch, r.Settings.PollIntervalMS, count(int(p.Rate)),
			p.CPU.Postgres, p.CPU.NATSServer, p.CPU.Relay, p.CPU.Machine)
	}
	if len(r.Steady) > 0 {
		fmt.Fprintf(w, "\nSteady state, %.0f s of one-row transactions per run (median of %d runs). Latency at a JetStream consumer, from the commit time in the transaction's Begin message (commit→consumer; for the polling relay, which has none, the row's created_at: the transaction's start) and from the clock_timestamp() of the INSERT inside the transaction (insert→consumer: what a user sees, the commit and its fsync included); CPU per event is the process's CPU time over the run ÷ events achieved:\n\n",
			r.Settings.LatencySeconds, r.Settings.Runs)
		fmt.Fprintln(w, "| relay | offered/s | achieved/s | commit→consumer p50 / p99 / p99.9 / max ms | insert→consumer p50 / p99 / p99.9 ms | outboxd's histogram p99 | backlog at end | PG statements/s | PG rows scanned/s | PG rows updated/s | CPU cores pg / nats / relay / whole machine (of it stolen) | CPU µs per event relay / nats | run-queue wait s/s pg / nats / relay |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range r.Steady {
			backlog := fmt.Sprintf("%s B slot lag", count(int(s.LagBytes)))
			if s.Relay == relayPolling {
				backlog = fmt.Sprintf("%s unsent rows", count(int(s.Unsent)))
			}
			if s.Undelivered > 0 {
				backlog += fmt.Sprintf("; %s events still undelivered 2 min after the load (latencies cover those delivered)", count(s.Undelivered))
			}
			hist := "—"
			if s.HistogramP99 > 0 {
				hist = fmt.Sprintf("≤ %g ms", s.HistogramP99)
			}
			inserted := "—"
			if s.InsertLatency.P50 > 0 {
				inserted = fmt.Sprintf("%.1f / %.1f / %.1f", s.InsertLatency.P50, s.InsertLatency.P99, s.InsertLatency.P999)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.1f / %.1f / %.1f / %.1f | %s | %s | %s | %.1f | %s | %s | %.2f / %.2f / %.2f / %.2f (%.2f) | %.0f / %.0f | %.2f / %.2f / %.2f |\n",
				s.Relay, count(s.Rate), count(int(s.Achieved)), s.Latency.P50, s.Latency.P99, s.Latency.P999, s.Latency.Max, inserted,
				hist, backlog, s.PGLoad.StatementsPerSec, count(int(s.PGLoad.RowsScannedPerSec)), count(int(s.PGLoad.RowsUpdatedPerSec)),
				s.CPU.Postgres, s.CPU.NATSServer, s.CPU.Relay, s.CPU.Machine, s.CPU.Stolen,
				s.microsPerEvent(s.CPU.Relay), s.microsPerEvent(s.CPU.NATSServer),
				s.CPU.Waiting.Postgres, s.CPU.Waiting.NATSServer, s.CPU.Waiting.Relay)
		}
	}
	fmt.Fprintln(w, "\nTargets:\n\n| target | wanted | measured | met |\n|---|---|---|---|")
	for _, t := range r.Targets {
		met := "not met"
		if t.Met {
			met = "met"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Name, t.Want, t.Measured, met)
	}
	fmt.Fprintf(w, "\nMachine: %d CPUs, load average at start %s, at end %s; PostgreSQL %s, nats-server %s, nats CLI %s.\n",
		r.Machine.CPUs, r.Machine.LoadAtStart, r.Machine.LoadAtEnd, r.Machine.PostgreSQL, r.Machine.NATSServer, r.Machine.NATSCLI)
}

// count writes n with thousands separators: 1234567 → 1,234,567.
func count(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + count(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// steady returns the steady-state case of relay at rate, nil if none.
func (r *Results) steady(relay string, rate int) *SteadyCase {
	for i := range r.Steady {
		if r.Steady[i].Relay == relay && r.Steady[i].Rate == rate {
			return &r.Steady[i]
		}
	}
	return nil
}

// writeCPUBudget writes what each event costs each process in CPU time, in
// the limits and in outboxd's drain into JetStream, and how many cores the
// drain target needs at the drain's costs: where that is more than the
// machine has, the target cannot be met with the three sharing it.
func (r *Results) writeCPUBudget(w io.Writer) {
	fmt.Fprintf(w, "\nCPU time per event, µs (medians), and the cores the drain target needs at the drain's costs (this machine: %d):\n\n", r.Machine.CPUs)
	fmt.Fprintln(w, "| backlog | rows/tx | PG in the decode limit | nats-server in the broker limit async / fast | outboxd → JetStream: PG / nats-server / outboxd | drain target | cores it needs |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.Backlogs {
		b := r.broker(c.Size)
		decodePG := medianOf(c.Decode, func(d drain) float64 { return micros(d.CPU.Postgres, d.EventsPerSec) })
		pg, nats, relay := micros(c.CPU.Postgres, c.OutboxdRate), micros(c.CPU.NATSServer, c.OutboxdRate), micros(c.CPU.Relay, c.OutboxdRate)
		target := drainTarget * min(c.DecodeRate, b.Limit())
		fmt.Fprintf(w, "| %s | %d | %.1f | %.1f / %.1f | %.1f / %.1f / %.1f | %s/s | %.2f |\n",
			count(c.Size), c.Shape, decodePG, b.AsyncNATSMicros, b.FastNATSMicros, pg, nats, relay,
			count(int(target)), target*(pg+nats+relay)/1e6)
	}
}

// micros is the CPU time per event, µs, of a group busy cores at rate
// events/s.
func micros(cores, rate float64) float64 {
	if rate <= 0 {
		return 0
	}
	return cores / rate * 1e6
}
