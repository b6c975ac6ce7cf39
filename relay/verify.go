package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/checkpoint"
)

// VerifyConfig is what outboxd verify compares: the relay's table, mapping
// and stream, and the rows created in [Since, Until).
type VerifyConfig struct {
	Config
	// Since is the first created_at verified.
	Since time.Time
	// Until bounds created_at (exclusive). Zero: a minute before the
	// checkpoint was saved (now, without a checkpoint): later rows may not
	// be published yet.
	Until time.Time
}

// verifyMargin is how long before the checkpoint's save the default
// --until lies: a row created before it but committed after the save may
// not be confirmed yet.
const verifyMargin = time.Minute

// maxExamples is how many ids each finding lists.
const maxExamples = 10

// VerifyReport is what the stream holds of the table's rows.
type VerifyReport struct {
	Since, Until time.Time
	// UntilFrom says where Until came from.
	UntilFrom string
	// Rows is the table's rows in range; Messages the stream's messages
	// read (since Since less a minute for the clocks' difference).
	Rows, Messages int
	// Lost are rows with no message; Duplicated rows with more than one;
	// Reordered rows stored before a row of the same aggregate created
	// earlier (by created_at; rows of one created_at are not ordered).
	Lost, Duplicated, Reordered findings
	// NotInTable are messages whose id is no row in range: rows deleted,
	// created outside it, or other writers' messages. Not a fault.
	NotInTable int
}

// findings counts the rows of one kind and keeps the first few ids.
type findings struct {
	Count    int
	Examples []string
}

func (f *findings) add(id string) {
	f.Count++
	if len(f.Examples) < maxExamples {
		f.Examples = append(f.Examples, id)
	}
}

// OK reports whether every row is in the stream exactly once.
func (r VerifyReport) OK() bool { return r.Lost.Count == 0 && r.Duplicated.Count == 0 }

// ErrVerifyFailed is Verify's error when rows are lost or duplicated.
var ErrVerifyFailed = errors.New("the stream does not hold every row exactly once")

// WriteText prints the report for a person.
func (r VerifyReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rows created from %s until %s (%s): %d; messages in the stream since then: %d\n",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.UntilFrom, r.Rows, r.Messages)
	for _, f := range []struct {
		name string
		f    findings
	}{{"lost (no message)", r.Lost}, {"duplicated (stored more than once)", r.Duplicated},
		{"out of created_at order within their aggregate", r.Reordered}} {
		fmt.Fprintf(&b, "%s: %d", f.name, f.f.Count)
		if len(f.f.Examples) > 0 {
			fmt.Fprintf(&b, " (e.g. %s)", strings.Join(f.f.Examples, ", "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "messages of no row in range: %d (rows deleted or created outside it, or other writers)\n", r.NotInTable)
	_, err := io.WriteString(w, b.String())
	return err
}

// streamEntry is where the stream holds an id, and how often.
type streamEntry struct {
	seq   uint64
	count uint32
	// matched is set once a row in range has the id.
	matched bool
}

// Verify compares the outbox rows created in [Since, Until) with the
// stream's messages by Nats-Msg-Id, reading the stream since Since (less
// the clocks' margin) and the table in (created_at, id) order. It holds
// one entry per message read in memory. The error is ErrVerifyFailed when
// a row is lost or duplicated; the report says which.
func Verify(ctx context.Context, cfg VerifyConfig, env Env) (VerifyReport, error) {
	r := VerifyReport{Since: cfg.Since, Until: cfg.Until, UntilFrom: "--until"}
	if cfg.messagesOnly() {
		return r, errors.New("--table is empty: verify compares the rows of an outbox table with the stream (logical messages leave no rows)")
	}
	idCol, _ := cfg.Columns.Mapped("id")
	createdAt, ok := cfg.Columns.Mapped("created_at")
	if !ok {
		return r, errors.New("verify selects rows by created_at, and --columns maps none: map it (e.g. created_at=CreatedAt)")
	}
	js, err := newJetStream(env.NATS)
	if err != nil {
		return r, err
	}
	if r.Until.IsZero() {
		if r.Until, r.UntilFrom, err = defaultUntil(ctx, cfg, env); err != nil {
			return r, err
		}
	}
	if !r.Until.After(r.Since) {
		return r, fmt.Errorf("--until %s is not after --since %s: nothing to verify", r.Until.Format(time.RFC3339), r.Since.Format(time.RFC3339))
	}
	inStream := make(map[string]*streamEntry)
	err = readStreamSince(ctx, js, cfg.Stream, cfg.Since.Add(-sinceSkew), func(id string, seq uint64) {
		r.Messages++
		if e := inStream[id]; e != nil {
			e.count++
			return
		}
		inStream[id] = &streamEntry{seq: seq, count: 1}
	})
	if err != nil {
		return r, err
	}
	if err := verifyRows(ctx, cfg, idCol, createdAt, inStream, &r); err != nil {
		return r, err
	}
	for _, e := range inStream {
		if !e.matched {
			r.NotInTable++
		}
	}
	if !r.OK() {
		return r, ErrVerifyFailed
	}
	return r, nil
}

// defaultUntil is --until's default: a minute before the checkpoint was
// saved, or before now without one.
func defaultUntil(ctx context.Context, cfg VerifyConfig, env Env) (time.Time, string, error) {
	store, err := openStore(ctx, cfg.Config, env.NATS)
	if err != nil {
		return time.Time{}, "", err
	}
	saved, err := store.Load(ctx)
	switch {
	case err == nil && !saved.SavedAt.IsZero():
		return saved.SavedAt.Add(-verifyMargin), "a minute before checkpoint " + store.String() + " was saved", nil
	case err == nil || errors.Is(err, checkpoint.ErrNotFound):
		return time.Now().Add(-verifyMargin), "a minute ago: no checkpoint saved", nil
	}
	return time.Time{}, "", fmt.Errorf("load checkpoint from %s for --until's default (give --until): %w", store, err)
}

// verifyRows reads the table's rows in range and checks each against the
// stream: present, once, and after the rows of its aggregate created
// earlier.
func verifyRows(ctx context.Context, cfg VerifyConfig, idCol, createdAt string, inStream map[string]*streamEntry, r *VerifyReport) error {
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	typ, err := columnType(ctx, conn, cfg.Table, createdAt)
	if err != nil {
		return err
	}
	aggregate := "''"
	if col, ok := cfg.Columns.Mapped("aggregate_id"); ok {
		aggregate = pgx.Identifier{col}.Sanitize() + "::text"
	}
	at := pgx.Identifier{createdAt}.Sanitize()
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT %s::text, %s, %s::text FROM %s WHERE %s >= %s AND %s < %s ORDER BY %s, 1`,
		pgx.Identifier{idCol}.Sanitize(), aggregate, at, cfg.Table, at, timeIn(r.Since, typ, cfg.Retention.CreatedAtZone),
		at, timeIn(r.Until, typ, cfg.Retention.CreatedAtZone), at))
	if err != nil {
		return fmt.Errorf("read the rows of %s: %w", cfg.Table, err)
	}
	defer rows.Close()
	orders := make(map[string]*aggregateOrder)
	var id, agg, created string
	for rows.Next() {
		if err := rows.Scan(&id, &agg, &created); err != nil {
			return fmt.Errorf("read the rows of %s: %w", cfg.Table, err)
		}
		r.Rows++
		id = cfg.IDPrefix + id
		e := inStream[id]
		switch {
		case e == nil:
			r.Lost.add(id)
			continue
		case e.count > 1:
			r.Duplicated.add(id)
		}
		e.matched = true
		o := orders[agg]
		if o == nil {
			o = &aggregateOrder{}
			orders[agg] = o
		}
		if !o.next(created, e.seq) {
			r.Reordered.add(id)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the rows of %s: %w", cfg.Table, err)
	}
	return nil
}

// aggregateOrder follows one aggregate's rows in created_at order: a row
// must be stored after every row of the aggregate created earlier. Rows
// that share created_at (one transaction's, with the default now()) are
// not ordered among themselves.
type aggregateOrder struct {
	createdAt string
	before    uint64 // the highest stream sequence of earlier created_at values
	current   uint64 // the highest of this created_at
}

// next takes the aggregate's next row and reports whether its stream
// sequence is after the rows created earlier.
func (o *aggregateOrder) next(createdAt string, seq uint64) bool {
	if createdAt != o.createdAt {
		o.before, o.current, o.createdAt = max(o.before, o.current), 0, createdAt
	}
	o.current = max(o.current, seq)
	return seq > o.before
}

// timeIn is t as SQL for comparing with a column of type typ: a timestamp
// (without time zone) column holds times in zone.
func timeIn(t time.Time, typ, zone string) string {
	lit := "'" + t.UTC().Format(time.RFC3339Nano) + "'::timestamptz"
	if typ == "timestamp without time zone" {
		lit = "(" + lit + " AT TIME ZONE '" + strings.ReplaceAll(zone, "'", "''") + "')"
	}
	return lit
}
