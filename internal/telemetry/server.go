package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics, /healthz and /readyz, and everything else
// with page (the status page; nil for none).
//
// /healthz answers 200 while the process runs. /readyz answers 200 when
// the relay streams or stands by with NATS connected (Health.Ready), else
// 503; the body says why in one line either way.
func Handler(h *Health, page http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.metrics.registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, reason := h.Ready()
		if ready {
			plain(w, http.StatusOK, "ready: "+reason)
			return
		}
		plain(w, http.StatusServiceUnavailable, "not ready: "+reason)
	})
	if page != nil {
		mux.Handle("/", page)
	}
	return mux
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}

// Serve serves handler on ln until ctx is done, then shuts down, giving
// requests in progress a second to finish. It closes ln.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	errC := make(chan error, 1)
	go func() { errC <- srv.Serve(ln) }()
	select {
	case err := <-errC:
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close() //nolint:errcheck // already failing to shut down gracefully
	}
	if err := <-errC; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	}
	return nil
}
