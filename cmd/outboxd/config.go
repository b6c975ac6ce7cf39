package main

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/relay/natsconn"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// The --sink values.
const (
	sinkJetStream = "jetstream"
	sinkNull      = "null" // benchmarks: acknowledge without publishing
)

// retentionOff is the --retention value that turns the job off (default).
const retentionOff = "off"

// runConfig is every setting of `outboxd run`, parsed and checked.
type runConfig struct {
	PGURL           string
	NATSURL         string
	NATSMonitorURL  string
	Stream          string
	Slot            string
	Publication     string
	Table           string
	Messages        bool
	Columns         string
	HeadersFormat   string
	IDPrefix        string
	NullPayload     string
	Subject         string
	Checkpoint      string
	CreateStream    bool
	DeadLetter      string
	Exclusive       bool
	AllowGap        bool
	SlotFailover    bool
	MaxInFlight     int
	PublishLinger   time.Duration
	ReadLinger      time.Duration
	PublishMode     string
	Atomic          string
	StatusInterval  time.Duration
	CheckpointEvery time.Duration
	ShutdownTimeout time.Duration
	StandbyRetry    time.Duration
	Heartbeat       time.Duration
	StreamCheck     time.Duration
	Retention       string
	RetentionBatch  int
	RetentionPause  time.Duration
	RetentionWait   time.Duration
	CreatedAtZone   string
	PGStreaming     bool
	SpoolDir        string
	LogLevel        string
	LogPayloads     bool
	MetricsAddr     string
	// Benchmark-only, hidden from --help.
	Sink       string
	CPUProfile string
	// Trace is the benchmarks-only runtime/trace output file.
	Trace string

	// NATS authentication and TLS; see resolveNATSAuth.
	NATSContext  string
	NATSCreds    string
	NATSNkey     string
	NATSUser     string
	NATSPassword string
	NATSToken    string
	NATSTLSCA    string
	NATSTLSCert  string
	NATSTLSKey   string

	// natsURLSet reports that --nats-url was given (flag or environment),
	// so it wins over the URL of a --nats-context.
	natsURLSet bool
	// metricsAddrSet reports that --metrics-addr was given: an address the
	// operator chose is never replaced by a free port.
	metricsAddrSet bool

	// levelFromFile re-reads the log level from the config file, or is nil
	// when there is no file or a flag or the environment sets the level.
	levelFromFile func() (string, error)

	// Parsed forms, set by validate: the NATS credentials, and the
	// relay's configuration.
	natsAuth natsconn.Auth
	relay    relay.Config
}

// defaultRunConfig is the relay's defaults in their flag forms.
func defaultRunConfig() runConfig {
	d := relay.DefaultConfig()
	return runConfig{
		PGURL:           d.PGURL,
		NATSURL:         "nats://127.0.0.1:4222",
		Stream:          d.Stream,
		Slot:            d.Slot,
		Publication:     d.Publication,
		Table:           d.Table.Schema + "." + d.Table.Name,
		Messages:        d.Messages,
		Columns:         d.Columns.String(),
		HeadersFormat:   "json",
		NullPayload:     string(d.NullPayload),
		Subject:         relay.DefaultSubject,
		Checkpoint:      d.Checkpoint.String(),
		MaxInFlight:     d.MaxInFlight,
		PublishLinger:   d.PublishLinger,
		ReadLinger:      d.ReadLinger,
		PublishMode:     string(d.PublishMode),
		Atomic:          string(d.AtomicTransactions),
		StreamCheck:     d.StreamCheck,
		StatusInterval:  d.StatusInterval,
		CheckpointEvery: d.CheckpointInterval,
		ShutdownTimeout: d.ShutdownTimeout,
		StandbyRetry:    d.StandbyRetry,
		Retention:       retentionOff,
		RetentionBatch:  d.Retention.Batch,
		RetentionPause:  d.Retention.Pause,
		RetentionWait:   d.Retention.Wait,
		CreatedAtZone:   d.Retention.CreatedAtZone,
		PGStreaming:     d.PGStreaming,
		SlotFailover:    d.SlotFailover,
		LogLevel:        "info",
		MetricsAddr:     telemetry.DefaultAddr,
		Sink:            sinkJetStream,
	}
}

func (c *runConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.PGURL, "pg-url", c.PGURL, "PostgreSQL URL of the database holding the outbox table (the role needs REPLICATION)")
	fs.Var(&trackedString{value: &c.NATSURL, set: &c.natsURLSet}, "nats-url", "NATS server URL(s), comma-separated (if not given, the url of the --nats-context, if any)")
	fs.StringVar(&c.NATSContext, "nats-context", c.NATSContext, "nats CLI context to read the URL, credentials and TLS files from ($XDG_CONFIG_HOME/nats/context/NAME.json or ~/.config/nats/context/NAME.json); the --nats-* flags given explicitly win")
	fs.StringVar(&c.NATSCreds, "nats-creds", c.NATSCreds, "NATS user credentials file (JWT and nkey seed, from nsc)")
	fs.StringVar(&c.NATSNkey, "nats-nkey", c.NATSNkey, "NATS nkey seed file (a user seed, SU...)")
	fs.StringVar(&c.NATSUser, "nats-user", c.NATSUser, "NATS user name (its password in --nats-password)")
	fs.StringVar(&c.NATSPassword, "nats-password", c.NATSPassword, "NATS password of --nats-user; prefer the environment variable, which keeps it out of the process list")
	fs.StringVar(&c.NATSToken, "nats-token", c.NATSToken, "NATS authentication token; prefer the environment variable, which keeps it out of the process list")
	fs.StringVar(&c.NATSTLSCA, "nats-tls-ca", c.NATSTLSCA, "PEM file of the CA certificates that sign the NATS server's certificate (default: the system's)")
	fs.StringVar(&c.NATSTLSCert, "nats-tls-cert", c.NATSTLSCert, "PEM client certificate for NATS TLS authentication (its key in --nats-tls-key)")
	fs.StringVar(&c.NATSTLSKey, "nats-tls-key", c.NATSTLSKey, "PEM private key of --nats-tls-cert")
	fs.StringVar(&c.NATSMonitorURL, "nats-monitor-url", c.NATSMonitorURL, "NATS monitoring URL (e.g. http://127.0.0.1:8222), read at start to check that a single-replica stream's server fsyncs every write")
	fs.StringVar(&c.Stream, "stream", c.Stream, "JetStream stream the events are published to")
	fs.StringVar(&c.Slot, "slot", c.Slot, "logical replication slot (created with pgoutput if missing)")
	fs.StringVar(&c.Publication, "publication", c.Publication, "publication that holds the outbox table")
	fs.StringVar(&c.Table, "table", c.Table, "outbox table, schema.table (quote mixed-case names: '\"Sales\".\"Outbox\"'); empty: no table, only logical-message events (needs --messages)")
	fs.BoolVar(&c.Messages, "messages", c.Messages, "publish the events emitted as transactional logical decoding messages with prefix 'outbox' (outbox_emit_message, the Go outbox package's message mode); --messages=false leaves them alone")
	fs.StringVar(&c.Columns, "columns", c.Columns, "outboxd's fields mapped to the table's columns, field=column,... (fields: "+strings.Join(decoder.FieldNames, ", ")+
		"; id and payload are required, a field left out is not read; column names are exact and case-sensitive; payload and headers may read part of a JSON column: payload=Content->Value,headers=Content->Headers; header.NAME=column makes a header of a column: header.Content-Type=ContentType)")
	fs.StringVar(&c.HeadersFormat, "headers-format", c.HeadersFormat, "how the headers column is written: json (a JSON object) or properties (Java properties text, key=value lines, e.g. Debezium's tracingspancontext)")
	fs.StringVar(&c.IDPrefix, "id-prefix", c.IDPrefix, "put this before every message id (Nats-Msg-Id, and the id in dead letters, errors and logs), so that the ids of two tables or databases publishing to one stream, integer ids say, stay apart in its duplicate window (e.g. sales-db1:)")
	fs.StringVar(&c.NullPayload, "null-payload", c.NullPayload, "what a row whose payload is NULL becomes: stop (a row that cannot be published: --dead-letter, else outboxd stops), skip (not published; counted and logged), empty (published with an empty body and Outbox-Null-Payload: true, e.g. Debezium's tombstones)")
	fs.StringVar(&c.Subject, "subject", c.Subject, "subject template; {name} is replaced by the row's value of that column, or of the field mapped by --columns (e.g. {event_type}), passed through the transforms after pipes: last(SEP), first(SEP), safe, lower, tokens (e.g. {TypeName|first(,)|last(.)})")
	fs.StringVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "where the LSN checkpoint is kept: kv:BUCKET (NATS KV bucket, key = slot name) or file:PATH")
	fs.StringVar(&c.DeadLetter, "dead-letter", c.DeadLetter, "subject for rows that can never be published (too large, bad subject value, bad headers); a stream must capture it; off by default: such a row stops outboxd")
	fs.BoolVar(&c.Exclusive, "exclusive-stream", c.Exclusive, "outboxd is the only writer to the stream: keep commit order across JetStream leader failover by publishing with Nats-Expected-Last-Sequence (use it with R3 streams)")
	fs.BoolVar(&c.CreateStream, "create-stream", c.CreateStream, "create the stream if it is missing, with file storage, a 2-minute duplicate window and the template's literal prefix as subjects (e.g. outbox.>)")
	fs.BoolVar(&c.SlotFailover, "slot-failover", c.SlotFailover, "on PostgreSQL 17+, create the slot as a failover slot (or make the existing one so), which standbys with sync_replication_slots = on keep a copy of, so outboxd goes on after a primary failover; outboxd checks the primary's synchronized_standby_slots at start (see the runbook, \"Primary failover\"); ignored on older servers")
	fs.BoolVar(&c.AllowGap, "allow-gap", c.AllowGap, "start even though the slot is ahead of the checkpoint or was recreated (events in the gap are not published)")
	fs.StringVar(&c.PublishMode, "publish-mode", c.PublishMode, "how events are published: auto (fast where the server, nats-server 2.14+, and the stream, allow_batched, take it; else async), fast (JetStream fast-ingest batches with cumulative acks; refuse to start without them), async (one PublishAsync and PubAck per message; always with --exclusive-stream)")
	fs.StringVar(&c.Atomic, "atomic-transactions", c.Atomic, "publish each transaction of two or more events as one JetStream atomic batch, so the stream never holds part of one, even when outboxd is killed in its middle: off (message by message), auto (where the server, nats-server 2.12+, and the stream, allow_atomic, take them), on (refuse to start without them); several times the CPU and drain time of fast batches for such transactions; transactions over the server's batch limit (1,000) go message by message with the Outbox-Tx-Split header")
	fs.DurationVar(&c.PublishLinger, "publish-linger", c.PublishLinger, "fast mode: how long an open batch waits for the next event before it commits; longer makes larger batches, costing less CPU per event, and adds up to this much latency (100µs-100ms)")
	fs.DurationVar(&c.ReadLinger, "read-linger", c.ReadLinger, "a read that finds no WAL waiting waits until 8 KiB arrived or this long has passed, so that messages the walsender sends one by one are read in batches (fewer wake-ups, less CPU per event, for outboxd and PostgreSQL); a trickle is up to this much later, a fast stream hardly waits; TCP only; 0 (the default) reads at once; 5ms halves outboxd's CPU per event at 1,000 events/s for some 3 ms of latency (0-100ms)")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", c.MaxInFlight, "most messages published but not yet acknowledged (1-65536)")
	fs.DurationVar(&c.StatusInterval, "status-interval", c.StatusInterval, "how often the confirmed position is sent to PostgreSQL (10ms-1m)")
	fs.DurationVar(&c.CheckpointEvery, "checkpoint-interval", c.CheckpointEvery, "how often the acknowledged position is saved (10ms-1m)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long SIGINT/SIGTERM waits for in-flight acknowledgements")
	fs.DurationVar(&c.StandbyRetry, "standby-retry", c.StandbyRetry, "while another outboxd holds the slot, how often to try to take it over (100ms-1m)")
	fs.StringVar(&c.Retention, "retention", c.Retention, "delete rows once they are confirmed (published, acknowledged, checkpointed) and at least this old by their created_at, e.g. 168h; 0s deletes them as soon as they are confirmed and needs no created_at; off keeps every row")
	fs.IntVar(&c.RetentionBatch, "retention-batch", c.RetentionBatch, "most rows --retention deletes at a time (1-100000)")
	fs.DurationVar(&c.RetentionPause, "retention-pause", c.RetentionPause, "pause between two --retention batches (10ms-1h); with --retention-batch it caps the rate (10,000 rows/s by default)")
	fs.DurationVar(&c.RetentionWait, "retention-wait", c.RetentionWait, "how long a --retention batch keeps its snapshot open waiting for the confirmed position to reach it; past that it deletes nothing and the next one tries (1s-1h)")
	fs.StringVar(&c.CreatedAtZone, "created-at-zone", c.CreatedAtZone, "the time zone in which a created_at column of type timestamp (without time zone) holds its values, as PostgreSQL names it (UTC, Europe/Berlin), to measure the rows' age for retention; a timestamptz column needs none")
	fs.DurationVar(&c.Heartbeat, "heartbeat-interval", c.Heartbeat, "write a logical decoding heartbeat this often so a slot on a database busy with other tables keeps advancing (0 = off; 1s-1h)")
	fs.DurationVar(&c.StreamCheck, "stream-check-interval", c.StreamCheck, "this often, take a message JetStream acknowledged as a sample and check an interval later that the stream still holds it at its sequence; the result is counted in outboxd_stream_checks_total (alert on missing or replaced: the stream lost acknowledged events) (0 = off; 1s-24h)")
	fs.BoolVar(&c.PGStreaming, "pg-streaming", c.PGStreaming, "ask PostgreSQL 14+ to stream large in-progress transactions (protocol 2); outboxd spools them on disk until they commit, and never publishes aborted ones")
	fs.StringVar(&c.SpoolDir, "spool-dir", c.SpoolDir, "folder for spooled in-progress transactions (default: the system's temporary folder)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.Var(&trackedString{value: &c.MetricsAddr, set: &c.metricsAddrSet}, "metrics-addr",
		"host:port serving Prometheus /metrics, /healthz, /readyz and the status page at /; when the default is in use (another outboxd on this host), a free port is used and logged; empty serves nothing")
	fs.BoolVar(&c.LogPayloads, "log-payloads", c.LogPayloads, "log every published payload at debug level (needs --log-level debug; payloads may hold personal data)")
	// Hidden: scripts/bench isolates decoding with a sink that publishes nothing, and profiles.
	fs.StringVar(&c.Sink, "sink", c.Sink, "benchmarks only: jetstream, or null to acknowledge events without publishing them")
	fs.StringVar(&c.CPUProfile, "cpu-profile", c.CPUProfile, "benchmarks only: write a pprof CPU profile of the run to this file")
	_ = fs.MarkHidden("sink")
	_ = fs.MarkHidden("cpu-profile")
	fs.StringVar(&c.Trace, "trace", c.Trace, "benchmarks only: write a Go execution trace of the run to this file")
	_ = fs.MarkHidden("trace")
}

// validate parses the settings that have a syntax and reports the first
// bad one with its flag name, the value and what is accepted.
func (c *runConfig) validate() error {
	// First: a --nats-context may set the URL checked next.
	if err := c.resolveNATSAuth(); err != nil {
		return err
	}
	if _, err := pgconn.ParseConfig(c.PGURL); err != nil {
		// pgconn's message quotes the URL with its password masked.
		return fmt.Errorf("--pg-url: %v: use postgres://user@host:5432/dbname (or key=value pairs: host=... dbname=...)", err)
	}
	if err := natsconn.ValidateURL(c.NATSURL); err != nil {
		return err
	}
	if c.NATSMonitorURL != "" {
		if u, err := url.Parse(c.NATSMonitorURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--nats-monitor-url %q is not an HTTP URL: use http://host:8222", c.NATSMonitorURL)
		}
	}
	if err := c.parseRelay(); err != nil {
		return err
	}
	if err := c.relay.Validate(); err != nil {
		return err
	}
	if c.MetricsAddr != "" {
		if _, port, err := net.SplitHostPort(c.MetricsAddr); err != nil || !validPort(port) {
			return fmt.Errorf("--metrics-addr %q is not host:port: use e.g. 127.0.0.1:9187, :9187, or \"\" to serve nothing", c.MetricsAddr)
		}
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		return fmt.Errorf("--log-level %q is not a level: use debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// parseRelay parses the relay's settings that have a syntax into
// c.relay; relay.Config.Validate checks their ranges and combinations.
func (c *runConfig) parseRelay() error {
	r := relay.Config{
		PGURL: c.PGURL, Slot: c.Slot, Publication: c.Publication, Messages: c.Messages, Stream: c.Stream,
		CreateStream: c.CreateStream, DeadLetter: c.DeadLetter, Exclusive: c.Exclusive, AllowGap: c.AllowGap,
		SlotFailover: c.SlotFailover, PublishMode: relay.PublishMode(c.PublishMode), AtomicTransactions: relay.AtomicMode(c.Atomic), MaxInFlight: c.MaxInFlight,
		PublishLinger: c.PublishLinger,
		ReadLinger:    c.ReadLinger, StatusInterval: c.StatusInterval, CheckpointInterval: c.CheckpointEvery,
		ShutdownTimeout: c.ShutdownTimeout, StandbyRetry: c.StandbyRetry, Heartbeat: c.Heartbeat, StreamCheck: c.StreamCheck,
		PGStreaming: c.PGStreaming, SpoolDir: c.SpoolDir, NATSMonitorURL: c.NATSMonitorURL, LogPayloads: c.LogPayloads,
		IDPrefix: c.IDPrefix, NullPayload: relay.NullPayload(c.NullPayload),
		Retention: relay.Retention{Batch: c.RetentionBatch, Pause: c.RetentionPause, Wait: c.RetentionWait, CreatedAtZone: c.CreatedAtZone},
	}
	var err error
	if c.Table != "" {
		if r.Table, err = replication.ParseTable(c.Table); err != nil {
			return fmt.Errorf("--table: %w", err)
		}
	}
	if r.Columns, err = decoder.ParseColumns(c.Columns); err != nil {
		return fmt.Errorf("--columns: %w", err)
	}
	if r.Columns.HeadersFormat, err = decoder.ParseHeadersFormat(c.HeadersFormat); err != nil {
		return fmt.Errorf("--headers-format: %w", err)
	}
	if r.Subject, err = sink.ParseTemplate(c.Subject); err != nil {
		return fmt.Errorf("--subject: %w", err)
	}
	if r.Checkpoint, err = checkpoint.ParseLocation(c.Checkpoint); err != nil {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	switch c.Sink {
	case sinkJetStream:
	case sinkNull:
		r.NullSink = true
	default:
		return fmt.Errorf("--sink %q is not a sink: use %s (or %s in benchmarks)", c.Sink, sinkJetStream, sinkNull)
	}
	if c.Retention != retentionOff {
		age, err := time.ParseDuration(c.Retention)
		if err != nil || age < 0 {
			return fmt.Errorf("--retention %q is not an age: use off, 0s (delete as soon as confirmed) or a duration such as 72h", c.Retention)
		}
		r.Retention.On, r.Retention.Age = true, age
	}
	c.relay = r
	return nil
}

// validPort reports whether p is a TCP port number (0 picks a free one).
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

// trackedString is a string flag that records whether it was set, from
// the command line, its environment variable or the config file
// (cliconfig.Apply sets the Value directly, which pflag's Changed does not
// see).
type trackedString struct {
	value *string
	set   *bool
}

func (s *trackedString) String() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

func (s *trackedString) Set(v string) error {
	*s.value, *s.set = v, true
	return nil
}

func (s *trackedString) Type() string { return "string" }

// reloadLogLevel is where SIGHUP reads the log level from: the config
// file again, unless a flag or environment variable set the level (those
// cannot change while the process runs, so the level stays).
func (c *runConfig) reloadLogLevel() (string, error) {
	if c.levelFromFile == nil {
		return c.LogLevel, nil
	}
	return c.levelFromFile()
}
