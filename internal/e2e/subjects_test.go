package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestSubjectDefaultTemplateDottedEventType is the regression test of the
// project's own example: outbox_emit's hint and package outbox use the
// event type 'order.created', which the default subject template used to
// refuse, stopping outboxd at the row and again on every restart. With the
// default settings the example is published on outbox.order.order.created,
// and outboxd keeps running, across a restart too.
func TestSubjectDefaultTemplateDottedEventType(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	conn := e.connect()
	ctx := context.Background()
	emit := func(aggregateID, eventType string) string {
		t.Helper()
		var id uuid.UUID
		if err := conn.QueryRow(ctx, `SELECT outbox_emit('order', $1, $2, '{"total": 9.5}')`, aggregateID, eventType).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id.String()
	}
	type want struct{ id, subject string }
	check := func(wants []want) {
		t.Helper()
		msgs := e.readStream(e.js(), len(wants), time.Minute)
		if len(msgs) != len(wants) {
			t.Fatalf("stream holds %d messages, want %d", len(msgs), len(wants))
		}
		for i, w := range wants {
			m := msgs[i]
			if m.Subject != w.subject || m.Header.Get(jetstream.MsgIDHeader) != w.id || string(m.Data) != `{"total": 9.5}` {
				t.Errorf("message %d: %s %q %s, want %s %q with the payload", i, m.Subject, m.Header.Get(jetstream.MsgIDHeader), m.Data, w.subject, w.id)
			}
		}
	}
	running := func(p *proc) {
		t.Helper()
		select {
		case <-p.done:
			t.Fatalf("outboxd exited: %v\n%s", p.err, tail(p.output.String(), 20))
		default:
		}
	}

	// The example as the docs write it, with no --subject.
	p := e.start(e.args()...)
	e.waitStreaming(p)
	wants := []want{{emit("42", "order.created"), "outbox.order.order.created"}}
	check(wants)
	wants = append(wants, want{emit("42", "OrderPaid"), "outbox.order.OrderPaid"})
	check(wants)
	running(p)
	p.stopCleanly()

	// A restart resumes past the example instead of stopping on it.
	wants = append(wants, want{emit("43", "order.shipped.v2"), "outbox.order.order.shipped.v2"})
	p = e.start(e.args()...)
	e.waitStreaming(p)
	check(wants)
	running(p)
	p.stopCleanly()
}

// TestSubjectInvalidUnderDefaultTemplate: a row whose event type the
// default template still refuses (an empty token, a space) goes to
// --dead-letter with its body, and without --dead-letter stops outboxd
// with an error naming the row id, the placeholder, the value and the
// fixes: a transform, or --dead-letter.
func TestSubjectInvalidUnderDefaultTemplate(t *testing.T) {
	const insert = `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', '1', $2, '{"n": 1}')`
	pg := pgtest.Shared(t)

	t.Run("dead letter", func(t *testing.T) {
		e := newEnv(t, pg, true)
		p := e.start(e.args("--dead-letter", "outbox.dead-letter")...)
		e.waitStreaming(p)
		conn := e.connect()
		ctx := context.Background()
		bad := uuid.New()
		if _, err := conn.Exec(ctx, insert, bad, "a..b"); err != nil {
			t.Fatal(err)
		}
		var good uuid.UUID
		if err := conn.QueryRow(ctx, `SELECT outbox_emit('order', '2', 'order.paid', '{}')`).Scan(&good); err != nil {
			t.Fatal(err)
		}
		msgs := e.readStream(e.js(), 2, time.Minute)
		if len(msgs) != 2 {
			t.Fatalf("stream holds %d messages, want the dead letter and the good row", len(msgs))
		}
		dead, reason := msgs[0], msgs[0].Header.Get("Outbox-Dead-Letter-Reason")
		if dead.Subject != "outbox.dead-letter" || string(dead.Data) != `{"n": 1}` || dead.Header.Get("Outbox-Id") != bad.String() {
			t.Errorf("first message: %s %q, Outbox-Id %q; want the dead letter of %s with its body", dead.Subject, dead.Data, dead.Header.Get("Outbox-Id"), bad)
		}
		if got := dead.Header.Get("Outbox-Original-Subject"); got != "outbox.order.a..b" {
			t.Errorf("Outbox-Original-Subject = %q, want outbox.order.a..b", got)
		}
		for _, w := range []string{`outbox row id "` + bad.String() + `"`, "{event_type}", `"a..b"`, "empty part between dots", "{event_type|safe}"} {
			if !strings.Contains(reason, w) {
				t.Errorf("dead-letter reason lacks %q: %s", w, reason)
			}
		}
		if m := msgs[1]; m.Subject != "outbox.order.order.paid" || m.Header.Get(jetstream.MsgIDHeader) != good.String() {
			t.Errorf("second message: %s %q, want the good row %s on outbox.order.order.paid", m.Subject, m.Header.Get(jetstream.MsgIDHeader), good)
		}
		p.stopCleanly()
	})

	t.Run("stop", func(t *testing.T) {
		e := newEnv(t, pg, true)
		p := e.start(e.args()...)
		e.waitStreaming(p)
		bad := uuid.New()
		if _, err := e.connect().Exec(context.Background(), insert, bad, "order created"); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(time.Minute); code != 1 {
			t.Fatalf("outboxd exited %d on a row it cannot publish, want 1", code)
		}
		// The error of the last JSON log line that has one.
		var cause string
		for _, line := range strings.Split(p.output.String(), "\n") {
			var l struct{ Error string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Error != "" {
				cause = l.Error
			}
		}
		for _, w := range []string{`outbox row id "` + bad.String() + `"`, "{event_type}", `"order created"`, "whitespace",
			"{event_type|safe}", "--dead-letter"} {
			if !strings.Contains(cause, w) {
				t.Errorf("error lacks %q: %s", w, cause)
			}
		}
	})
}
