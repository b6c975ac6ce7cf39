package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/replication"
)

// TestConfigValidate: the defaults are valid, and each bad setting is
// refused with its flag, the value and what is accepted.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	withRetention := func(c *Config) { c.Retention.On = true }
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // empty: valid
	}{
		{"messages only", func(c *Config) { c.Table = replication.Table{} }, ""},
		{"nothing to publish", func(c *Config) { c.Table, c.Messages = replication.Table{}, false }, "--table is empty and --messages=false"},
		{"no subject", func(c *Config) { c.Subject = nil }, "--subject is not set"},
		{"no stream", func(c *Config) { c.Stream = "" }, "--stream is empty"},
		{"bad slot", func(c *Config) { c.Slot = "Outbox-1" }, "--slot"},
		{"max-in-flight 0", func(c *Config) { c.MaxInFlight = 0 }, "--max-in-flight 0 is out of range: use 1 to 65536"},
		{"max-in-flight 65537", func(c *Config) { c.MaxInFlight = 65537 }, "--max-in-flight 65537 is out of range"},
		{"max-in-flight 65536", func(c *Config) { c.MaxInFlight = 65536 }, ""},
		{"publish-linger 0", func(c *Config) { c.PublishLinger = 0 }, "--publish-linger 0s is out of range: use 100µs to 100ms"},
		{"publish-linger 1s", func(c *Config) { c.PublishLinger = time.Second }, "--publish-linger 1s is out of range"},
		{"read-linger negative", func(c *Config) { c.ReadLinger = -time.Millisecond }, "--read-linger -1ms is out of range"},
		{"read-linger 0", func(c *Config) { c.ReadLinger = 0 }, ""},
		{"publish mode", func(c *Config) { c.PublishMode = "sync" }, `--publish-mode "sync" is not a mode: use auto, fast or async`},
		{"fast and exclusive", func(c *Config) { c.PublishMode, c.Exclusive = PublishFast, true }, "cannot be combined with --exclusive-stream"},
		{"async and exclusive", func(c *Config) { c.PublishMode, c.Exclusive = PublishAsync, true }, ""},
		{"status-interval", func(c *Config) { c.StatusInterval = 5 * time.Minute }, "--status-interval 5m0s is out of range: use 10ms to 1m"},
		{"checkpoint-interval", func(c *Config) { c.CheckpointInterval = time.Millisecond }, "--checkpoint-interval 1ms is out of range"},
		{"standby-retry", func(c *Config) { c.StandbyRetry = 0 }, "--standby-retry 0s is out of range: use 100ms to 1m"},
		{"heartbeat off", func(c *Config) { c.Heartbeat = 0 }, ""},
		{"heartbeat too often", func(c *Config) { c.Heartbeat = 10 * time.Millisecond }, "--heartbeat-interval 10ms is out of range: use 0 (off) or 1s to 1h"},
		{"shutdown-timeout", func(c *Config) { c.ShutdownTimeout = 0 }, "--shutdown-timeout 0s must be positive"},
		{"retention 0s", withRetention, ""},
		{"retention without a table", func(c *Config) { withRetention(c); c.Table = replication.Table{} }, "there is no table to delete from"},
		{"retention with the null sink", func(c *Config) { withRetention(c); c.NullSink = true }, "never published"},
		{"retention age without created_at", func(c *Config) {
			c.Retention.On, c.Retention.Age = true, 24*time.Hour
			c.Columns = decoder.Columns{ID: "Id", Payload: "Content"}
		}, "--retention 24h needs the rows' age"},
		{"retention-batch", func(c *Config) { withRetention(c); c.Retention.Batch = 0 }, "--retention-batch 0 is out of range: use 1 to 100000"},
		{"retention-pause", func(c *Config) { withRetention(c); c.Retention.Pause = time.Millisecond }, "--retention-pause 1ms is out of range"},
		{"retention-wait", func(c *Config) { withRetention(c); c.Retention.Wait = 2 * time.Hour }, "--retention-wait 2h0m0s is out of range"},
		{"created-at-zone", func(c *Config) { withRetention(c); c.Retention.CreatedAtZone = " " }, "--created-at-zone is empty"},
		{"retention off ignores its ranges", func(c *Config) { c.Retention.Batch = 0 }, ""},
		{"null-payload skip", func(c *Config) { c.NullPayload = NullPayloadSkip }, ""},
		{"null-payload empty", func(c *Config) { c.NullPayload = NullPayloadEmpty }, ""},
		{"null-payload unset is stop", func(c *Config) { c.NullPayload = "" }, ""},
		{"null-payload unknown", func(c *Config) { c.NullPayload = "drop" }, `--null-payload "drop" is not a policy: use stop, skip or empty`},
		{"id-prefix", func(c *Config) { c.IDPrefix = "sales-db1:" }, ""},
		{"id-prefix 64 bytes", func(c *Config) { c.IDPrefix = strings.Repeat("p", 64) }, ""},
		{"id-prefix too long", func(c *Config) { c.IDPrefix = strings.Repeat("p", 65) }, "--id-prefix \"ppp"},
		{"id-prefix with a space", func(c *Config) { c.IDPrefix = "db 1:" }, `--id-prefix "db 1:" is not a usable prefix: use up to 64 bytes without white space or control characters`},
		{"id-prefix with a line break", func(c *Config) { c.IDPrefix = "db1\r\nNats-Msg-Id: x" }, "--id-prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestShortDuration writes durations as users write them.
func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 0: "0s", time.Second: "1s", 1500 * time.Millisecond: "1.5s",
		time.Hour + time.Second: "1h0m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestSinkConfig: run and backfill publish through one configuration, which
// carries every publishing setting (backfill once ignored --publish-linger).
func TestSinkConfig(t *testing.T) {
	c := DefaultConfig()
	c.Stream, c.MaxInFlight, c.DeadLetter, c.Exclusive = "ORDERS", 7, "outbox.dead", true
	c.PublishLinger, c.LogPayloads = 3*time.Millisecond, true
	got := c.sinkConfig(publishing{fast: true, atomic: true}, nil, zerolog.Nop())
	if got.Stream != "ORDERS" || got.Subject != c.Subject || got.MaxInFlight != 7 || got.DeadLetter != "outbox.dead" ||
		!got.Exclusive || !got.Fast || !got.Atomic || got.Linger != 3*time.Millisecond || !got.LogPayloads {
		t.Errorf("sinkConfig = %+v, want every setting of %+v", got, c)
	}
}
