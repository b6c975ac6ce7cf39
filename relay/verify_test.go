package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

func TestVerifyReportText(t *testing.T) {
	r := VerifyReport{Since: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), Until: time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC),
		UntilFrom: "--until", Rows: 12, Messages: 13, NotInTable: 1}
	for i := range 12 {
		r.Lost.add("id" + string(rune('a'+i)))
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"rows created from 2026-12-06T10:00:00Z until 2026-12-06T11:00:00Z (--until): 12",
		"lost (no message): 12 (e.g. ida, idb", "idj)", "duplicated (stored more than once): 0\n", "messages of no row in range: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "idk") || r.OK() {
		t.Errorf("report lists more than %d examples, or OK() with lost rows:\n%s", maxExamples, out)
	}
}

// verifyServers is what verify runs against in a test: a migrated
// PostgreSQL database and a NATS server whose stream keeps Nats-Msg-Id
// duplicates for 100ms only, so a test can store an id twice.
type verifyServers struct {
	cfg VerifyConfig
	pg  *pgx.Conn
	js  jetstream.JetStream
	env Env
}

func newVerifyServers(tb testing.TB) *verifyServers {
	tb.Helper()
	dsn, conn := pgtest.Shared(tb).MigratedDatabase(tb)
	nc := natstest.Start(tb).Conn(tb)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PGURL = dsn
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{"outbox.>"},
		Duplicates: 100 * time.Millisecond}); err != nil {
		tb.Fatal(err)
	}
	return &verifyServers{cfg: VerifyConfig{Config: cfg}, pg: conn, js: js, env: Env{NATS: nc, Log: zerolog.Nop()}}
}

// insert writes an outbox row of aggregate agg created at at, and returns
// its id.
func (v *verifyServers) insert(tb testing.TB, agg string, at time.Time) string {
	tb.Helper()
	var id string
	err := v.pg.QueryRow(context.Background(), `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES (gen_random_uuid(), 'order', $1, 'Created', '{}', $2) RETURNING id::text`, agg, at).Scan(&id)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// publish stores a message with Nats-Msg-Id id, waiting out the duplicate
// window when the stream holds the id already.
func (v *verifyServers) publish(tb testing.TB, id string) {
	tb.Helper()
	m := nats.NewMsg("outbox.order.Created")
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Data = []byte("{}")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ack, err := v.js.PublishMsg(context.Background(), m)
		if err != nil {
			tb.Fatal(err)
		}
		if !ack.Duplicate {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the stream still takes %s for a duplicate after 10s", id)
		}
	}
}

// publishAll stores a message for each id, pipelined in windows that
// stay below the client's limit of pending publishes.
func (v *verifyServers) publishAll(tb testing.TB, ids []string) {
	tb.Helper()
	for i, id := range ids {
		m := nats.NewMsg("outbox.order.Created")
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Data = []byte("{}")
		if _, err := v.js.PublishMsgAsync(m); err != nil {
			tb.Fatal(err)
		}
		if (i+1)%2000 != 0 && i+1 != len(ids) {
			continue
		}
		select {
		case <-v.js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			tb.Fatalf("%d publishes not acknowledged after a minute", v.js.PublishAsyncPending())
		}
	}
}

// TestVerify: rows lost, stored twice, stored before a row of their
// aggregate created earlier, and messages of no row in range, found
// across many chunks; a range without them passes. The end-to-end test of
// the command (internal/e2e TestVerify) deletes a message and stores one
// twice on a real relay's stream.
func TestVerify(t *testing.T) {
	v := newVerifyServers(t)
	const prefix = "app-"
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UTC()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	before := v.insert(t, "a", t0.Add(-time.Second))
	var inOrder []string
	for i := range 40 {
		inOrder = append(inOrder, v.insert(t, fmt.Sprint("agg", i%4), at(i)))
	}
	lost1, lost2 := v.insert(t, "a", at(50)), v.insert(t, "b", at(51))
	dup := v.insert(t, "c", at(52))
	early, late := v.insert(t, "r", at(53)), v.insert(t, "r", at(54))
	// One transaction's rows share created_at and are not ordered.
	tx := []string{v.insert(t, "tx", at(55)), v.insert(t, "tx", at(55)), v.insert(t, "tx", at(55))}

	for _, id := range append(append([]string{before}, inOrder...), dup, late, early, tx[2], tx[0], tx[1], dup) {
		v.publish(t, prefix+id)
	}
	v.publish(t, "another-writer")

	tests := []struct {
		name         string
		since, until time.Time
		want         VerifyReport
		wantErr      error
	}{
		{"faults", t0, at(3600), VerifyReport{Rows: 48, Messages: 49, NotInTable: 2,
			Lost:       findings{2, []string{prefix + lost1, prefix + lost2}},
			Duplicated: findings{1, []string{prefix + dup}},
			Reordered:  findings{1, []string{prefix + late}}}, ErrVerifyFailed},
		// Every id but the 40 rows' is of no row in range: 8.
		{"in order", t0, at(45), VerifyReport{Rows: 40, Messages: 49, NotInTable: 8}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := v.cfg
			cfg.IDPrefix, cfg.Since, cfg.Until, cfg.chunk = prefix, tt.since, tt.until, 7
			got, err := Verify(context.Background(), cfg, v.env)
			if !errors.Is(err, tt.wantErr) || (err != nil && tt.wantErr == nil) {
				t.Fatalf("Verify() error = %v, want %v", err, tt.wantErr)
			}
			for _, c := range []struct {
				name      string
				got, want any
			}{
				{"Rows", got.Rows, tt.want.Rows}, {"Messages", got.Messages, tt.want.Messages},
				{"NotInTable", got.NotInTable, tt.want.NotInTable},
				{"Lost", got.Lost, tt.want.Lost}, {"Duplicated", got.Duplicated, tt.want.Duplicated},
				{"Reordered", got.Reordered, tt.want.Reordered},
			} {
				if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
					t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
				}
			}
		})
	}
}

// TestVerifyOrder: a row must be stored after the rows of its aggregate
// created earlier, by its id's first copy; rows of one created_at are not
// ordered; other aggregates do not count.
func TestVerifyOrder(t *testing.T) {
	v := newVerifyServers(t)
	ctx := context.Background()
	if err := createVerifyTable(ctx, v.pg); err != nil {
		t.Fatal(err)
	}
	type row struct {
		agg       string
		at        int // seconds after t0
		seqs      []uint64
		reordered bool
	}
	tests := []struct {
		name string
		rows []row
	}{
		{"in order", []row{{"x", 1, []uint64{1}, false}, {"x", 2, []uint64{2}, false}, {"x", 3, []uint64{5}, false}}},
		{"one transaction in any order", []row{{"x", 1, []uint64{3}, false}, {"x", 1, []uint64{1}, false},
			{"x", 1, []uint64{2}, false}, {"x", 2, []uint64{4}, false}}},
		{"a later row stored first", []row{{"x", 1, []uint64{4}, false}, {"x", 2, []uint64{2}, true}, {"x", 3, []uint64{5}, false}}},
		{"stored before a whole earlier transaction", []row{{"x", 1, []uint64{2}, false}, {"x", 1, []uint64{3}, false},
			{"x", 2, []uint64{1}, true}}},
		{"other aggregates do not count", []row{{"x", 1, []uint64{2}, false}, {"y", 2, []uint64{1}, false}}},
		{"a duplicate by its first copy", []row{{"x", 1, []uint64{1, 5}, false}, {"x", 2, []uint64{3}, false}}},
		{"a lost row orders nothing", []row{{"x", 1, nil, false}, {"x", 2, []uint64{3}, false}}},
	}
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := v.pg.Exec(ctx, "TRUNCATE outbox, pg_temp."+verifyTable); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, r := range tt.rows {
				id := v.insert(t, r.agg, t0.Add(time.Duration(r.at)*time.Second))
				for _, seq := range r.seqs {
					if _, err := v.pg.Exec(ctx, "INSERT INTO pg_temp."+verifyTable+" VALUES ($1, $2)", id, int64(seq)); err != nil {
						t.Fatal(err)
					}
				}
				if r.reordered {
					want = append(want, id)
				}
			}
			r := VerifyReport{Since: t0, Until: t0.Add(time.Hour)}
			if err := compareWithTable(ctx, v.pg, v.cfg, "timestamp with time zone", &r); err != nil {
				t.Fatal(err)
			}
			if r.Reordered.Count != len(want) || strings.Join(r.Reordered.Examples, ",") != strings.Join(want, ",") {
				t.Errorf("reordered = %v, want %d %v", r.Reordered, len(want), want)
			}
		})
	}
}

// TestVerifySpillBounded: reading a stream many chunks long, verify holds
// one chunk at most: its buffer never grows past the chunk it was made
// with, and each COPY takes at most a chunk; every message reaches the
// temporary table.
func TestVerifySpillBounded(t *testing.T) {
	const n, chunk = 25_000, 1000
	v := newVerifyServers(t)
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("m-", i)
	}
	v.publishAll(t, ids)
	if err := createVerifyTable(ctx, v.pg); err != nil {
		t.Fatal(err)
	}
	spill := newIDSpill(v.pg, chunk)
	read, err := copyStreamSince(ctx, v.js, v.cfg.Stream, time.Now().Add(-time.Minute), spill, &verifyProgress{})
	if err != nil {
		t.Fatal(err)
	}
	if read != n || cap(spill.buf) != chunk || len(spill.buf) != 0 || spill.largest != chunk || spill.copies != n/chunk {
		t.Errorf("read %d, buffer cap %d len %d, largest copy %d, %d copies; want %d, %d 0, %d, %d",
			read, cap(spill.buf), len(spill.buf), spill.largest, spill.copies, n, chunk, chunk, n/chunk)
	}
	var rows, distinct, first, last int64
	if err := v.pg.QueryRow(ctx, "SELECT count(*), count(DISTINCT id), min(seq), max(seq) FROM pg_temp."+verifyTable).
		Scan(&rows, &distinct, &first, &last); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n || first != 1 || last != n {
		t.Errorf("temporary table holds %d rows, %d ids, sequences %d to %d; want %d, %d, 1 to %d", rows, distinct, first, last, n, n, n)
	}
}

// TestVerifyBadInput: a role without TEMP on the database, a read-only
// session (as on a standby) and a created_at that is no timestamp stop
// verify before it reads the stream, with the fix.
func TestVerifyBadInput(t *testing.T) {
	v := newVerifyServers(t)
	ctx := context.Background()
	u, err := url.Parse(v.cfg.PGURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	role := db + "_no_temp"
	if _, err := v.pg.Exec(ctx, fmt.Sprintf(`REVOKE TEMP ON DATABASE %[1]s FROM PUBLIC; CREATE ROLE %[2]s LOGIN; GRANT SELECT ON outbox TO %[2]s;
		CREATE TABLE text_times (id uuid PRIMARY KEY, aggregate_id text, created_at text)`,
		pgx.Identifier{db}.Sanitize(), pgx.Identifier{role}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := v.pg.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", pgx.Identifier{role}.Sanitize())); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	asRole, readOnly := *u, *u
	asRole.User = url.User(role)
	q := readOnly.Query()
	q.Set("default_transaction_read_only", "on")
	readOnly.RawQuery = q.Encode()

	tests := []struct {
		name    string
		change  func(*VerifyConfig)
		wantErr []string
	}{
		{"role without TEMP", func(c *VerifyConfig) { c.PGURL = asRole.String() }, []string{"temporary table",
			fmt.Sprintf("GRANT TEMP ON DATABASE %s TO %s", pgx.Identifier{db}.Sanitize(), pgx.Identifier{role}.Sanitize())}},
		{"read-only session", func(c *VerifyConfig) { c.PGURL = readOnly.String() }, []string{"read-only", "give --pg-url the primary"}},
		{"created_at is text", func(c *VerifyConfig) { c.Table.Name = "text_times" }, []string{`"created_at"`, "is text", "timestamptz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := v.cfg
			cfg.Since, cfg.Until = time.Now().Add(-time.Hour), time.Now()
			tt.change(&cfg)
			_, err := Verify(ctx, cfg, v.env)
			if err == nil || errors.Is(err, ErrVerifyFailed) {
				t.Fatalf("Verify() error = %v, want one naming the fix", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestVerifyProgress: the bar is drawn on a terminal only.
func TestVerifyProgress(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		var b strings.Builder
		p := &verifyProgress{out: &b, terminal: terminal}
		p.start(10)
		p.set(4)
		p.set(10)
		p.finish(10)
		p.comparing(10)
		out := b.String()
		if !terminal && out != "" {
			t.Errorf("not on a terminal, it wrote %q", out)
		}
		if terminal && (!strings.Contains(out, "verify: reading the stream") || !strings.Contains(out, "10/10") ||
			!strings.Contains(out, "comparing 10 messages")) {
			t.Errorf("on a terminal, it wrote %q", out)
		}
	}
}
