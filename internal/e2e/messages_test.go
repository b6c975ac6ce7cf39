package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/outbox"
	"github.com/outboxd/outboxd/sink"
)

// emitter writes transactions that mix the four ways of emitting an event:
// outbox_emit_message and the outbox package's message mode (no row), and
// outbox_emit and outbox.Emit (a row). Every event is about one aggregate,
// so the checker's per-aggregate order is the whole stream's commit order.
type emitter struct {
	conn     *pgx.Conn
	check    *checker.Checker
	messages *outbox.Writer
	n        int
	// rowsToo mixes in row events; without it every event is a message.
	rowsToo bool
}

func (e *env) newEmitter(check *checker.Checker, rowsToo bool) *emitter {
	w, err := outbox.New(outbox.Config{Messages: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return &emitter{conn: e.connect(), check: check, messages: w, rowsToo: rowsToo}
}

// payloadOf is the payload of event n, which the test finds in the stream.
func payloadOf(n int) string { return fmt.Sprintf(`{"n": %d, "note": "é \"quoted\""}`, n) }

// tx writes one transaction of size events and commits or rolls it back.
func (em *emitter) tx(ctx context.Context, size int, commit bool) error {
	events := make([]checker.Event, 0, size)
	err := pgx.BeginFunc(ctx, em.conn, func(tx pgx.Tx) error {
		for range size {
			em.n++
			id, err := em.emit(ctx, tx, em.n)
			if err != nil {
				return err
			}
			events = append(events, checker.Event{ID: id.String(), Aggregate: "order/1"})
		}
		if !commit {
			return errRollBack
		}
		return nil
	})
	switch {
	case err == nil:
		em.check.Committed(events)
	case err == errRollBack:
		em.check.RolledBack(events)
	default:
		return err
	}
	return nil
}

var errRollBack = fmt.Errorf("roll back")

// batch commits one transaction of size message events of about 1 KiB
// each, written with one EmitBatch.
func (em *emitter) batch(t *testing.T, size int) {
	t.Helper()
	ctx := context.Background()
	events := make([]outbox.Event, size)
	pad := strings.Repeat("x", 1000)
	for i := range events {
		em.n++
		events[i] = outbox.Event{AggregateType: "order", AggregateID: "1", EventType: "Created",
			Payload: json.RawMessage(fmt.Sprintf(`{"n": %d, "pad": %q}`, em.n, pad)),
			Headers: map[string]string{"Trace-Id": fmt.Sprintf("t-%d", em.n)},
		}
	}
	var ids []uuid.UUID
	if err := pgx.BeginFunc(ctx, em.conn, func(tx pgx.Tx) error {
		var err error
		ids, err = em.messages.EmitBatch(ctx, tx, events)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	recorded := make([]checker.Event, len(ids))
	for i, id := range ids {
		recorded[i] = checker.Event{ID: id.String(), Aggregate: "order/1"}
	}
	em.check.Committed(recorded)
}

// emit writes event n one of the ways, in turn.
func (em *emitter) emit(ctx context.Context, tx pgx.Tx, n int) (uuid.UUID, error) {
	headers := fmt.Sprintf(`{"Trace-Id": "t-%d"}`, n)
	ways := 2
	if em.rowsToo {
		ways = 4
	}
	var id uuid.UUID
	var err error
	switch n % ways {
	case 0:
		err = tx.QueryRow(ctx, "SELECT outbox_emit_message('order', '1', 'Created', $1, $2)", payloadOf(n), headers).Scan(&id)
	case 1:
		id, err = em.messages.Emit(ctx, tx, outbox.Event{AggregateType: "order", AggregateID: "1", EventType: "Created",
			Payload: json.RawMessage(payloadOf(n)), Headers: map[string]string{"Trace-Id": fmt.Sprintf("t-%d", n)}})
	case 2:
		err = tx.QueryRow(ctx, "SELECT outbox_emit('order', '1', 'Created', $1, $2)", payloadOf(n), headers).Scan(&id)
	default:
		id, err = outbox.Emit(ctx, tx, outbox.Event{AggregateType: "order", AggregateID: "1", EventType: "Created",
			Payload: json.RawMessage(payloadOf(n)), Headers: map[string]string{"Trace-Id": fmt.Sprintf("t-%d", n)}})
	}
	return id, err
}

// checkMessages checks what the rules for rows give every event message:
// subject, Nats-Msg-Id, the Outbox-* headers, the event's headers, the
// payload as the body; and that the stream is in commit order.
func checkMessages(t *testing.T, msgs []message) {
	t.Helper()
	var last pglogrepl.LSN
	for _, m := range msgs {
		if m.Subject != "outbox.order.Created" {
			t.Errorf("message %d: subject %q, want outbox.order.Created", m.Seq, m.Subject)
		}
		if _, err := uuid.Parse(m.Header.Get(jetstream.MsgIDHeader)); err != nil {
			t.Errorf("message %d: Nats-Msg-Id %q: %v", m.Seq, m.Header.Get(jetstream.MsgIDHeader), err)
		}
		if m.Header.Get(sink.HeaderAggregateType) != "order" || m.Header.Get(sink.HeaderAggregateID) != "1" ||
			m.Header.Get(sink.HeaderEventType) != "Created" || m.Header.Get(sink.HeaderXid) == "" {
			t.Errorf("message %d: headers %v", m.Seq, m.Header)
		}
		var body struct{ N int }
		if err := json.Unmarshal(m.Data, &body); err != nil {
			t.Errorf("message %d: body %q: %v", m.Seq, m.Data, err)
			continue
		}
		if !jsonSame(m.Data, []byte(payloadOf(body.N))) && !strings.Contains(string(m.Data), `"pad"`) {
			t.Errorf("message %d: body %s, want %s", m.Seq, m.Data, payloadOf(body.N))
		}
		if got := m.Header.Get("Trace-Id"); got != fmt.Sprintf("t-%d", body.N) {
			t.Errorf("message %d: Trace-Id %q, want t-%d", m.Seq, got, body.N)
		}
		lsn, _ := pglogrepl.ParseLSN(m.Header.Get(sink.HeaderLSN))
		if lsn < last {
			t.Errorf("message %d: commit LSN %s after %s: not in commit order", m.Seq, lsn, last)
		}
		last = lsn
	}
}

func jsonSame(a, b []byte) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

// TestMessageMode: events emitted as logical messages (SQL function and Go
// package), mixed in the same transactions with row events, reach the
// stream in commit order exactly once with the rules of rows; rolled-back
// transactions emit nothing; a kill -9 and a restart lose and repeat
// nothing.
func TestMessageMode(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	ctx := context.Background()
	check := checker.New()
	em := e.newEmitter(check, true)
	// No checkpoint is saved before the kill below, so the restart
	// replays everything: the envelope ids must deduplicate it.
	p := e.start(e.args("--checkpoint-interval", "1m")...)
	e.waitStreaming(p)
	for i := range 12 {
		if err := em.tx(ctx, 1+i%4, i%5 != 3); err != nil {
			t.Fatal(err)
		}
	}
	// Larger than logical_decoding_work_mem: PostgreSQL streams it in
	// segments before it commits, and outboxd spools it.
	em.batch(t, 400)
	first := e.readStream(e.js(), check.Count(), time.Minute)
	checkMessages(t, first)

	// Killed while transactions commit, restarted with more written
	// while it was down.
	for i := range 6 {
		if err := em.tx(ctx, 3, i != 2); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			p.kill()
		}
	}
	lastLSN, _ := pglogrepl.ParseLSN(first[len(first)-1].Header.Get(sink.HeaderLSN))
	if confirmed := e.confirmedFlush(em.conn); confirmed >= lastLSN {
		t.Fatalf("slot confirmed at %s, past the published %s: the restart would replay nothing", confirmed, lastLSN)
	}
	p = e.start(e.args()...)
	e.waitStreaming(p)
	for range 4 {
		if err := em.tx(ctx, 2, true); err != nil {
			t.Fatal(err)
		}
	}
	report := e.verify(e.js(), check, time.Minute)
	t.Logf("message mode with a kill -9: %s", report)
	if report.RolledBack == 0 {
		t.Error("no transaction was rolled back: the test lost its point")
	}
	all := e.readStream(e.js(), check.Count(), time.Minute)
	checkMessages(t, all)
	p.stopCleanly()
}

// TestMessageModeWithoutTable: --table ” with a publication that holds no
// table publishes message events; a publication with tables is refused,
// since their rows would not be published; --messages=false leaves
// message events alone.
func TestMessageModeWithoutTable(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	e.expectExit(e.args("--table", ""), `publication "outboxd": contains tables ("public"."outbox")`, "--table")

	e.pg.Exec(t, e.dsn, "CREATE PUBLICATION outboxd_messages")
	ctx := context.Background()
	check := checker.New()
	em := e.newEmitter(check, false)
	p := e.start(e.args("--table", "", "--publication", "outboxd_messages")...)
	e.waitStreaming(p)
	for i := range 6 {
		if err := em.tx(ctx, 2, i != 4); err != nil {
			t.Fatal(err)
		}
	}
	e.verify(e.js(), check, time.Minute)
	checkMessages(t, e.readStream(e.js(), check.Count(), time.Minute))
	p.stopCleanly()

	// Turned off: message events are not published, rows still are.
	p = e.start(e.args("--messages=false")...)
	e.waitStreaming(p)
	if err := em.tx(ctx, 2, true); err != nil { // two messages, not published
		t.Fatal(err)
	}
	var rowID uuid.UUID
	if err := em.conn.QueryRow(ctx, "SELECT outbox_emit('order', '1', 'Created', $1)", payloadOf(99)).Scan(&rowID); err != nil {
		t.Fatal(err)
	}
	msgs := e.readStream(e.js(), check.Count()+1-2, time.Minute) // the two just emitted are not expected
	if got := msgs[len(msgs)-1].Header.Get(jetstream.MsgIDHeader); len(msgs) != check.Count()-2+1 || got != rowID.String() {
		t.Errorf("with --messages=false: %d messages, last %s; want %d, the row %s last", len(msgs), got, check.Count()-1, rowID)
	}
	p.stopCleanly()
}

// badMessages are logical messages with the 'outbox' prefix that cannot be
// published, each with what the error must say.
var badMessages = []struct {
	name, sql string
	want      []string
}{
	{"not JSON", `SELECT pg_logical_emit_message(true, 'outbox', 'order.created')`, []string{"is not valid JSON"}},
	{"missing key", `SELECT pg_logical_emit_message(true, 'outbox', '{"id": "bad-1", "aggregate_type": "order", "aggregate_id": "1", "payload": {}}')`,
		[]string{`outbox message id "bad-1"`, `envelope key "event_type" is missing`}},
	{"wrong type", `SELECT pg_logical_emit_message(true, 'outbox', '{"id": 7, "aggregate_type": "order", "aggregate_id": "1", "event_type": "Created", "payload": {}}')`,
		[]string{`envelope key "id" is a JSON number, want a string`}},
	{"non-transactional", `SELECT pg_logical_emit_message(false, 'outbox', '{"id": "bad-2", "aggregate_type": "order", "aggregate_id": "1", "event_type": "Created", "payload": {}}')`,
		[]string{`outbox message id "bad-2" (xid 0`, "transactional = false"}},
}

// TestBadMessages: without --dead-letter each bad message stops outboxd
// with an error naming it, and again after a restart (the position does
// not pass it); with --dead-letter it goes there, content as the body,
// the good events around it are published in order, and the slot moves
// past it.
func TestBadMessages(t *testing.T) {
	pg := pgtest.Shared(t)
	for _, bad := range badMessages {
		t.Run("stop/"+bad.name, func(t *testing.T) {
			e := newEnv(t, pg, true)
			p := e.start(e.args()...)
			e.waitStreaming(p)
			e.pg.Exec(t, e.dsn, bad.sql)
			if code := p.wait(time.Minute); code == 0 {
				t.Fatal("outboxd exited 0 after a bad message, want a failure")
			}
			for _, w := range bad.want {
				if !strings.Contains(p.output.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, tail(p.output.String(), 20))
				}
			}
			e.expectExit(e.args(), bad.want...)
		})
	}

	t.Run("dead-letter", func(t *testing.T) {
		e := newEnv(t, pg, true)
		ctx := context.Background()
		check := checker.New()
		em := e.newEmitter(check, false)
		p := e.start(e.args("--dead-letter", "outbox.dead-letter")...)
		e.waitStreaming(p)
		for _, bad := range badMessages {
			if err := em.tx(ctx, 1, true); err != nil {
				t.Fatal(err)
			}
			e.pg.Exec(t, e.dsn, bad.sql)
		}
		if err := em.tx(ctx, 1, true); err != nil {
			t.Fatal(err)
		}
		msgs := e.readStream(e.js(), check.Count()+len(badMessages), time.Minute)
		var good []message
		dead := 0
		for i, m := range msgs {
			if m.Subject != "outbox.dead-letter" {
				good = append(good, m)
				continue
			}
			// Each good event is followed by one bad message.
			bad := badMessages[dead]
			dead++
			if i != 2*dead-1 {
				t.Errorf("dead letter for %q at %d, want %d", bad.name, i, 2*dead-1)
			}
			reason := m.Header.Get(sink.HeaderDeadLetterReason)
			for _, w := range bad.want {
				if !strings.Contains(reason, w) {
					t.Errorf("dead letter for %q: reason %q lacks %q", bad.name, reason, w)
				}
			}
			if !strings.Contains(bad.sql, "'"+string(m.Data)+"'") {
				t.Errorf("dead letter for %q: body %q, want the message's content", bad.name, m.Data)
			}
		}
		if dead != len(badMessages) {
			t.Errorf("%d dead letters, want %d", dead, len(badMessages))
		}
		if report := check.Verify(received(t, good)); !report.OK() {
			t.Errorf("good events: %s", report)
		}
		p.stopCleanly()
		var ahead bool
		last := e.readStream(e.js(), len(msgs), time.Minute)[len(msgs)-1]
		lsn, _ := pglogrepl.ParseLSN(last.Header.Get(sink.HeaderLSN))
		if err := em.conn.QueryRow(ctx, "SELECT confirmed_flush_lsn > $1 FROM pg_replication_slots WHERE slot_name = $2", lsn.String(), e.slot).Scan(&ahead); err != nil || !ahead {
			t.Errorf("slot not confirmed past the last event's commit %s (%v)", lsn, err)
		}
		// A restart sends nothing again.
		p = e.start(e.args("--dead-letter", "outbox.dead-letter")...)
		e.waitStreaming(p)
		if err := em.tx(ctx, 1, true); err != nil {
			t.Fatal(err)
		}
		if again := e.readStream(e.js(), len(msgs)+1, time.Minute); len(again) != len(msgs)+1 {
			t.Errorf("after a restart the stream holds %d messages, want %d", len(again), len(msgs)+1)
		}
		p.stopCleanly()
	})
}
