package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDemo runs the demo as scripts/demo does, with five events: each step
// is announced, in order, before it runs; every event is printed from the
// stream; the relay's single-replica warning gives way to one short line;
// the relay stops cleanly and the temporary folder is removed.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	if err := run(ctx, []string{"--events", "5"}, &out, &log); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), log.String())
	}
	checkInOrder(t, out.String(),
		"starting PostgreSQL (initdb, wal_level=logical) in ",
		"starting NATS with JetStream (embedded) in ",
		"PostgreSQL at postgres://",
		"migrating: table public.outbox, function outbox_emit, publication outboxd ...",
		"starting outboxd (slot outboxd, stream OUTBOX) ...",
		"  stream OUTBOX has a single replica in the temporary folder: fine for a demo, not for real events",
		"writing 5 events in 1 transaction ...",
		"committed; each event as JetStream stores it:",
		"  seq=1 ",
		"  seq=5 ",
		"all 5 events acknowledged by JetStream, checkpoint saved, outboxd stopped",
	)
	if got := strings.Count(out.String(), "seq="); got != 5 {
		t.Errorf("printed %d events, want 5:\n%s", got, out.String())
	}
	if strings.Contains(out.String(), "Ctrl-C") {
		t.Errorf("without --keep the demo offers to keep running:\n%s", out.String())
	}
	// At the default level, warn, the relay's warning would show here.
	if strings.Contains(log.String(), "single replica") {
		t.Errorf("the relay's single-replica warning was logged; the demo says it in one line instead:\n%s", log.String())
	}
	checkRemoved(t, out.String())
}

// TestDemoKeep runs the demo with --keep until it prints its next steps,
// then follows them: the printed psql statement, run at the printed
// PostgreSQL URL, writes an event that a consumer reading the printed
// stream and subject at the printed NATS URL receives. Cancelling, as
// Ctrl-C does, stops everything and removes the temporary folder.
func TestDemoKeep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	demo := startDemo(t, ctx, "--events", "5", "--keep")
	watch := demo.waitForLine(t, ctx, regexp.MustCompile(`watch the stream: nats --server (\S+) sub --stream (\S+) --all '([^']+)'`))
	write := demo.waitForLine(t, ctx, regexp.MustCompile(`write an event: +psql '([^']+)' -c "([^"]+)"`))
	natsURL, stream, subject := watch[1], watch[2], watch[3]
	pgURL, statement := write[1], write[2]

	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to the printed PostgreSQL URL %s: %v", pgURL, err)
	}
	var id string
	err = conn.QueryRow(ctx, statement).Scan(&id)
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("the printed statement %s: %v", statement, err)
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("connect to the printed NATS URL %s: %v", natsURL, err)
	}
	defer nc.Close()
	if got := readStream(t, ctx, nc, stream, subject, id); got != 6 {
		t.Errorf("the written event %s is message %d of stream %s, want 6 (after the 5 sample events)", id, got, stream)
	}

	demo.interrupt()
	select {
	case <-demo.done:
		if demo.err != nil {
			t.Fatalf("demo after Ctrl-C: %v\n%s\n%s", demo.err, demo.out.String(), demo.log.String())
		}
	case <-ctx.Done():
		t.Fatalf("demo still running after Ctrl-C:\n%s", demo.out.String())
	}
	out := demo.out.String()
	checkInOrder(t, out,
		"all 5 events acknowledged by JetStream; everything keeps running until Ctrl-C. Next, in another terminal:",
		"outboxd stopped, checkpoint saved; stopping NATS and PostgreSQL and removing /",
	)
	checkRemoved(t, out)
}

// TestDemoBadInput: bad flags are refused before anything starts, naming
// the flag and what it accepts.
func TestDemoBadInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"events zero", []string{"--events", "0"}, "--events 0 is out of range: use 1 to 1000000"},
		{"events not a number", []string{"--events", "many"}, `invalid argument "many" for "--events"`},
		{"log level unknown", []string{"--log-level", "loud"}, `--log-level "loud" is not a level`},
		{"keep not a bool", []string{"--keep=maybe"}, `invalid argument "maybe" for "--keep"`},
		{"keep takes no separate value", []string{"--keep", "maybe"}, `unexpected argument "maybe": outboxd-demo takes only --events, --log-level and --keep`},
		{"unknown flag", []string{"--pg-url", "x"}, "unknown flag: --pg-url"},
		{"argument", []string{"now"}, `unexpected argument "now"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, &out, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error with %q", tt.args, err, tt.want)
			}
			if out.Len() > 0 {
				t.Errorf("run(%q) started something:\n%s", tt.args, out.String())
			}
		})
	}
}

// checkInOrder fails unless each of lines starts a line of out, after the
// line the one before it started.
func checkInOrder(t testing.TB, out string, lines ...string) {
	t.Helper()
	rest := "\n" + out
	for _, line := range lines {
		i := strings.Index(rest, "\n"+line)
		if i < 0 {
			t.Errorf("no line starting %q after the ones before it in the output:\n%s", line, out)
			return
		}
		rest = rest[i+1:]
	}
}

// checkRemoved fails unless the temporary folder the demo printed is gone.
func checkRemoved(t testing.TB, out string) {
	t.Helper()
	m := regexp.MustCompile(`starting PostgreSQL \(initdb, wal_level=logical\) in (\S+)/postgres `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo did not print its temporary folder:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary folder %s is still there after the demo (stat: %v)", m[1], err)
	}
}

// demoRun is a demo running in the background, as a terminal runs it.
type demoRun struct {
	interrupt context.CancelFunc // Ctrl-C
	out       syncBuffer
	log       syncBuffer
	done      chan struct{} // closed when run has returned, err with it
	err       error
}

// startDemo runs the demo with args until it returns or the test ends;
// a failed test still waits for it, so its temporary folder goes too.
func startDemo(t testing.TB, ctx context.Context, args ...string) *demoRun {
	t.Helper()
	ctx, interrupt := context.WithCancel(ctx)
	d := &demoRun{interrupt: interrupt, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.err = run(ctx, args, &d.out, &d.log)
	}()
	t.Cleanup(func() { interrupt(); <-d.done })
	return d
}

// waitForLine waits until the demo has printed a line matching re and
// returns its submatches; it fails if the demo ends or ctx does first.
func (d *demoRun) waitForLine(t testing.TB, ctx context.Context, re *regexp.Regexp) []string {
	t.Helper()
	for {
		if m := re.FindStringSubmatch(d.out.String()); m != nil {
			return m
		}
		select {
		case <-d.done:
			t.Fatalf("demo ended (%v) before printing a line matching %s:\n%s\n%s", d.err, re, d.out.String(), d.log.String())
		case <-ctx.Done():
			t.Fatalf("no line matching %s: %v\n%s", re, ctx.Err(), d.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readStream reads stream's messages on subject from the start until the
// one with Nats-Msg-Id id and returns its stream sequence. It gives up
// after 30 seconds, well before the demo's own deadline shuts the server.
func readStream(t testing.TB, ctx context.Context, nc *nats.Conn, stream, subject, id string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("the printed stream %s: %v", stream, err)
	}
	consumer, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatalf("consumer on %s of stream %s: %v", subject, stream, err)
	}
	var ids []string
	for ctx.Err() == nil {
		msg, err := consumer.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			continue
		}
		if err != nil {
			t.Fatalf("read stream %s: %v", stream, err)
		}
		got := msg.Headers().Get(jetstream.MsgIDHeader)
		if got == id {
			meta, err := msg.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			return meta.Sequence.Stream
		}
		ids = append(ids, got)
	}
	t.Fatalf("event %s did not arrive on %s in stream %s (saw %q): %v", id, subject, stream, ids, ctx.Err())
	return 0
}

// syncBuffer is a bytes.Buffer that the demo writes while the test reads.
// It must not be copied once used.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
