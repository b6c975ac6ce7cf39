package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/sink"
)

// TestEndToEnd streams 10,000 events in 1-row and 500-row transactions,
// mixed with writes to a table outside the publication and rolled-back
// transactions, and checks the stream holds exactly the committed events,
// once each, in commit order, with the right subjects, headers and bodies.
func TestEndToEnd(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	conn := e.connect()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE business (id serial PRIMARY KEY, note text)"); err != nil {
		t.Fatal(err)
	}
	p := e.start(e.args()...)
	e.waitStreaming(p)

	check := checker.New()
	w := e.newWriter(check, 50)
	var committed []row
	started := time.Now()
	for len(committed) < 10_000 {
		size := 1
		if len(committed)%1000 == 0 {
			size = 500
		}
		size = min(size, 10_000-len(committed))
		rows, err := w.tx(ctx, size, true)
		if err != nil {
			t.Fatal(err)
		}
		committed = append(committed, rows...)
		if len(committed)%250 == 0 {
			if _, err := conn.Exec(ctx, "INSERT INTO business (note) SELECT 'x' FROM generate_series(1, 20)"); err != nil {
				t.Fatal(err)
			}
		}
		if len(committed)%2000 == 1 {
			if _, err := w.tx(ctx, 10, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One row with headers of its own, which must reach the message.
	headers := `{"traceparent": "00-abc-def-01", "tenant": "acme"}`
	withHeaders := w.next()
	withHeaders.Headers = &headers
	if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, headers)
		VALUES ($1, $2, $3, $4, $5, $6)`, withHeaders.ID, withHeaders.AggregateType, withHeaders.AggregateID,
		withHeaders.EventType, withHeaders.Payload, withHeaders.Headers); err != nil {
		t.Fatal(err)
	}
	check.Committed([]checker.Event{{ID: withHeaders.ID.String(), Aggregate: withHeaders.AggregateType + "/" + withHeaders.AggregateID}})
	committed = append(committed, withHeaders)

	js := e.js()
	msgs := e.readStream(js, len(committed), 2*time.Minute)
	elapsed := time.Since(started)
	t.Logf("%d events written and streamed in %s: %.0f events/s", len(committed), elapsed.Round(time.Millisecond), float64(len(committed))/elapsed.Seconds())

	if report := check.Verify(received(t, msgs)); !report.OK() {
		t.Fatalf("stream check failed: %s", report)
	}
	if len(msgs) != len(committed) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(committed))
	}
	var prevLSN pglogrepl.LSN
	for i, m := range msgs {
		want := committed[i]
		if err := checkMessage(m, want, e.slot); err != nil {
			t.Fatalf("message %d (stream seq %d): %v", i, m.Seq, err)
		}
		lsn, _ := pglogrepl.ParseLSN(m.Header.Get(sink.HeaderLSN))
		if lsn < prevLSN {
			t.Fatalf("message %d: commit LSN %s before the previous message's %s", i, lsn, prevLSN)
		}
		prevLSN = lsn
	}
	last := msgs[len(msgs)-1]
	if got := last.Header.Get("traceparent"); got != "00-abc-def-01" || last.Header.Get("tenant") != "acme" {
		t.Errorf("row headers not carried: traceparent=%q tenant=%q", got, last.Header.Get("tenant"))
	}
	p.stopCleanly()
}

// checkMessage compares a stream message with the row it must carry.
func checkMessage(m message, want row, _ string) error {
	if got := m.Header.Get(jetstream.MsgIDHeader); got != want.ID.String() {
		return fmt.Errorf("Nats-Msg-Id %q, want %q (commit order broken?)", got, want.ID)
	}
	if subject := "outbox." + want.AggregateType + "." + want.EventType; m.Subject != subject {
		return fmt.Errorf("subject %q, want %q", m.Subject, subject)
	}
	for header, value := range map[string]string{
		sink.HeaderAggregateType: want.AggregateType,
		sink.HeaderAggregateID:   want.AggregateID,
		sink.HeaderEventType:     want.EventType,
	} {
		if got := m.Header.Get(header); got != value {
			return fmt.Errorf("header %s = %q, want %q", header, got, value)
		}
	}
	if _, err := strconv.ParseUint(m.Header.Get(sink.HeaderXid), 10, 32); err != nil {
		return fmt.Errorf("header %s = %q: %v", sink.HeaderXid, m.Header.Get(sink.HeaderXid), err)
	}
	if ts, err := time.Parse(time.RFC3339Nano, m.Header.Get(sink.HeaderCommitTime)); err != nil || time.Since(ts) > time.Hour {
		return fmt.Errorf("header %s = %q: %v", sink.HeaderCommitTime, m.Header.Get(sink.HeaderCommitTime), err)
	}
	var got, wantBody any
	if err := json.Unmarshal(m.Data, &got); err != nil {
		return fmt.Errorf("body %q is not JSON: %v", m.Data, err)
	}
	if err := json.Unmarshal([]byte(want.Payload), &wantBody); err != nil {
		return err
	}
	if !reflect.DeepEqual(got, wantBody) {
		return fmt.Errorf("body %s, want %s", m.Data, want.Payload)
	}
	return nil
}

// TestCrashRecovery kills the real binary with SIGKILL at random moments
// while 50,000 events stream, restarting it each time; at the end every
// event is in the stream exactly once and order holds.
func TestCrashRecovery(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 200)
	rng := rand.New(rand.NewPCG(1, 2))
	const total = 50_000

	p := e.start(e.args()...)
	e.waitStreaming(p)
	// Pace the writes over ~15 s so every kill lands mid-stream; one
	// transaction in 20 rolls back.
	wrng := rand.New(rand.NewPCG(3, 4))
	writes := w.background(total, 12*time.Millisecond, func(int) (int, bool) { return 1 + wrng.IntN(100), wrng.IntN(20) != 0 })
	const kills = 6
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(300+rng.IntN(2000)) * time.Millisecond)
		p.kill()
		t.Logf("kill -9 #%d after %d committed events", i+1, check.Count())
		p = e.start(e.args()...)
	}
	if err := writes.Wait(); err != nil {
		t.Fatal(err)
	}
	report := e.verify(e.js(), check, 3*time.Minute)
	t.Logf("after %d kills: %s", kills, report)
	p.stopCleanly()
}

// TestNATSOutage stops the NATS server for 10 s while events stream. Nothing
// may be lost, and during the outage the slot's confirmed_flush_lsn must not
// pass the first event that JetStream had not stored when it went down.
func TestNATSOutage(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 100)
	p := e.start(e.args()...)
	e.waitStreaming(p)

	writes := w.background(0, 5*time.Millisecond, func(i int) (int, bool) { return 1 + i%20, true })

	time.Sleep(2 * time.Second)
	conn := e.connect()
	outageStart := time.Now()
	e.nats.Shutdown()
	var confirmed []pglogrepl.LSN
	for time.Since(outageStart) < 10*time.Second {
		confirmed = append(confirmed, e.confirmedFlush(conn))
		time.Sleep(100 * time.Millisecond)
	}
	e.nats.Restart(t)
	time.Sleep(3 * time.Second)
	if err := writes.Stop(); err != nil {
		t.Fatal(err)
	}

	js := e.js()
	report := e.verify(js, check, 2*time.Minute)
	t.Logf("NATS outage of 10s: %s", report)
	// The first message stored after the outage began bounds what may have
	// been confirmed during it.
	msgs := e.readStream(js, 0, time.Second)
	var bound pglogrepl.LSN
	for _, m := range msgs {
		if m.Time.After(outageStart) {
			bound, _ = pglogrepl.ParseLSN(m.Header.Get(sink.HeaderLSN))
			break
		}
	}
	if bound == 0 {
		t.Fatal("no message was stored after the outage: the test proves nothing")
	}
	for i, c := range confirmed {
		if c > bound {
			t.Fatalf("sample %d during the outage: confirmed_flush_lsn %s passed %s, the commit LSN of the first event not yet in the stream", i, c, bound)
		}
	}
	t.Logf("%d samples during the outage, all at or before %s (max %s)", len(confirmed), bound, maxLSN(confirmed))
	p.stopCleanly()
}

func maxLSN(lsns []pglogrepl.LSN) pglogrepl.LSN {
	var m pglogrepl.LSN
	for _, l := range lsns {
		m = max(m, l)
	}
	return m
}

// TestRestartResume stops outboxd cleanly, inserts more, and starts it
// again: only the new events are published. A core NATS subscription counts
// every publish, so a republish that JetStream would deduplicate still shows.
func TestRestartResume(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 10)
	ctx := context.Background()
	js := e.js()

	p := e.start(e.args()...)
	e.waitStreaming(p)
	for i := 0; i < 20; i++ {
		if _, err := w.tx(ctx, 5, true); err != nil {
			t.Fatal(err)
		}
	}
	e.readStream(js, 100, time.Minute)
	p.stopCleanly()

	for i := 0; i < 10; i++ {
		if _, err := w.tx(ctx, 5, true); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := e.nats.Conn(t).SubscribeSync("outbox.>")
	if err != nil {
		t.Fatal(err)
	}
	p = e.start(e.args()...)
	e.verify(js, check, time.Minute)
	time.Sleep(time.Second) // let any stray republish arrive
	published, _, err := sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if published != 50 {
		t.Errorf("after the restart outboxd published %d messages, want exactly the 50 new ones", published)
	}
	p.stopCleanly()
}
