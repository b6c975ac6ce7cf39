package statuspage

import (
	_ "embed"
	"encoding/json"
	"net/http"

	"github.com/outboxd/outboxd/internal/telemetry"
)

//go:embed assets/index.html
var indexHTML []byte

// status is what /status.json answers.
type status struct {
	Now        telemetry.Snapshot `json:"now"`
	IntervalMS int64              `json:"interval_ms"`
	WindowMS   int64              `json:"window_ms"`
	Samples    []Sample           `json:"samples"`
}

// Handler serves the page at / and its data at /status.json. now gives
// the current state; r the history.
func Handler(now func() telemetry.Snapshot, r *Recorder) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// Everything is inline: nothing else may load.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		w.Write(indexHTML) //nolint:errcheck // the client went away
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(status{ //nolint:errcheck // the client went away
			Now:        now(),
			IntervalMS: r.interval.Milliseconds(),
			WindowMS:   r.interval.Milliseconds() * int64(len(r.ring)),
			Samples:    r.Samples(),
		})
	})
	return mux
}
