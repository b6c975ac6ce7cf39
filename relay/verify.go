package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/checkpoint"
)

// VerifyConfig is what outboxd verify compares: the relay's table, mapping
// and stream, and the rows created in [Since, Until).
type VerifyConfig struct {
	Config
	// Since is the first created_at verified. Zero with SinceLSN.
	Since time.Time
	// SinceLSN, when set, stands for Since: the commit time, less a
	// minute, of the first event in the stream committed at or after it.
	SinceLSN pglogrepl.LSN
	// Until bounds created_at (exclusive). Zero: a minute before the
	// checkpoint was saved (now, without a checkpoint): later rows may not
	// be published yet.
	Until time.Time
	// Progress receives a progress bar of the stream's reading when
	// Terminal is set (stderr is a terminal); nothing otherwise.
	Progress io.Writer
	Terminal bool

	// chunk is how many message ids are held before they are copied to
	// PostgreSQL; zero means verifyChunk. Tests make it small.
	chunk int
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

// Verify compares the outbox rows created in [Since, Until) with the
// stream's messages by Nats-Msg-Id. It reads the stream's headers since
// Since (less the clocks' margin) into a temporary table on its own
// PostgreSQL connection, a chunk at a time, and compares there: its
// memory is one chunk however long the stream is. The error is
// ErrVerifyFailed when a row is lost or duplicated; the report says which.
func Verify(ctx context.Context, cfg VerifyConfig, env Env) (VerifyReport, error) {
	r := VerifyReport{Since: cfg.Since, Until: cfg.Until, UntilFrom: "--until"}
	if cfg.messagesOnly() {
		return r, errors.New("--table is empty: verify compares the rows of an outbox table with the stream (logical messages leave no rows)")
	}
	if _, ok := cfg.Columns.Mapped("created_at"); !ok {
		return r, errors.New("verify selects rows by created_at, and --columns maps none: map it (e.g. created_at=CreatedAt)")
	}
	js, err := newJetStream(env.NATS)
	if err != nil {
		return r, err
	}
	if cfg.SinceLSN != 0 {
		if cfg.Since, err = sinceFromLSN(ctx, js, cfg.Stream, cfg.SinceLSN); err != nil {
			return r, err
		}
		r.Since = cfg.Since
	}
	if r.Until.IsZero() {
		if r.Until, r.UntilFrom, err = defaultUntil(ctx, cfg, env); err != nil {
			return r, err
		}
	}
	if !r.Until.After(r.Since) {
		return r, fmt.Errorf("--until %s is not after --since %s: nothing to verify", r.Until.Format(time.RFC3339), r.Since.Format(time.RFC3339))
	}
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		return r, err
	}
	// Closing the session drops the temporary table.
	defer conn.Close(context.WithoutCancel(ctx))
	typ, err := createdAtType(ctx, conn, cfg)
	if err != nil {
		return r, err
	}
	if err := createVerifyTable(ctx, conn); err != nil {
		return r, err
	}
	chunk := cfg.chunk
	if chunk <= 0 {
		chunk = verifyChunk
	}
	spill := newIDSpill(conn, chunk)
	progress := &verifyProgress{out: cfg.Progress, terminal: cfg.Terminal}
	read, err := copyStreamSince(ctx, js, cfg.Stream, cfg.Since.Add(-sinceSkew), spill, progress)
	if err != nil {
		return r, err
	}
	r.Messages = int(read)
	progress.comparing(read)
	if err := compareWithTable(ctx, conn, cfg, typ, &r); err != nil {
		return r, err
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

// timeIn is t as SQL for comparing with a column of type typ: a timestamp
// (without time zone) column holds times in zone.
func timeIn(t time.Time, typ, zone string) string {
	lit := "'" + t.UTC().Format(time.RFC3339Nano) + "'::timestamptz"
	if typ == "timestamp without time zone" {
		lit = "(" + lit + " AT TIME ZONE '" + strings.ReplaceAll(zone, "'", "''") + "')"
	}
	return lit
}
