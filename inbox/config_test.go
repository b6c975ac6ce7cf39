package inbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/inbox"
)

// validConfig passes Validate; each case below breaks one thing.
func validConfig() inbox.Config {
	return inbox.Config{Name: "billing", Stream: "OUTBOX", Table: "inbox", Partitions: 8,
		DeadLetter: "inbox.dead-letter.billing", Handler: writeEffect}
}

// TestValidate: each bad value is refused with its field, the value and
// the fix.
func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*inbox.Config)
		wantErr string // "" for valid
	}{
		{name: "valid", change: func(*inbox.Config) {}},
		{name: "schema-qualified table", change: func(c *inbox.Config) { c.Table = "billing.inbox" }},
		{name: "one partition", change: func(c *inbox.Config) { c.Partitions = 1 }},
		{name: "no name", change: func(c *inbox.Config) { c.Name = "" },
			wantErr: `Name "" is empty: set it to the consumer's name`},
		{name: "name with a dot", change: func(c *inbox.Config) { c.Name = "bill.ing" },
			wantErr: `Name "bill.ing" is not a usable name: use up to 200 letters, digits, - and _`},
		{name: "no stream", change: func(c *inbox.Config) { c.Stream = "" },
			wantErr: `Stream "" is empty: name the stream`},
		{name: "no table", change: func(c *inbox.Config) { c.Table = "" },
			wantErr: `Table "" is not a table name: name the inbox table as table or schema.table`},
		{name: "three-part table", change: func(c *inbox.Config) { c.Table = "db.billing.inbox" },
			wantErr: `Table "db.billing.inbox" is not a table name`},
		{name: "no handler", change: func(c *inbox.Config) { c.Handler = nil },
			wantErr: "Handler nil is not set"},
		{name: "zero partitions", change: func(c *inbox.Config) { c.Partitions = 0 },
			wantErr: "Partitions 0 is out of range 1 to 1024: set it to the N of the stream's {{partition(N,...)}} subject transform"},
		{name: "too many partitions", change: func(c *inbox.Config) { c.Partitions = 5000 },
			wantErr: "Partitions 5000 is out of range 1 to 1024"},
		{name: "no dead letter", change: func(c *inbox.Config) { c.DeadLetter = "" },
			wantErr: `DeadLetter "" is not a plain subject: use a subject without wildcards`},
		{name: "dead letter with wildcard", change: func(c *inbox.Config) { c.DeadLetter = "dead.>" },
			wantErr: `DeadLetter "dead.>" is not a plain subject`},
		{name: "dead letter the workers would read", change: func(c *inbox.Config) { c.DeadLetter = "outbox.dead.billing" },
			wantErr: `DeadLetter "outbox.dead.billing" matches Subject "outbox.*.*": choose a subject outside it`},
		{name: "subject with >", change: func(c *inbox.Config) { c.Subject = "outbox.>" },
			wantErr: `Subject "outbox.>" is not a pattern of whole tokens: use literal tokens and * only, no >`},
		{name: "subject without wildcard", change: func(c *inbox.Config) { c.Subject = "outbox.order" },
			wantErr: `Subject "outbox.order" has no wildcard`},
		{name: "key out of range", change: func(c *inbox.Config) { c.Key = []int{3} },
			wantErr: `Key [3] is not a set of wildcard positions of "outbox.*.*": list distinct positions from 1 to 2`},
		{name: "key repeated", change: func(c *inbox.Config) { c.Key = []int{2, 2} },
			wantErr: "Key [2 2] is not a set of wildcard positions"},
		{name: "negative attempts", change: func(c *inbox.Config) { c.MaxAttempts = -1 },
			wantErr: "MaxAttempts -1 is below 1: use 0 (default 5) or more"},
		{name: "ack wait too short", change: func(c *inbox.Config) { c.AckWait = time.Millisecond },
			wantErr: "AckWait 1ms is below 100ms"},
		{name: "negative retention", change: func(c *inbox.Config) { c.Retention = -time.Hour },
			wantErr: "Retention -1h0m0s is negative"},
		{name: "negative retention interval", change: func(c *inbox.Config) { c.RetentionInterval = -time.Second },
			wantErr: "RetentionInterval -1s is negative"},
		{name: "zero backoff", change: func(c *inbox.Config) { c.Backoff = []time.Duration{time.Second, 0} },
			wantErr: "Backoff [1s 0s] has 0s at index 1: use positive waits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			checkErr(t, err, tt.wantErr)
		})
	}
}

// checkErr fails t unless err is nil for want "", or a *ConfigError
// whose text holds want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return
	}
	var cfgErr *inbox.ConfigError
	if !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want a *ConfigError containing %q", err, want)
	}
}

// TestTransform: the transform that Config gives the operator, and that
// the server takes, for the default layout and for one whose key is one
// token of three.
func TestTransform(t *testing.T) {
	tests := []struct {
		name string
		cfg  inbox.Config
		want jetstream.SubjectTransformConfig
	}{
		{name: "default", cfg: inbox.Config{Partitions: 8},
			want: jetstream.SubjectTransformConfig{Source: "outbox.*.*", Destination: "outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(8,1,2)}}"}},
		{name: "event type in the subject, keyed by the id", cfg: inbox.Config{Subject: "app.outbox.*.*.*", Key: []int{2}, Partitions: 16},
			want: jetstream.SubjectTransformConfig{Source: "app.outbox.*.*.*", Destination: "app.outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(16,2)}}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Transform(); got != tt.want {
				t.Errorf("Transform() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestHorizon: the longest of the duplicate window, the stream's max age
// and the redelivery span.
func TestHorizon(t *testing.T) {
	tests := []struct {
		name   string
		cfg    inbox.Config
		stream jetstream.StreamConfig
		want   time.Duration
	}{
		// Defaults: 6 deliveries of 30s, waits 1s+5s+30s+1m+1m.
		{name: "defaults, outboxd's stream", stream: jetstream.StreamConfig{Duplicates: 2 * time.Minute}, want: 3*time.Minute + 2*time.Minute + 36*time.Second},
		{name: "long duplicate window", stream: jetstream.StreamConfig{Duplicates: time.Hour}, want: time.Hour},
		{name: "max age", stream: jetstream.StreamConfig{Duplicates: 2 * time.Minute, MaxAge: 7 * 24 * time.Hour}, want: 7 * 24 * time.Hour},
		{name: "short retries", cfg: inbox.Config{MaxAttempts: 2, AckWait: time.Second, Backoff: []time.Duration{time.Second}},
			stream: jetstream.StreamConfig{Duplicates: time.Second}, want: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Horizon(tt.stream); got != tt.want {
				t.Errorf("Horizon = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestNewChecksTheServers: what Validate cannot know is checked by New
// against the stream and the database, each with the fix.
func TestNewChecksTheServers(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 8, duplicates: 2 * time.Minute})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tests := []struct {
		name    string
		change  func(*inbox.Config)
		db      inbox.DB
		wantErr string
	}{
		{name: "valid", change: func(*inbox.Config) {}},
		{name: "one worker reads every partition", change: func(c *inbox.Config) { c.Name = "audit"; c.Partitions = 1 }},
		{name: "no stream", change: func(c *inbox.Config) { c.Stream = "ORDERS" },
			wantErr: `Stream "ORDERS" does not exist: name the stream outboxd publishes to`},
		{name: "partitions differ from the stream's", change: func(c *inbox.Config) { c.Partitions = 4 },
			wantErr: `Partitions 4 does not match stream OUTBOX's transform to "outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(8,1,2)}}" (want "outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(4,1,2)}}")`},
		{name: "no transform for the subject", change: func(c *inbox.Config) { c.Subject = "outbox.*.*.*" },
			wantErr: `Stream "OUTBOX" has no subject transform from "outbox.*.*.*" that adds the partition token 8 partitions need: nats stream edit OUTBOX --transform-source 'outbox.*.*.*' --transform-destination 'outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(8,1,2,3)}}'`},
		{name: "retention within the horizon", change: func(c *inbox.Config) { c.Retention = time.Minute },
			wantErr: "Retention 1m0s is not longer than the redelivery horizon 2m0s (stream OUTBOX: duplicate window 2m0s"},
		{name: "retention past the horizon", change: func(c *inbox.Config) { c.Retention = 24 * time.Hour }},
		{name: "dead letters stored nowhere", change: func(c *inbox.Config) { c.DeadLetter = "nowhere.billing" },
			wantErr: `DeadLetter "nowhere.billing" is captured by no stream: create one (nats stream add DEAD_LETTER --subjects 'nowhere.billing'`},
		{name: "no inbox table", change: func(c *inbox.Config) { c.Table = "missing" },
			wantErr: `Table "missing" does not exist: create it with inbox.CreateTable`},
		{name: "not an inbox table", change: func(c *inbox.Config) { c.Table = "effects" },
			wantErr: `Table "effects" lacks a column of the inbox`},
		{name: "one connection for eight workers", db: conn, change: func(*inbox.Config) {},
			wantErr: "DB *pgx.Conn runs one statement at a time, too few for 8 workers: pass a *pgxpool.Pool"},
		{name: "one connection for a worker and retention", db: conn, change: func(c *inbox.Config) { c.Partitions = 1; c.Retention = time.Hour },
			wantErr: "DB *pgx.Conn runs one statement at a time, too few for a worker and retention: pass a *pgxpool.Pool"},
		{name: "one connection for one worker", db: conn, change: func(c *inbox.Config) { c.Name = "single"; c.Partitions = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := e.config(8)
			// A redelivery span of 21s: the horizon is the 2m window.
			cfg.MaxAttempts, cfg.AckWait, cfg.Backoff = 1, 10*time.Second, []time.Duration{time.Second}
			tt.change(&cfg)
			db := tt.db
			if db == nil {
				db = e.pool
			}
			_, err := inbox.New(ctx, e.js, db, cfg)
			checkErr(t, err, tt.wantErr)
		})
	}
}

// TestNewRefusesAnotherLayout: durable consumers made for one partition
// count are not silently moved to another, which would skip or reorder
// the messages between their positions.
func TestNewRefusesAnotherLayout(t *testing.T) {
	e := newEnv(t, envOptions{partitions: 1})
	ctx := context.Background()
	cfg := e.config(1)
	if _, err := inbox.New(ctx, e.js, e.pool, cfg); err != nil {
		t.Fatal(err)
	}
	tr := cfg.Transform()
	tr.Destination = strings.Replace(tr.Destination, "partition(1,", "partition(2,", 1)
	stream, err := e.js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	scfg := stream.CachedInfo().Config
	scfg.SubjectTransform = &tr
	if _, err := e.js.UpdateStream(ctx, scfg); err != nil {
		t.Fatal(err)
	}
	cfg.Partitions = 2
	_, err = inbox.New(ctx, e.js, e.pool, cfg)
	checkErr(t, err, `Partitions 2 gives durable consumer billing-0 the filter "outbox.*.*.0", but it has "outbox.*.*" from another layout: keep Subject and Partitions as they were, or let the old consumers catch up`)
}
