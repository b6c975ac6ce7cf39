package decoder

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the built seeds in testdata/fuzz/FuzzDecode")

// fuzzSeeds are built messages decoded after fuzzSetup: valid rows, rows
// that fail, and every other message kind. Files under
// testdata/fuzz/FuzzDecode named seed-* are these; others (captured from a
// real server) are left alone.
func fuzzSeeds() map[string][]byte {
	byteaRow := rowWith(4, text(`\x7b7d`))
	return map[string][]byte{
		"insert":              insertMsg(outboxRelID, outboxRow()...),
		"insert-nulls":        insertMsg(outboxRelID, append(rowWith(5, null)[:6:6], null)...),
		"insert-null-id":      insertMsg(outboxRelID, rowWith(0, null)...),
		"insert-unchanged":    insertMsg(outboxRelID, rowWith(6, unchanged)...),
		"insert-binary":       insertMsg(outboxRelID, rowWith(2, binval("\x00\x00\x00\x2a"))...),
		"insert-bad-headers":  insertMsg(outboxRelID, rowWith(5, text(`{"a": 1, "b": ["c"]}`))...),
		"insert-offset-time":  insertMsg(outboxRelID, rowWith(6, text("2026-12-02 21:09:55+05:30:15"))...),
		"insert-bytea-table":  insertMsg(outboxRelID+1, byteaRow...),
		"insert-other":        insertMsg(otherRelID, otherRow()...),
		"insert-unknown":      insertMsg(7, otherRow()...),
		"relation-outbox":     outboxRelation(),
		"relation-added":      relationMsg(outboxRelID, "public", "outbox", append(outboxCols(), col{name: "tenant", oid: oidText})...),
		"relation-dropped":    relationMsg(outboxRelID, "public", "outbox", outboxCols()[1:]...),
		"relation-other":      otherRelation(),
		"begin":               testBegin(),
		"commit":              testCommit(),
		"origin":              originMsg(0x1000, "node_a"),
		"type":                typeMsg(16500, "public", "mood"),
		"update":              updateMsg(outboxRelID, outboxRow()...),
		"delete":              deleteMsg(outboxRelID, text(testID)),
		"truncate":            truncateMsg(outboxRelID),
		"message":             logicalMsg(true, 0x1000, "outboxd", "hi"),
		"empty":               {},
		"insert-huge-length":  msg{'I'}.u32(outboxRelID).u8('N').u16(7).u8('t').u32(0x7FFFFFFF),
		"relation-huge-count": msg{'R'}.u32(outboxRelID).str("public").str("outbox").u8('d').u16(0xFFFF),
	}
}

// fuzzSetup describes the default outbox table, a second outbox-shaped table
// with a bytea payload under another decoder, and a business table, then
// opens a transaction.
func fuzzSetup(tb testing.TB) []*Decoder {
	byteaCols := outboxCols()
	byteaCols[4].oid = oidBytea
	byteaCols[6].oid = oidTimestamp
	return []*Decoder{
		newDecoder(tb, Config{}, outboxRelation(), otherRelation(), testBegin()),
		newDecoder(tb, Config{Table: "outbox_bin"},
			relationMsg(outboxRelID+1, "public", "outbox_bin", byteaCols...), otherRelation(), testBegin()),
	}
}

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
	var re *RowError
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
	if ch.Event == nil {
		return
	}
	if ch.Event.ID == "" {
		t.Fatal("Insert with an empty event id")
	}
	for _, c := range ch.Event.row.rel.cols {
		ch.Event.Column(c.name)
	}
}

// TestFuzzCorpus keeps the committed seed files in step with the builder;
// run with -update-corpus after changing fuzzSeeds.
func TestFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for name, seed := range fuzzSeeds() {
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
