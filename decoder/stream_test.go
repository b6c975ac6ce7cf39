package decoder

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/event"
)

// The streamed transaction of these tests, its subtransactions, and a
// transaction of another xid sent whole between its segments.
const (
	streamXid       = 900
	subXid1         = 901
	subXid2         = 902
	otherXid        = 950
	streamCommitLSN = pglogrepl.LSN(0x3000000)
	streamEndLSN    = pglogrepl.LSN(0x3000100)
)

var (
	streamCommitTime = time.Date(2026, 12, 3, 8, 0, 0, 500000000, time.UTC)
	streamTx         = event.TxInfo{Xid: streamXid, CommitLSN: streamCommitLSN, CommitTime: streamCommitTime}
)

func testStreamCommit() []byte {
	return streamCommitMsg(streamXid, streamCommitLSN, streamEndLSN, streamCommitTime)
}

// rowLSNs gives each streamed row its own WAL start.
func streamLSN(i int) pglogrepl.LSN { return 0x2000000 + pglogrepl.LSN(i)*0x80 }

// idRow is outboxRow with the id "row-<i>".
func idRow(i int) []val { return rowWith(0, text(fmt.Sprintf("row-%06d", i))) }

func newStreamDecoder(tb testing.TB, cfg Config, setup ...[]byte) (*Decoder, *Spool) {
	tb.Helper()
	cfg.Spool = newSpool(tb)
	return newDecoder(tb, cfg, setup...), cfg.Spool
}

// mustNone decodes data, which must give the zero Change.
func mustNone(tb testing.TB, d *Decoder, lsn pglogrepl.LSN, data []byte) {
	tb.Helper()
	ch, err := d.Decode(lsn, data)
	if err != nil || ch != (Change{}) {
		tb.Fatalf("Decode(%q message) = %+v, %v; want the zero Change", data[0], ch, err)
	}
}

func mustStreamCommit(tb testing.TB, d *Decoder, data []byte) Change {
	tb.Helper()
	ch, err := d.Decode(streamEndLSN, data)
	if err != nil || ch.Kind != StreamCommit {
		tb.Fatalf("Decode(stream commit) = %+v, %v; want Kind StreamCommit", ch, err)
	}
	return ch
}

// replayAll collects a whole replay, failing on any error.
func replayAll(tb testing.TB, d *Decoder, xid uint32) []Change {
	tb.Helper()
	var out []Change
	for ch, err := range d.Replay(xid) {
		if err != nil {
			tb.Fatalf("Replay after %d changes: %v", len(out), err)
		}
		out = append(out, ch)
	}
	return out
}

// spoolFiles lists the files in the spool's directory.
func spoolFiles(tb testing.TB, s *Spool) []string {
	tb.Helper()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func kinds(chs []Change) string {
	var b strings.Builder
	for i, ch := range chs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ch.Kind.String())
	}
	return b.String()
}

// wholeTransaction decodes rows as one transaction sent whole, with the
// streamed transaction's xid and commit, for comparison with its replay.
func wholeTransaction(tb testing.TB, cfg Config, lsns []pglogrepl.LSN, msgs [][]byte) []Change {
	tb.Helper()
	d := newDecoder(tb, cfg, outboxRelation(), otherRelation())
	var out []Change
	decode := func(lsn pglogrepl.LSN, m []byte) {
		ch, err := d.Decode(lsn, m)
		if err != nil {
			tb.Fatalf("whole transaction: %v", err)
		}
		if ch.Kind != None {
			out = append(out, ch)
		}
	}
	decode(streamCommitLSN, beginMsg(streamCommitLSN, streamCommitTime, streamXid))
	for i, m := range msgs {
		decode(lsns[i], m)
	}
	decode(streamEndLSN, commitMsg(streamCommitLSN, streamEndLSN, streamCommitTime))
	return out
}

// sameEvent compares two events field by field, their rows and relations
// included, but not the copy of the Relation message a decoder with a
// Spool keeps.
func sameEvent(a, b *event.Event) bool {
	ca, cb := *a, *b
	rowA, rowB := *ca.Row.(*row), *cb.Row.(*row)
	ca.Row, cb.Row = nil, nil
	ra, rb := *rowA.rel, *rowB.rel
	ra.raw, rb.raw = nil, nil
	rowA.rel, rowB.rel = nil, nil
	return reflect.DeepEqual(ca, cb) && reflect.DeepEqual(rowA, rowB) && reflect.DeepEqual(ra, rb)
}

// TestStreamInterleaved streams a transaction in three segments with a
// transaction of another xid sent whole in between: replay yields exactly
// the streamed rows, in order, as the same transaction sent whole would.
func TestStreamInterleaved(t *testing.T) {
	cfg := Config{Messages: true}
	d, spool := newStreamDecoder(t, cfg)
	noKeepalive := func(when string) {
		t.Helper()
		if d.InTransaction() {
			t.Fatalf("InTransaction %s", when)
		}
	}

	// Segment 1: the relations, a row, a row of another table.
	mustNone(t, d, 0x1FFFF00, streamStartMsg(streamXid, true))
	mustNone(t, d, 0x1FFFF00, inStream(streamXid, outboxRelation()))
	mustNone(t, d, 0x1FFFF00, inStream(streamXid, otherRelation()))
	if d.InTransaction() {
		t.Fatal("InTransaction inside a stream segment")
	}
	mustNone(t, d, streamLSN(1), inStream(streamXid, insertMsg(outboxRelID, idRow(1)...)))
	mustNone(t, d, streamLSN(2), inStream(streamXid, insertMsg(otherRelID, otherRow()...)))
	mustNone(t, d, streamLSN(2), streamStopMsg())
	noKeepalive("between stream segments")
	if n := d.OpenStreams(); n != 1 {
		t.Fatalf("OpenStreams = %d, want 1", n)
	}
	if files := spoolFiles(t, spool); len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}

	// A transaction of another xid, sent whole.
	otherTx := event.TxInfo{Xid: otherXid, CommitLSN: 0x2800000, CommitTime: commitTime}
	ch, err := d.Decode(0x27FFF00, beginMsg(otherTx.CommitLSN, otherTx.CommitTime, otherXid))
	if err != nil || ch.Kind != Begin || ch.Tx != otherTx {
		t.Fatalf("Begin = %+v, %v", ch, err)
	}
	mustNone(t, d, 0x27FFF00, outboxRelation())
	ch, err = d.Decode(0x27FFF80, insertMsg(outboxRelID, idRow(100)...))
	if err != nil || ch.Kind != Insert || ch.Event.ID != "row-000100" || ch.Event.Tx != otherTx {
		t.Fatalf("Insert of the other transaction = %+v, %v", ch, err)
	}
	ch, err = d.Decode(0x2800080, commitMsg(otherTx.CommitLSN, 0x2800080, otherTx.CommitTime))
	if err != nil || ch.Kind != Commit || ch.EndLSN != 0x2800080 {
		t.Fatalf("Commit = %+v, %v", ch, err)
	}
	noKeepalive("after the other transaction")

	// Segment 2: a subtransaction's row and message, and an update.
	message := logicalMsg(true, streamLSN(4), "outboxd", "hello")
	mustNone(t, d, streamLSN(3), streamStartMsg(streamXid, false))
	mustNone(t, d, streamLSN(3), inStream(subXid1, insertMsg(outboxRelID, idRow(2)...)))
	mustNone(t, d, streamLSN(4), inStream(subXid1, message))
	mustNone(t, d, streamLSN(5), inStream(streamXid, updateMsg(outboxRelID, idRow(2)...)))
	mustNone(t, d, streamLSN(5), streamStopMsg())
	noKeepalive("between stream segments")

	// Segment 3, with an Origin after Stream Start as pgoutput sends it.
	mustNone(t, d, streamLSN(6), streamStartMsg(streamXid, false))
	mustNone(t, d, streamLSN(6), originMsg(0x1000, "node_a"))
	mustNone(t, d, streamLSN(6), inStream(streamXid, insertMsg(outboxRelID, idRow(3)...)))
	mustNone(t, d, streamLSN(6), streamStopMsg())

	ch = mustStreamCommit(t, d, testStreamCommit())
	if ch.Tx != streamTx || ch.EndLSN != streamEndLSN || ch.Event != nil {
		t.Fatalf("StreamCommit = %+v, want Tx %+v EndLSN %s", ch, streamTx, streamEndLSN)
	}
	if !d.InTransaction() {
		t.Fatal("not InTransaction while the stream commit waits for replay")
	}
	if n := d.OpenStreams(); n != 0 {
		t.Fatalf("OpenStreams after the stream commit = %d, want 0", n)
	}
	if _, err := d.Decode(0x4000000, testBegin()); err == nil || errors.Is(err, ErrMalformed) {
		t.Fatalf("Decode before Replay = %v, want the replay-pending error", err)
	}

	got := replayAll(t, d, streamXid)
	want := wholeTransaction(t, cfg,
		[]pglogrepl.LSN{streamLSN(1), streamLSN(2), streamLSN(3), streamLSN(4), streamLSN(5), streamLSN(6)},
		[][]byte{
			insertMsg(outboxRelID, idRow(1)...), insertMsg(otherRelID, otherRow()...),
			insertMsg(outboxRelID, idRow(2)...), message,
			updateMsg(outboxRelID, idRow(2)...), insertMsg(outboxRelID, idRow(3)...),
		})
	if k := kinds(got); k != "Begin Insert Insert Message Insert Commit" || k != kinds(want) {
		t.Fatalf("replay = %s, the whole transaction = %s", k, kinds(want))
	}
	for i := range got {
		if g, w := got[i], want[i]; g.Kind != w.Kind || g.Tx != w.Tx || g.EndLSN != w.EndLSN || !reflect.DeepEqual(g.Message, w.Message) || (g.Event == nil) != (w.Event == nil) {
			t.Fatalf("replayed change %d = %+v, sent whole %+v", i, got[i], want[i])
		}
		if got[i].Event != nil && !sameEvent(got[i].Event, want[i].Event) {
			t.Fatalf("replayed event %d = %+v, sent whole %+v", i, *got[i].Event, *want[i].Event)
		}
	}
	for i, id := range []string{"row-000001", "row-000002", "", "row-000003"} {
		ch := got[1+i]
		if ch.Tx != streamTx || (id != "" && (ch.Event.ID != id || ch.Event.Tx != streamTx)) {
			t.Fatalf("replayed change %d = %+v, want id %q in %+v", i, ch, id, streamTx)
		}
	}
	if m := got[3].Message; m == nil || !m.Transactional || m.Prefix != "outboxd" || string(m.Content) != "hello" || m.LSN != streamLSN(4) {
		t.Fatalf("replayed message = %+v", m)
	}
	if got[5].EndLSN != streamEndLSN {
		t.Fatalf("replayed Commit EndLSN = %s, want %s", got[5].EndLSN, streamEndLSN)
	}

	noKeepalive("after replay")
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("spool files after replay: %v", files)
	}
	// The stream goes on.
	if ch, err := d.Decode(0x4000000, testBegin()); err != nil || ch.Kind != Begin {
		t.Fatalf("Begin after replay = %+v, %v", ch, err)
	}
}

// TestStreamAbort aborts a whole streamed transaction: nothing of it is
// replayed, and its file is gone.
func TestStreamAbort(t *testing.T) {
	d, spool := newStreamDecoder(t, Config{})
	for seg := range 2 {
		mustNone(t, d, streamLSN(seg), streamStartMsg(streamXid, seg == 0))
		if seg == 0 {
			mustNone(t, d, streamLSN(seg), inStream(streamXid, outboxRelation()))
		}
		mustNone(t, d, streamLSN(seg), inStream(subXid1, insertMsg(outboxRelID, idRow(seg)...)))
		mustNone(t, d, streamLSN(seg), streamStopMsg())
	}
	if files := spoolFiles(t, spool); len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
	mustNone(t, d, streamLSN(3), streamAbortMsg(streamXid, streamXid))
	if n := d.OpenStreams(); n != 0 {
		t.Fatalf("OpenStreams after abort = %d", n)
	}
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("spool files after abort: %v", files)
	}
	if d.InTransaction() {
		t.Fatal("InTransaction after abort")
	}
	// An abort repeated, or of an xid never streamed, changes nothing.
	mustNone(t, d, streamLSN(3), streamAbortMsg(streamXid, streamXid))
	mustNone(t, d, streamLSN(3), streamAbortMsg(12345, 12346))
	// The transaction is gone: another segment of it is a broken stream.
	if _, err := d.Decode(streamLSN(4), streamStartMsg(streamXid, false)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("segment of an aborted transaction: %v, want ErrMalformed", err)
	}
}

// TestStreamSubtransactionAbort aborts one subtransaction: its rows are
// skipped, the others' kept, and the Relation message it carried still
// describes the table for the rows after it.
func TestStreamSubtransactionAbort(t *testing.T) {
	d, spool := newStreamDecoder(t, Config{})
	mustNone(t, d, streamLSN(0), streamStartMsg(streamXid, true))
	// pgoutput sends a table's layout with the xid of the change that
	// needed it: here, the subtransaction that is rolled back.
	mustNone(t, d, streamLSN(0), inStream(subXid1, outboxRelation()))
	mustNone(t, d, streamLSN(1), inStream(subXid1, insertMsg(outboxRelID, idRow(1)...)))
	mustNone(t, d, streamLSN(2), inStream(streamXid, insertMsg(outboxRelID, idRow(2)...)))
	mustNone(t, d, streamLSN(3), inStream(subXid2, insertMsg(outboxRelID, idRow(3)...)))
	mustNone(t, d, streamLSN(4), inStream(subXid1, insertMsg(outboxRelID, idRow(4)...)))
	mustNone(t, d, streamLSN(4), streamStopMsg())
	mustNone(t, d, streamLSN(5), streamAbortMsg(streamXid, subXid1))
	// A subtransaction with nothing spooled.
	mustNone(t, d, streamLSN(5), streamAbortMsg(streamXid, 903))
	if n := d.OpenStreams(); n != 1 {
		t.Fatalf("OpenStreams after a subtransaction abort = %d, want 1", n)
	}

	mustNone(t, d, streamLSN(6), streamStartMsg(streamXid, false))
	mustNone(t, d, streamLSN(6), inStream(streamXid, insertMsg(outboxRelID, idRow(6)...)))
	mustNone(t, d, streamLSN(6), streamStopMsg())

	// A transaction sent whole after the last segment changes the cached
	// layout of the table (after the streamed one altered it, say): the
	// replay still reads every row with the layout spooled before it.
	wider := relationMsg(outboxRelID, "public", "outbox", append(outboxCols(), col{name: "tenant", oid: oidText})...)
	mustNone(t, d, 0x2800000, wider)
	mustStreamCommit(t, d, testStreamCommit())

	got := replayAll(t, d, streamXid)
	if k := kinds(got); k != "Begin Insert Insert Insert Commit" {
		t.Fatalf("replay = %s", k)
	}
	for i, want := range []struct {
		id  string
		lsn pglogrepl.LSN
	}{{"row-000002", streamLSN(2)}, {"row-000003", streamLSN(3)}, {"row-000006", streamLSN(6)}} {
		ev := got[1+i].Event
		if ev.ID != want.id || ev.LSN != want.lsn || ev.Tx != streamTx {
			t.Fatalf("replayed row %d = id %q lsn %s tx %+v; want %q %s", i, ev.ID, ev.LSN, ev.Tx, want.id, want.lsn)
		}
	}
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("spool files after replay: %v", files)
	}
}

// TestStreamRelationBetweenSegments: a Relation message for the table sent
// whole between segments replaces the cached layout; the next streamed row
// is spooled after that layout, so the replay does not depend on what the
// cache holds at commit.
func TestStreamRelationBetweenSegments(t *testing.T) {
	d, spool := newStreamDecoder(t, Config{})
	mustNone(t, d, streamLSN(0), streamStartMsg(streamXid, true))
	mustNone(t, d, streamLSN(0), inStream(streamXid, outboxRelation()))
	mustNone(t, d, streamLSN(1), inStream(streamXid, insertMsg(outboxRelID, idRow(1)...)))
	mustNone(t, d, streamLSN(2), inStream(streamXid, insertMsg(outboxRelID, idRow(2)...)))
	mustNone(t, d, streamLSN(2), streamStopMsg())
	if n := spool.txs[streamXid].records; n != 3 {
		t.Fatalf("%d records, want Relation and two Inserts", n)
	}
	// The same layout, sent again for a transaction of another xid,
	// with a column's type modifier changed.
	cols := outboxCols()
	cols[1].typmod = 40
	mustNone(t, d, 0x2800000, relationMsg(outboxRelID, "public", "outbox", cols...))
	mustNone(t, d, streamLSN(3), streamStartMsg(streamXid, false))
	mustNone(t, d, streamLSN(3), inStream(streamXid, insertMsg(outboxRelID, idRow(3)...)))
	mustNone(t, d, streamLSN(3), streamStopMsg())
	if n := spool.txs[streamXid].records; n != 5 {
		t.Fatalf("%d records, want the layout spooled again before the third Insert", n)
	}
	// At commit the cache holds a layout no streamed row fits.
	mustNone(t, d, 0x2900000, relationMsg(outboxRelID, "public", "outbox", append(outboxCols(), col{name: "tenant", oid: oidText})...))
	mustStreamCommit(t, d, testStreamCommit())
	got := replayAll(t, d, streamXid)
	if k := kinds(got); k != "Begin Insert Insert Insert Commit" || got[3].Event.ID != "row-000003" {
		t.Fatalf("replay = %s", k)
	}
}

// TestStreamEmpty covers streamed transactions with nothing to publish: a
// Stream Commit for an xid never streamed, and one whose rows were all in
// other tables. Both replay as Begin and Commit, without a file.
func TestStreamEmpty(t *testing.T) {
	d, spool := newStreamDecoder(t, Config{}, otherRelation())

	mustStreamCommit(t, d, streamCommitMsg(777, streamCommitLSN, streamEndLSN, streamCommitTime))
	got := replayAll(t, d, 777)
	if k := kinds(got); k != "Begin Commit" || got[0].Tx.Xid != 777 || got[1].EndLSN != streamEndLSN {
		t.Fatalf("replay of an xid never streamed = %+v", got)
	}

	mustNone(t, d, streamLSN(0), streamStartMsg(streamXid, true))
	mustNone(t, d, streamLSN(0), inStream(streamXid, otherRelation()))
	for i := range 100 {
		mustNone(t, d, streamLSN(i), inStream(streamXid, insertMsg(otherRelID, otherRow()...)))
	}
	mustNone(t, d, streamLSN(100), inStream(streamXid, deleteMsg(otherRelID, text("42"))))
	mustNone(t, d, streamLSN(100), inStream(streamXid, truncateMsg(otherRelID)))
	mustNone(t, d, streamLSN(100), inStream(streamXid, typeMsg(16500, "public", "mood")))
	mustNone(t, d, streamLSN(100), streamStopMsg())
	// Only the Relation message was spooled.
	if tx := spool.txs[streamXid]; tx == nil || tx.records != 1 {
		t.Fatalf("spooled %+v, want the Relation message only", tx)
	}
	mustStreamCommit(t, d, testStreamCommit())
	if k := kinds(replayAll(t, d, streamXid)); k != "Begin Commit" {
		t.Fatalf("replay of a transaction without outbox rows = %s", k)
	}
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("spool files after replay: %v", files)
	}
}

// streamRows streams rows outbox rows of streamXid in segments of perSeg,
// then its Stream Commit. The Insert message is built once: Decode keeps
// nothing of a streamed message.
func streamRows(tb testing.TB, d *Decoder, rows, perSeg int) {
	tb.Helper()
	row := inStream(streamXid, insertMsg(outboxRelID, append(rowWith(4, text(benchPayload))[:5:5], null, text("2026-12-02 15:39:55.123456+00"))...))
	for i := 0; i < rows; i++ {
		if i%perSeg == 0 {
			if _, err := d.Decode(streamLSN(i), streamStartMsg(streamXid, i == 0)); err != nil {
				tb.Fatal(err)
			}
			if i == 0 {
				if _, err := d.Decode(streamLSN(i), inStream(streamXid, outboxRelation())); err != nil {
					tb.Fatal(err)
				}
			}
		}
		if _, err := d.Decode(streamLSN(i), row); err != nil {
			tb.Fatal(err)
		}
		if i%perSeg == perSeg-1 || i == rows-1 {
			if _, err := d.Decode(streamLSN(i), streamStopMsg()); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if ch, err := d.Decode(streamEndLSN, testStreamCommit()); err != nil || ch.Kind != StreamCommit {
		tb.Fatalf("stream commit = %+v, %v", ch, err)
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestStreamLargeTransactionMemory streams and replays 200,000 rows: the
// heap stays flat while they are spooled and while they are replayed,
// where holding them would take some 80 MB.
func TestStreamLargeTransactionMemory(t *testing.T) {
	const (
		rows   = 200_000
		perSeg = 20_000
		// Far below what the rows take (each message is ~300 bytes, each
		// Event more), far above the spool's buffers and GC noise.
		slack = 8 << 20
	)
	d, spool := newStreamDecoder(t, Config{})
	base := heapInuse()

	// Spooling: sample the heap at the end of every segment.
	row := inStream(streamXid, insertMsg(outboxRelID, append(rowWith(4, text(benchPayload))[:6:6], text("2026-12-02 15:39:55.123456+00"))...))
	peak := base
	for i := range rows {
		if i%perSeg == 0 {
			mustNone(t, d, streamLSN(i), streamStartMsg(streamXid, i == 0))
			if i == 0 {
				mustNone(t, d, streamLSN(i), inStream(streamXid, outboxRelation()))
			}
		}
		if _, err := d.Decode(streamLSN(i), row); err != nil {
			t.Fatal(err)
		}
		if i%perSeg == perSeg-1 {
			mustNone(t, d, streamLSN(i), streamStopMsg())
			peak = max(peak, heapInuse())
		}
	}
	if peak > base+slack {
		t.Fatalf("heap in use grew from %d to %d bytes while spooling %d rows", base, peak, rows)
	}
	tx := spool.txs[streamXid]
	if tx == nil || tx.records != rows+1 {
		t.Fatalf("spooled %+v, want %d records", tx, rows+1)
	}
	if fi, err := os.Stat(tx.path); err != nil || fi.Size() != tx.bytes || fi.Size() < rows*int64(len(row)) {
		t.Fatalf("spool file %v, %v; want %d bytes", fi, err, tx.bytes)
	}
	mustStreamCommit(t, d, testStreamCommit())

	// Replay: the caller drops each event, as the publisher does once
	// it is acknowledged.
	base = heapInuse()
	peak = base
	n := 0
	for ch, err := range d.Replay(streamXid) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Kind != Insert {
			continue
		}
		if ch.Event.LSN != streamLSN(n) || ch.Event.Tx != streamTx || ch.Event.ID != testID {
			t.Fatalf("row %d: %+v", n, ch.Event)
		}
		n++
		if n%perSeg == 0 {
			peak = max(peak, heapInuse())
		}
	}
	if n != rows {
		t.Fatalf("replayed %d rows, want %d", n, rows)
	}
	if peak > base+slack {
		t.Fatalf("heap in use grew from %d to %d bytes while replaying %d rows", base, peak, rows)
	}
	if files := spoolFiles(t, spool); len(files) != 0 {
		t.Fatalf("spool files after replay: %v", files)
	}
}

func TestReplay(t *testing.T) {
	// setup streams three rows in two segments and commits.
	setup := func(t *testing.T, rows ...[]val) (*Decoder, *Spool) {
		d, spool := newStreamDecoder(t, Config{})
		mustNone(t, d, streamLSN(0), streamStartMsg(streamXid, true))
		mustNone(t, d, streamLSN(0), inStream(streamXid, outboxRelation()))
		for i, r := range rows {
			if i == 2 {
				mustNone(t, d, streamLSN(i), streamStopMsg())
				mustNone(t, d, streamLSN(i), streamStartMsg(streamXid, false))
			}
			mustNone(t, d, streamLSN(i), inStream(streamXid, insertMsg(outboxRelID, r...)))
		}
		mustNone(t, d, streamLSN(9), streamStopMsg())
		mustStreamCommit(t, d, testStreamCommit())
		return d, spool
	}
	three := [][]val{idRow(0), idRow(1), idRow(2)}

	t.Run("wrong xid", func(t *testing.T) {
		d, _ := setup(t, three...)
		n := 0
		for ch, err := range d.Replay(streamXid + 1) {
			n++
			if err == nil || ch != (Change{}) || !strings.Contains(err.Error(), "no Stream Commit") {
				t.Fatalf("Replay of another xid = %+v, %v", ch, err)
			}
		}
		if n != 1 {
			t.Fatalf("Replay of another xid yielded %d pairs, want 1", n)
		}
		// The right one still waits.
		if k := kinds(replayAll(t, d, streamXid)); k != "Begin Insert Insert Insert Commit" {
			t.Fatalf("replay = %s", k)
		}
	})
	t.Run("without spool", func(t *testing.T) {
		d := newDecoder(t, Config{})
		for _, err := range d.Replay(streamXid) {
			if err == nil {
				t.Fatal("Replay without a Spool gave no error")
			}
		}
		if err := d.Discard(streamXid); err == nil {
			t.Fatal("Discard without a Spool gave no error")
		}
	})
	t.Run("stopped early then again", func(t *testing.T) {
		d, spool := setup(t, three...)
		for ch, err := range d.Replay(streamXid) {
			if err != nil {
				t.Fatal(err)
			}
			if ch.Kind == Insert {
				break
			}
		}
		if !d.InTransaction() || len(spoolFiles(t, spool)) != 1 {
			t.Fatal("a replay stopped early dropped the transaction")
		}
		if _, err := d.Decode(0x4000000, testBegin()); err == nil {
			t.Fatal("Decode after a replay stopped early gave no error")
		}
		got := replayAll(t, d, streamXid)
		if k := kinds(got); k != "Begin Insert Insert Insert Commit" || got[1].Event.ID != "row-000000" {
			t.Fatalf("second replay = %s", k)
		}
		if d.InTransaction() || len(spoolFiles(t, spool)) != 0 {
			t.Fatal("a finished replay left the transaction")
		}
		// Replayed once is done.
		for _, err := range d.Replay(streamXid) {
			if err == nil {
				t.Fatal("a second full Replay gave no error")
			}
		}
	})
	t.Run("stopped at commit", func(t *testing.T) {
		d, _ := setup(t, three...)
		for ch, err := range d.Replay(streamXid) {
			if err != nil {
				t.Fatal(err)
			}
			if ch.Kind == Commit {
				break
			}
		}
		if d.InTransaction() {
			t.Fatal("InTransaction after Commit was yielded")
		}
	})
	t.Run("discard", func(t *testing.T) {
		d, spool := setup(t, three...)
		if err := d.Discard(streamXid + 1); err == nil {
			t.Fatal("Discard of another xid gave no error")
		}
		if err := d.Discard(streamXid); err != nil {
			t.Fatal(err)
		}
		if d.InTransaction() || len(spoolFiles(t, spool)) != 0 {
			t.Fatal("Discard left the transaction")
		}
		if ch, err := d.Decode(0x4000000, testBegin()); err != nil || ch.Kind != Begin {
			t.Fatalf("Begin after Discard = %+v, %v", ch, err)
		}
	})
	t.Run("nested", func(t *testing.T) {
		d, _ := setup(t, three...)
		for ch, err := range d.Replay(streamXid) {
			if err != nil {
				t.Fatal(err)
			}
			if ch.Kind != Begin {
				continue
			}
			for _, err := range d.Replay(streamXid) {
				if err == nil || !strings.Contains(err.Error(), "already running") {
					t.Fatalf("nested Replay = %v", err)
				}
			}
			if err := d.Discard(streamXid); err == nil {
				t.Fatal("Discard inside Replay gave no error")
			}
		}
	})
	t.Run("row error in the middle", func(t *testing.T) {
		d, _ := setup(t, idRow(0), rowWith(4, null), idRow(2))
		var got []string
		for ch, err := range d.Replay(streamXid) {
			var re *event.RowError
			switch {
			case errors.As(err, &re):
				if re.Xid != streamXid || re.LSN != streamLSN(1) || re.Column != "payload" || re.EventID != testID {
					t.Fatalf("RowError = %+v", re)
				}
				got = append(got, "RowError")
			case err != nil:
				t.Fatal(err)
			case ch.Kind == Insert:
				got = append(got, ch.Event.ID)
			default:
				got = append(got, ch.Kind.String())
			}
		}
		if s := strings.Join(got, " "); s != "Begin row-000000 RowError row-000002 Commit" {
			t.Fatalf("replay = %s", s)
		}
	})
	t.Run("schema error waits for replay", func(t *testing.T) {
		d, _ := newStreamDecoder(t, Config{})
		var noPayload []col
		for _, c := range outboxCols() {
			if c.name != "payload" {
				noPayload = append(noPayload, c)
			}
		}
		mustNone(t, d, streamLSN(0), streamStartMsg(streamXid, true))
		mustNone(t, d, streamLSN(0), inStream(streamXid, relationMsg(outboxRelID, "public", "outbox", noPayload...)))
		mustNone(t, d, streamLSN(1), inStream(streamXid, insertMsg(outboxRelID, idRow(1)[:6]...)))
		mustNone(t, d, streamLSN(1), streamStopMsg())
		mustStreamCommit(t, d, testStreamCommit())
		var errs int
		for ch, err := range d.Replay(streamXid) {
			if err != nil {
				matchErr(t, err, &SchemaError{Table: "public.outbox", Column: "payload"})
				errs++
			} else if ch.Kind == Insert {
				t.Fatal("an Insert into a table without payload")
			}
		}
		if errs != 2 {
			t.Fatalf("%d schema errors, want 2 (Relation and Insert)", errs)
		}
	})
}

func TestSpoolLifecycle(t *testing.T) {
	t.Run("default dir", func(t *testing.T) {
		s, err := NewSpool("")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.dir, os.TempDir()) {
			t.Fatalf("spool dir %s is not under %s", s.dir, os.TempDir())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
			t.Fatalf("spool dir after Close: %v", err)
		}
	})
	t.Run("missing dir", func(t *testing.T) {
		if _, err := NewSpool(t.TempDir() + "/missing"); err == nil {
			t.Fatal("NewSpool in a missing folder gave no error")
		}
	})
	t.Run("close removes open transactions", func(t *testing.T) {
		s, err := NewSpool(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		d := newDecoder(t, Config{Spool: s})
		mustNone(t, d, 0, streamStartMsg(streamXid, true))
		mustNone(t, d, 0, inStream(streamXid, outboxRelation()))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
			t.Fatalf("spool dir after Close: %v", err)
		}
		if _, err := d.Decode(0, streamStopMsg()); err == nil {
			// The segment was closed with the spool.
			t.Fatal("Stream Stop after Close gave no error")
		}
		if _, err := d.Decode(0, streamStartMsg(streamXid+1, true)); err == nil {
			t.Fatal("Stream Start on a closed Spool gave no error")
		}
		if _, err := New(Config{Spool: s}); err == nil {
			t.Fatal("New with a closed Spool gave no error")
		}
	})
	t.Run("new decoder starts over", func(t *testing.T) {
		d, spool := newStreamDecoder(t, Config{})
		mustNone(t, d, 0, streamStartMsg(streamXid, true))
		mustNone(t, d, 0, inStream(streamXid, outboxRelation()))
		mustNone(t, d, 0, inStream(streamXid, insertMsg(outboxRelID, idRow(0)...)))
		mustNone(t, d, 0, streamStopMsg())
		mustNone(t, d, 0, streamStartMsg(streamXid+1, true))
		mustNone(t, d, 0, inStream(streamXid+1, outboxRelation()))
		// The connection breaks inside a segment; the next session's
		// Decoder gets the same Spool, and the server starts over.
		d2 := newDecoder(t, Config{Spool: spool})
		if n := d2.OpenStreams(); n != 0 || len(spoolFiles(t, spool)) != 0 {
			t.Fatalf("after New: %d open streams, files %v", n, spoolFiles(t, spool))
		}
		mustNone(t, d2, 0, streamStartMsg(streamXid, true))
		mustNone(t, d2, 0, inStream(streamXid, outboxRelation()))
		mustNone(t, d2, 0, inStream(streamXid, insertMsg(outboxRelID, idRow(1)...)))
		mustNone(t, d2, 0, streamStopMsg())
		mustStreamCommit(t, d2, testStreamCommit())
		got := replayAll(t, d2, streamXid)
		if k := kinds(got); k != "Begin Insert Commit" || got[1].Event.ID != "row-000001" {
			t.Fatalf("replay after a new start = %s", k)
		}
	})
}

func TestStreamProtocolErrors(t *testing.T) {
	start := streamStartMsg(streamXid, true)
	tests := []struct {
		name  string
		setup [][]byte
		data  []byte
	}{
		{name: "stream stop without start", data: streamStopMsg()},
		{name: "stream stop with a byte after it", setup: [][]byte{start}, data: append(streamStopMsg(), 0)},
		{name: "stream stop after stop", setup: [][]byte{start, streamStopMsg()}, data: streamStopMsg()},
		{name: "stream start inside a segment", setup: [][]byte{start}, data: streamStartMsg(streamXid+1, true)},
		{name: "stream start inside a transaction", setup: [][]byte{testBegin()}, data: start},
		{name: "later segment of an unknown xid", data: streamStartMsg(streamXid, false)},
		{name: "first segment of a streaming xid", setup: [][]byte{start, streamStopMsg()}, data: start},
		{name: "first segment flag 2", data: msg{'S'}.u32(streamXid).u8(2)},
		{name: "stream start with a byte after it", data: append(start, 0)},
		{name: "begin inside a segment", setup: [][]byte{start}, data: testBegin()},
		{name: "commit inside a segment", setup: [][]byte{start}, data: testCommit()},
		{name: "stream commit inside a segment", setup: [][]byte{start}, data: testStreamCommit()},
		{name: "stream commit inside a transaction", setup: [][]byte{testBegin()}, data: testStreamCommit()},
		{name: "stream commit with a byte after it", data: append(testStreamCommit(), 0)},
		{name: "stream abort inside a segment", setup: [][]byte{start}, data: streamAbortMsg(streamXid, streamXid)},
		{name: "stream abort inside a transaction", setup: [][]byte{testBegin()}, data: streamAbortMsg(streamXid, streamXid)},
		{name: "stream abort with abort lsn and time (protocol 4)", setup: [][]byte{start, streamStopMsg()}, data: msg(streamAbortMsg(streamXid, streamXid)).u64(1).u64(2)},
		{name: "streamed insert into an unknown relation", setup: [][]byte{start}, data: inStream(streamXid, insertMsg(99, otherRow()...))},
		{name: "streamed insert with fewer columns", setup: [][]byte{otherRelation(), start}, data: inStream(streamXid, insertMsg(otherRelID, text("42")))},
		{name: "streamed insert with unknown value kind", setup: [][]byte{start, inStream(streamXid, outboxRelation())}, data: inStream(streamXid, insertMsg(outboxRelID, append(outboxRow()[:6], val{kind: 'x'})...))},
		{name: "streamed insert tuple type K", setup: [][]byte{start, inStream(streamXid, outboxRelation())}, data: inStream(streamXid, msg{'I'}.u32(outboxRelID).u8('K').tuple(outboxRow()))},
		{name: "streamed relation with huge column count", setup: [][]byte{start}, data: inStream(streamXid, msg{'R'}.u32(1).str("public").str("t").u8('d').u16(65535))},
		{name: "streamed message with unknown flags", setup: [][]byte{start}, data: inStream(streamXid, msg{'M'}.u8(2).u64(1).str("p").u32(0))},
		{name: "unknown message in a segment", setup: [][]byte{start}, data: []byte{'Z', 0, 0, 0, 0}},
		{name: "two-phase message in a segment", setup: [][]byte{start}, data: []byte{'b', 0, 0, 0, 0}},
		{name: "streamed insert outside a segment", setup: [][]byte{outboxRelation(), testBegin()}, data: inStream(streamXid, insertMsg(outboxRelID, outboxRow()...))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newStreamDecoder(t, Config{Messages: true}, tt.setup...)
			ch, err := d.Decode(rowLSN, tt.data)
			matchErr(t, err, ErrMalformed)
			if ch != (Change{}) {
				t.Fatalf("Change = %+v with error, want the zero Change", ch)
			}
		})
	}
}

// TestStreamTruncated cuts valid v2 messages (and Message, now decoded) at
// every byte: each prefix must return ErrMalformed, never panic and never
// decode.
func TestStreamTruncated(t *testing.T) {
	start := streamStartMsg(streamXid, true)
	tests := []struct {
		name  string
		setup [][]byte
		data  []byte
	}{
		{name: "stream start", data: start},
		{name: "stream commit", data: testStreamCommit()},
		{name: "stream abort", setup: [][]byte{start, streamStopMsg()}, data: streamAbortMsg(streamXid, subXid1)},
		{name: "streamed relation", setup: [][]byte{start}, data: inStream(streamXid, outboxRelation())},
		{name: "streamed outbox insert", setup: [][]byte{start, inStream(streamXid, outboxRelation())}, data: inStream(subXid1, insertMsg(outboxRelID, outboxRow()...))},
		{name: "streamed other insert", setup: [][]byte{start, inStream(streamXid, otherRelation())}, data: inStream(subXid1, insertMsg(otherRelID, otherRow()...))},
		{name: "streamed message", setup: [][]byte{start}, data: inStream(streamXid, logicalMsg(true, 0x1000, "outboxd", "hello"))},
		{name: "streamed non-transactional message", setup: [][]byte{start}, data: inStream(streamXid, logicalMsg(false, 0x1000, "outboxd", "hello"))},
		{name: "message", setup: [][]byte{testBegin()}, data: logicalMsg(true, 0x1000, "outboxd", "hello")},
	}
	spool := newSpool(t)
	cfg := Config{Messages: true, Spool: spool}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newDecoder(t, cfg, tt.setup...).Decode(rowLSN, tt.data); err != nil {
				t.Fatalf("whole message: %v", err)
			}
			for n := range len(tt.data) {
				// New resets the shared Spool.
				d := newDecoder(t, cfg, tt.setup...)
				ch, err := d.Decode(rowLSN, tt.data[:n])
				if !errors.Is(err, ErrMalformed) || ch != (Change{}) {
					t.Fatalf("first %d of %d bytes: Change %+v, error %v; want ErrMalformed", n, len(tt.data), ch, err)
				}
			}
		})
	}
}

func TestLogicalMessages(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		setup    [][]byte
		data     []byte
		want     *LogicalMessage
		wantTx   event.TxInfo
		wantNone bool
		wantErr  error
	}{
		{
			name: "transactional", cfg: Config{Messages: true}, setup: [][]byte{testBegin()},
			data:   logicalMsg(true, 0x16B3710, "outboxd", "hello"),
			want:   &LogicalMessage{Transactional: true, LSN: 0x16B3710, Prefix: "outboxd", Content: []byte("hello")},
			wantTx: event.TxInfo{Xid: testXid, CommitLSN: beginLSN, CommitTime: commitTime},
		},
		{
			name: "non-transactional outside a transaction", cfg: Config{Messages: true},
			data: logicalMsg(false, 0x1000, "audit", "\x00\x01binary"),
			want: &LogicalMessage{LSN: 0x1000, Prefix: "audit", Content: []byte("\x00\x01binary")},
		},
		{
			name: "empty prefix and content", cfg: Config{Messages: true},
			data: logicalMsg(false, 0x1000, "", ""),
			want: &LogicalMessage{LSN: 0x1000, Content: []byte{}},
		},
		{
			name: "non-transactional in a stream segment", cfg: Config{Messages: true, Spool: newSpool(t)},
			setup: [][]byte{streamStartMsg(streamXid, true)},
			data:  inStream(streamXid, logicalMsg(false, 0x1000, "audit", "now")),
			want:  &LogicalMessage{LSN: 0x1000, Prefix: "audit", Content: []byte("now")},
		},
		{
			name: "transactional in a stream segment waits for replay", cfg: Config{Messages: true, Spool: newSpool(t)},
			setup:    [][]byte{streamStartMsg(streamXid, true)},
			data:     inStream(streamXid, logicalMsg(true, 0x1000, "audit", "later")),
			wantNone: true,
		},
		{
			name: "not asked for", setup: [][]byte{testBegin()},
			data:     logicalMsg(true, 0x1000, "outboxd", "hello"),
			wantNone: true,
		},
		{
			name: "not asked for in a stream segment", cfg: Config{Spool: newSpool(t)},
			setup:    [][]byte{streamStartMsg(streamXid, true)},
			data:     inStream(streamXid, logicalMsg(false, 0x1000, "audit", "now")),
			wantNone: true,
		},
		{
			name: "transactional outside a transaction", cfg: Config{Messages: true},
			data: logicalMsg(true, 0x1000, "outboxd", "hello"), wantErr: ErrMalformed,
		},
		{
			name: "unknown flags", cfg: Config{Messages: true},
			data: msg{'M'}.u8(3).u64(1).str("p").u32(0), wantErr: ErrMalformed,
		},
		{
			name: "content beyond the message", cfg: Config{Messages: true},
			data: msg{'M'}.u8(0).u64(1).str("p").u32(0xFFFFFFFF), wantErr: ErrMalformed,
		},
		{
			name: "trailing byte", cfg: Config{Messages: true},
			data: append(logicalMsg(false, 0x1000, "p", "c"), 0), wantErr: ErrMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, tt.cfg, tt.setup...)
			ch, err := d.Decode(rowLSN, tt.data)
			matchErr(t, err, tt.wantErr)
			switch {
			case tt.wantErr != nil || tt.wantNone:
				if ch != (Change{}) {
					t.Fatalf("Change = %+v, want the zero Change", ch)
				}
			default:
				if ch.Kind != Message || ch.Event != nil || ch.Tx != tt.wantTx || !reflect.DeepEqual(ch.Message, tt.want) {
					t.Fatalf("Change = %+v (message %+v), want Kind Message, Tx %+v, %+v", ch, ch.Message, tt.wantTx, tt.want)
				}
			}
		})
	}

	// Messages not asked for are not spooled either.
	d, spool := newStreamDecoder(t, Config{})
	mustNone(t, d, 0, streamStartMsg(streamXid, true))
	mustNone(t, d, 0, inStream(streamXid, logicalMsg(true, 0x1000, "audit", "later")))
	mustNone(t, d, 0, streamStopMsg())
	if len(spoolFiles(t, spool)) != 0 {
		t.Fatal("a message not asked for was spooled")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{None: "None", Begin: "Begin", Insert: "Insert", Commit: "Commit",
		Message: "Message", StreamCommit: "StreamCommit", 42: "Kind(42)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestBuilderMatchesPglogreplV2 checks the v2 builder against pglogrepl's
// independent parser.
func TestBuilderMatchesPglogreplV2(t *testing.T) {
	parseV2 := func(data []byte, inStream bool) pglogrepl.Message {
		t.Helper()
		m, err := pglogrepl.ParseV2(append([]byte(nil), data...), inStream)
		if err != nil {
			t.Fatalf("pglogrepl.ParseV2(%q): %v", data[0], err)
		}
		return m
	}
	if m, ok := parseV2(streamStartMsg(streamXid, true), false).(*pglogrepl.StreamStartMessageV2); !ok || m.Xid != streamXid || m.FirstSegment != 1 {
		t.Fatalf("stream start = %+v", m)
	}
	if _, ok := parseV2(streamStopMsg(), false).(*pglogrepl.StreamStopMessageV2); !ok {
		t.Fatal("stream stop")
	}
	if m, ok := parseV2(testStreamCommit(), false).(*pglogrepl.StreamCommitMessageV2); !ok || m.Xid != streamXid ||
		m.CommitLSN != streamCommitLSN || m.TransactionEndLSN != streamEndLSN || !m.CommitTime.Equal(streamCommitTime) {
		t.Fatalf("stream commit = %+v", m)
	}
	if m, ok := parseV2(streamAbortMsg(streamXid, subXid1), false).(*pglogrepl.StreamAbortMessageV2); !ok || m.Xid != streamXid || m.SubXid != subXid1 {
		t.Fatalf("stream abort = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, outboxRelation()), true).(*pglogrepl.RelationMessageV2); !ok || m.Xid != subXid1 || m.RelationName != "outbox" || len(m.Columns) != 7 {
		t.Fatalf("streamed relation = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, insertMsg(outboxRelID, outboxRow()...)), true).(*pglogrepl.InsertMessageV2); !ok || m.Xid != subXid1 || m.RelationID != outboxRelID || len(m.Tuple.Columns) != 7 {
		t.Fatalf("streamed insert = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, logicalMsg(true, 0x1000, "p", "c")), true).(*pglogrepl.LogicalDecodingMessageV2); !ok || m.Xid != subXid1 ||
		!m.Transactional || m.LSN != 0x1000 || m.Prefix != "p" || string(m.Content) != "c" {
		t.Fatalf("streamed message = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, updateMsg(outboxRelID, outboxRow()...)), true).(*pglogrepl.UpdateMessageV2); !ok || m.Xid != subXid1 {
		t.Fatalf("streamed update = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, deleteMsg(outboxRelID, text(testID))), true).(*pglogrepl.DeleteMessageV2); !ok || m.Xid != subXid1 {
		t.Fatalf("streamed delete = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, truncateMsg(1, 2)), true).(*pglogrepl.TruncateMessageV2); !ok || m.Xid != subXid1 || len(m.RelationIDs) != 2 {
		t.Fatalf("streamed truncate = %+v", m)
	}
	if m, ok := parseV2(inStream(subXid1, typeMsg(16500, "public", "mood")), true).(*pglogrepl.TypeMessageV2); !ok || m.Xid != subXid1 || m.Name != "mood" {
		t.Fatalf("streamed type = %+v", m)
	}
}

// TestReplayDamagedSpool: a spool file cut short, damaged or gone ends the
// replay with an error naming the transaction, never a panic; the
// transaction stays for Discard.
func TestReplayDamagedSpool(t *testing.T) {
	tests := []struct {
		name   string
		damage func(path string, size int64) error
	}{
		{name: "cut in a header", damage: func(p string, size int64) error { return os.Truncate(p, size-int64(len(idRow(2)))-recordHeaderSize-2) }},
		{name: "cut in a record", damage: func(p string, size int64) error { return os.Truncate(p, size-3) }},
		{name: "zero length", damage: func(p string, size int64) error { return overwrite(p, 12, []byte{0, 0, 0, 0}) }},
		{name: "huge length", damage: func(p string, size int64) error { return overwrite(p, 12, []byte{0x7F, 0xFF, 0xFF, 0xFF}) }},
		{name: "unknown record", damage: func(p string, size int64) error { return overwrite(p, recordHeaderSize, []byte{'U'}) }},
		{name: "removed", damage: func(p string, size int64) error { return os.Remove(p) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, spool := newStreamDecoder(t, Config{})
			mustNone(t, d, streamLSN(0), streamStartMsg(streamXid, true))
			mustNone(t, d, streamLSN(0), inStream(streamXid, outboxRelation()))
			mustNone(t, d, streamLSN(1), inStream(streamXid, insertMsg(outboxRelID, idRow(1)...)))
			mustNone(t, d, streamLSN(2), inStream(streamXid, insertMsg(outboxRelID, idRow(2)...)))
			mustNone(t, d, streamLSN(2), streamStopMsg())
			tx := spool.txs[streamXid]
			mustStreamCommit(t, d, testStreamCommit())
			if err := tt.damage(tx.path, tx.bytes); err != nil {
				t.Fatal(err)
			}
			var last error
			for ch, err := range d.Replay(streamXid) {
				if last != nil {
					t.Fatalf("Replay went on after %v: %+v, %v", last, ch, err)
				}
				if ch.Kind == Commit {
					t.Fatal("Replay of a damaged file reached Commit")
				}
				last = err
			}
			if last == nil || !strings.Contains(last.Error(), fmt.Sprint("xid ", streamXid)) {
				t.Fatalf("last error = %v, want one naming xid %d", last, streamXid)
			}
			if !d.InTransaction() {
				t.Fatal("a failed replay dropped the transaction")
			}
			if err := d.Discard(streamXid); err != nil {
				t.Fatal(err)
			}
			if len(spoolFiles(t, spool)) != 0 || d.InTransaction() {
				t.Fatal("Discard left the transaction")
			}
		})
	}
	if n := newDecoder(t, Config{}).OpenStreams(); n != 0 {
		t.Fatalf("OpenStreams without a Spool = %d", n)
	}
}

func overwrite(path string, off int64, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
