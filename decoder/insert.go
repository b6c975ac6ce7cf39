package decoder

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/event"
)

// rawValue is one mapped column of an Insert's tuple.
type rawValue struct {
	kind byte   // 'n', 'u', 't' or 'b'
	val  []byte // aliases the message; nil unless kind is 't' or 'b'
}

// insertTuple is an Insert whose bytes have been checked.
type insertTuple struct {
	rel       *relation
	tuple     []byte // from the column count on
	n         int    // column count
	vals      [numFields]rawValue
	binaryCol int // first column sent in binary, or -1
}

func (d *Decoder) decodeInsert(walStart pglogrepl.LSN, body []byte) (Change, error) {
	var ins insertTuple
	if err := d.parseInsert(body, true, &ins); err != nil {
		return Change{}, err
	}
	rel := ins.rel
	if rel.err != nil {
		return Change{}, rel.err
	}
	if ins.n != len(rel.cols) {
		return Change{}, malformed("insert into %s.%s: %d columns, its Relation message has %d", rel.namespace, rel.name, ins.n, len(rel.cols))
	}
	if rel.partition {
		return Change{}, d.partitionError(rel)
	}
	if !rel.outbox {
		return Change{}, nil
	}
	ev, err := d.newEvent(walStart, rel, ins.tuple, &ins.vals, ins.binaryCol)
	if err != nil {
		return Change{}, err
	}
	return Change{Kind: Insert, Tx: d.tx, Event: ev}, nil
}

// parseInsert checks an Insert body (protocol version 1 form) and collects
// the mapped columns' values. needTx rejects an Insert outside a
// transaction; inside a stream segment there is none to check.
func (d *Decoder) parseInsert(body []byte, needTx bool, ins *insertTuple) error {
	r := reader{b: body}
	relID := r.u32("relation id")
	tupleType := r.u8("tuple type")
	if r.short != "" {
		return r.check("insert")
	}
	if tupleType != 'N' {
		return malformed("insert: tuple type %q, want 'N'", tupleType)
	}
	rel := d.rels[relID]
	if rel == nil {
		return malformed("insert into relation id %d that no Relation message described", relID)
	}
	if needTx && !d.inTx {
		return malformed("insert into %s.%s outside a transaction", rel.namespace, rel.name)
	}

	ins.rel = rel
	ins.tuple = body[r.off:]
	n := int(r.u16("column count"))
	ins.n = n
	ins.binaryCol = -1
	for i := 0; i < n && r.short == ""; i++ {
		kind, val := r.value()
		if r.short != "" {
			break
		}
		switch kind {
		case 'n', 'u', 't':
		case 'b':
			if ins.binaryCol < 0 {
				ins.binaryCol = i
			}
		default:
			return malformed("insert into %s.%s: column %d has unknown value kind %q", rel.namespace, rel.name, i, kind)
		}
		if i < len(rel.fieldsOf) {
			for m, f := rel.fieldsOf[i], field(0); m != 0; m, f = m>>1, f+1 {
				if m&1 != 0 {
					ins.vals[f] = rawValue{kind: kind, val: val}
				}
			}
		}
	}
	return r.check("insert")
}

// newEvent maps a validated outbox tuple to an Event.
func (d *Decoder) newEvent(walStart pglogrepl.LSN, rel *relation, tuple []byte, vals *[numFields]rawValue, binaryCol int) (*event.Event, error) {
	d.events++
	rowErr := func(f field, id, reason string) *event.RowError {
		return &event.RowError{EventID: id, Xid: d.tx.Xid, LSN: walStart, Column: rel.cols[rel.fieldCol[f]].name, Reason: reason,
			Row: d.partialEvent(walStart, rel, tuple, vals), Ordinal: d.events}
	}

	// The id comes first so that every later error can name the row.
	if reason := requireText(vals[fID]); reason != "" {
		return nil, rowErr(fID, "", reason)
	}
	if len(vals[fID].val) == 0 {
		return nil, rowErr(fID, "", "is empty: every event needs an id")
	}
	id := vals[fID].val
	eventID := func() string { return d.idPrefix + string(id) } // only rows in error pay for it
	if binaryCol >= 0 {
		return nil, &event.RowError{EventID: eventID(), Xid: d.tx.Xid, LSN: walStart, Column: rel.cols[binaryCol].name, Reason: binaryReason,
			Row: d.partialEvent(walStart, rel, tuple, vals), Ordinal: d.events}
	}
	nullPayload := vals[fPayload].kind == 'n'
	switch {
	case nullPayload && !d.nullOK:
		return nil, rowErr(fPayload, eventID(), nullPayloadReason)
	case !nullPayload:
		if reason := requireText(vals[fPayload]); reason != "" {
			return nil, rowErr(fPayload, eventID(), reason)
		}
	}
	// The optional text fields: unmapped or NULL leaves them empty (their
	// Outbox-* header is then absent), so a table without them, or with
	// nullable ones, still streams.
	for _, f := range [...]field{fAggregateType, fAggregateID, fEventType} {
		if rel.fieldCol[f] < 0 {
			continue
		}
		if v := vals[f]; v.kind != 'n' && v.kind != 't' {
			return nil, rowErr(f, eventID(), kindReason(v.kind))
		}
	}

	var payload []byte
	if !nullPayload {
		payload = vals[fPayload].val
		switch path := d.columns.PayloadPath; {
		case rel.cols[rel.fieldCol[fPayload]].typ == oidBytea:
			p, err := decodeBytea(payload)
			if err != nil {
				return nil, rowErr(fPayload, eventID(), err.Error())
			}
			payload = p
		case !path.IsZero():
			v, err := path.lookup(payload)
			if err != nil {
				return nil, rowErr(fPayload, eventID(), err.Error())
			}
			if v[0] == '"' {
				// A JSON document stored in a string: publish the document.
				v = jsonString(v)
			}
			payload = v
		}
	}

	var headers []event.Header
	if rel.fieldCol[fHeaders] >= 0 {
		switch v := vals[fHeaders]; v.kind {
		case 'n':
		case 't':
			h, reason := d.headers(rel, v.val)
			if reason != "" {
				return nil, rowErr(fHeaders, eventID(), reason)
			}
			headers = h
		default:
			return nil, rowErr(fHeaders, eventID(), kindReason(v.kind))
		}
	}
	if len(d.columns.HeaderColumns) > 0 {
		h, column, reason := d.columnHeaders(rel, tuple, headers)
		if reason != "" {
			return nil, &event.RowError{EventID: eventID(), Xid: d.tx.Xid, LSN: walStart, Column: column, Reason: reason,
				Row: d.partialEvent(walStart, rel, tuple, vals), Ordinal: d.events}
		}
		headers = h
	}

	ev := newRowEvent(rel, tuple)
	if rel.fieldCol[fCreatedAt] >= 0 {
		switch v := vals[fCreatedAt]; v.kind {
		case 'n':
		case 't':
			t, err := parseTimestamp(v.val)
			if err != nil {
				return nil, rowErr(fCreatedAt, eventID(), err.Error())
			}
			ev.CreatedAt = t
		default:
			return nil, rowErr(fCreatedAt, eventID(), kindReason(v.kind))
		}
	}

	// One string holds the four text fields: one allocation instead of
	// four, and unlike a string aliasing the message, an ID kept in a
	// dedupe set does not pin the whole WAL message (payload included).
	aggType, aggID, evType := vals[fAggregateType].val, vals[fAggregateID].val, vals[fEventType].val
	d.scratch = append(append(append(append(append(d.scratch[:0], d.idPrefix...), id...), aggType...), aggID...), evType...)
	s := string(d.scratch)
	i := 0
	next := func(n int) string { v := s[i : i+n]; i += n; return v }
	ev.ID = next(len(d.idPrefix) + len(id))
	ev.AggregateType = next(len(aggType))
	ev.AggregateID = next(len(aggID))
	ev.EventType = next(len(evType))
	if cap(d.scratch) > 64<<10 {
		d.scratch = nil // do not keep a buffer grown by one huge row
	}

	ev.Tx = d.tx
	ev.LSN = walStart
	ev.Payload = payload
	ev.NullPayload = nullPayload
	ev.Headers = headers
	return ev, nil
}

// headers reads the headers column's value v (at Columns.HeadersPath), or
// says why it cannot be read.
func (d *Decoder) headers(rel *relation, v []byte) ([]event.Header, string) {
	if d.columns.HeadersFormat == HeadersProperties {
		h, err := event.ParseProperties(v)
		if err != nil {
			return nil, err.Error()
		}
		return h, ""
	}
	path := d.columns.HeadersPath
	if !path.IsZero() {
		obj, err := path.lookup(v)
		if err != nil {
			return nil, err.Error()
		}
		v = obj
	}
	h, err := event.ParseHeaders(v)
	if err == nil {
		return h, ""
	}
	reason := err.Error()
	if !path.IsZero() {
		reason = "at the JSON path " + path.String() + " " + reason
	}
	var nested *event.HeaderValueError
	if errors.As(err, &nested) {
		inner, _ := NewJSONPath(append(path.Keys(), nested.Key)...)
		reason += fmt.Sprintf("; write header values as strings, numbers or booleans, or, if that %s holds the headers, map headers to it with a JSON path: --columns headers=%s%s",
			nested.Kind, quoteName(rel.cols[rel.fieldCol[fHeaders]].name), inner)
	}
	return nil, reason
}

// partialEvent is a row that cannot become an Event, as far as it can be
// read, for its dead letter: each text field that came as text, the
// headers when they parse, and the payload column as the row holds it
// (the whole column, whatever Columns.PayloadPath says, so that nothing
// of it is lost), bytea decoded when it decodes. Only rows in error take
// this slower path.
func (d *Decoder) partialEvent(walStart pglogrepl.LSN, rel *relation, tuple []byte, vals *[numFields]rawValue) *event.Event {
	text := func(f field) string {
		if rel.fieldCol[f] < 0 || vals[f].kind != 't' {
			return ""
		}
		return string(vals[f].val)
	}
	ev := newRowEvent(rel, tuple)
	ev.Tx, ev.LSN, ev.ID, ev.AggregateType, ev.AggregateID, ev.EventType = d.tx, walStart, text(fID), text(fAggregateType),
		text(fAggregateID), text(fEventType)
	if ev.ID != "" {
		ev.ID = d.idPrefix + ev.ID
	}
	if v := vals[fPayload]; v.kind == 't' || v.kind == 'b' {
		ev.Payload = v.val
		if v.kind == 't' && rel.cols[rel.fieldCol[fPayload]].typ == oidBytea {
			if p, err := decodeBytea(v.val); err == nil {
				ev.Payload = p
			}
		}
	}
	if rel.fieldCol[fHeaders] >= 0 && vals[fHeaders].kind == 't' {
		ev.Headers, _ = d.headers(rel, vals[fHeaders].val) // a dead letter without them still has its reason
	}
	if len(d.columns.HeaderColumns) > 0 {
		if hs, _, reason := d.columnHeaders(rel, tuple, ev.Headers); reason == "" {
			ev.Headers = hs
		}
	}
	return ev
}

// nullPayloadReason is why a NULL payload stops the row unless
// Config.AllowNullPayload.
const nullPayloadReason = "is NULL, and --null-payload is stop (the default): make the writer set a payload, " +
	"or set --null-payload skip to leave such rows out (counted and logged) or --null-payload empty to publish them with an empty body " +
	"(Debezium writes a NULL payload as a tombstone)"

const binaryReason = "was sent in binary format: outboxd reads text format only; start replication without the binary option"

// requireText returns why a required value is unusable, or "".
func requireText(v rawValue) string {
	if v.kind == 't' {
		return ""
	}
	return kindReason(v.kind)
}

func kindReason(kind byte) string {
	switch kind {
	case 'n':
		return "is NULL, but the column is required: add NOT NULL to the column or fix the writer"
	case 'u':
		return "is an unchanged TOAST value, which an INSERT should never carry: check the publication and the server version"
	case 'b':
		return binaryReason
	}
	return "has no value"
}
