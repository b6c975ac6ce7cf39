package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// expectExit runs outboxd to its end and checks it failed with every one of
// want in its output.
func (e *env) expectExit(args []string, want ...string) string {
	e.t.Helper()
	p := e.start(args...)
	code := p.wait(2 * time.Minute)
	out := p.output.String()
	if code == 0 {
		e.t.Fatalf("outboxd exited 0, want a failure; output:\n%s", tail(out, 30))
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			e.t.Errorf("output lacks %q; output:\n%s", w, tail(out, 30))
		}
	}
	return out
}

// TestStartupErrors: each error that retrying cannot fix stops outboxd
// before streaming with a message that names the value and the fix.
func TestStartupErrors(t *testing.T) {
	tests := []struct {
		name    string
		migrate bool
		setup   func(t *testing.T, e *env)
		args    func(e *env) []string
		want    []string
	}{
		{
			name: "table missing",
			want: []string{`table "public"."outbox": does not exist`, "outboxd migrate"},
		},
		{
			name: "required column missing",
			setup: func(t *testing.T, e *env) {
				e.pg.Exec(t, e.dsn, `CREATE TABLE outbox (id uuid PRIMARY KEY, aggregate_type text, aggregate_id text, payload jsonb);
					CREATE PUBLICATION outboxd FOR TABLE outbox`)
			},
			want: []string{`column "event_type" does not exist (field event_type is mapped to it)`, `"aggregate_id", "payload"`},
		},
		{
			name:    "publication missing",
			migrate: true,
			setup:   func(t *testing.T, e *env) { e.pg.Exec(t, e.dsn, "DROP PUBLICATION outboxd") },
			want:    []string{`publication "outboxd": does not exist`, "CREATE PUBLICATION"},
		},
		{
			name:    "publication without the table",
			migrate: true,
			setup: func(t *testing.T, e *env) {
				e.pg.Exec(t, e.dsn, "DROP PUBLICATION outboxd; CREATE PUBLICATION outboxd")
			},
			want: []string{`does not contain table "public"."outbox"`, "ALTER PUBLICATION"},
		},
		{
			name:    "slot with another plugin",
			migrate: true,
			setup: func(t *testing.T, e *env) {
				e.pg.Exec(t, e.dsn, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", e.slot)
			},
			want: []string{`uses output plugin "test_decoding"`, "pg_drop_replication_slot"},
		},
		{
			name:    "stream missing and not allowed to create it",
			migrate: true,
			args: func(e *env) []string {
				return []string{"run", "--pg-url", e.dsn, "--nats-url", e.url(), "--slot", e.slot, "--metrics-addr", ""}
			},
			want: []string{`stream "OUTBOX" does not exist`, "--create-stream"},
		},
		{
			name:    "bad checkpoint location",
			migrate: true,
			args:    func(e *env) []string { return e.args("--checkpoint", "s3:bucket") },
			want:    []string{`"s3:bucket"`, "kv:BUCKET", "file:PATH"},
		},
		{
			name:    "bad subject template",
			migrate: true,
			args:    func(e *env) []string { return e.args("--subject", "outbox.{aggregate_type") },
			want:    []string{"--subject", "unclosed"},
		},
		{
			name:    "unreachable database is not retried forever when the database does not exist",
			migrate: true,
			args: func(e *env) []string {
				return e.args("--pg-url", strings.Replace(e.dsn, e.slot, "no_such_db", 1))
			},
			want: []string{"no_such_db", "does not exist"},
		},
	}
	pg := pgtest.Shared(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pg, tt.migrate)
			if tt.setup != nil {
				tt.setup(t, e)
			}
			args := e.args()
			if tt.args != nil {
				args = tt.args(e)
			}
			e.expectExit(args, tt.want...)
		})
	}
}

// TestWALLevelNotLogical needs a server of its own, started with wal_level=replica.
func TestWALLevelNotLogical(t *testing.T) {
	e := newEnv(t, pgtest.Start(t, pgtest.WithConf("wal_level", "replica")), true)
	e.expectExit(e.args(), "wal_level", `is "replica"`, "wal_level = logical")
}

// TestRowErrors: a row that can never be published stops outboxd with an
// error naming the row id, xid and LSN; the rows before it are published,
// and a restart stops on the same row again: nothing is skipped.
func TestRowErrors(t *testing.T) {
	tests := []struct {
		name string
		// insert writes the bad row with the given id.
		insert string
		want   []string
	}{
		{
			name:   "payload over max_payload",
			insert: `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', '1', 'Created', jsonb_build_object('blob', repeat('x', 9000)))`,
			want:   []string{`column "payload"`, "max_payload of 8192 bytes"},
		},
		{
			name:   "subject token with a dot",
			insert: `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order.v2', '1', 'Created', '{}')`,
			want:   []string{`column "aggregate_type"`, `{aggregate_type}`, `"order.v2"`, "not a valid subject token"},
		},
		{
			name:   "subject token with a space",
			insert: `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', '1', 'Order Created', '{}')`,
			want:   []string{`column "event_type"`, `{event_type}`, "not a valid subject token"},
		},
		{
			name:   "header value that is an object",
			insert: `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, 'order', '1', 'Created', '{}', '{"retries": {"n": 3}}')`,
			want:   []string{`column "headers"`, `"retries"`, "a header value must be a string, a number, a boolean or null"},
		},
	}
	pg := pgtest.Shared(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pg, true, natstest.WithMaxPayload(8192))
			p := e.start(e.args()...)
			e.waitStreaming(p)
			conn := e.connect()
			ctx := context.Background()
			good, bad := uuid.New(), uuid.New()
			if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
				VALUES ($1, 'order', '1', 'Created', '{"ok": true}')`, good); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, tt.insert, bad); err != nil {
				t.Fatal(err)
			}
			want := append([]string{`outbox row id "` + bad.String() + `" (xid `, ", lsn "}, tt.want...)
			code := p.wait(time.Minute)
			if code == 0 {
				t.Fatalf("outboxd exited 0 on a bad row")
			}
			for _, w := range want {
				if !strings.Contains(p.output.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, tail(p.output.String(), 20))
				}
			}
			msgs := e.readStream(e.js(), 1, 30*time.Second)
			if len(msgs) != 1 || msgs[0].Header.Get("Nats-Msg-Id") != good.String() {
				t.Fatalf("stream holds %d messages, want only the good row %s", len(msgs), good)
			}
			// Restarting must stop on the same row: the position never moved past it.
			e.expectExit(e.args(), want...)
		})
	}
}

// TestPasswordNeverPrinted runs outboxd with a password in --pg-url, once
// streaming and stopping cleanly and once failing to connect; the password
// must appear in none of its output.
func TestPasswordNeverPrinted(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	const secret = "pw-s3cr3t-9f2a"
	u, err := url.Parse(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("postgres", secret) // trust auth ignores it, but it is in the URL
	p := e.start(e.args("--pg-url", u.String())...)
	e.waitStreaming(p)
	p.stopCleanly()
	outputs := p.output.String()

	u.Path = "/no_such_db"
	outputs += e.expectExit(e.args("--pg-url", u.String()), "no_such_db")
	u.Host = "127.0.0.1:1" // nothing listens there: a connection error, retried; stop it after a moment
	p = e.start(e.args("--pg-url", u.String())...)
	time.Sleep(2 * time.Second)
	p.stop(time.Minute)
	outputs += p.output.String()
	if strings.Contains(outputs, secret) {
		t.Fatalf("the password appears in outboxd's output:\n%s", outputs)
	}
}

// deadLetterTable has no constraints, so a writer can commit every row
// fault outboxd knows; its id is text, so it can be NULL or empty.
const deadLetterTable = `CREATE TABLE dl_outbox (id text, aggregate_type text, aggregate_id text, event_type text,
		payload text, headers jsonb, created_at timestamptz);
	CREATE PUBLICATION dl FOR TABLE dl_outbox WITH (publish = 'insert')`

// TestDeadLetter: with --dead-letter, every kind of row that can never be
// published goes to that subject with headers naming the reason, the row
// id, xid and LSN, and keeps its body and the subject it asked for; only a
// body over max_payload is dropped, with a header saying why. Two rows
// without an id in one INSERT get two dead letters (they share xid and
// LSN). The good rows around them are published in order.
func TestDeadLetter(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), false, natstest.WithMaxPayload(8192))
	e.pg.Exec(t, e.dsn, deadLetterTable)
	p := e.start(e.args("--dead-letter", "outbox.dead-letter", "--table", "dl_outbox", "--publication", "dl")...)
	e.waitStreaming(p)
	conn := e.connect()
	ctx := context.Background()
	type row struct {
		values   string // the VALUES list of the INSERT
		dead     string // "" for a good row, else a fragment of the reason
		id       string // the id the row holds
		original string // the subject the row asked for; "" when it cannot be rendered
		body     string // the dead letter's body
		dropped  bool   // the body is over max_payload
	}
	big := strings.Repeat("x", 9000)
	rows := []row{
		{values: `('good-1', 'order', '1', 'Created', '{"ok": 1}', NULL, now())`},
		{values: `('hdr-object', 'order', '1', 'Created', '{"n": 1}', '{"retries": {"n": 3}}', now())`, dead: "a header value must be", original: "outbox.order.Created", body: `{"n": 1}`},
		{values: `('hdr-name', 'order', '1', 'Created', '{"n": 2}', '{"trace id": "x"}', now())`, dead: "not a valid NATS header name", original: "outbox.order.Created", body: `{"n": 2}`},
		{values: `('hdr-control', 'order', '1', 'Created', '{"n": 3}', '{"trace": "a\nb"}', now())`, dead: "control character", original: "outbox.order.Created", body: `{"n": 3}`},
		{values: `('hdr-array', 'order', '1', 'Created', '{"n": 4}', '[1, 2]', now())`, dead: "headers", original: "outbox.order.Created", body: `{"n": 4}`},
		{values: `('subject-dot', 'order.v2', '1', 'Created', '{"n": 5}', NULL, now())`, dead: "not a valid subject token", original: "outbox.order.v2.Created", body: `{"n": 5}`},
		{values: `('subject-space', 'order', '1', 'Order Created', '{"n": 6}', NULL, now())`, dead: "not a valid subject token", original: "outbox.order.Order Created", body: `{"n": 6}`},
		{values: `('subject-null', NULL, '1', 'Created', '{"n": 7}', NULL, now())`, dead: "NULL or missing", body: `{"n": 7}`},
		{values: `('payload-null', 'order', '1', 'Created', NULL, NULL, now())`, dead: "is NULL", original: "outbox.order.Created"},
		{values: `('created-infinity', 'order', '1', 'Created', '{"n": 8}', NULL, 'infinity')`, dead: "finite timestamp", original: "outbox.order.Created", body: `{"n": 8}`},
		{values: `('too-big', 'order', '1', 'Created', '` + big + `', NULL, now())`, dead: "max_payload", original: "outbox.order.Created", dropped: true},
		{values: `('', 'order', '1', 'Created', '{"n": 9}', NULL, now())`, dead: "is empty", original: "outbox.order.Created", body: `{"n": 9}`},
		{values: `('good-2', 'order', '2', 'Paid', '{"ok": 2}', NULL, now())`},
	}
	for i := range rows {
		rows[i].id = strings.Split(strings.TrimPrefix(rows[i].values, "('"), "'")[0]
		if _, err := conn.Exec(ctx, "INSERT INTO dl_outbox VALUES "+rows[i].values); err != nil {
			t.Fatal(err)
		}
	}
	// Two rows without an id in one COPY (one multi-insert WAL record)
	// share xid and LSN.
	twins := [][]any{{nil, "order", "3", "Created", `{"twin": 1}`}, {nil, "order", "3", "Created", `{"twin": 2}`}}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"dl_outbox"}, []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload"},
		pgx.CopyFromRows(twins)); err != nil {
		t.Fatal(err)
	}
	rows = append(rows,
		row{dead: "is NULL", original: "outbox.order.Created", body: `{"twin": 1}`},
		row{dead: "is NULL", original: "outbox.order.Created", body: `{"twin": 2}`})

	msgs := e.readStream(e.js(), len(rows), time.Minute)
	if len(msgs) != len(rows) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(rows))
	}
	for i, m := range msgs {
		want := rows[i]
		if want.dead == "" {
			if m.Subject == "outbox.dead-letter" || m.Header.Get("Nats-Msg-Id") != want.id {
				t.Errorf("message %d: %s %q, want the good row %s", i, m.Subject, m.Header.Get("Nats-Msg-Id"), want.id)
			}
			continue
		}
		reason := m.Header.Get("Outbox-Dead-Letter-Reason")
		dropped := m.Header.Get("Outbox-Dead-Letter-Body-Dropped")
		switch {
		case m.Subject != "outbox.dead-letter":
			t.Errorf("message %d: subject %q, want the dead-letter subject", i, m.Subject)
		case !strings.Contains(reason, want.dead) || !strings.Contains(reason, fmt.Sprintf("%q", want.id)) && want.id != "":
			t.Errorf("message %d: reason %q, want it to name %q and the row id %q", i, reason, want.dead, want.id)
		case m.Header.Get("Outbox-Id") != want.id || m.Header.Get("Outbox-Xid") == "" || m.Header.Get("Outbox-Lsn") == "":
			t.Errorf("message %d: headers %v lack the row id %q, xid or LSN", i, m.Header, want.id)
		case m.Header.Get("Outbox-Original-Subject") != want.original:
			t.Errorf("message %d (%s): original subject %q, want %q", i, want.id, m.Header.Get("Outbox-Original-Subject"), want.original)
		case want.dropped && (len(m.Data) != 0 || !strings.Contains(dropped, "max_payload of 8192 bytes")):
			t.Errorf("message %d: body of %d bytes, dropped header %q: want no body and a header saying why", i, len(m.Data), dropped)
		case !want.dropped && (string(m.Data) != want.body || dropped != ""):
			t.Errorf("message %d (%s): body %q, dropped header %q: want the row's payload %q kept", i, want.id, m.Data, dropped, want.body)
		}
	}
	if got, want := strings.Count(p.output.String(), "row dead-lettered"), len(rows)-2; got != want {
		t.Errorf("%d log lines for dead-lettered rows, want one each (%d):\n%s", got, want, tail(p.output.String(), 20))
	}
	p.stopCleanly()
}

// TestDeadLetterSubjectNotCaptured: a --dead-letter subject no stream
// captures stops outboxd at start, before any row could be lost there.
func TestDeadLetterSubjectNotCaptured(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true)
	// A stream that exists already is never changed: one that --create-stream
	// makes captures the dead-letter subject too (sink.WithDeadLetter).
	if _, err := e.js().CreateStream(context.Background(), jetstream.StreamConfig{Name: streamName, Subjects: []string{"outbox.>"}}); err != nil {
		t.Fatal(err)
	}
	e.expectExit(e.args("--dead-letter", "elsewhere.dead"), `no stream captures subject "elsewhere.dead"`, "--dead-letter")
}

// TestPayloadsLoggedOnlyWhenAsked: even at debug level a payload never
// reaches the log unless --log-payloads is set.
func TestPayloadsLoggedOnlyWhenAsked(t *testing.T) {
	const marker = "payload-marker-5f1c"
	for _, logPayloads := range []bool{false, true} {
		t.Run(fmt.Sprintf("log-payloads=%v", logPayloads), func(t *testing.T) {
			e := newEnv(t, pgtest.Shared(t), true)
			args := e.args() // --log-level debug
			if logPayloads {
				args = append(args, "--log-payloads")
			}
			p := e.start(args...)
			e.waitStreaming(p)
			e.pg.Exec(t, e.dsn, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
				VALUES (gen_random_uuid(), 'order', '1', 'Created', jsonb_build_object('secret', $1::text))`, marker)
			e.readStream(e.js(), 1, time.Minute)
			p.stopCleanly()
			if got := strings.Contains(p.output.String(), marker); got != logPayloads {
				t.Errorf("payload in the debug log = %v, want %v", got, logPayloads)
			}
		})
	}
}
