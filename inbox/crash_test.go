package inbox_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/inbox"
)

// The crash child is this test binary started again with these
// variables: TestMain runs crashChild instead of the tests.
const (
	envChild = "INBOX_CRASH_CHILD" // "1" in the child
	envPG    = "INBOX_CRASH_PG"    // the database's URL
	envNATS  = "INBOX_CRASH_NATS"  // the server's URL
	// envAt is where the child kills itself with SIGKILL: "handler:K"
	// inside the handler of the K-th message it handles, "commit:K" after
	// the K-th commit and before its ack, "" never.
	envAt = "INBOX_CRASH_AT"
)

// Log messages the parent reads from the child's output.
const (
	logCrash   = "crash point"
	logSkipped = "message already applied"
)

// crashConfig is the consumer the children run: 8 partitions, a short
// AckWait so that a dead child's messages come back soon, and attempts
// enough for every kill to land on the same message without dead-lettering
// it (kills count as attempts).
func crashConfig() inbox.Config {
	return inbox.Config{Name: "billing", Stream: streamName, Table: "inbox", Partitions: 8, DeadLetter: deadLetter,
		AckWait: time.Second, MaxAttempts: 1000, Backoff: []time.Duration{50 * time.Millisecond}}
}

// crashChild is the consumer process that the crash test kills: it runs
// the inbox consumer until SIGTERM, or kills itself at envAt. It returns
// the exit code.
func crashChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := runCrashChild(ctx, log); err != nil {
		log.Error("child failed", "error", err)
		return 1
	}
	return 0
}

func runCrashChild(ctx context.Context, log *slog.Logger) error {
	point, k, err := crashPoint(os.Getenv(envAt))
	if err != nil {
		return err
	}
	pgCfg, err := pgxpool.ParseConfig(os.Getenv(envPG))
	if err != nil {
		return err
	}
	pgCfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, pgCfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := nats.Connect(os.Getenv(envNATS))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var handled, committed atomic.Int64
	crashAt := func(where string, count *atomic.Int64, m inbox.Message) {
		if point == where && count.Add(1) == k {
			log.Error(logCrash, "point", where, "id", m.ID)
			syscall.Kill(os.Getpid(), syscall.SIGKILL) //nolint:errcheck // it does not return
			select {}
		}
	}
	cfg := crashConfig()
	cfg.Logger = log
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := writeEffect(ctx, tx, m); err != nil {
			return err
		}
		crashAt("handler", &handled, m) // the effect is written, not committed
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
		return nil
	}
	c, err := inbox.New(ctx, js, pool, cfg)
	if err != nil {
		return err
	}
	inbox.SetAfterCommit(c, func(m inbox.Message) { crashAt("commit", &committed, m) })
	return c.Run(ctx)
}

func crashPoint(at string) (point string, k int64, err error) {
	if at == "" {
		return "", 0, nil
	}
	point, n, _ := strings.Cut(at, ":")
	k, err = strconv.ParseInt(n, 10, 64)
	if err != nil || (point != "handler" && point != "commit") {
		return "", 0, fmt.Errorf("%s=%q: want handler:K or commit:K", envAt, at)
	}
	return point, k, nil
}

// crashStats counts what the children did, from their logs.
type crashStats struct {
	kills         map[string]int  // by crash point: handler, commit, random
	commitCrashes map[string]bool // ids whose ack a kill prevented
	skipped       map[string]int  // ids found in the inbox on a redelivery
}

// TestCrashExactlyOnce kills the consumer process with SIGKILL over and
// over while events flow into the stream: inside its handler (the effect
// written, not committed), between its commit and its ack, and at random
// moments, restarting it each time. Afterwards every event must have been
// applied exactly once, each aggregate's events in publish order, and
// nothing dead-lettered; every event whose ack a kill prevented must have
// been delivered again and skipped.
func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the consumer process for about 20s")
	}
	e := newEnv(t, envOptions{partitions: 8, duplicates: time.Second})
	cfg := crashConfig()
	cfg.Handler = writeEffect
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	evs := events(120, 20) // 2,400 events
	stats := crashStats{kills: map[string]int{}, commitCrashes: map[string]bool{}, skipped: map[string]int{}}

	var published atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { publishSlowly(t, e, evs, &published) })
	defer wg.Wait()

	rounds := 0
	for ; rounds < 30 && (rounds < 24 || !published.Load()); rounds++ {
		at := ""
		switch rounds % 3 {
		case 0:
			at = "handler:" + strconv.Itoa(1+rand.IntN(40))
		case 1:
			at = "commit:" + strconv.Itoa(1+rand.IntN(40))
		}
		runChild(t, e, at, &stats)
	}
	wg.Wait()
	if !published.Load() {
		t.Fatal("the publisher failed")
	}
	final := startChild(t, e, "")
	e.waitApplied(t, len(evs), 30*time.Second)
	e.settled(t, cfg, 30*time.Second)
	if err := final.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := final.cmd.Wait(); err != nil {
		t.Fatalf("the last child, stopped with SIGTERM: %v\n%s", err, final.out.String())
	}
	stats.read(t, final.out.Bytes())

	checkExactlyOnceInOrder(t, e, evs)
	if n := len(e.deadLetters(t)); n != 0 {
		t.Errorf("%d messages dead-lettered, want none", n)
	}
	for id := range stats.commitCrashes {
		if stats.skipped[id] == 0 {
			t.Errorf("event %s: the child died between its commit and its ack, yet no redelivery found it in the inbox", id)
		}
	}
	if stats.kills["handler"] < 5 || stats.kills["commit"] < 5 {
		t.Errorf("kills in the handler %d, between commit and ack %d: want at least 5 of each", stats.kills["handler"], stats.kills["commit"])
	}
	var deliveries uint64
	for p := range cfg.Partitions {
		deliveries += consumerInfo(t, e, cfg, p).Delivered.Consumer
	}
	skips := 0
	for _, n := range stats.skipped {
		skips += n
	}
	t.Logf("%d events (%d aggregates, 8 partitions), %d children: %d killed in the handler, %d between commit and ack, %d at random; "+
		"%d deliveries, %d found already applied; every event applied once, in order",
		len(evs), 120, rounds+1, stats.kills["handler"], stats.kills["commit"], stats.kills["random"], deliveries, skips)
}

// publishSlowly publishes evs in small batches over about 8s, so that
// events flow while the children die, and then publishes 30 of them again
// after the stream's 1s duplicate window, which stores them twice.
func publishSlowly(t *testing.T, e *env, evs []event, done *atomic.Bool) {
	const batch = 30
	for i := 0; i < len(evs); i += batch {
		if err := tryPublish(e.js, evs[i:min(i+batch, len(evs))]); err != nil {
			t.Errorf("publish: %v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := tryPublish(e.js, evs[:batch]); err != nil {
		t.Errorf("publish again: %v", err)
		return
	}
	done.Store(true)
}

// tryPublish is publish for a goroutine that may not call t.Fatal.
func tryPublish(js jetstream.JetStream, evs []event) error {
	for _, ev := range evs {
		if _, err := js.PublishMsgAsync(outboxMsg(ev)); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("no PubAck after 30s")
	}
}

type child struct {
	cmd *exec.Cmd
	out *bytes.Buffer // read only after cmd.Wait
}

func startChild(t *testing.T, e *env, at string) child {
	t.Helper()
	c := child{cmd: exec.Command(os.Args[0]), out: &bytes.Buffer{}}
	c.cmd.Env = append(os.Environ(), envChild+"=1", envPG+"="+e.dsn, envNATS+"="+e.srv.URL(), envAt+"="+at)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// runChild runs one child until it dies: by its own SIGKILL at a crash
// point, or by the parent's at a random moment (at ""). A child whose
// crash point does not come within 3s (no messages left) is killed too.
func runChild(t *testing.T, e *env, at string, stats *crashStats) {
	t.Helper()
	c := startChild(t, e, at)
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	limit := 3 * time.Second
	if at == "" {
		limit = time.Duration(100+rand.IntN(600)) * time.Millisecond
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(limit):
		c.cmd.Process.Kill() //nolint:errcheck // Wait reports how it ended
		err = <-exited
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child (crash at %q) ended with %v, want SIGKILL:\n%s", at, err, c.out.String())
	}
	if !stats.read(t, c.out.Bytes()) {
		stats.kills["random"]++
	}
}

// read counts a child's crash point and skipped redeliveries from its
// log, and reports whether the child died at a crash point.
func (s *crashStats) read(t *testing.T, out []byte) (crashed bool) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg   string `json:"msg"`
			Point string `json:"point"`
			ID    string `json:"id"`
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue // a line cut short by the kill
		}
		switch line.Msg {
		case logCrash:
			crashed = true
			s.kills[line.Point]++
			if line.Point == "commit" {
				s.commitCrashes[line.ID] = true
			}
		case logSkipped:
			s.skipped[line.ID]++
		case "child failed":
			t.Errorf("child failed: %s", line.Error)
		}
	}
	return crashed
}
