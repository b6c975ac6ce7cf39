package relay

import (
	"strings"
	"testing"
	"time"
)

// TestAggregateOrder: a row must be stored after the rows of its
// aggregate created earlier; rows of one created_at are not ordered.
func TestAggregateOrder(t *testing.T) {
	type row struct {
		createdAt string
		seq       uint64
		inOrder   bool
	}
	tests := []struct {
		name string
		rows []row
	}{
		{"in order", []row{{"t1", 1, true}, {"t2", 2, true}, {"t3", 5, true}}},
		{"one transaction in any order", []row{{"t1", 3, true}, {"t1", 1, true}, {"t1", 2, true}, {"t2", 4, true}}},
		{"a later row stored first", []row{{"t1", 4, true}, {"t2", 2, false}, {"t3", 5, true}}},
		{"stored before a whole earlier transaction", []row{{"t1", 2, true}, {"t1", 3, true}, {"t2", 1, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o aggregateOrder
			for i, r := range tt.rows {
				if got := o.next(r.createdAt, r.seq); got != r.inOrder {
					t.Errorf("row %d (created %s, seq %d): in order = %v, want %v", i, r.createdAt, r.seq, got, r.inOrder)
				}
			}
		})
	}
}

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
