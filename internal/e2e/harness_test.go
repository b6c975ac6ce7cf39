package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
	"github.com/outboxd/outboxd/migrations"
	"github.com/outboxd/outboxd/sink"
)

// binary is the outboxd executable built once by TestMain, with
// buildFlags (race_test.go adds -race when the tests use it).
var (
	binary     string
	buildFlags []string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "outboxd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "outboxd")
	args := append(append([]string{"build"}, buildFlags...), "-o", binary, "github.com/outboxd/outboxd/cmd/outboxd")
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build outboxd:", err)
		return 1
	}
	return pgtest.Main(m)
}

const streamName = "OUTBOX"

// env is one test's database, NATS server and outboxd settings.
type env struct {
	t       *testing.T
	pg      *pgtest.Server
	dsn     string
	nats    *natstest.Server  // single-node runs
	cluster *natstest.Cluster // cluster runs
	slot    string
	dir     string
}

// url is the NATS URL outboxd and the test connect to.
func (e *env) url() string {
	if e.cluster != nil {
		return e.cluster.URL()
	}
	return e.nats.URL()
}

// js is a JetStream context for the test (closed by t.Cleanup).
func (e *env) js() jetstream.JetStream {
	if e.cluster != nil {
		return e.cluster.JetStream(e.t)
	}
	return e.nats.JetStream(e.t)
}

// newEnv makes a fresh database on pg (migrated unless migrate is false)
// and a NATS server of its own.
func newEnv(t *testing.T, pg *pgtest.Server, migrate bool, natsOpts ...natstest.Option) *env {
	t.Helper()
	return setUp(t, &env{t: t, pg: pg, nats: natstest.Start(t, natsOpts...)}, migrate)
}

// newClusterEnv is newEnv with a three-node JetStream cluster.
func newClusterEnv(t *testing.T, pg *pgtest.Server, migrate bool) *env {
	t.Helper()
	c := natstest.StartCluster(t, 3)
	c.WaitReady(t)
	return setUp(t, &env{t: t, pg: pg, cluster: c}, migrate)
}

func setUp(t *testing.T, e *env, migrate bool) *env {
	t.Helper()
	e.dsn, e.dir = e.pg.NewDatabase(t), t.TempDir()
	// Slot names are per cluster: derive one from the unique database name.
	cfg, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	e.slot = strings.ToLower(cfg.Database)
	if migrate {
		conn := e.connect()
		if _, err := migrations.Apply(context.Background(), conn); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	t.Cleanup(func() {
		// A slot keeps WAL and blocks DROP DATABASE: remove it.
		conn, err := pgx.Connect(context.Background(), e.dsn)
		if err == nil {
			conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", e.slot) //nolint:errcheck
			conn.Close(context.Background())
		}
	})
	return e
}

func (e *env) connect() *pgx.Conn {
	e.t.Helper()
	conn, err := pgx.Connect(context.Background(), e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// args is the command line of `outboxd run` for this environment.
func (e *env) args(extra ...string) []string {
	return append([]string{"run", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot,
		"--stream", streamName, "--create-stream", "--log-level", "debug", "--metrics-addr", "127.0.0.1:0"}, extra...)
}

// proc is a running outboxd.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	output *testsync.Buffer
	done   chan struct{}
	err    error
}

// start runs outboxd with args; its output is logged if the test fails.
func (e *env) start(args ...string) *proc {
	e.t.Helper()
	return e.startBinary(binary, args...)
}

// startBinary is start with another build of outboxd.
func (e *env) startBinary(path string, args ...string) *proc {
	e.t.Helper()
	return e.startProcess(path, os.Environ(), args...)
}

// startWithEnv is start with env added to the test's environment less
// its own OUTBOXD_* variables: outboxd sees only the settings env gives.
func (e *env) startWithEnv(env []string, args ...string) *proc {
	e.t.Helper()
	clean := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OUTBOXD_") })
	return e.startProcess(binary, append(clean, env...), args...)
}

// startProcess runs the outboxd binary at path with env and args; the
// test's cleanup kills it and, if the test failed, logs its output.
func (e *env) startProcess(path string, env []string, args ...string) *proc {
	e.t.Helper()
	p := &proc{t: e.t, cmd: exec.Command(path, args...), output: &testsync.Buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.Env = env
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	e.t.Cleanup(func() {
		p.kill()
		if e.t.Failed() {
			e.t.Logf("outboxd %v output:\n%s", args, tail(p.output.String(), 60))
		}
	})
	return p
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
	<-p.done
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(timeout time.Duration) int {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	return p.wait(timeout)
}

// stopCleanly sends SIGTERM and fails the test unless outboxd exits 0.
func (p *proc) stopCleanly() {
	p.t.Helper()
	if code := p.stop(time.Minute); code != 0 {
		p.t.Errorf("outboxd exited %d after SIGTERM, want 0", code)
	}
}

// wait returns the exit code once the process ends, failing the test after timeout.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		p.t.Fatalf("outboxd did not exit within %s", timeout)
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) {
		return exitErr.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

// waitStreaming waits until outboxd holds the slot, so rows written after
// it are in its stream.
func (e *env) waitStreaming(p *proc) {
	e.t.Helper()
	conn := e.connect()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var active bool
		err := conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&active)
		if err == nil && active {
			return
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			e.t.Fatal(err)
		}
		select {
		case <-p.done:
			e.t.Fatalf("outboxd exited before streaming: %v\n%s", p.err, tail(p.output.String(), 40))
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("outboxd did not start streaming\n%s", tail(p.output.String(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writer commits outbox rows and records them in a checker.
type writer struct {
	e          *env
	conn       *pgx.Conn
	check      *checker.Checker
	aggregates int
	n          int
	// rng, when set, picks each row's aggregate at random.
	rng *rand.Rand
	// history, when set, prefixes the aggregate ids: rows written after
	// the database was restored from an older copy commit at lower LSNs
	// than rows of the lost history, and are another aggregate's events.
	history string
	// beforeWrite, when set, is told each transaction's rows before they
	// are written.
	beforeWrite func(rows []row)
	// survive makes tx ride out PostgreSQL restarts: a transaction that
	// failed before COMMIT is recorded as rolled back, one whose COMMIT got
	// no answer as uncertain, and the writer reconnects.
	survive bool
}

func (e *env) newWriter(check *checker.Checker, aggregates int) *writer {
	return &writer{e: e, conn: e.connect(), check: check, aggregates: aggregates}
}

// row is one outbox row as written.
type row struct {
	ID            uuid.UUID
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       string
	Headers       *string
}

// next makes the writer's next row: a deterministic mix of types and aggregates.
func (w *writer) next() row {
	w.n++
	return row{
		ID:            uuid.New(),
		AggregateType: []string{"order", "customer", "invoice"}[w.n%3],
		AggregateID:   fmt.Sprintf("%sagg-%d", w.history, w.aggregate()),
		EventType:     []string{"Created", "Updated"}[w.n%2],
		Payload:       fmt.Sprintf(`{"n": %d, "note": "event %d"}`, w.n, w.n),
	}
}

func (w *writer) aggregate() int {
	if w.rng != nil {
		return w.rng.IntN(w.aggregates)
	}
	return w.n % w.aggregates
}

// tx writes one transaction of size rows, committing it or rolling it back.
func (w *writer) tx(ctx context.Context, size int, commit bool) ([]row, error) {
	rows := make([]row, size)
	events := make([]checker.Event, size)
	for i := range rows {
		rows[i] = w.next()
		events[i] = checker.Event{ID: rows[i].ID.String(), Aggregate: rows[i].AggregateType + "/" + rows[i].AggregateID}
	}
	if w.beforeWrite != nil {
		w.beforeWrite(rows)
	}
	committing, err := w.write(ctx, rows, commit)
	switch {
	case err == nil && commit:
		w.check.Committed(events)
	case err == nil || !committing:
		w.check.RolledBack(events)
	default:
		w.check.Uncertain(events)
	}
	if err != nil && w.survive && ctx.Err() == nil {
		return rows, w.reconnect(ctx)
	}
	return rows, err
}

// write runs the transaction; committing reports whether COMMIT was sent.
func (w *writer) write(ctx context.Context, rows []row, commit bool) (committing bool, err error) {
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	data := make([][]any, len(rows))
	for i, r := range rows {
		data[i] = []any{r.ID, r.AggregateType, r.AggregateID, r.EventType, r.Payload, r.Headers}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"public", "outbox"},
		[]string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers"}, pgx.CopyFromRows(data)); err != nil {
		return false, err
	}
	if !commit {
		return false, tx.Rollback(ctx)
	}
	return true, tx.Commit(ctx)
}

// reconnect waits for PostgreSQL to accept connections again (a minute at most).
func (w *writer) reconnect(ctx context.Context) error {
	w.conn.Close(ctx) //nolint:errcheck
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgx.Connect(ctx, w.e.dsn)
		if err == nil {
			w.conn = conn
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("reconnect writer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// load is a writer committing transactions on its own goroutine.
type load struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// background writes transactions until total rows are written (0: until
// Stop or until shape returns size 0), sleeping pace between them; shape(i)
// gives transaction i's size and whether it commits.
func (w *writer) background(total int, pace time.Duration, shape func(i int) (size int, commit bool)) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i, written := 0, 0; (total == 0 || written < total) && ctx.Err() == nil; i++ {
			size, commit := shape(i)
			if size == 0 {
				return
			}
			if total > 0 {
				size = min(size, total-written)
			}
			if _, err := w.tx(ctx, size, commit); err != nil {
				if ctx.Err() == nil {
					l.err = err
				}
				return
			}
			written += size
			time.Sleep(pace)
		}
	}()
	w.e.t.Cleanup(func() { l.Stop() }) //nolint:errcheck // the test reports it where it matters
	return l
}

// Wait waits until the writer has written everything and returns its error.
func (l *load) Wait() error {
	<-l.done
	return l.err
}

// Stop stops the writer, waits for it and returns its error.
func (l *load) Stop() error {
	l.cancel()
	return l.Wait()
}

// message is one message read back from the stream.
type message struct {
	Seq     uint64
	Time    time.Time // when the stream stored it
	Subject string
	Header  nats.Header
	Data    []byte
}

// readStream waits until the stream holds at least want messages (or
// timeout passes) and returns all of them in stream order.
func (e *env) readStream(js jetstream.JetStream, want int, timeout time.Duration) []message {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	deadline := time.Now().Add(timeout)
	var total uint64
	for {
		stream, err := js.Stream(ctx, streamName)
		if err == nil {
			total = stream.CachedInfo().State.Msgs
			if total >= uint64(want) {
				break
			}
		}
		if time.Now().After(deadline) {
			e.t.Errorf("stream holds %d messages after %s, want %d (err %v)", total, timeout, want, err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		e.t.Fatal(err)
	}
	total = stream.CachedInfo().State.Msgs
	consumer, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]message, 0, total)
	for uint64(len(out)) < total {
		batch, err := consumer.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			e.t.Fatal(err)
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, message{Seq: meta.Sequence.Stream, Time: meta.Timestamp, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
		}
		if ctx.Err() != nil {
			e.t.Fatalf("read %d of %d messages: %v", len(out), total, ctx.Err())
		}
	}
	return out
}

// received turns stream messages into the checker's form.
func received(t *testing.T, msgs []message) []checker.Received {
	t.Helper()
	out := make([]checker.Received, len(msgs))
	for i, m := range msgs {
		lsn, err := pglogrepl.ParseLSN(m.Header.Get(sink.HeaderLSN))
		if err != nil {
			t.Fatalf("message %d: bad %s header: %v", m.Seq, sink.HeaderLSN, err)
		}
		out[i] = checker.Received{
			ID:        m.Header.Get(jetstream.MsgIDHeader),
			Aggregate: m.Header.Get(sink.HeaderAggregateType) + "/" + m.Header.Get(sink.HeaderAggregateID),
			CommitLSN: lsn,
		}
	}
	return out
}

// verify checks the whole stream against the checker and fails on any
// lost, unexpected, duplicated or reordered event.
func (e *env) verify(js jetstream.JetStream, check *checker.Checker, timeout time.Duration) checker.Report {
	e.t.Helper()
	msgs := e.readStream(js, check.Count(), timeout)
	report := check.Verify(received(e.t, msgs))
	if !report.OK() {
		e.t.Errorf("stream check failed: %s", report)
	}
	return report
}

// confirmedFlush reads the slot's confirmed_flush_lsn.
func (e *env) confirmedFlush(conn *pgx.Conn) pglogrepl.LSN {
	e.t.Helper()
	var lsn pglogrepl.LSN
	if err := conn.QueryRow(context.Background(),
		"SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&lsn); err != nil {
		e.t.Fatal(err)
	}
	return lsn
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
