package decoder

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/outboxd/outboxd/event"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the built seeds in testdata/fuzz/FuzzDecode and FuzzDecodeV2")

// fuzzSeeds are built messages decoded after fuzzSetup: valid rows, rows
// that fail, and every other message kind. Files under
// testdata/fuzz/FuzzDecode named seed-* are these; others (captured from a
// real server) are left alone.
func fuzzSeeds() map[string][]byte {
	byteaRow := rowWith(4, text(`\x7b7d`))
	return map[string][]byte{
		"insert":                 insertMsg(outboxRelID, outboxRow()...),
		"insert-nulls":           insertMsg(outboxRelID, append(rowWith(5, null)[:6:6], null)...),
		"insert-null-id":         insertMsg(outboxRelID, rowWith(0, null)...),
		"insert-unchanged":       insertMsg(outboxRelID, rowWith(6, unchanged)...),
		"insert-binary":          insertMsg(outboxRelID, rowWith(2, binval("\x00\x00\x00\x2a"))...),
		"insert-bad-headers":     insertMsg(outboxRelID, rowWith(5, text(`{"a": 1, "b": ["c"]}`))...),
		"insert-offset-time":     insertMsg(outboxRelID, rowWith(6, text("2026-12-02 21:09:55+05:30:15"))...),
		"insert-bytea-table":     insertMsg(outboxRelID+1, byteaRow...),
		"insert-other":           insertMsg(otherRelID, otherRow()...),
		"insert-unknown":         insertMsg(7, otherRow()...),
		"relation-outbox":        outboxRelation(),
		"relation-added":         relationMsg(outboxRelID, "public", "outbox", append(outboxCols(), col{name: "tenant", oid: oidText})...),
		"relation-dropped":       relationMsg(outboxRelID, "public", "outbox", outboxCols()[1:]...),
		"relation-other":         otherRelation(),
		"begin":                  testBegin(),
		"commit":                 testCommit(),
		"origin":                 originMsg(0x1000, "node_a"),
		"type":                   typeMsg(16500, "public", "mood"),
		"update":                 updateMsg(outboxRelID, outboxRow()...),
		"delete":                 deleteMsg(outboxRelID, text(testID)),
		"truncate":               truncateMsg(outboxRelID),
		"message":                logicalMsg(true, 0x1000, "outboxd", "hi"),
		"message-nontx":          logicalMsg(false, 0x1000, "audit", "\x00\xff"),
		"message-envelope":       logicalMsg(true, 0x1000, "outbox", testEnvelope),
		"message-bad-envelope":   logicalMsg(true, 0x1000, "outbox", `{"id": 1}`),
		"message-envelope-nontx": logicalMsg(false, 0x1000, "outbox", testEnvelope),
		"empty":                  {},
		"insert-huge-length":     msg{'I'}.u32(outboxRelID).u8('N').u16(7).u8('t').u32(0x7FFFFFFF),
		"insert-null-payload":    insertMsg(outboxRelID, rowWith(4, null)...),
		"insert-header-kinds":    insertMsg(outboxRelID, rowWith(5, text(`{"n": 3, "b": true, "z": null, "s": "x"}`))...),
		"insert-cap":             insertMsg(capRelID, capRow(text(capContent))...),
		"insert-cap-no-value":    insertMsg(capRelID, capRow(text(`{"Headers": {}, "value": 1}`))...),
		"insert-cap-not-json":    insertMsg(capRelID, capRow(text(`Value=1`))...),
		"insert-cap-string":      insertMsg(capRelID, capRow(text(`{"Headers": {"a": 1}, "Value": "{\"x\": \"\\u00e9\"}"}`))...),
		"insert-cap-null":        insertMsg(capRelID, capRow(null)...),
		"insert-cap-nested":      insertMsg(capRelID, capRow(text(`{"Headers": {"a": {"b": []}}, "Value": 1}`))...),
		"relation-cap":           relationMsg(capRelID, "cap", "published", capCols()...),
		"relation-huge-count":    msg{'R'}.u32(outboxRelID).str("public").str("outbox").u8('d').u16(0xFFFF),
	}
}

// fuzzSetup describes the default outbox table, a second outbox-shaped table
// with a bytea payload under another decoder, and a business table, then
// opens a transaction; a third decoder also decodes logical messages, and
// a fifth maps CAP's table.
func fuzzSetup(tb testing.TB) []*Decoder {
	byteaCols := outboxCols()
	byteaCols[4].oid = oidBytea
	byteaCols[6].oid = oidTimestamp
	return []*Decoder{
		newDecoder(tb, Config{}, outboxRelation(), otherRelation(), testBegin()),
		newDecoder(tb, Config{Table: "outbox_bin"},
			relationMsg(outboxRelID+1, "public", "outbox_bin", byteaCols...), otherRelation(), testBegin()),
		newDecoder(tb, Config{Messages: true}, outboxRelation(), otherRelation(), testBegin()),
		newDecoder(tb, Config{EnvelopePrefix: "outbox"}, outboxRelation(), testBegin()),
		// CAP's table: an integer id with a prefix, payload and headers
		// at JSON paths into a text column, NULL payloads let through.
		newDecoder(tb, Config{Schema: "cap", Table: "published", Columns: capColumns(tb), IDPrefix: "cap:", AllowNullPayload: true},
			relationMsg(capRelID, "cap", "published", capCols()...), outboxRelation(), testBegin()),
	}
}

// capRelID is the relation id of CAP's table in the fuzz setup.
const capRelID = outboxRelID + 2

func FuzzDecode(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range fuzzSetup(t) {
			ch, err := d.Decode(rowLSN, data)
			checkDecodeResult(t, ch, err)
			// Whatever data did to the cache or the transaction, the
			// decoder keeps answering without panicking.
			for _, next := range [][]byte{insertMsg(outboxRelID, outboxRow()...), testCommit(), data} {
				ch, err := d.Decode(rowLSN, next)
				checkDecodeResult(t, ch, err)
			}
		}
	})
}

func checkDecodeResult(t *testing.T, ch Change, err error) {
	t.Helper()
	var re *event.RowError
	var se *SchemaError
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.As(err, &re) && !errors.As(err, &se) {
			t.Fatalf("error of unexpected type %T: %v", err, err)
		}
		if ch != (Change{}) {
			t.Fatalf("Change %+v returned with error %v", ch, err)
		}
		return
	}
	if (ch.Kind == Insert) != (ch.Event != nil) {
		t.Fatalf("Change %+v: Event must be set exactly for Insert", ch)
	}
	if (ch.Kind == Message) != (ch.Message != nil) {
		t.Fatalf("Change %+v: Message must be set exactly for Message", ch)
	}
	if ch.Event == nil {
		return
	}
	if ch.Event.ID == "" {
		t.Fatal("Insert with an empty event id")
	}
	if ch.Event.NullPayload && ch.Event.Payload != nil {
		t.Fatalf("NullPayload event with a payload %q", ch.Event.Payload)
	}
	if ch.Event.FromMessage {
		env := event.Envelope{ID: ch.Event.ID, AggregateType: ch.Event.AggregateType, AggregateID: ch.Event.AggregateID,
			EventType: ch.Event.EventType, Payload: ch.Event.Payload}
		if err := env.Validate(); err != nil {
			t.Fatalf("event from an envelope that Validate refuses: %v", err)
		}
		return
	}
	for _, c := range ch.Event.Row.(*row).rel.cols {
		ch.Event.Column(c.name)
	}
}

// TestFuzzCorpus keeps the committed seed files in step with the builder;
// run with -update-corpus after changing fuzzSeeds.
func TestFuzzCorpus(t *testing.T) {
	checkCorpus(t, "FuzzDecode", fuzzSeeds())
	checkCorpus(t, "FuzzDecodeV2", fuzzSeedsV2())
}

func checkCorpus(t *testing.T, target string, seeds map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	for name, seed := range seeds {
		path := filepath.Join(dir, "seed-"+name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed)
		if *updateCorpus {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is missing or stale (%v): run go test ./decoder -run TestFuzzCorpus -update-corpus", path, err)
		}
	}
}

// Protocol version 2: the state machine of stream segments, commits and
// aborts matters more than any one message, so FuzzDecodeV2 reads its input
// as a sequence of messages, each a big-endian uint16 length and that many
// bytes (a length past the end takes the rest).

func joinFrames(msgs ...[]byte) []byte {
	var out msg
	for _, m := range msgs {
		out = append(out.u16(uint16(len(m))), m...)
	}
	return out
}

func splitFrames(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 2 {
			return append(out, data)
		}
		n := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		n = min(n, len(data))
		out = append(out, data[:n:n])
		data = data[n:]
	}
	return out
}

// fuzzSeedsV2 are message sequences decoded after outboxRelation and
// otherRelation (protocol version 1 form, outside any stream).
func fuzzSeedsV2() map[string][]byte {
	start, stop := streamStartMsg(streamXid, true), streamStopMsg()
	next := streamStartMsg(streamXid, false)
	rel := inStream(streamXid, outboxRelation())
	row := func(xid uint32, i int) []byte { return inStream(xid, insertMsg(outboxRelID, idRow(i)...)) }
	var noPayload []col
	for _, c := range outboxCols() {
		if c.name != "payload" {
			noPayload = append(noPayload, c)
		}
	}
	return map[string][]byte{
		"stream-commit": joinFrames(start, rel, row(streamXid, 1), stop, testStreamCommit()),
		"stream-interleaved": joinFrames(start, rel, row(streamXid, 1), stop,
			beginMsg(0x2800000, commitTime, otherXid), insertMsg(outboxRelID, idRow(9)...), commitMsg(0x2800000, 0x2800080, commitTime),
			next, row(subXid1, 2), inStream(subXid1, logicalMsg(true, 0x2000100, "outboxd", "hi")), stop,
			next, originMsg(0x1000, "node_a"), row(streamXid, 3), stop, testStreamCommit()),
		"stream-abort":     joinFrames(start, rel, row(streamXid, 1), stop, streamAbortMsg(streamXid, streamXid)),
		"stream-subabort":  joinFrames(start, inStream(subXid1, outboxRelation()), row(subXid1, 1), row(streamXid, 2), stop, streamAbortMsg(streamXid, subXid1), testStreamCommit()),
		"stream-empty":     joinFrames(testStreamCommit()),
		"stream-two-xids":  joinFrames(start, rel, row(streamXid, 1), stop, streamStartMsg(streamXid+10, true), inStream(streamXid+10, outboxRelation()), row(streamXid+10, 2), stop, streamCommitMsg(streamXid+10, 0x3000000, 0x3000100, commitTime), testStreamCommit()),
		"stream-other":     joinFrames(start, inStream(streamXid, otherRelation()), inStream(streamXid, insertMsg(otherRelID, otherRow()...)), inStream(streamXid, updateMsg(otherRelID, otherRow()...)), inStream(streamXid, deleteMsg(otherRelID, text("42"))), inStream(streamXid, truncateMsg(otherRelID)), inStream(streamXid, typeMsg(16500, "public", "mood")), stop, testStreamCommit()),
		"stream-row-error": joinFrames(start, rel, inStream(streamXid, insertMsg(outboxRelID, rowWith(4, null)...)), row(streamXid, 2), stop, testStreamCommit()),
		"stream-schema-error": joinFrames(start, inStream(streamXid, relationMsg(outboxRelID, "public", "outbox", noPayload...)),
			inStream(streamXid, insertMsg(outboxRelID, idRow(1)[:6]...)), stop, testStreamCommit()),
		"stream-messages":  joinFrames(start, inStream(streamXid, logicalMsg(false, 0x1000, "audit", "now")), inStream(streamXid, logicalMsg(true, 0x1000, "audit", "later")), stop, testStreamCommit()),
		"messages":         joinFrames(logicalMsg(false, 0x1000, "audit", "x"), testBegin(), logicalMsg(true, 0x1000, "outboxd", "hi"), insertMsg(outboxRelID, outboxRow()...), testCommit()),
		"stream-truncated": joinFrames(start, rel, row(streamXid, 1)[:20]),
		"stream-stop-only": joinFrames(stop),
	}
}

func FuzzDecodeV2(f *testing.F) {
	for _, seed := range fuzzSeedsV2() {
		f.Add(seed)
	}
	// One Spool for the whole run: New empties it for every input.
	spool, err := NewSpool(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { spool.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder(t, Config{Messages: true, Spool: spool}, outboxRelation(), otherRelation())
		for _, m := range splitFrames(data) {
			ch, err := d.Decode(rowLSN, m)
			checkDecodeResult(t, ch, err)
			if err == nil && ch.Kind == StreamCommit {
				checkReplay(t, d, ch)
			}
		}
		if files := spoolFiles(t, spool); len(files) > d.OpenStreams() {
			t.Fatalf("%d spool files for %d open streams", len(files), d.OpenStreams())
		}
	})
}

// checkReplay replays a Stream Commit: Begin, outbox changes of that
// transaction, Commit; no error but row and schema errors, which do not end
// it.
func checkReplay(t *testing.T, d *Decoder, sc Change) {
	t.Helper()
	var got []Kind
	for ch, err := range d.Replay(sc.Tx.Xid) {
		if err != nil {
			var re *event.RowError
			var se *SchemaError
			if !errors.As(err, &re) && !errors.As(err, &se) {
				t.Fatalf("replay: error %T: %v", err, err)
			}
			if ch != (Change{}) {
				t.Fatalf("replay: Change %+v with error %v", ch, err)
			}
			continue
		}
		checkDecodeResult(t, ch, nil)
		if ch.Tx != sc.Tx || (ch.Event != nil && ch.Event.Tx != sc.Tx) {
			t.Fatalf("replay: Change %+v, want Tx %+v", ch, sc.Tx)
		}
		if ch.Message != nil && !ch.Message.Transactional {
			t.Fatalf("replay: non-transactional message %+v", ch.Message)
		}
		got = append(got, ch.Kind)
	}
	if len(got) < 2 || got[0] != Begin || got[len(got)-1] != Commit {
		t.Fatalf("replay: %v, want Begin … Commit", got)
	}
	for _, k := range got[1 : len(got)-1] {
		if k != Insert && k != Message {
			t.Fatalf("replay: %v", got)
		}
	}
	if d.InTransaction() {
		t.Fatal("InTransaction after replay")
	}
}
