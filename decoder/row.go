package decoder

import "github.com/outboxd/outboxd/event"

// row is the TupleData of an outbox row, kept as the bytes the server sent
// (aliasing the message) with a pointer to its relation. Event.Column looks
// values up on demand, which costs a walk over the columns but no allocation
// per row beyond the Event itself.
type row struct {
	rel   *relation
	tuple []byte // from the column count on; validated by decodeInsert
}

// rowEvent is an Event with the row its Column reads: one allocation for
// both.
type rowEvent struct {
	event.Event
	row row
}

// newRowEvent returns the Event of a row of rel whose TupleData is tuple.
func newRowEvent(rel *relation, tuple []byte) *event.Event {
	e := &rowEvent{row: row{rel: rel, tuple: tuple}}
	e.Row = &e.row
	return &e.Event
}

// Column returns the text value of the named column, or of the column a
// mapped field names (event.Event.Column); ok is false when the relation
// has no such column or the value is NULL, unchanged TOAST or binary.
func (r *row) Column(name string) (string, bool) {
	if r.rel == nil {
		return "", false
	}
	i := r.rel.column(name)
	if i < 0 {
		f, ok := fieldByKey(name)
		if !ok || r.rel.fieldCol[f] < 0 {
			return "", false
		}
		i = r.rel.fieldCol[f]
	}
	kind, val, ok := tupleValue(r.tuple, i)
	if !ok || kind != 't' {
		return "", false
	}
	return string(val), true
}

// tupleValue returns column i of a TupleData. It re-checks bounds even
// though decodeInsert validated the tuple, so a bug elsewhere cannot turn
// into a panic here.
func tupleValue(tuple []byte, i int) (kind byte, val []byte, ok bool) {
	r := reader{b: tuple}
	n := int(r.u16("column count"))
	if i >= n {
		return 0, nil, false
	}
	for j := 0; j <= i; j++ {
		kind, val = r.value()
		if r.short != "" {
			return 0, nil, false
		}
	}
	return kind, val, true
}
