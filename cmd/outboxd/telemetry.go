package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/statuspage"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/relay"
)

// observability is what outboxd shows on --metrics-addr: metrics, health
// and the status page. The metrics and health are always kept (they cost
// a few atomic adds); the server and the probe run only with an address.
type observability struct {
	metrics *telemetry.Metrics
	health  *telemetry.Health
	// tasks serve and probe until their context is done; none without
	// --metrics-addr.
	tasks []func(context.Context) error
}

// newObservability listens on --metrics-addr, so a busy port stops
// outboxd at once with an error that names it; only the default address
// gives way to a free port (telemetry.Listen).
func newObservability(cfg runConfig, log zerolog.Logger) (*observability, error) {
	o := &observability{metrics: telemetry.NewMetrics(cfg.Stream)}
	o.health = telemetry.NewHealth(o.metrics)
	if cfg.MetricsAddr == "" {
		return o, nil
	}
	ln, fellBack, err := telemetry.Listen(cfg.MetricsAddr, !cfg.metricsAddrSet)
	if err != nil {
		return nil, err
	}
	if fellBack {
		log.Warn().Str("component", "telemetry").Str("addr", ln.Addr().String()).Str("default", cfg.MetricsAddr).
			Msg("the default metrics address is in use (another outboxd on this host?): serving on a free port instead; set --metrics-addr to choose one")
	} else {
		log.Info().Str("component", "telemetry").Str("addr", ln.Addr().String()).
			Msg("serving metrics, health and the status page")
	}
	history := statuspage.NewRecorder(o.health.Snapshot, statuspage.DefaultInterval, statuspage.DefaultWindow)
	page := statuspage.Handler(o.health.Snapshot, history)
	o.tasks = []func(context.Context) error{
		func(ctx context.Context) error { return telemetry.Serve(ctx, ln, telemetry.Handler(o.health, page)) },
		history.Run,
		relay.SlotProbe(cfg.PGURL, cfg.Slot, o.metrics, log.With().Str("component", "telemetry").Str("slot", cfg.Slot).Logger()),
	}
	return o, nil
}
