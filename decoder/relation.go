package decoder

import (
	"bytes"
	"fmt"
	"strings"
)

// field indexes Event's mapped fields.
type field uint8

const (
	fID field = iota
	fAggregateType
	fAggregateID
	fEventType
	fPayload
	fHeaders
	fCreatedAt
	numFields
)

// fieldNames are the Columns field names, for messages that tell the user
// which setting to change.
var fieldNames = [numFields]string{"ID", "AggregateType", "AggregateID", "EventType", "Payload", "Headers", "CreatedAt"}

func fieldRequired(f field) bool { return f != fHeaders && f != fCreatedAt }

func fieldColumns(c Columns) [numFields]string {
	return [numFields]string{c.ID, c.AggregateType, c.AggregateID, c.EventType, c.Payload, c.Headers, c.CreatedAt}
}

// Type OIDs of the built-in types outboxd reads.
const (
	oidBytea       = 17
	oidText        = 25
	oidJSON        = 114
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidVarchar     = 1043
	oidUUID        = 2950
	oidJSONB       = 3802
)

// fieldTypes lists the column types each field accepts.
var fieldTypes = [numFields][]uint32{
	fID:            {oidUUID, oidText, oidVarchar},
	fAggregateType: {oidText, oidVarchar},
	fAggregateID:   {oidText, oidVarchar},
	fEventType:     {oidText, oidVarchar},
	fPayload:       {oidJSONB, oidJSON, oidText, oidVarchar, oidBytea},
	fHeaders:       {oidJSONB, oidJSON},
	fCreatedAt:     {oidTimestamptz, oidTimestamp},
}

// typeName names common built-in types in schema errors; pgoutput sends only
// the OID, and a user reads "int4" faster than "23".
func typeName(oid uint32) string {
	switch oid {
	case 16:
		return "boolean"
	case oidBytea:
		return "bytea"
	case 18:
		return "char"
	case 19:
		return "name"
	case 20:
		return "bigint"
	case 21:
		return "smallint"
	case 23:
		return "integer"
	case oidText:
		return "text"
	case oidJSON:
		return "json"
	case 700:
		return "real"
	case 701:
		return "double precision"
	case 1042:
		return "character"
	case oidVarchar:
		return "varchar"
	case 1082:
		return "date"
	case 1083:
		return "time"
	case oidTimestamp:
		return "timestamp"
	case oidTimestamptz:
		return "timestamptz"
	case 1700:
		return "numeric"
	case oidUUID:
		return "uuid"
	case oidJSONB:
		return "jsonb"
	}
	return fmt.Sprintf("type oid %d", oid)
}

func typeList(oids []uint32) string {
	var b strings.Builder
	for i, oid := range oids {
		switch {
		case i == 0:
		case i == len(oids)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(typeName(oid))
	}
	return b.String()
}

// relColumn is one column of a Relation message.
type relColumn struct {
	name  string
	typ   uint32
	flags uint8 // 1 = part of the replica identity key
}

// relation is a cached Relation message. It is never modified once cached:
// events keep a pointer to it, and a later Relation message for the same id
// replaces the cache entry with a new relation.
type relation struct {
	id        uint32
	namespace string
	name      string
	cols      []relColumn

	// raw is the Relation message's body, kept with a Spool only: a
	// streamed Insert is spooled after the layout it was checked against.
	raw []byte

	outbox bool
	// err is set when this is the outbox table but its columns do not fit
	// the mapping; Inserts into it return err.
	err *SchemaError
	// For a usable outbox table: the column index of each mapped field (-1
	// when not mapped) and, per column, a bitmask of the fields it feeds
	// (one column may feed several fields).
	fieldCol [numFields]int
	fieldsOf []uint8
}

func (rel *relation) column(name string) int {
	for i := range rel.cols {
		if rel.cols[i].name == name {
			return i
		}
	}
	return -1
}

func (d *Decoder) decodeRelation(body []byte) (Change, error) {
	rel, err := d.cacheRelation(body)
	if err != nil {
		return Change{}, err
	}
	if rel.err != nil {
		return Change{}, rel.err
	}
	return Change{}, nil
}

// cacheRelation reads a Relation message and caches it, even when it is
// the outbox table and its columns do not fit the mapping (rel.err).
func (d *Decoder) cacheRelation(body []byte) (*relation, error) {
	r := reader{b: body}
	id := r.u32("relation id")
	ns := r.cstring("namespace")
	name := r.cstring("relation name")
	r.u8("replica identity")
	n := int(r.u16("column count"))
	if r.short != "" {
		return nil, r.check("relation")
	}
	// Each column takes at least 10 bytes; checking first keeps a corrupt
	// count from allocating a large slice.
	const minColumnSize = 1 + 1 + 4 + 4
	if n*minColumnSize > r.remaining() {
		return nil, malformed("relation: %d columns need at least %d bytes, %d left", n, n*minColumnSize, r.remaining())
	}
	cols := make([]relColumn, n)
	for i := range cols {
		cols[i].flags = r.u8("column flags")
		cname := r.cstring("column name")
		cols[i].typ = r.u32("column type")
		r.u32("column type modifier")
		if r.short != "" {
			break
		}
		cols[i].name = string(cname)
	}
	if err := r.check("relation"); err != nil {
		return nil, err
	}
	rel := &relation{
		id:        id,
		namespace: string(ns),
		name:      string(name),
		cols:      cols,
		outbox:    string(ns) == d.schema && string(name) == d.table,
	}
	if d.spool != nil {
		rel.raw = bytes.Clone(body)
	}
	if rel.outbox {
		rel.err = d.mapColumns(rel)
	}
	d.rels[id] = rel
	return rel, nil
}

// mapColumns checks that the outbox relation has every mapped column with a
// usable type and records where each field is.
func (d *Decoder) mapColumns(rel *relation) *SchemaError {
	names := fieldColumns(d.columns)
	fieldsOf := make([]uint8, len(rel.cols))
	for f := range numFields {
		rel.fieldCol[f] = -1
		if names[f] == "" {
			continue
		}
		i := rel.column(names[f])
		if i < 0 {
			return &SchemaError{
				Table:  rel.namespace + "." + rel.name,
				Column: names[f],
				Reason: fmt.Sprintf("does not exist (mapped to %s): add the column, map %s to an existing column, or check that the publication publishes it", fieldNames[f], fieldNames[f]),
			}
		}
		if !typeIn(rel.cols[i].typ, fieldTypes[f]) {
			return &SchemaError{
				Table:  rel.namespace + "." + rel.name,
				Column: names[f],
				Reason: fmt.Sprintf("has type %s, but %s needs %s: change the column's type or map %s to another column", typeName(rel.cols[i].typ), fieldNames[f], typeList(fieldTypes[f]), fieldNames[f]),
			}
		}
		rel.fieldCol[f] = i
		fieldsOf[i] |= 1 << f
	}
	rel.fieldsOf = fieldsOf
	return nil
}

func typeIn(oid uint32, oids []uint32) bool {
	for _, o := range oids {
		if o == oid {
			return true
		}
	}
	return false
}
