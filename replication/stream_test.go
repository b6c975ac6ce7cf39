package replication

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// TestMain also fails the package when a test left a goroutine running.
func TestMain(m *testing.M) { os.Exit(pgtest.MainLeakChecked(m)) }

// outboxColumns is the migrated outbox table as the catalog lists it.
var outboxColumns = []Column{
	{Name: "id", Type: 2950}, {Name: "aggregate_type", Type: 25}, {Name: "aggregate_id", Type: 25},
	{Name: "event_type", Type: 25}, {Name: "payload", Type: 3802}, {Name: "headers", Type: 3802},
	{Name: "created_at", Type: 1184},
}

// checkOutboxColumns is a PreflightConfig.CheckColumns that wants the
// migrated table's columns, in order, with their types.
func checkOutboxColumns(have []Column) error {
	if !slices.Equal(have, outboxColumns) {
		return fmt.Errorf("columns %v, want %v", have, outboxColumns)
	}
	return nil
}

// uniqueSlot names a slot no other test uses: slot names are per cluster,
// not per database, and a server from OUTBOXD_TEST_PG_URL is shared by
// every test package.
func uniqueSlot() string { return "t_" + strings.ToLower(rand.Text()[:12]) }

// insertEvents commits one transaction with n outbox rows.
func insertEvents(t testing.TB, conn *pgx.Conn, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	for range n {
		if _, err := tx.Exec(ctx, `INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'order', 'o-1', 'OrderPlaced', '{"n": 1}')`, uuid.New()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// slotRow is a slot's row in pg_replication_slots.
type slotRow struct {
	plugin, slotType string
	confirmedFlush   pglogrepl.LSN
	active           bool
	activePID        int32
}

func (r slotRow) String() string {
	return fmt.Sprintf("{plugin %s, type %s, confirmed_flush_lsn %s, active %v, pid %d}",
		r.plugin, r.slotType, r.confirmedFlush, r.active, r.activePID)
}

func readSlot(t testing.TB, conn *pgx.Conn, slot string) slotRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		r         slotRow
		confirmed *string
		pid       *int32
	)
	err := conn.QueryRow(ctx, `SELECT plugin, slot_type, confirmed_flush_lsn::text, active, active_pid
		FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&r.plugin, &r.slotType, &confirmed, &r.active, &pid)
	if err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	if confirmed != nil {
		if r.confirmedFlush, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			t.Fatal(err)
		}
	}
	if pid != nil {
		r.activePID = *pid
	}
	return r
}

// walsenderRow is the slot's walsender in pg_stat_replication.
type walsenderRow struct {
	pid                int32
	write, flush       pglogrepl.LSN
	replyTime          time.Time
	hasWrite, hasFlush bool
}

func (r walsenderRow) String() string {
	return fmt.Sprintf("{pid %d, write_lsn %s (set %v), flush_lsn %s (set %v), reply_time %s}",
		r.pid, r.write, r.hasWrite, r.flush, r.hasFlush, r.replyTime.Format(time.RFC3339Nano))
}

func readWalsender(t testing.TB, conn *pgx.Conn, slot string) (walsenderRow, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		r            walsenderRow
		write, flush *string
		reply        *time.Time
	)
	err := conn.QueryRow(ctx, `SELECT r.pid, r.write_lsn::text, r.flush_lsn::text, r.reply_time
		FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid
		WHERE s.slot_name = $1`, slot).Scan(&r.pid, &write, &flush, &reply)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	if err != nil {
		t.Fatalf("read walsender of %s: %v", slot, err)
	}
	if write != nil {
		r.write, r.hasWrite = mustLSN(t, *write), true
	}
	if flush != nil {
		r.flush, r.hasFlush = mustLSN(t, *flush), true
	}
	if reply != nil {
		r.replyTime = *reply
	}
	return r, true
}

func mustLSN(t testing.TB, s string) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// awaitStatusUpdates returns once the walsender of slot has processed n
// standby status updates sent after the call.
func awaitStatusUpdates(t testing.TB, conn *pgx.Conn, slot string, n int) {
	t.Helper()
	since := time.Now()
	seen := 0
	var last time.Time
	testsync.Eventually(t, 30*time.Second, func() string {
		w, ok := readWalsender(t, conn, slot)
		if !ok {
			return "slot " + slot + " has no walsender"
		}
		if w.replyTime.After(since) && !w.replyTime.Equal(last) {
			seen++
			last = w.replyTime
		}
		if seen < n {
			return fmt.Sprintf("saw %d of %d status updates", seen, n)
		}
		return ""
	})
}

// receiver collects what Stream.Run sends, one message at a time.
type receiver struct {
	t       testing.TB
	out     chan []Message
	pending []Message // the rest of the batch last received
}

// next returns the next message that match accepts, failing the test
// after timeout or when Run closed the channel.
func (r *receiver) next(timeout time.Duration, what string, match func(Message) bool) Message {
	r.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		for len(r.pending) > 0 {
			msg := r.pending[0]
			r.pending = r.pending[1:]
			if match(msg) {
				return msg
			}
		}
		select {
		case batch, ok := <-r.out:
			if !ok {
				r.t.Fatalf("waiting for %s: Run closed its channel", what)
			}
			if len(batch) == 0 || len(batch) > maxBatch {
				r.t.Fatalf("Run sent a batch of %d messages, want 1 to %d", len(batch), maxBatch)
			}
			r.pending = batch
		case <-timer.C:
			r.t.Fatalf("no %s within %s", what, timeout)
		}
	}
}

// transaction reads one whole transaction (Begin … Commit) and returns its
// messages and its Commit.
func (r *receiver) transaction(timeout time.Duration) ([]Message, *pglogrepl.CommitMessage) {
	r.t.Helper()
	var msgs []Message
	r.next(timeout, "Begin", func(m Message) bool { return m.Data != nil && m.Data[0] == 'B' })
	for {
		m := r.next(timeout, "message", func(m Message) bool { return m.Data != nil })
		parsed, err := pglogrepl.Parse(m.Data)
		if err != nil {
			r.t.Fatalf("parse pgoutput %q: %v", m.Data[0], err)
		}
		if c, ok := parsed.(*pglogrepl.CommitMessage); ok {
			return msgs, c
		}
		msgs = append(msgs, m)
	}
}

func isInsert(m Message) bool { return m.Data != nil && m.Data[0] == 'I' }

// runStream runs s.Run on out until the returned stop is called; stop
// returns Run's error. t.Cleanup stops it if the test did not.
func runStream(t testing.TB, s *Stream, out chan []Message) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx, out) }()
	var (
		stopped bool
		err     error
	)
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			// Run closes out when it returns; drain so it never blocks.
			for range out { //nolint:revive // draining
			}
			err = <-errc
		}
		return err
	}
	t.Cleanup(func() { stop() }) //nolint:errcheck
	return stop, errc
}

func TestStreamAgainstPostgres(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn, conn := srv.MigratedDatabase(t)
	slot := uniqueSlot()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pcfg := PreflightConfig{Slot: slot, Publication: "outboxd", Table: Table{"public", "outbox"}, CheckColumns: checkOutboxColumns}
	state, err := Preflight(ctx, conn, pcfg)
	if err != nil {
		t.Fatalf("Preflight on a migrated database: %v", err)
	}
	if state != (SlotState{}) {
		t.Fatalf("Preflight before the slot exists: %+v, want it missing", state)
	}

	const interval = 100 * time.Millisecond
	stream, err := Connect(ctx, Config{ConnString: dsn, Slot: slot, StatusInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			stream.Close(context.Background()) //nolint:errcheck
		}
	})
	if stream.SystemID() == "" || stream.Timeline() < 1 {
		t.Errorf("identity: system %q, timeline %d", stream.SystemID(), stream.Timeline())
	}
	// Before Start there is nothing to confirm, so Close has nothing to
	// send; the same holds for a status update.
	if err := stream.sendStatus(false); err != nil {
		t.Errorf("status update before Start: %v", err)
	}

	consistent, err := stream.CreateSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if consistent == 0 {
		t.Fatal("CreateSlot returned LSN 0")
	}
	if row := readSlot(t, conn, slot); row.plugin != "pgoutput" || row.slotType != "logical" || row.confirmedFlush != consistent {
		t.Fatalf("slot after CreateSlot: %s, want logical pgoutput at %s", row, consistent)
	}
	if _, err := stream.CreateSlot(ctx); !Permanent(err) {
		// 42710 duplicate_object: retrying cannot make the name free.
		t.Errorf("second CreateSlot: %v, want a permanent error", err)
	}
	state, err = Preflight(ctx, conn, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SlotState{Exists: true, ConfirmedFlush: consistent}); state != want {
		t.Fatalf("Preflight after CreateSlot: %+v, want %+v", state, want)
	}

	if err := stream.Start(ctx, consistent, nil); err == nil || !strings.HasPrefix(err.Error(), "BUG:") {
		t.Errorf("Start without durable: %v, want a BUG error", err)
	}
	var durable atomic.Uint64
	if err := stream.Start(ctx, consistent, func() pglogrepl.LSN { return pglogrepl.LSN(durable.Load()) }); err != nil {
		t.Fatal(err)
	}
	out := make(chan []Message, 64)
	stop, _ := runStream(t, stream, out)
	rx := &receiver{t: t, out: out}

	// An INSERT arrives as XLogData with its own copy of the bytes.
	insertEvents(t, conn, 1)
	msgs, commit1 := rx.transaction(30 * time.Second)
	var insert *Message
	for i := range msgs {
		if isInsert(msgs[i]) {
			insert = &msgs[i]
		}
	}
	if insert == nil {
		t.Fatalf("transaction without an Insert: %d messages", len(msgs))
	}
	if insert.WALStart == 0 || insert.ServerWALEnd == 0 || len(insert.Data) < 2 {
		t.Errorf("Insert message: WALStart %s, ServerWALEnd %s, %d bytes", insert.WALStart, insert.ServerWALEnd, len(insert.Data))
	}
	saved := bytes.Clone(insert.Data)
	l1 := commit1.TransactionEndLSN
	if l1 <= consistent {
		t.Fatalf("commit end %s is not after the consistent point %s", l1, consistent)
	}

	// Keepalives arrive as messages without Data.
	ka := rx.next(30*time.Second, "keepalive", func(m Message) bool { return m.Data == nil })
	if ka.ServerWALEnd == 0 || ka.WALStart != 0 {
		t.Errorf("keepalive: %+v", ka)
	}

	// Durable 0: status updates confirm nothing.
	awaitStatusUpdates(t, conn, slot, 3)
	if got := readSlot(t, conn, slot).confirmedFlush; got != consistent {
		t.Fatalf("durable 0: confirmed_flush_lsn moved from %s to %s", consistent, got)
	}

	// Durable L1 while a later transaction has been received: the slot is
	// confirmed at L1, not at what was received.
	durable.Store(uint64(l1))
	insertEvents(t, conn, 2)
	_, commit2 := rx.transaction(30 * time.Second)
	l2 := commit2.TransactionEndLSN
	if l2 <= l1 {
		t.Fatalf("second commit end %s is not after the first %s", l2, l1)
	}
	testsync.Eventually(t, 10*time.Second, func() string {
		if got := readSlot(t, conn, slot).confirmedFlush; got != l1 {
			return fmt.Sprintf("confirmed_flush_lsn %s, want durable %s", got, l1)
		}
		return ""
	})
	awaitStatusUpdates(t, conn, slot, 3)
	if got := readSlot(t, conn, slot).confirmedFlush; got != l1 {
		t.Fatalf("confirmed_flush_lsn %s, want durable %s (received up to past %s)", got, l1, l2)
	}
	// What other goroutines see of it, for metrics.
	if got := stream.Confirmed(); got != l1 {
		t.Errorf("Confirmed() = %s, want the durable %s last sent", got, l1)
	}
	if got := stream.Received(); got <= l1 {
		t.Errorf("Received() = %s, want past %s (the second transaction was received)", got, l1)
	}
	w, ok := readWalsender(t, conn, slot)
	if !ok || !w.hasFlush || w.flush != l1 || !w.hasWrite || w.write <= l2 {
		t.Errorf("walsender: %s; want flush %s and write (received) past %s", w, l1, l2)
	}
	pid := w.pid

	// The private copy survived later reads into pgconn's buffer.
	if !bytes.Equal(insert.Data, saved) {
		t.Error("Insert data changed after later messages: Run did not copy it")
	}

	if err := stop(); err != nil {
		t.Fatalf("Run after cancel: %v, want nil", err)
	}
	// Close confirms what is durable by then, with a final status update.
	durable.Store(uint64(l2))
	closed = true
	if err := stream.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	testsync.Eventually(t, 10*time.Second, func() string {
		if row := readSlot(t, conn, slot); row.confirmedFlush != l2 || row.active {
			return fmt.Sprintf("after Close: slot %s (walsender was %d), want confirmed at %s and inactive", row, pid, l2)
		}
		return ""
	})
	state, err = Preflight(ctx, conn, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SlotState{Exists: true, ConfirmedFlush: l2}); state != want {
		t.Errorf("Preflight after Close: %+v, want %+v", state, want)
	}
}

// startedStream connects to dsn, creates slot and starts streaming from
// its consistent point, with nothing ever confirmed past it; t.Cleanup
// closes the stream.
func startedStream(ctx context.Context, t *testing.T, dsn, slot string) *Stream {
	t.Helper()
	stream, err := Connect(ctx, Config{ConnString: dsn, Slot: slot, StatusInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close(context.Background()) }) //nolint:errcheck
	consistent, err := stream.CreateSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Start(ctx, consistent, func() pglogrepl.LSN { return consistent }); err != nil {
		t.Fatal(err)
	}
	return stream
}

// TestStreamBackPressure checks invariant 6: while nobody reads what Run
// delivers, Run keeps sending status updates, so the server does not end
// the session after wal_sender_timeout.
func TestStreamBackPressure(t *testing.T) {
	const walSenderTimeout = 2 * time.Second
	srv := pgtest.Start(t, pgtest.WithConf("wal_sender_timeout", "2s"))
	dsn, conn := srv.MigratedDatabase(t)
	slot := uniqueSlot()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var setting string
	if err := conn.QueryRow(ctx, "SHOW wal_sender_timeout").Scan(&setting); err != nil || setting != "2s" {
		t.Fatalf("wal_sender_timeout = %q, %v; want 2s", setting, err)
	}

	stream := startedStream(ctx, t, dsn, slot)
	out := make(chan []Message) // unbuffered, and nobody reads for now
	stop, done := runStream(t, stream, out)

	const transactions = 3
	for range transactions {
		insertEvents(t, conn, 1)
	}
	var walsender int32
	testsync.Eventually(t, 10*time.Second, func() string {
		w, ok := readWalsender(t, conn, slot)
		if !ok {
			return "no walsender for " + slot
		}
		walsender = w.pid
		return ""
	})

	time.Sleep(3 * walSenderTimeout) // the scenario: back-pressured for 3× the timeout

	select {
	case err := <-done:
		t.Fatalf("Run returned while back-pressured: %v", err)
	default:
	}
	w, ok := readWalsender(t, conn, slot)
	if !ok || w.pid != walsender {
		t.Fatalf("walsender %d is gone (now %s, %v): the server ended the session", walsender, w, ok)
	}
	if age := time.Since(w.replyTime); age > walSenderTimeout {
		t.Errorf("last status update %s ago, want under wal_sender_timeout %s", age, walSenderTimeout)
	}

	// Reading again: everything committed arrives, and the session still
	// streams new commits.
	rx := &receiver{t: t, out: out}
	for i := range transactions {
		msgs, _ := rx.transaction(10 * time.Second)
		if len(msgs) == 0 || !isInsert(msgs[len(msgs)-1]) {
			t.Fatalf("transaction %d: %d messages, want its Insert", i, len(msgs))
		}
	}
	insertEvents(t, conn, 1)
	rx.transaction(10 * time.Second)
	if w, ok := readWalsender(t, conn, slot); !ok || w.pid != walsender {
		t.Errorf("walsender changed from %d to %s", walsender, w)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
}

// TestStreamBatchesABacklog checks that messages already read from the
// socket travel together: a backlog arrives in batches of many messages,
// none over maxBatch, every row once and in WAL order.
func TestStreamBatchesABacklog(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn, conn := srv.MigratedDatabase(t)
	slot := uniqueSlot()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream := startedStream(ctx, t, dsn, slot)
	// Nobody reads yet: Run waits to hand on its first batch while the
	// walsender fills the socket with the rest.
	out := make(chan []Message)
	stop, _ := runStream(t, stream, out)
	const rows = 300 // about 45 KiB: all of it fits in the socket buffers
	insertEvents(t, conn, rows)
	var end pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&end); err != nil {
		t.Fatal(err)
	}
	testsync.Eventually(t, 30*time.Second, func() string {
		var sent pglogrepl.LSN
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(r.sent_lsn), '0/0')::text::pg_lsn FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, slot).Scan(&sent); err != nil {
			t.Fatal(err)
		}
		if sent < end {
			return fmt.Sprintf("walsender sent up to %s, want %s", sent, end)
		}
		return ""
	})
	defer stop() //nolint:errcheck

	var (
		inserts, largest int
		last             pglogrepl.LSN
	)
	for inserts < rows {
		select {
		case batch := <-out:
			if len(batch) == 0 || len(batch) > maxBatch {
				t.Fatalf("a batch of %d messages, want 1 to %d", len(batch), maxBatch)
			}
			largest = max(largest, len(batch))
			for _, m := range batch {
				if !isInsert(m) {
					continue
				}
				if m.WALStart <= last {
					t.Fatalf("insert at %s after one at %s", m.WALStart, last)
				}
				last = m.WALStart
				inserts++
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d inserts received", inserts, rows)
		}
	}
	t.Logf("largest batch: %d messages", largest)
	if largest < 10 {
		t.Errorf("largest batch of a %d-row backlog: %d messages, want many read together", rows, largest)
	}
}

func TestCopyToSlab(t *testing.T) {
	if got, slab := copyToSlab(nil, nil); got != nil || slab != nil {
		t.Fatalf("copyToSlab(nil, nil) = %v, %v: a keepalive's nil must stay nil", got, slab)
	}
	a, slab := copyToSlab(nil, []byte("first"))
	b, slab := copyToSlab(slab, []byte("second"))
	if string(a) != "first" || string(b) != "second" {
		t.Fatalf("copies %q, %q", a, b)
	}
	if &a[:cap(a)][0] != &slab[0] || cap(a) != len(a) {
		t.Errorf("first copy: not at the slab's start, or its capacity %d reaches past it", cap(a))
	}
	_ = append(a, 'X') // must not overwrite b
	if string(b) != "second" {
		t.Errorf("appending to one copy changed its neighbour to %q", b)
	}
	empty, _ := copyToSlab(slab, []byte{})
	if empty == nil || len(empty) != 0 {
		t.Errorf("an empty message copied to %v, want empty and not nil", empty)
	}
	big := bytes.Repeat([]byte{7}, slabSize+1)
	c, slab2 := copyToSlab(slab, big)
	if !bytes.Equal(c, big) || cap(slab2) != slabSize+1 {
		t.Errorf("a message larger than a slab: copy of %d bytes, slab of %d", len(c), cap(slab2))
	}
}

// TestStatusNeverPastServerWAL: a durable position beyond what the server
// has written (a checkpoint from a history the database no longer has) is
// not confirmed: PostgreSQL would store it in the slot and then skip the
// transactions it writes up to there.
func TestStatusNeverPastServerWAL(t *testing.T) {
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	slot := uniqueSlot()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := Connect(ctx, Config{ConnString: dsn, Slot: slot, StatusInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close(context.Background()) }) //nolint:errcheck
	consistent, err := stream.CreateSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stream.ServerWALEnd() == 0 {
		t.Fatal("ServerWALEnd is 0, want the server's WAL end at connect")
	}
	const farAhead = pglogrepl.LSN(0xFF_00000000)
	if err := stream.Start(ctx, consistent, func() pglogrepl.LSN { return farAhead }); err != nil {
		t.Fatal(err)
	}
	stop, _ := runStream(t, stream, make(chan []Message, 8))
	insertEvents(t, conn, 1)
	time.Sleep(500 * time.Millisecond) // several status updates
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var confirmed, walEnd pglogrepl.LSN
	if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn, pg_current_wal_flush_lsn() FROM pg_replication_slots WHERE slot_name = $1`,
		slot).Scan(&confirmed, &walEnd); err != nil {
		t.Fatal(err)
	}
	if confirmed > walEnd || stream.Confirmed() > walEnd {
		t.Fatalf("slot confirmed %s (status sent %s) past the server's WAL end %s", confirmed, stream.Confirmed(), walEnd)
	}
	if confirmed <= consistent {
		t.Fatalf("slot confirmed %s, want it moved up to the WAL the server sent (past %s)", confirmed, consistent)
	}
}

// TestSkippedPublication: PostgreSQL 18's warning that it skipped a missing
// publication is the error older servers raise (MissingPublication, a
// permanent error); other notices are not errors.
func TestSkippedPublication(t *testing.T) {
	s := &Stream{cfg: Config{Publication: "outboxd"}}
	tests := []struct {
		name    string
		notice  pgproto3.NoticeResponse
		missing bool
	}{
		{name: "PostgreSQL 18, English", missing: true, notice: pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "55000",
			Message: `skipped loading publication "outboxd"`, Detail: "The publication does not exist at this point in the WAL.", Routine: "LoadPublications"}},
		{name: "translated", missing: true, notice: pgproto3.NoticeResponse{Severity: "WARNUNG", SeverityUnlocalized: "WARNING", Code: "55000",
			Message: `Publikation »outboxd« übersprungen`, Routine: "LoadPublications"}},
		{name: "server without the unlocalized severity", missing: true, notice: pgproto3.NoticeResponse{Severity: "WARNING", Code: "55000",
			Message: `skipped loading publication "outboxd"`}},
		{name: "another warning", notice: pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "01000", Message: "something else"}},
		{name: "another warning of that code", notice: pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "55000", Message: "something else", Routine: "Other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.skippedPublication(&tt.notice)
			if !tt.missing {
				if err != nil {
					t.Fatalf("skippedPublication = %v, want nil", err)
				}
				return
			}
			if !MissingPublication(err) || !Permanent(err) || !strings.Contains(err.Error(), `publication "outboxd" does not exist`) {
				t.Fatalf("skippedPublication = %v, want a permanent missing-publication error naming it", err)
			}
		})
	}
}
