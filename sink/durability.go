package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CheckDurability warns when messages JetStream acknowledged could still be
// lost on a power failure: a single-replica stream on a server that does not
// fsync every write (sync_interval: always). The server's setting is read
// from its monitoring endpoint (monitorURL + "/jsz"); without a monitoring
// URL a single-replica stream gets a warning that the setting is unknown.
func CheckDurability(ctx context.Context, js jetstream.JetStream, stream, monitorURL string) ([]string, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("read stream %q: %w", stream, err)
	}
	if s.CachedInfo().Config.Replicas > 1 {
		return nil, nil
	}
	fix := "use an R3 stream on a JetStream cluster, or set `jetstream { sync_interval: always }` in the server's configuration (every write then waits for fsync)"
	if monitorURL == "" {
		return []string{fmt.Sprintf("stream %q has a single replica and outboxd cannot see whether the server fsyncs every write (set --nats-monitor-url to check): "+
			"with the default sync_interval of 2m, messages JetStream acknowledged can be lost on power failure; %s", stream, fix)}, nil
	}
	always, interval, err := serverSync(ctx, monitorURL)
	if err != nil {
		return nil, err
	}
	if always {
		return nil, nil
	}
	return []string{fmt.Sprintf("stream %q has a single replica on a server whose sync_interval is %s, not always: messages JetStream acknowledged can be lost on power failure; %s",
		stream, interval, fix)}, nil
}

// serverSync reads the JetStream sync settings from a server's /jsz.
func serverSync(ctx context.Context, monitorURL string) (always bool, interval string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := strings.TrimSuffix(monitorURL, "/") + "/jsz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, "", fmt.Errorf("--nats-monitor-url %q: %w", monitorURL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, "", fmt.Errorf("read JetStream settings from %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, "", fmt.Errorf("read JetStream settings from %s: HTTP %s", url, resp.Status)
	}
	var jsz struct {
		Config struct {
			SyncInterval time.Duration `json:"sync_interval"`
			SyncAlways   bool          `json:"sync_always"`
		} `json:"config"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return false, "", fmt.Errorf("read JetStream settings from %s: %w", url, err)
	}
	interval = "the default (2m)"
	if jsz.Config.SyncInterval > 0 {
		interval = jsz.Config.SyncInterval.String()
	}
	return jsz.Config.SyncAlways, interval, nil
}
