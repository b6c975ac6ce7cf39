package decoder

// row is the TupleData of an outbox row, kept as the bytes the server sent
// (aliasing the message) with a pointer to its relation. Event.Column looks
// values up on demand, which costs a walk over the columns but no allocation
// per row beyond the Event itself.
type row struct {
	rel   *relation
	tuple []byte // from the column count on; validated by decodeInsert
}

// get returns the text value of the named column; ok is false when the
// relation has no such column or the value is NULL, unchanged TOAST or
// binary.
func (r row) get(name string) (string, bool) {
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
