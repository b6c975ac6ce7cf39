package inbox

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of the Config fields whose zero value means "the default".
const (
	DefaultSubject     = "outbox.*.*"
	DefaultMaxAttempts = 5
	DefaultAckWait     = 30 * time.Second
	// DefaultRetentionInterval is how often Run deletes expired inbox rows
	// when Retention is set, unless Retention/2 is shorter.
	DefaultRetentionInterval = time.Hour
)

// defaultBackoff is the wait before each new delivery of a message whose
// handler failed: the first entry after the first failure, and so on; the
// last entry repeats.
var defaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}

// DefaultBackoff returns Config.Backoff's default: 1s, 5s, 30s, then 1m.
func DefaultBackoff() []time.Duration { return append([]time.Duration(nil), defaultBackoff...) }

// MaxPartitions bounds Config.Partitions: each partition is one durable
// consumer on the server and one worker goroutine here.
const MaxPartitions = 1024

// Config describes one inbox consumer. Fields marked required have no
// default; for the others the zero value means the default given.
type Config struct {
	// Name identifies the consumer, required: it keys the inbox rows (two
	// consumers sharing a table each apply an event once) and names the
	// durable consumers Name-0 … Name-(Partitions-1). Letters, digits, -
	// and _. Never reuse it for a different handler.
	Name string
	// Stream is the JetStream stream to consume, required (outboxd's
	// default is OUTBOX).
	Stream string
	// Table is the inbox table, optionally schema-qualified
	// ("billing.inbox"), required. CreateTable makes it.
	Table string
	// Subject is the pattern of the subjects to consume as outboxd
	// publishes them, before the partition token: literal tokens and one *
	// per variable token, no > (default "outbox.*.*", for outboxd's
	// --subject 'outbox.{aggregate_type}.{aggregate_id|safe}'). Every
	// subject of an event must match it: one with more or fewer tokens
	// gets no partition token and no worker reads it.
	Subject string
	// Key lists the wildcards of Subject, counted from 1, whose values make
	// the aggregate's key: the events of one key are applied in order.
	// Default: every wildcard (for outbox.*.*: type and id).
	Key []int
	// Partitions is the number of partitions, required: one durable
	// consumer and one worker each. It must equal the N of the stream's
	// {{partition(N,...)}} transform (see Transform); 1 needs no transform.
	Partitions int
	// Handler does the business write of one message, required.
	Handler Handler
	// DeadLetter is the subject where a message goes that failed
	// MaxAttempts times or cannot be applied at all, required. A stream
	// must capture it, and it must not match Subject (the workers would
	// read their own dead letters).
	DeadLetter string
	// MaxAttempts is how many deliveries of a message may end without it
	// being applied (its handler failed, or the consumer died or ran past
	// AckWait) before it is dead-lettered (default 5). Failures of the
	// database itself do not count: they are retried without limit.
	MaxAttempts int
	// Backoff is the wait before each new delivery of a message whose
	// handler failed (default DefaultBackoff). While a message waits, the
	// later messages of its partition wait too.
	Backoff []time.Duration
	// AckWait is how long the server waits for a delivered message's ack
	// before delivering it again (default 30s). A handler must finish
	// within it; a crashed consumer's message waits this long.
	AckWait time.Duration
	// Retention is how long inbox rows are kept; Run deletes older ones.
	// Zero keeps them for ever. It must be longer than the stream's
	// redelivery horizon (see Horizon): New says by how much if not.
	Retention time.Duration
	// RetentionInterval is how often Run deletes expired rows (default
	// 1h, or Retention/2 when shorter).
	RetentionInterval time.Duration
	// Logger receives what the consumer does: failures at Warn, dead
	// letters at Error, each message at Debug. Default: discard.
	Logger *slog.Logger
}

// ConfigError is a Config value that cannot work. It names the field,
// the value, what is wrong and the fix.
type ConfigError struct {
	Field   string
	Value   string
	Problem string
	Fix     string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("inbox: %s %s %s: %s", e.Field, e.Value, e.Problem, e.Fix)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// withDefaults returns c with its defaults filled in.
func (c Config) withDefaults() Config {
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if len(c.Key) == 0 {
		for i := range strings.Count(c.Subject, "*") {
			c.Key = append(c.Key, i+1)
		}
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff()
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = min(DefaultRetentionInterval, c.Retention/2)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks c on its own, without the servers: New checks in
// addition what depends on the stream and the database. It returns a
// *ConfigError.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.validateNames(); err != nil {
		return err
	}
	if err := c.validatePartitioning(); err != nil {
		return err
	}
	return c.validateDelivery()
}

func (c Config) validateNames() error {
	switch {
	case c.Name == "":
		return &ConfigError{"Name", `""`, "is empty", "set it to the consumer's name, e.g. billing; it keys the inbox rows and names the durable consumers"}
	case !nameRE.MatchString(c.Name) || len(c.Name) > 200:
		return &ConfigError{"Name", strconv.Quote(c.Name), "is not a usable name", "use up to 200 letters, digits, - and _, e.g. billing"}
	case c.Stream == "":
		return &ConfigError{"Stream", `""`, "is empty", "name the stream outboxd publishes to, e.g. OUTBOX"}
	case c.Handler == nil:
		return &ConfigError{"Handler", "nil", "is not set", "set it to the function that does the business write"}
	}
	if _, err := tableIdent(c.Table); err != nil {
		return err
	}
	if err := checkDeadLetterSubject(c.DeadLetter); err != nil {
		return err
	}
	if subjectMatches(c.Subject, c.DeadLetter) || subjectMatches(c.Subject+".*", c.DeadLetter) {
		return &ConfigError{"DeadLetter", strconv.Quote(c.DeadLetter), fmt.Sprintf("matches Subject %q", c.Subject),
			"choose a subject outside it, e.g. inbox.dead-letter." + c.Name + ", or the workers would read their own dead letters"}
	}
	return nil
}

func (c Config) validatePartitioning() error {
	tokens := strings.Split(c.Subject, ".")
	wildcards := strings.Count(c.Subject, "*")
	for _, tok := range tokens {
		if tok == "" || tok == ">" || (tok != "*" && strings.ContainsAny(tok, "*> \t\r\n")) {
			return &ConfigError{"Subject", strconv.Quote(c.Subject), "is not a pattern of whole tokens",
				"use literal tokens and * only, no >, e.g. outbox.*.* (make outboxd publish a fixed number of tokens with |safe)"}
		}
	}
	if wildcards == 0 {
		return &ConfigError{"Subject", strconv.Quote(c.Subject), "has no wildcard",
			"use a * for the tokens that vary, at least the aggregate id, e.g. outbox.*.*"}
	}
	seen := map[int]bool{}
	for _, k := range c.Key {
		if k < 1 || k > wildcards || seen[k] {
			return &ConfigError{"Key", fmt.Sprint(c.Key), fmt.Sprintf("is not a set of wildcard positions of %q", c.Subject),
				fmt.Sprintf("list distinct positions from 1 to %d, those that hold the aggregate's id and type (default: all)", wildcards)}
		}
		seen[k] = true
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return &ConfigError{"Partitions", strconv.Itoa(c.Partitions), fmt.Sprintf("is out of range 1 to %d", MaxPartitions),
			"set it to the N of the stream's {{partition(N,...)}} subject transform (1 for one worker and no transform)"}
	}
	return nil
}

func (c Config) validateDelivery() error {
	switch {
	case c.MaxAttempts < 1:
		return &ConfigError{"MaxAttempts", strconv.Itoa(c.MaxAttempts), "is below 1",
			fmt.Sprintf("use 0 (default %d) or more deliveries before a message is dead-lettered", DefaultMaxAttempts)}
	case c.AckWait < 100*time.Millisecond:
		return &ConfigError{"AckWait", c.AckWait.String(), "is below 100ms",
			fmt.Sprintf("use 0 (default %s) or a time a handler surely finishes in", DefaultAckWait)}
	case c.Retention < 0:
		return &ConfigError{"Retention", c.Retention.String(), "is negative", "use 0 to keep inbox rows for ever, or a time longer than the stream's redelivery horizon"}
	case c.RetentionInterval < 0:
		return &ConfigError{"RetentionInterval", c.RetentionInterval.String(), "is negative", fmt.Sprintf("use 0 (default %s) or more", DefaultRetentionInterval)}
	}
	for i, d := range c.Backoff {
		if d <= 0 {
			return &ConfigError{"Backoff", fmt.Sprint(c.Backoff), fmt.Sprintf("has %s at index %d", d, i), "use positive waits, e.g. 1s 5s 30s 1m, or leave it empty for the default"}
		}
	}
	return nil
}

// delay returns the wait before the next delivery after the n-th failed
// one (n counts from 1).
func (c Config) delay(n uint64) time.Duration {
	i := min(max(n, 1), uint64(len(c.Backoff))) - 1
	return c.Backoff[i]
}

// Durable returns the name of partition p's durable consumer.
func (c Config) Durable(p int) string { return c.Name + "-" + strconv.Itoa(p) }

// subjectMatches reports whether subject, a plain subject, matches
// pattern, whose tokens are literal or *.
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	if len(pt) != len(st) {
		return false
	}
	for i := range pt {
		if pt[i] != "*" && pt[i] != st[i] {
			return false
		}
	}
	return true
}

// checkDeadLetterSubject refuses a dead-letter subject that is not plain.
func checkDeadLetterSubject(subject string) error {
	bad := subject == "" || strings.ContainsAny(subject, "*> \t\r\n") || strings.HasPrefix(subject, ".") ||
		strings.HasSuffix(subject, ".") || strings.Contains(subject, "..")
	if bad {
		return &ConfigError{"DeadLetter", strconv.Quote(subject), "is not a plain subject",
			"use a subject without wildcards or spaces that a stream captures, e.g. inbox.dead-letter.billing"}
	}
	return nil
}
